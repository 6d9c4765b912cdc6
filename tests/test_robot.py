"""The robot source of truth: loading, validation, generated models."""
import numpy as np
import pytest

from robident_twin.model.builders import mujoco_model, pinocchio_model, to_mjcf, to_urdf
from robident_twin.errors import RobotSpecError
from robident_twin.model.robot import load_robot


def test_iiwa14_numbers_from_robots_md(iiwa):
    assert iiwa.n_joints == 7
    assert [j.link.mass_kg for j in iiwa.joints] == [5.76, 6.35, 3.5, 3.5, 3.5, 1.8, 1.2]
    np.testing.assert_allclose(np.degrees(iiwa.dq_max_rad_s), [85, 85, 100, 75, 130, 135, 135])
    np.testing.assert_allclose(iiwa.fv_link_Nms_rad, [0.2415, 0.3733, 0.1103, 0.1, 0.1, 0.1248, 0.1])
    np.testing.assert_allclose(iiwa.tau_max_Nm, [320, 320, 176, 176, 110, 40, 40])


def test_straight_up_at_zero(iiwa):
    """MDH equivalence stated in robots.md: base 0.36, r3 0.42, r5 0.40, flange 0.126 -> 1.306 m."""
    import pinocchio as pin

    m = pinocchio_model(iiwa)
    d = m.createData()
    pin.framesForwardKinematics(m, d, np.zeros(7))
    flange = d.oMf[m.getFrameId("flange")].translation
    np.testing.assert_allclose(flange, [0, 0, 0.36 + 0.42 + 0.40 + 0.126], atol=1e-12)


def test_generated_urdf_and_mjcf_load(iiwa):
    assert "<robot" in to_urdf(iiwa) and "<mujoco" in to_mjcf(iiwa)
    m = mujoco_model(iiwa)
    assert m.nq == 7 and m.nu == 7
    np.testing.assert_allclose(m.dof_armature, iiwa.drive_inertia_kgm2)
    np.testing.assert_allclose(m.body_mass[1:], [j.link.mass_kg for j in iiwa.joints])


def test_unknown_robot_name():
    with pytest.raises(RobotSpecError, match="unknown robot 'nonexistent'.*available robots: .*iiwa14"):
        load_robot("nonexistent")


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["joints"][2]["link"].pop("mass_kg"), r"joints\[2\]\.link\.mass_kg'.*missing"),
    (lambda d: d["joints"][1]["link"].__setitem__("mass_kg", -3.0), r"joints\[1\]\.link\.mass_kg'.*positive.*-3"),
    (lambda d: d["joints"][4]["link"]["inertia_com_kgm2"].update(xx=0.001, yy=0.001, zz=0.01),
     r"joints\[4\]\.link\.inertia_com_kgm2'.*triangle inequality"),
    (lambda d: d["joints"][0]["link"]["inertia_com_kgm2"].update(xx=-0.01),
     r"joints\[0\]\.link\.inertia_com_kgm2'.*not positive definite"),
    (lambda d: d["joints"][3]["friction"].__setitem__("gearbox", {"coulomb_Nm": 1.0}),
     r"joints\[3\]\.friction'.*unknown friction side"),
    (lambda d: d["joints"][0]["limits"].__setitem__("position_deg", [10, -10]),
     r"position_deg'.*lower < upper"),
    (lambda d: d["joints"][5]["link"].__setitem__("com_m", [0, 0]), r"com_m'.*list of 3 numbers"),
    (lambda d: d["joints"][6]["friction"]["link"].__setitem__("viscous_Nms_rad", "high"),
     r"viscous_Nms_rad'.*expected a number"),
])
def test_bad_robot_file_is_refused_naming_file_and_field(robot_yaml, mutate, message):
    path = robot_yaml(mutate)
    with pytest.raises(RobotSpecError, match=message) as info:
        load_robot(path)
    assert str(path) in str(info.value)
