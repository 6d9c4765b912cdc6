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


def _model_arrays_differ(m1, m2) -> list[str]:
    """Names of the numeric arrays (and solver options) in which two MjModels differ at all."""
    bad = [n for n in dir(m1) if not n.startswith("_") and isinstance(getattr(m1, n, None), np.ndarray)
           and getattr(m1, n).dtype.kind in "fiu"
           and (getattr(m1, n).shape != getattr(m2, n).shape or not np.array_equal(getattr(m1, n), getattr(m2, n)))]
    return bad + [f"opt.{n}" for n in ("timestep", "integrator", "gravity", "disableflags")
                  if not np.array_equal(getattr(m1.opt, n), getattr(m2.opt, n))]


@pytest.mark.parametrize("robot", ["iiwa14", "lwr4p", "kuka_ir361", "cloos_qrc350"])
@pytest.mark.parametrize("actuator", ["motor", "ramp"])
def test_mjcf_text_is_the_mjspec_model(robot, actuator):
    """The exported MJCF text (full precision) compiles to exactly the model MjSpec builds,
    with payload and coupled drives (the CLOOS), so the file and the twin cannot drift apart."""
    import dataclasses

    import mujoco

    spec = load_robot(robot)
    if spec.payload is not None:
        spec = dataclasses.replace(spec, payload_attached=True)
    built = mujoco_model(spec, 2e-3, "implicitfast", actuator)
    from_text = mujoco.MjModel.from_xml_string(to_mjcf(spec, 2e-3, "implicitfast", actuator))
    assert _model_arrays_differ(built, from_text) == []
    assert built.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST and built.opt.timestep == 2e-3


def test_mjcf_and_urdf_are_escaped_xml(iiwa):
    """Names are XML attributes, not pasted text: a robot name with markup characters stays a name."""
    import dataclasses
    import xml.etree.ElementTree as ET

    spec = dataclasses.replace(iiwa, name='arm "A" & <B>')
    assert ET.fromstring(to_urdf(spec).split("\n", 1)[1]).get("name") == spec.name
    assert ET.fromstring(to_mjcf(spec)).get("model") == spec.name


def test_collision_model_geoms(iiwa):
    """One capsule per link plus each obstacle, with the obstacle's MuJoCo type and size."""
    import mujoco

    from robident_twin.model.builders import collision_model

    obs = [dict(name="table", type="box", pos_m=[0.6, 0, 0.2], size_m=[0.3, 0.3, 0.02]),
           dict(name="ball", type="sphere", pos_m=[0, 0.5, 0.5], size_m=[0.1])]
    m = collision_model(iiwa, 0.07, obs)
    names = [m.geom(i).name for i in range(m.ngeom)]
    assert names == ["link0", "obstacle_table", "obstacle_ball"] + [f"link{i}" for i in range(1, 8)]
    table = m.geom("obstacle_table")
    assert table.type[0] == mujoco.mjtGeom.mjGEOM_BOX
    np.testing.assert_array_equal(table.size, [0.3, 0.3, 0.02])
    np.testing.assert_array_equal(m.geom("link3").size[0], 0.07)
    with pytest.raises(ValueError, match="obstacle 'x': type must be one of"):
        collision_model(iiwa, 0.07, [dict(name="x", type="cone", pos_m=[0, 0, 0], size_m=[1])])


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
