"""Generate the URDF, the MJCF, the pinocchio model and the MuJoCo model from a RobotSpec.

- The MuJoCo model is built with MuJoCo's own model editor (:func:`mjspec`, ``mujoco.MjSpec``)
  and compiled from it, never from text.
- The URDF and MJCF files are XML trees (``xml.etree``), written at full float precision
  (``repr``): ``MjSpec.to_xml`` prints 6 significant digits, which would round a coupling
  coefficient such as 0.18916667 to 0.189167 in an exported twin. ``tests/test_robot.py``
  checks that the MJCF text compiles to exactly the model :func:`mjspec` builds.
- The pinocchio model is parsed from the URDF by pinocchio's reader, so every engine sees the
  same numbers.

Drive inertia goes into MuJoCo's ``armature``; friction is applied explicitly by the twin
(see :mod:`robident_twin.model.dynamics`), never by the engines' own friction models.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from functools import lru_cache

import numpy as np

from robident_twin.model.robot import RobotSpec


def rpy_to_matrix(rpy: np.ndarray) -> np.ndarray:
    """URDF convention: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def matrix_to_quat_wxyz(R: np.ndarray) -> np.ndarray:
    """Rotation matrix to a unit quaternion (w, x, y, z), MuJoCo's order."""
    import mujoco

    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R).ravel())
    return q


DRAKE_NS = "http://drake.mit.edu"  # Drake's URDF extensions (drake:rotor_inertia, drake:gear_ratio)
ET.register_namespace("drake", DRAKE_NS)


def _f(x: float) -> str:
    return repr(float(x))


def _v(a) -> str:
    return " ".join(_f(x) for x in a)


def _full_inertia(I: np.ndarray) -> list[float]:
    """MuJoCo's ``fullinertia`` order: xx yy zz xy xz yz."""
    return [float(I[0, 0]), float(I[1, 1]), float(I[2, 2]), float(I[0, 1]), float(I[0, 2]), float(I[1, 2])]


def _xml_text(root: ET.Element, declaration: bool = False) -> str:
    ET.indent(root, space="  ")
    # ElementTree ends empty elements with " />"; the files keep the usual "/>" (in a value ">" is escaped)
    text = ET.tostring(root, encoding="unicode").replace(" />", "/>")
    return ('<?xml version="1.0"?>\n' if declaration else "") + text + "\n"


def _el(parent: ET.Element, tag: str, **attrs) -> ET.Element:
    return ET.SubElement(parent, tag, {k: v for k, v in attrs.items()})


def _urdf_inertial(link: ET.Element, com_m, mass_kg: float, I: np.ndarray) -> None:
    inertial = _el(link, "inertial")
    _el(inertial, "origin", xyz=_v(com_m), rpy="0 0 0")
    _el(inertial, "mass", value=_f(mass_kg))
    _el(inertial, "inertia", ixx=_f(I[0, 0]), ixy=_f(I[0, 1]), ixz=_f(I[0, 2]),
        iyy=_f(I[1, 1]), iyz=_f(I[1, 2]), izz=_f(I[2, 2]))


def to_urdf(spec: RobotSpec) -> str:
    """URDF text of the robot: link inertials about the COM, revolute joints about z, and each
    drive in Drake's ``<transmission>`` convention (URDF has no armature tag): rotor inertia =
    drive inertia / gear ratio^2 and the gear ratio (not for coupled drives)."""
    robot = ET.Element("robot", name=spec.name)
    _el(robot, "link", name="base_link")
    parent = "base_link"
    for i, j in enumerate(spec.joints, start=1):
        _urdf_inertial(_el(robot, "link", name=f"link{i}"), j.link.com_m, j.link.mass_kg, j.link.inertia_com_kgm2)
        joint = _el(robot, "joint", name=j.name, type="revolute")
        _el(joint, "parent", link=parent)
        _el(joint, "child", link=f"link{i}")
        _el(joint, "origin", xyz=_v(j.origin_xyz_m), rpy=_v(j.origin_rpy_rad))
        _el(joint, "axis", xyz="0 0 1")
        _el(joint, "limit", lower=_f(j.q_min_rad), upper=_f(j.q_max_rad), effort=_f(j.tau_max_Nm),
            velocity=_f(j.dq_max_rad_s))
        _el(joint, "dynamics", damping=_f(j.fv_link_Nms_rad + j.fv_motor_Nms_rad),
            friction=_f(j.fc_link_Nm + j.fc_motor_Nm))
        parent = f"link{i}"
    # an explicit zero inertial: a loader that gives a link without one a default mass
    # (plain pybullet.loadURDF: 1 kg) would otherwise load a heavier robot
    _urdf_inertial(_el(robot, "link", name="flange"), np.zeros(3), 0.0, np.zeros((3, 3)))
    _urdf_fixed(robot, "flange_joint", parent, "flange", spec.flange_xyz_m, spec.flange_rpy_rad)
    if spec.payload_attached:
        pl = spec.payload
        _urdf_inertial(_el(robot, "link", name="payload"), pl.com_m, pl.mass_kg, pl.inertia_com_kgm2)
        _urdf_fixed(robot, "payload_joint", "flange", "payload", np.zeros(3), np.zeros(3))
    if not spec.is_coupled:  # a per-joint simple transmission cannot express a coupling
        for j in spec.joints:
            tr = _el(robot, "transmission", name=f"{j.name}_transmission")
            _el(tr, "type").text = "transmission_interface/SimpleTransmission"
            _el(tr, "joint", name=j.name)
            act = _el(tr, "actuator", name=f"{j.name}_motor")
            _el(act, f"{{{DRAKE_NS}}}rotor_inertia", value=_f(j.drive_inertia_kgm2 / j.gear_ratio**2))
            _el(act, f"{{{DRAKE_NS}}}gear_ratio", value=_f(j.gear_ratio))
    return _xml_text(robot, declaration=True)


def _urdf_fixed(robot: ET.Element, name: str, parent: str, child: str, xyz, rpy) -> None:
    joint = _el(robot, "joint", name=name, type="fixed")
    _el(joint, "parent", link=parent)
    _el(joint, "child", link=child)
    _el(joint, "origin", xyz=_v(xyz), rpy=_v(rpy))


def mjspec(spec: RobotSpec, timestep_s: float = 1e-3, integrator: str = "RK4", actuator: str = "motor"):
    """The twin's MuJoCo model as a ``mujoco.MjSpec``: nested bodies, hinge joints with
    armature = drive inertia, one torque actuator per joint (unbounded: limits are enforced by
    the HAL, not by clipping), no contacts, no engine friction or damping (the twin applies
    friction explicitly). Coupled drives (a coupling matrix) act on motor coordinates through
    fixed tendons whose armature is the rotor inertia.

    ``actuator="motor"`` gives plain torque motors (ctrl = torque). ``actuator="ramp"``
    gives integrator actuators whose activation is the torque and whose control is its
    rate: a controller that sets ctrl = (u_next - act) / dt applies a torque that is
    continuous and piecewise linear in time (first-order hold), as a motor's current
    loop does, instead of jumping every control period."""
    import mujoco

    if actuator not in ("motor", "ramp"):
        raise ValueError(f"actuator must be 'motor' or 'ramp', got {actuator!r}")
    s = mujoco.MjSpec()
    s.modelname = spec.name
    s.compiler.degree = False
    s.compiler.autolimits = True
    s.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    s.option.timestep = float(timestep_s)
    try:
        s.option.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    except AttributeError:
        raise ValueError(f"integrator must be one of Euler, RK4, implicit, implicitfast; got {integrator!r}") from None
    s.option.gravity = np.asarray(spec.gravity_m_s2, dtype=float)
    s.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    s.default.geom.contype = 0
    s.default.geom.conaffinity = 0
    s.default.geom.rgba = [0.9, 0.5, 0.1, 1.0]
    coupled = spec.is_coupled
    parent = s.worldbody
    for i, j in enumerate(spec.joints, start=1):
        body = parent.add_body(name=f"link{i}", pos=np.asarray(j.origin_xyz_m, dtype=float),
                               quat=matrix_to_quat_wxyz(rpy_to_matrix(j.origin_rpy_rad)))
        body.add_joint(name=j.name, type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0.0, 0.0, 1.0],
                       armature=0.0 if coupled else float(j.drive_inertia_kgm2), damping=0.0, frictionloss=0.0)
        _mj_inertial(body, j.link.com_m, j.link.mass_kg, j.link.inertia_com_kgm2)
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.06, 0.0, 0.0], mass=0.0)
        parent = body
    fq = matrix_to_quat_wxyz(rpy_to_matrix(spec.flange_rpy_rad))
    parent.add_site(name="flange", pos=np.asarray(spec.flange_xyz_m, dtype=float), quat=fq)
    if spec.payload_attached:
        pl = spec.payload
        body = parent.add_body(name="payload", pos=np.asarray(spec.flange_xyz_m, dtype=float), quat=fq)
        _mj_inertial(body, pl.com_m, pl.mass_kg, pl.inertia_com_kgm2)
    if coupled:  # motor k drives q_m,k = sum_i Cinv[k, i] q_i; its rotor inertia is the tendon's armature
        cinv = spec.coupling_inv
        for k, j in enumerate(spec.joints):
            tendon = s.add_tendon(name=f"{j.name}_drive", armature=float(j.drive_inertia_kgm2))
            for i, ji in enumerate(spec.joints):
                if abs(cinv[k, i]) > 0:
                    tendon.wrap_joint(ji.name, float(cinv[k, i]))
    for j in spec.joints:
        a = s.add_actuator(name=f"{j.name}_motor", target=f"{j.name}_drive" if coupled else j.name,
                           trntype=mujoco.mjtTrn.mjTRN_TENDON if coupled else mujoco.mjtTrn.mjTRN_JOINT)
        a.gear = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        a.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        a.gainprm = [1.0] + [0.0] * 9
        a.biastype = mujoco.mjtBias.mjBIAS_NONE
        if actuator == "ramp":
            a.dyntype = mujoco.mjtDyn.mjDYN_INTEGRATOR
    return s


def _mj_inertial(body, com_m, mass_kg: float, I: np.ndarray) -> None:
    body.explicitinertial = True
    body.mass = float(mass_kg)
    body.ipos = np.asarray(com_m, dtype=float)
    body.fullinertia = _full_inertia(I)


def to_mjcf(spec: RobotSpec, timestep_s: float = 1e-3, integrator: str = "RK4",
            actuator: str = "motor") -> str:
    """MJCF text of :func:`mjspec`'s model at full precision (it compiles to the same model,
    bit for bit; the test in tests/test_robot.py)."""
    if actuator not in ("motor", "ramp"):
        raise ValueError(f"actuator must be 'motor' or 'ramp', got {actuator!r}")
    root = ET.Element("mujoco", model=spec.name)
    _el(root, "compiler", angle="radian", autolimits="true", inertiafromgeom="false")
    option = _el(root, "option", timestep=_f(timestep_s), integrator=integrator, gravity=_v(spec.gravity_m_s2))
    _el(option, "flag", contact="disable")
    _el(_el(root, "default"), "geom", contype="0", conaffinity="0", rgba="0.9 0.5 0.1 1")
    parent = _el(root, "worldbody")
    coupled = spec.is_coupled
    for i, j in enumerate(spec.joints, start=1):
        quat = matrix_to_quat_wxyz(rpy_to_matrix(j.origin_rpy_rad))
        body = _el(parent, "body", name=f"link{i}", pos=_v(j.origin_xyz_m), quat=_v(quat))
        _el(body, "joint", name=j.name, type="hinge", axis="0 0 1",
            armature=_f(0.0 if coupled else j.drive_inertia_kgm2), damping="0", frictionloss="0")
        _el(body, "inertial", pos=_v(j.link.com_m), mass=_f(j.link.mass_kg),
            fullinertia=_v(_full_inertia(j.link.inertia_com_kgm2)))
        _el(body, "geom", type="sphere", size="0.06", mass="0")
        parent = body
    fq = matrix_to_quat_wxyz(rpy_to_matrix(spec.flange_rpy_rad))
    _el(parent, "site", name="flange", pos=_v(spec.flange_xyz_m), quat=_v(fq))
    if spec.payload_attached:
        pl = spec.payload
        body = _el(parent, "body", name="payload", pos=_v(spec.flange_xyz_m), quat=_v(fq))
        _el(body, "inertial", pos=_v(pl.com_m), mass=_f(pl.mass_kg), fullinertia=_v(_full_inertia(pl.inertia_com_kgm2)))
    if coupled:
        cinv = spec.coupling_inv
        tendons = _el(root, "tendon")
        for k, j in enumerate(spec.joints):
            fixed = _el(tendons, "fixed", name=f"{j.name}_drive", armature=_f(j.drive_inertia_kgm2))
            for i, ji in enumerate(spec.joints):
                if abs(cinv[k, i]) > 0:
                    _el(fixed, "joint", joint=ji.name, coef=_f(cinv[k, i]))
    actuators = _el(root, "actuator")
    for j in spec.joints:
        target = {"tendon": f"{j.name}_drive"} if coupled else {"joint": j.name}
        if actuator == "motor":
            _el(actuators, "motor", name=f"{j.name}_motor", **target, gear="1")
        else:
            _el(actuators, "general", name=f"{j.name}_motor", **target, dyntype="integrator", gainprm="1",
                biastype="none", gear="1")
    return _xml_text(root)


@lru_cache(maxsize=16)
def _pinocchio_from_urdf(urdf: str, gravity: tuple):
    import pinocchio as pin

    model = pin.buildModelFromXML(urdf)
    model.gravity.linear = np.array(gravity)
    return model


def pinocchio_model(spec: RobotSpec):
    """Pinocchio model parsed from the generated URDF. Armature stays zero here: drive
    inertia and friction are separate terms of the identification model."""
    model = _pinocchio_from_urdf(to_urdf(spec), tuple(spec.gravity_m_s2))
    return model.copy()


def mujoco_model(spec: RobotSpec, timestep_s: float = 1e-3, integrator: str = "RK4",
                 actuator: str = "motor"):
    """MuJoCo model compiled from :func:`mjspec`."""
    return mjspec(spec, timestep_s, integrator, actuator).compile()


# --------------------------------------------------------------------------- collision geometry
# Added for issue 4 (excitation design constraints and the dry run); separate from mjspec so the
# twin's dynamics model is untouched. Used by robident_twin.design.geometry.CollisionChecker.

_GEOM_TYPES = ("sphere", "box", "capsule")


def collision_mjspec(spec: RobotSpec, radius_m: float = 0.06, obstacles=()):
    """The robot's collision geometry as a ``mujoco.MjSpec``: one capsule per link (geom
    ``link0`` for the base, from the world origin to joint 1; geom ``link<i>`` from joint i to
    joint i+1, the last one to the flange), radius ``radius_m``, plus static obstacle geoms
    ``obstacle_<name>``. Each obstacle is a mapping ``{name, type: sphere|box|capsule,
    pos_m: [x, y, z], size_m: [...]}`` (MuJoCo sizes: sphere [r], box half sizes
    [hx, hy, hz], capsule [r, half_length] along z). Kinematics as :func:`mjspec`."""
    import mujoco

    s = mujoco.MjSpec()
    s.modelname = f"{spec.name}_collision"
    s.compiler.degree = False
    s.compiler.autolimits = True

    def seg(body, name: str, a, b) -> None:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if np.linalg.norm(b - a) < 1e-9:
            body.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_SPHERE, pos=a, size=[radius_m, 0.0, 0.0])
        else:
            body.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=np.concatenate([a, b]),
                          size=[radius_m, 0.0, 0.0])

    seg(s.worldbody, "link0", np.zeros(3), spec.joints[0].origin_xyz_m)
    for ob in obstacles:
        if ob["type"] not in _GEOM_TYPES:
            raise ValueError(f"obstacle {ob['name']!r}: type must be one of {_GEOM_TYPES}, got {ob['type']!r}")
        size = np.zeros(3)
        size[:len(ob["size_m"])] = ob["size_m"]
        s.worldbody.add_geom(name=f"obstacle_{ob['name']}", type=getattr(mujoco.mjtGeom, f"mjGEOM_{ob['type'].upper()}"),
                             pos=np.asarray(ob["pos_m"], dtype=float), size=size)
    parent = s.worldbody
    n = spec.n_joints
    for i, j in enumerate(spec.joints, start=1):
        end = spec.joints[i].origin_xyz_m if i < n else spec.flange_xyz_m
        body = parent.add_body(name=f"link{i}", pos=np.asarray(j.origin_xyz_m, dtype=float),
                               quat=matrix_to_quat_wxyz(rpy_to_matrix(j.origin_rpy_rad)))
        body.add_joint(name=j.name, type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0.0, 0.0, 1.0])
        seg(body, f"link{i}", np.zeros(3), end)
        parent = body
    return s


def collision_model(spec: RobotSpec, radius_m: float = 0.06, obstacles=()):
    """MuJoCo model compiled from :func:`collision_mjspec`."""
    return collision_mjspec(spec, radius_m, obstacles).compile()
