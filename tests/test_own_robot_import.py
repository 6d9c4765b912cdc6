"""Bring your own robot (issue 16): the URDF / MJCF importer against pinocchio on the original file.

Ground truth is independent of the project: pinocchio's RNEA and joint-torque regressor built
straight from the user's URDF (with the locked joints reduced away by pinocchio itself).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from robident_twin import errors
from robident_twin.model.build import build_model
from robident_twin.model.dynamics import TruthModel
from robident_twin.model.importer import import_robot, rotation_z_to
from robident_twin.model.overlay import parse_overlay
from robident_twin.model.regressor import ModelOptions

RIGID = ModelOptions(measurement="joint_torque", drive_inertia=False, viscous=False, coulomb=False, offsets=False)
PANDA_LOCK = {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}


def erd_robot(rel: str) -> Path:
    """A URDF shipped by the example-robot-data wheel (a test dependency, no Python module)."""
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        pytest.fail("example-robot-data is a test dependency: pip install -e '.[test]'")
    for f in dist.files or []:
        if str(f).endswith(rel):
            return Path(dist.locate_file(f))
    pytest.fail(f"example-robot-data has no {rel}")


@pytest.fixture(scope="session")
def ur5_urdf() -> Path:
    return erd_robot("ur_description/urdf/ur5_robot.urdf")


@pytest.fixture(scope="session")
def panda_urdf() -> Path:
    return erd_robot("panda_description/urdf/panda.urdf")


def pin_reference(urdf: Path, lock: dict | None = None):
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(urdf))
    if lock:
        q = pin.neutral(model)
        ids = []
        for name, pos in lock.items():
            jid = model.getJointId(name)
            q[model.joints[jid].idx_q] = pos
            ids.append(jid)
        model = pin.buildReducedModel(model, ids, q)
    return model


def max_rnea_error(model, spec, n_states=5, seed=0) -> float:
    import pinocchio as pin

    data, truth = model.createData(), TruthModel(spec)
    rng = np.random.default_rng(seed)
    err = 0.0
    for _ in range(n_states):
        q, dq, ddq = rng.uniform(-2, 2, size=(3, model.nv))
        err = max(err, float(np.abs(pin.rnea(model, data, q, dq, ddq) - truth.rnea_links(q, dq, ddq)[0]).max()))
    return err


def regressor_rank(model, n_states=40, seed=1) -> int:
    """Numerical rank of pinocchio's joint-torque regressor stacked over random states."""
    import pinocchio as pin

    data = model.createData()
    rng = np.random.default_rng(seed)
    Y = np.vstack([pin.computeJointTorqueRegressor(model, data, *rng.uniform(-3, 3, size=(3, model.nv)))
                   for _ in range(n_states)])
    s = np.linalg.svd(Y, compute_uv=False)
    return int(np.sum(s > s[0] * 1e-9))


# --------------------------------------------------------------------------- random arms


def _num(x) -> str:
    return repr(float(x))


def _vec(a) -> str:
    return " ".join(_num(x) for x in a)


def _random_axis(rng, prev):
    kind = rng.integers(4)
    if prev is not None and kind == 0:
        return prev.copy()                                   # parallel (or coaxial, with a zero offset)
    if prev is not None and kind == 1:
        v = np.cross(prev, rng.normal(size=3))
        return v / np.linalg.norm(v)                         # perpendicular
    if kind == 2:
        return np.eye(3)[rng.integers(3)] * rng.choice([-1, 1])  # a signed principal axis
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)                             # arbitrary


def _inertial(parent, rng, mass=None):
    inert = ET.SubElement(parent, "inertial")
    ET.SubElement(inert, "origin", xyz=_vec(rng.uniform(-0.1, 0.1, 3)),
                  rpy=_vec(rng.uniform(-1, 1, 3)))
    ET.SubElement(inert, "mass", value=_num(mass if mass is not None else rng.uniform(0.5, 5)))
    a, b = rng.uniform(0.01, 0.1, 2)
    c = rng.uniform(abs(a - b) + 1e-3, a + b)  # triangle inequality
    ET.SubElement(inert, "inertia", ixx=_num(a), iyy=_num(b), izz=_num(c), ixy="0", ixz="0", iyz="0")


def random_arm_urdf(rng, n: int) -> str:
    """A serial arm of n revolute joints with random axes, offsets (zero = coaxial) and
    orientations, and fixed links with their own inertials between some joints."""
    robot = ET.Element("robot", name=f"arm{n}")
    ET.SubElement(robot, "link", name="base")
    parent, prev_axis = "base", None
    for i in range(1, n + 1):
        if rng.random() < 0.3:  # a fixed link in between: merged into its parent
            fx = f"fixed{i}"
            _inertial(ET.SubElement(robot, "link", name=fx), rng)
            j = ET.SubElement(robot, "joint", name=f"fix{i}", type="fixed")
            ET.SubElement(j, "parent", link=parent)
            ET.SubElement(j, "child", link=fx)
            ET.SubElement(j, "origin", xyz=_vec(rng.uniform(-0.2, 0.2, 3)), rpy="0.3 -0.2 0.1")
            parent = fx
        axis = _random_axis(rng, prev_axis)
        child = f"link{i}"
        _inertial(ET.SubElement(robot, "link", name=child), rng)
        j = ET.SubElement(robot, "joint", name=f"j{i}", type="revolute")
        ET.SubElement(j, "parent", link=parent)
        ET.SubElement(j, "child", link=child)
        coaxial = rng.random() < 0.2
        xyz = np.zeros(3) if coaxial else rng.uniform(-0.3, 0.3, 3)
        rpy = np.zeros(3) if rng.random() < 0.3 else rng.uniform(-np.pi, np.pi, 3)
        ET.SubElement(j, "origin", xyz=_vec(xyz), rpy=_vec(rpy))
        ET.SubElement(j, "axis", xyz=_vec(axis))
        ET.SubElement(j, "limit", lower="-3", upper="3", effort="100", velocity="2")
        parent, prev_axis = child, axis
    tool = ET.SubElement(robot, "link", name="tool0")  # a massless tool frame
    j = ET.SubElement(robot, "joint", name="tool_joint", type="fixed")
    ET.SubElement(j, "parent", link=parent)
    ET.SubElement(j, "child", link=tool.get("name"))
    ET.SubElement(j, "origin", xyz="0 0 0.1", rpy="0 0 0")
    return ET.tostring(robot, encoding="unicode")


def test_rotation_z_to_maps_z_onto_the_axis():
    rng = np.random.default_rng(3)
    for a in [np.array([0, 0, 1.0]), np.array([0, 0, -1.0]), np.array([1.0, 0, 0]), *rng.normal(size=(5, 3))]:
        R = rotation_z_to(a)
        assert np.allclose(R @ [0, 0, 1], a / np.linalg.norm(a), atol=1e-14)
        assert np.allclose(R.T @ R, np.eye(3), atol=1e-14) and np.isclose(np.linalg.det(R), 1.0)


def test_twenty_random_arms_match_pinocchio_on_the_original_urdf(tmp_path):
    rng = np.random.default_rng(16)
    worst = 0.0
    for k in range(20):
        n = int(rng.integers(3, 8))
        path = tmp_path / f"arm{k}.urdf"
        path.write_text(random_arm_urdf(rng, n))
        spec = import_robot(path)
        ref = pin_reference(path)
        assert spec.n_joints == n and spec.joint_names == [f"j{i}" for i in range(1, n + 1)]
        assert spec.imported.link_names == tuple(f"link{i}" for i in range(1, n + 1))
        assert spec.imported.flange_frame == "tool0"
        err = max_rnea_error(ref, spec, n_states=3, seed=k)
        worst = max(worst, err)
        assert err < 1e-9, f"arm {k} ({n} joints): imported torques differ from pinocchio by {err:.3g} Nm"
        base = build_model(spec, RIGID, n_samples=60, seed=k).base
        assert len(base.names) == regressor_rank(ref, seed=k), f"arm {k}: base count != regressor rank"
    print(f"20 random arms: max |tau_imported - tau_pinocchio| = {worst:.2e} Nm")


# --------------------------------------------------------------------------- Panda and UR5


def test_ur5_and_panda_import_equal_pinocchio_and_the_regressor_rank(ur5_urdf, panda_urdf):
    for urdf, lock, n, flange in ((ur5_urdf, None, 6, "tool0"), (panda_urdf, PANDA_LOCK, 7, "panda_hand_tcp")):
        spec = import_robot(urdf, parse_overlay({"lock": lock} if lock else None))
        ref = pin_reference(urdf, lock)
        assert spec.n_joints == n and spec.imported.flange_frame == flange
        assert max_rnea_error(ref, spec) < 1e-9
        assert len(build_model(spec, RIGID, n_samples=80).base.names) == regressor_rank(ref)
        # what the file lacks got the documented, stable defaults and the run names them
        assert np.all(spec.drive_inertia_kgm2 > 0)
        assert any(d.startswith("drive.inertia_kgm2 = 0.00125 x torque_Nm") for d in spec.imported.defaults_used)


def urdf_to_mjcf(urdf: Path, out: Path) -> Path:
    """MuJoCo's own compiler: the URDF (meshes stripped: MuJoCo cannot read package:// .dae files;
    they carry no dynamics) compiled and saved as MJCF."""
    import mujoco

    root = ET.parse(urdf).getroot()
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for e in link.findall(tag):
                link.remove(e)
    stripped = out.with_suffix(".urdf")
    ET.ElementTree(root).write(stripped)
    mujoco.mj_saveLastXML(str(out), mujoco.MjModel.from_xml_path(str(stripped)))
    return out


@pytest.mark.parametrize("robot", ["ur5", "panda"])
def test_the_same_robot_as_mjcf_gives_the_same_base_parameters(robot, ur5_urdf, panda_urdf, tmp_path):
    urdf, lock = (ur5_urdf, {}) if robot == "ur5" else (panda_urdf, PANDA_LOCK)
    spec_u = import_robot(urdf, parse_overlay({"lock": lock}))
    mjcf = urdf_to_mjcf(urdf, tmp_path / f"{robot}.xml")
    # MJCF has no velocity or effort limits of its own here: the overlay gives the URDF's
    limits = {j.name: {"limits": {"velocity_rad_s": j.dq_max_rad_s, "torque_Nm": j.tau_max_Nm}} for j in spec_u.joints}
    spec_m = import_robot(mjcf, parse_overlay({"lock": lock, "joints": limits}))
    assert spec_m.imported.kind == "mjcf" and spec_m.joint_names == spec_u.joint_names
    bu, bm = build_model(spec_u, RIGID, n_samples=80), build_model(spec_m, RIGID, n_samples=80)
    assert bu.base.names == bm.base.names
    tu, tm = bu.true_base(), bm.true_base()
    # MuJoCo writes its XML with ~7 significant digits: agree to that precision
    assert np.allclose(tm, tu, rtol=1e-5, atol=1e-5 * np.abs(tu).max()), np.abs(tm - tu).max()


# --------------------------------------------------------------------------- what it refuses


def _simple_urdf(extra: str = "", joint_type: str = "revolute", inertial: str | None = None) -> str:
    inertial = inertial if inertial is not None else (
        '<inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>')
    return f"""<robot name="r"><link name="base"/>
      <link name="l1">{inertial}</link>
      <joint name="j1" type="{joint_type}"><parent link="base"/><child link="l1"/><axis xyz="0 1 0"/>
        <limit lower="-1" upper="1" effort="10" velocity="1"/></joint>{extra}</robot>"""


@pytest.mark.parametrize("case, text, overlay, error, words", [
    ("floating base", _simple_urdf(joint_type="floating"), None, errors.FloatingBaseError, "floating"),
    ("closed chain", _simple_urdf(
        '<link name="l2"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" '
        'iyz="0"/></inertial></link><joint name="j2" type="revolute"><parent link="base"/><child link="l2"/>'
        '<limit lower="-1" upper="1" effort="10" velocity="1"/></joint><joint name="j3" type="revolute">'
        '<parent link="l1"/><child link="l2"/><limit lower="-1" upper="1" effort="10" velocity="1"/></joint>'),
     None, errors.ClosedChainError, "'l2'"),
    ("missing inertials", _simple_urdf(inertial=""), None, errors.MissingInertialError, "'j1'"),
    ("zero mass", _simple_urdf(inertial='<inertial><mass value="0"/><inertia ixx="0" iyy="0" izz="0" ixy="0" '
                               'ixz="0" iyz="0"/></inertial>'), None, errors.ZeroMassError, "'j1'"),
    ("prismatic not locked", _simple_urdf(joint_type="prismatic"), None, errors.UnsupportedJointError, "lock"),
    ("unknown overlay key", _simple_urdf(), {"joints": {"j1": {"drive": {"inertia": 0.1}}}}, errors.OverlayError,
     "joints.j1.drive"),
    ("unknown overlay top key", _simple_urdf(), {"drives": {}}, errors.OverlayError, "drives"),
    ("overlay names no joint", _simple_urdf(), {"joints": {"j9": {"drive": {"gear_ratio": 50}}}},
     errors.OverlayError, "j9"),
])
def test_import_errors_are_named(case, text, overlay, error, words, tmp_path):
    p = tmp_path / "robot.urdf"
    p.write_text(text)
    with pytest.raises(error) as exc:
        import_robot(p, parse_overlay(overlay, tmp_path / "overlay.yaml") if overlay else None)
    assert words in str(exc.value), str(exc.value)
    assert isinstance(exc.value, errors.RobidentError)


def test_mjcf_errors_are_named(tmp_path):
    free = tmp_path / "free.xml"
    free.write_text('<mujoco><worldbody><body name="b"><freejoint/><geom size="0.1"/></body></worldbody></mujoco>')
    with pytest.raises(errors.FloatingBaseError):
        import_robot(free)
    loop = tmp_path / "loop.xml"
    loop.write_text('<mujoco><worldbody><body name="a"><joint name="ja" range="-1 1"/><geom size="0.1"/>'
                    '<body name="b" pos="0 0 1"><joint name="jb" range="-1 1"/><geom size="0.1"/></body></body>'
                    '</worldbody><equality><connect body1="b" body2="world" anchor="0 0 0"/></equality></mujoco>')
    with pytest.raises(errors.ClosedChainError):
        import_robot(loop)


def test_an_overlay_without_a_robot_file_is_refused(tmp_path):
    from robident_twin.errors import ConfigError
    from robident_twin.model.build import resolve_robot

    with pytest.raises(ConfigError, match="robot.overlay"):
        resolve_robot({"name": "iiwa14", "file": None, "overlay": str(tmp_path / "o.yaml")})
    with pytest.raises(errors.RobotSpecError, match="overlay only applies"):
        from robident_twin.model.robot import load_robot

        load_robot("iiwa14", tmp_path / "o.yaml")
