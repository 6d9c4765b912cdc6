"""Generate the URDF, the MJCF, the pinocchio model and the MuJoCo model from a RobotSpec.

The pinocchio model is parsed from the generated URDF and the MuJoCo model
from the generated MJCF, so every engine sees the same numbers. Drive inertia
goes into MuJoCo's ``armature``; friction is applied explicitly by the twin
(see :mod:`robident_twin.model.dynamics`), never by the engines' own friction models.
"""
from __future__ import annotations

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


def _f(x: float) -> str:
    return repr(float(x))


def _v(a) -> str:
    return " ".join(_f(x) for x in a)


def to_urdf(spec: RobotSpec) -> str:
    """URDF text of the robot: link inertials about the COM, revolute joints about z, and each
    drive in Drake's ``<transmission>`` convention (URDF has no armature tag): rotor inertia =
    drive inertia / gear ratio^2 and the gear ratio (not for coupled drives)."""
    lines = ['<?xml version="1.0"?>', f'<robot name="{spec.name}" xmlns:drake="{DRAKE_NS}">',
             '  <link name="base_link"/>']
    parent = "base_link"
    for i, j in enumerate(spec.joints, start=1):
        I = j.link.inertia_com_kgm2
        lines += [
            f'  <link name="link{i}">',
            '    <inertial>',
            f'      <origin xyz="{_v(j.link.com_m)}" rpy="0 0 0"/>',
            f'      <mass value="{_f(j.link.mass_kg)}"/>',
            f'      <inertia ixx="{_f(I[0, 0])}" ixy="{_f(I[0, 1])}" ixz="{_f(I[0, 2])}" '
            f'iyy="{_f(I[1, 1])}" iyz="{_f(I[1, 2])}" izz="{_f(I[2, 2])}"/>',
            '    </inertial>',
            '  </link>',
            f'  <joint name="{j.name}" type="revolute">',
            f'    <parent link="{parent}"/>',
            f'    <child link="link{i}"/>',
            f'    <origin xyz="{_v(j.origin_xyz_m)}" rpy="{_v(j.origin_rpy_rad)}"/>',
            '    <axis xyz="0 0 1"/>',
            f'    <limit lower="{_f(j.q_min_rad)}" upper="{_f(j.q_max_rad)}" '
            f'effort="{_f(j.tau_max_Nm)}" velocity="{_f(j.dq_max_rad_s)}"/>',
            f'    <dynamics damping="{_f(j.fv_link_Nms_rad + j.fv_motor_Nms_rad)}" '
            f'friction="{_f(j.fc_link_Nm + j.fc_motor_Nm)}"/>',
            '  </joint>',
        ]
        parent = f"link{i}"
    lines += [
        # an explicit zero inertial: a loader that gives a link without one a default mass
        # (plain pybullet.loadURDF: 1 kg) would otherwise load a heavier robot
        '  <link name="flange"><inertial><mass value="0"/>'
        '<inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>',
        '  <joint name="flange_joint" type="fixed">',
        f'    <parent link="{parent}"/>',
        '    <child link="flange"/>',
        f'    <origin xyz="{_v(spec.flange_xyz_m)}" rpy="{_v(spec.flange_rpy_rad)}"/>',
        '  </joint>',
    ]
    if spec.payload_attached:
        pl = spec.payload
        I = pl.inertia_com_kgm2
        lines += [
            '  <link name="payload">',
            '    <inertial>',
            f'      <origin xyz="{_v(pl.com_m)}" rpy="0 0 0"/>',
            f'      <mass value="{_f(pl.mass_kg)}"/>',
            f'      <inertia ixx="{_f(I[0, 0])}" ixy="{_f(I[0, 1])}" ixz="{_f(I[0, 2])}" '
            f'iyy="{_f(I[1, 1])}" iyz="{_f(I[1, 2])}" izz="{_f(I[2, 2])}"/>',
            '    </inertial>',
            '  </link>',
            '  <joint name="payload_joint" type="fixed">',
            '    <parent link="flange"/>',
            '    <child link="payload"/>',
            '    <origin xyz="0 0 0" rpy="0 0 0"/>',
            '  </joint>',
        ]
    if not spec.is_coupled:  # a per-joint simple transmission cannot express a coupling
        for j in spec.joints:
            lines += [
                f'  <transmission name="{j.name}_transmission">',
                '    <type>transmission_interface/SimpleTransmission</type>',
                f'    <joint name="{j.name}"/>',
                f'    <actuator name="{j.name}_motor">',
                f'      <drake:rotor_inertia value="{_f(j.drive_inertia_kgm2 / j.gear_ratio**2)}"/>',
                f'      <drake:gear_ratio value="{_f(j.gear_ratio)}"/>',
                '    </actuator>',
                '  </transmission>',
            ]
    lines.append('</robot>')
    return "\n".join(lines) + "\n"


def to_mjcf(spec: RobotSpec, timestep_s: float = 1e-3, integrator: str = "RK4",
            actuator: str = "motor") -> str:
    """MJCF text: nested bodies, hinge joints with armature = drive inertia, one torque
    actuator per joint (unbounded: limits are enforced by the HAL, not by clipping), no
    contacts, no engine friction or damping (the twin applies friction explicitly).

    ``actuator="motor"`` gives plain torque motors (ctrl = torque). ``actuator="ramp"``
    gives integrator actuators whose activation is the torque and whose control is its
    rate: a controller that sets ctrl = (u_next - act) / dt applies a torque that is
    continuous and piecewise linear in time (first-order hold), as a motor's current
    loop does, instead of jumping every control period."""
    if actuator not in ("motor", "ramp"):
        raise ValueError(f"actuator must be 'motor' or 'ramp', got {actuator!r}")
    g = spec.gravity_m_s2
    out = [
        f'<mujoco model="{spec.name}">',
        '  <compiler angle="radian" autolimits="true" inertiafromgeom="false"/>',
        f'  <option timestep="{_f(timestep_s)}" integrator="{integrator}" gravity="{_v(g)}">',
        '    <flag contact="disable"/>',
        '  </option>',
        '  <default><geom contype="0" conaffinity="0" rgba="0.9 0.5 0.1 1"/></default>',
        '  <worldbody>',
    ]
    indent = "    "
    coupled = spec.is_coupled  # drives act on motor coordinates through fixed tendons
    for i, j in enumerate(spec.joints, start=1):
        quat = matrix_to_quat_wxyz(rpy_to_matrix(j.origin_rpy_rad))
        I = j.link.inertia_com_kgm2
        armature = 0.0 if coupled else j.drive_inertia_kgm2
        out += [
            f'{indent}<body name="link{i}" pos="{_v(j.origin_xyz_m)}" quat="{_v(quat)}">',
            f'{indent}  <joint name="{j.name}" type="hinge" axis="0 0 1" '
            f'armature="{_f(armature)}" damping="0" frictionloss="0"/>',
            f'{indent}  <inertial pos="{_v(j.link.com_m)}" mass="{_f(j.link.mass_kg)}" '
            f'fullinertia="{_f(I[0, 0])} {_f(I[1, 1])} {_f(I[2, 2])} {_f(I[0, 1])} {_f(I[0, 2])} {_f(I[1, 2])}"/>',
            f'{indent}  <geom type="sphere" size="0.06" mass="0"/>',
        ]
        indent += "  "
    fq = matrix_to_quat_wxyz(rpy_to_matrix(spec.flange_rpy_rad))
    out.append(f'{indent}<site name="flange" pos="{_v(spec.flange_xyz_m)}" quat="{_v(fq)}"/>')
    if spec.payload_attached:
        pl = spec.payload
        I = pl.inertia_com_kgm2
        out += [f'{indent}<body name="payload" pos="{_v(spec.flange_xyz_m)}" quat="{_v(fq)}">',
                f'{indent}  <inertial pos="{_v(pl.com_m)}" mass="{_f(pl.mass_kg)}" '
                f'fullinertia="{_f(I[0, 0])} {_f(I[1, 1])} {_f(I[2, 2])} {_f(I[0, 1])} {_f(I[0, 2])} {_f(I[1, 2])}"/>',
                f'{indent}</body>']
    for _ in spec.joints:
        indent = indent[:-2]
        out.append(f"{indent}</body>")
    out.append('  </worldbody>')
    if coupled:
        # motor j drives q_m,j = sum_i Cinv[j, i] q_i; its rotor inertia is the tendon's armature
        cinv = spec.coupling_inv
        out.append('  <tendon>')
        for k, j in enumerate(spec.joints):
            out.append(f'    <fixed name="{j.name}_drive" armature="{_f(j.drive_inertia_kgm2)}">')
            for i, ji in enumerate(spec.joints):
                if abs(cinv[k, i]) > 0:
                    out.append(f'      <joint joint="{ji.name}" coef="{_f(cinv[k, i])}"/>')
            out.append('    </fixed>')
        out.append('  </tendon>')
    out.append('  <actuator>')
    for j in spec.joints:
        target = f'tendon="{j.name}_drive"' if coupled else f'joint="{j.name}"'
        if actuator == "motor":
            out.append(f'    <motor name="{j.name}_motor" {target} gear="1"/>')
        else:
            out.append(f'    <general name="{j.name}_motor" {target} dyntype="integrator" '
                       f'gainprm="1" biastype="none" gear="1"/>')
    out += ['  </actuator>', '</mujoco>']
    return "\n".join(out) + "\n"


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
    """MuJoCo model compiled from the generated MJCF."""
    import mujoco

    return mujoco.MjModel.from_xml_string(to_mjcf(spec, timestep_s, integrator, actuator))


# --------------------------------------------------------------------------- collision geometry
# Added for issue 4 (excitation design constraints and the dry run); separate from to_mjcf so the
# twin's dynamics model is untouched. Used by robident_twin.design.geometry.CollisionChecker.


def to_collision_mjcf(spec: RobotSpec, radius_m: float = 0.06, obstacles=()) -> str:
    """MJCF of the robot's collision geometry: one capsule per link (geom ``link0`` for the
    base, from the world origin to joint 1; geom ``link<i>`` from joint i to joint i+1, the
    last one to the flange), radius ``radius_m``, plus static obstacle geoms
    ``obstacle_<name>``. Each obstacle is a mapping ``{name, type: sphere|box|capsule,
    pos_m: [x, y, z], size_m: [...]}`` (MuJoCo sizes: sphere [r], box half sizes
    [hx, hy, hz], capsule [r, half_length] along z). Kinematics as :func:`to_mjcf`."""

    def seg(a, b) -> str:
        if np.linalg.norm(np.asarray(b) - np.asarray(a)) < 1e-9:
            return f'type="sphere" pos="{_v(a)}" size="{_f(radius_m)}"'
        return f'type="capsule" fromto="{_v(a)} {_v(b)}" size="{_f(radius_m)}"'

    out = [f'<mujoco model="{spec.name}_collision">',
           '  <compiler angle="radian" autolimits="true"/>', '  <worldbody>',
           f'    <geom name="link0" {seg(np.zeros(3), spec.joints[0].origin_xyz_m)}/>']
    for ob in obstacles:
        size = " ".join(_f(x) for x in ob["size_m"])
        out.append(f'    <geom name="obstacle_{ob["name"]}" type="{ob["type"]}" '
                   f'pos="{_v(ob["pos_m"])}" size="{size}"/>')
    indent = "    "
    n = spec.n_joints
    for i, j in enumerate(spec.joints, start=1):
        quat = matrix_to_quat_wxyz(rpy_to_matrix(j.origin_rpy_rad))
        end = spec.joints[i].origin_xyz_m if i < n else spec.flange_xyz_m
        out += [f'{indent}<body name="link{i}" pos="{_v(j.origin_xyz_m)}" quat="{_v(quat)}">',
                f'{indent}  <joint name="{j.name}" type="hinge" axis="0 0 1"/>',
                f'{indent}  <geom name="link{i}" {seg(np.zeros(3), end)}/>']
        indent += "  "
    for _ in spec.joints:
        indent = indent[:-2]
        out.append(f"{indent}</body>")
    out += ['  </worldbody>', '</mujoco>']
    return "\n".join(out) + "\n"
