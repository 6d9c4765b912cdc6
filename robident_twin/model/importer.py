"""Bring your own robot: a fixed-base serial arm from its URDF (pinocchio's URDF reader) or its
MJCF (MuJoCo's compiler), plus an overlay (:mod:`robident_twin.model.overlay`), as a
:class:`~robident_twin.model.robot.RobotSpec`.

What the importer does:

* fixed joints: their links are merged into the parent (pinocchio's reader and, for MJCF, the
  bodies without a joint, combined here); the joints named in ``overlay.lock`` (gripper
  fingers) are held at the given position and their links merged too
  (``pinocchio.buildReducedModel``);
* any joint axis: the project's robot spec turns about z, so each joint frame is rotated
  about its origin by the smallest rotation that takes z onto the user's axis
  (``ImportInfo.axis_rotations``; identity where the axis is already +z). Joint angles,
  torques and joint names are the user's; the inertials are re-expressed in the rotated frame
  and the export rotates them back into the user's link frames;
* refuses, with a named error, what it cannot model: a floating base
  (:class:`FloatingBaseError`), a closed chain (:class:`ClosedChainError`), prismatic, planar,
  ball joints that are not locked and branches of moving joints
  (:class:`UnsupportedJointError`), a moving link without inertial data
  (:class:`MissingInertialError`) or with zero mass (:class:`ZeroMassError`), an unknown
  overlay key (:class:`OverlayError`).
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robident_twin.errors import (ClosedChainError, FloatingBaseError, MissingInertialError, OverlayError,
                                  RobotSpecError, UnsupportedJointError, ZeroMassError)
from robident_twin.model.overlay import JOINT_DEFAULTS, Overlay, load_overlay
from robident_twin.model.robot import ImportInfo, JointSpec, LinkInertial, RobotSpec

_Z = np.array([0.0, 0.0, 1.0])


def rotation_z_to(axis: np.ndarray) -> np.ndarray:
    """The smallest rotation R with R z = axis (unit axis); identity for +z, pi about x for -z."""
    a = np.asarray(axis, dtype=float)
    a = a / np.linalg.norm(a)
    c = float(a @ _Z)
    if c > 1 - 1e-15:
        return np.eye(3)
    if c < -1 + 1e-15:
        return np.diag([1.0, -1.0, -1.0])
    v = np.cross(_Z, a)
    s = np.linalg.norm(v)
    k = v / s
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + s * K + (1 - c) * K @ K


def matrix_to_rpy(R: np.ndarray) -> np.ndarray:
    """URDF roll-pitch-yaw of a rotation matrix (inverse of builders.rpy_to_matrix)."""
    import pinocchio as pin

    return np.asarray(pin.rpy.matrixToRpy(np.asarray(R, dtype=float)), dtype=float)


@dataclass
class _ChainLink:
    """One moving joint of the imported chain, everything in its internal (axis = z) frame."""

    joint: str
    link: str
    R_parent: np.ndarray  # internal frame of this joint in the previous joint's internal frame
    p_parent_m: np.ndarray
    mass_kg: float
    com_m: np.ndarray
    inertia_com_kgm2: np.ndarray
    axis_rotation: np.ndarray  # user frame <- internal frame
    limits: dict  # "position_rad", "velocity_rad_s", "torque_Nm" as the file gives them (None: absent)


@dataclass
class _Chain:
    name: str
    links: list[_ChainLink]
    flange: str
    R_flange: np.ndarray
    p_flange_m: np.ndarray
    locked: tuple


# --------------------------------------------------------------------------- URDF


def _urdf_checks(root: ET.Element, path: Path, ov: Overlay) -> None:
    if root.tag != "robot":
        raise RobotSpecError(f"{path}: not a URDF (root element <{root.tag}>, expected <robot>)")
    joints = root.findall("joint")
    names = {j.get("name") for j in joints}
    for name in ov.lock:
        if name not in names:
            raise OverlayError(f"{ov.path or 'overlay'}: field 'lock.{name}': the URDF has no joint {name!r}; "
                               f"joints: {sorted(n for n in names if n)}")
    children: dict[str, str] = {}
    for j in joints:
        jname, jtype = j.get("name"), j.get("type")
        child = j.find("child").get("link") if j.find("child") is not None else None
        if child in children:
            raise ClosedChainError(f"{path}: link {child!r} is the child of both joint {children[child]!r} and "
                                   f"joint {jname!r}: a closed kinematic chain, which a serial-arm model cannot "
                                   "represent")
        children[child] = jname
        if jtype == "floating":
            raise FloatingBaseError(f"{path}: joint {jname!r} is floating: only fixed-base arms are supported "
                                    "(fix the base to the world with a fixed joint)")
        if jtype in ("planar",) and jname not in ov.lock:
            raise UnsupportedJointError(f"{path}: joint {jname!r} has type {jtype!r}; only revolute and continuous "
                                        "joints can move (lock it in the overlay: lock: {" + f"{jname}: 0.0" + "})")
    if root.find("loop_joint") is not None or root.find("loop") is not None:
        raise ClosedChainError(f"{path}: the URDF declares a loop joint (closed chain)")


def _urdf_prepared(root: ET.Element, ov: Overlay, defaults: list[str]) -> str:
    """The URDF text pinocchio reads: continuous joints become revolute with the overlay's
    position limits (default [-pi, pi])."""
    for j in root.findall("joint"):
        if j.get("type") == "continuous":
            name = j.get("name")
            lim = j.find("limit")
            if lim is None:
                lim = ET.SubElement(j, "limit")
            pos = ov.joint_value(name, "limits.position_rad")
            if pos is None:
                pos = (-math.pi, math.pi)
                defaults.append(f"{name}: continuous joint, position limits [-pi, pi]")
            j.set("type", "revolute")
            lim.set("lower", repr(float(pos[0])))
            lim.set("upper", repr(float(pos[1])))
            for k in ("effort", "velocity"):
                lim.set(k, lim.get(k, "0"))
    return ET.tostring(root, encoding="unicode")


def _joint_axis(jmodel) -> np.ndarray | None:
    short = jmodel.shortname()
    if short in ("JointModelRX", "JointModelRY", "JointModelRZ"):
        return np.eye(3)["XYZ".index(short[-1])]
    if short == "JointModelRevoluteUnaligned":
        return np.asarray(jmodel.extract().axis, dtype=float)
    return None


def _urdf_chain(path: Path, ov: Overlay, defaults: list[str]) -> _Chain:
    import pinocchio as pin

    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise RobotSpecError(f"{path}: not valid XML: {exc}") from exc
    _urdf_checks(root, path, ov)
    urdf_links = {lk.get("name"): lk for lk in root.findall("link")}
    try:
        full = pin.buildModelFromXML(_urdf_prepared(root, ov, defaults))
    except Exception as exc:  # pinocchio's parser raises plain RuntimeError/ValueError
        raise RobotSpecError(f"{path}: pinocchio cannot read this URDF: {exc}") from exc
    lock_ids, q_ref = [], pin.neutral(full)
    for name, pos in ov.lock.items():
        jid = full.getJointId(name)
        if full.joints[jid].nq != 1:
            raise UnsupportedJointError(f"{path}: joint {name!r} cannot be locked (it has {full.joints[jid].nq} "
                                        "position coordinates)")
        q_ref[full.joints[jid].idx_q] = pos
        lock_ids.append(jid)
    model = pin.buildReducedModel(full, lock_ids, q_ref) if lock_ids else full
    n = model.njoints - 1
    if n == 0:
        raise UnsupportedJointError(f"{path}: the robot has no moving joint")
    links: list[_ChainLink] = []
    R_prev = np.eye(3)
    for i in range(1, n + 1):
        name = model.names[i]
        axis = _joint_axis(model.joints[i])
        if axis is None:
            raise UnsupportedJointError(
                f"{path}: joint {name!r} is {model.joints[i].shortname()}; only revolute and continuous joints can "
                "move (lock it in the overlay: lock: {" + f"{name}: 0.0" + "})")
        if model.parents[i] != i - 1:
            raise UnsupportedJointError(
                f"{path}: joints {model.names[model.parents[i]]!r} ... {name!r} branch: joint {name!r} hangs on "
                f"{model.names[model.parents[i]]!r}, not on {model.names[i - 1]!r}; a serial arm has one chain "
                "(lock the joints of the other branches in the overlay)")
        Ra = rotation_z_to(axis)
        M = model.jointPlacements[i]
        Y = model.inertias[i]
        body_frames = [f.name for f in model.frames if f.parentJoint == i and f.type == pin.FrameType.BODY]
        link_name = body_frames[0] if body_frames else name
        if Y.mass <= 0:
            if not any(urdf_links.get(b) is not None and urdf_links[b].find("inertial") is not None
                       for b in body_frames):
                raise MissingInertialError(f"{path}: link(s) {body_frames} moved by joint {name!r} have no "
                                           "<inertial>: the model needs a mass, centre of mass and inertia")
            raise ZeroMassError(f"{path}: link(s) {body_frames} moved by joint {name!r} have zero total mass")
        lim = {"position_rad": (float(model.lowerPositionLimit[model.idx_qs[i]]),
                                float(model.upperPositionLimit[model.idx_qs[i]])),
               "velocity_rad_s": float(model.velocityLimit[model.idx_vs[i]]),
               "torque_Nm": float(model.effortLimit[model.idx_vs[i]])}
        links.append(_ChainLink(
            joint=name, link=link_name,
            R_parent=R_prev.T @ M.rotation @ Ra, p_parent_m=R_prev.T @ M.translation,
            mass_kg=float(Y.mass), com_m=Ra.T @ Y.lever, inertia_com_kgm2=Ra.T @ Y.inertia @ Ra,
            axis_rotation=Ra, limits=lim))
        R_prev = Ra
    # flange: the overlay's frame, else the deepest frame on the last moving link that is not
    # behind a locked joint (tool0, a TCP, the last link itself)
    locked = set(ov.lock)

    def ancestry(fid):
        out = []
        while fid != 0 and model.frames[fid].parentJoint == n:
            out.append(model.frames[fid].name)
            nxt = model.frames[fid].parentFrame
            if nxt == fid:
                break
            fid = nxt
        return out

    cands = [fid for fid, f in enumerate(model.frames) if f.parentJoint == n]
    if ov.flange is not None:
        match = [fid for fid in cands if model.frames[fid].name == ov.flange]
        if not match:
            raise OverlayError(f"{ov.path or 'overlay'}: field 'flange': no frame {ov.flange!r} on the last moving "
                               f"link; frames there: {sorted({model.frames[f].name for f in cands})}")
        fid = match[-1]
    else:
        free = [fid for fid in cands if not locked & set(ancestry(fid))]
        fid = max(free, key=lambda f: (len(ancestry(f)), f))
    F = model.frames[fid].placement
    return _Chain(name=root.get("name") or path.stem, links=links, flange=model.frames[fid].name,
                  R_flange=R_prev.T @ F.rotation, p_flange_m=R_prev.T @ F.translation,
                  locked=tuple(ov.lock.items()))


# --------------------------------------------------------------------------- MJCF


def _mjcf_chain(path: Path, ov: Overlay, defaults: list[str]) -> _Chain:
    import mujoco

    try:
        m = mujoco.MjModel.from_xml_path(str(path))
    except Exception as exc:
        raise RobotSpecError(f"{path}: MuJoCo cannot compile this MJCF: {exc}") from exc
    jname = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}" for j in range(m.njnt)]
    bname = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}" for b in range(m.nbody)]
    for name in ov.lock:
        if name not in jname:
            raise OverlayError(f"{ov.path or 'overlay'}: field 'lock.{name}': the MJCF has no joint {name!r}; "
                               f"joints: {jname}")
    for e in range(m.neq):
        if int(m.eq_type[e]) in (int(mujoco.mjtEq.mjEQ_CONNECT), int(mujoco.mjtEq.mjEQ_WELD)):
            raise ClosedChainError(f"{path}: equality constraint {e} ({mujoco.mjtEq(m.eq_type[e]).name}) closes a "
                                   "kinematic chain, which a serial-arm model cannot represent")
    d = mujoco.MjData(m)
    d.qpos[:] = 0.0
    moving = []
    for j in range(m.njnt):
        t = int(m.jnt_type[j])
        if jname[j] in ov.lock:
            d.qpos[m.jnt_qposadr[j]] = ov.lock[jname[j]]
            continue
        if t == int(mujoco.mjtJoint.mjJNT_FREE):
            raise FloatingBaseError(f"{path}: body {bname[m.jnt_bodyid[j]]!r} has a free joint: only fixed-base "
                                    "arms are supported")
        if t != int(mujoco.mjtJoint.mjJNT_HINGE):
            raise UnsupportedJointError(f"{path}: joint {jname[j]!r} is {mujoco.mjtJoint(t).name}; only hinge "
                                        "joints can move (lock it in the overlay: lock: {" + f"{jname[j]}: 0.0" + "})")
        moving.append(j)
    if not moving:
        raise UnsupportedJointError(f"{path}: the robot has no moving joint")
    mujoco.mj_kinematics(m, d)
    body_of = {m.jnt_bodyid[j]: j for j in moving}
    if len(body_of) != len(moving):
        raise UnsupportedJointError(f"{path}: a body has more than one hinge; a serial arm has one joint per link")

    def owner(b):  # the moving joint that carries body b (None: the fixed base)
        while b != 0:
            if b in body_of:
                return body_of[b]
            b = m.body_parentid[b]
        return None

    for k, j in enumerate(moving):
        parent_owner = owner(m.body_parentid[m.jnt_bodyid[j]])
        expected = moving[k - 1] if k else None
        if parent_owner != expected:
            raise UnsupportedJointError(f"{path}: joint {jname[j]!r} does not hang on "
                                        f"{jname[expected] if expected is not None else 'the base'}: "
                                        "a serial arm has one chain (lock the other branches in the overlay)")
    groups = {j: [b for b in range(1, m.nbody) if owner(b) == j] for j in moving}
    links, R_prev, o_prev = [], np.eye(3), np.zeros(3)
    for j in moving:
        b = m.jnt_bodyid[j]
        Ra = rotation_z_to(m.jnt_axis[j])
        R = d.xmat[b].reshape(3, 3) @ Ra
        o = d.xanchor[j].copy()
        mass = sum(float(m.body_mass[bb]) for bb in groups[j])
        if mass <= 0:
            raise ZeroMassError(f"{path}: bodies {[bname[bb] for bb in groups[j]]} moved by joint {jname[j]!r} "
                                "have zero total mass")
        com_w = sum(m.body_mass[bb] * d.xipos[bb] for bb in groups[j]) / mass
        I_w = np.zeros((3, 3))
        for bb in groups[j]:
            Rb = d.ximat[bb].reshape(3, 3)
            r = d.xipos[bb] - com_w
            I_w += Rb @ np.diag(m.body_inertia[bb]) @ Rb.T + m.body_mass[bb] * (r @ r * np.eye(3) - np.outer(r, r))
        lim = {"position_rad": tuple(float(x) for x in m.jnt_range[j]) if m.jnt_limited[j] else None,
               "velocity_rad_s": None,
               "torque_Nm": float(max(abs(m.jnt_actfrcrange[j][0]), abs(m.jnt_actfrcrange[j][1])))
               if m.jnt_actfrclimited[j] else None}
        links.append(_ChainLink(joint=jname[j], link=bname[b], R_parent=R_prev.T @ R,
                                p_parent_m=R_prev.T @ (o - o_prev), mass_kg=mass, com_m=R.T @ (com_w - o),
                                inertia_com_kgm2=R.T @ I_w @ R, axis_rotation=Ra, limits=lim))
        R_prev, o_prev = R, o
    locked_bodies = {m.jnt_bodyid[j] for j in range(m.njnt) if jname[j] in ov.lock}

    def behind_lock(b):
        while b != 0 and b != m.jnt_bodyid[moving[-1]]:
            if b in locked_bodies:
                return True
            b = m.body_parentid[b]
        return False

    last = [b for b in groups[moving[-1]] if not behind_lock(b)]
    sites = [s for s in range(m.nsite) if m.site_bodyid[s] in last]
    names = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SITE, s): ("site", s) for s in sites}
    names.update({bname[bb]: ("body", bb) for bb in last})
    if ov.flange is not None:
        if ov.flange not in names:
            raise OverlayError(f"{ov.path or 'overlay'}: field 'flange': no body or site {ov.flange!r} on the last "
                               f"moving link; there: {sorted(k for k in names if k)}")
        kind, idx = names[ov.flange]
        fname = ov.flange
    elif sites:
        kind, idx = "site", sites[-1]
        fname = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SITE, idx) or "flange"
    else:
        kind, idx = "body", last[-1]
        fname = bname[idx]
    xpos, xmat = (d.site_xpos, d.site_xmat) if kind == "site" else (d.xpos, d.xmat)
    return _Chain(name=bytes(m.names).split(b"\0")[0].decode() or path.stem,
                  links=links, flange=fname, R_flange=R_prev.T @ xmat[idx].reshape(3, 3),
                  p_flange_m=R_prev.T @ (xpos[idx] - o_prev), locked=tuple(ov.lock.items()))


# --------------------------------------------------------------------------- spec


def _file_kind(path: Path) -> str:
    if path.suffix.lower() == ".urdf":
        return "urdf"
    try:
        tag = next(ET.iterparse(path, events=("start",)))[1].tag
    except (ET.ParseError, StopIteration) as exc:
        raise RobotSpecError(f"{path}: not valid XML: {exc}") from exc
    if tag == "robot":
        return "urdf"
    if tag == "mujoco":
        return "mjcf"
    raise RobotSpecError(f"{path}: root element <{tag}> is neither a URDF <robot> nor an MJCF <mujoco>")


def _value(ov: Overlay, link: _ChainLink, key: str, limits: dict, path: Path, defaults: list[str]) -> float:
    v = ov.joint_value(link.joint, key)
    if v is not None:
        return v
    factor, scale = JOINT_DEFAULTS[key]
    val = factor * (limits[scale] if scale else 1.0)
    defaults.append((key, link.joint, val))
    return val


def _summarise_defaults(used: list) -> tuple[str, ...]:
    """One line per defaulted key (which joints, the rule, the values), then the other notes."""
    out, per_key = [], {}
    for item in used:
        if isinstance(item, tuple):
            per_key.setdefault(item[0], []).append(item[1:])
    for key, rows in per_key.items():
        factor, scale = JOINT_DEFAULTS[key]
        rule = f"{factor:g} x {scale}" if scale else f"{factor:g}"
        vals = sorted({round(v, 12) for _, v in rows})
        shown = f"{vals[0]:.4g}" if len(vals) == 1 else f"{vals[0]:.4g} .. {vals[-1]:.4g}"
        out.append(f"{key} = {rule} ({shown}) on {', '.join(j for j, _ in rows)}")
    out += [item for item in used if isinstance(item, str)]
    return tuple(out)


def import_robot(path: str | Path, overlay: str | Path | Overlay | None = None) -> RobotSpec:
    """The robot of a URDF or MJCF file with its overlay (a path, an :class:`Overlay` or None)."""
    path = Path(path)
    if not path.is_file():
        raise RobotSpecError(f"robot.file: {path} does not exist")
    ov = overlay if isinstance(overlay, Overlay) else load_overlay(overlay)
    kind = _file_kind(path)
    defaults: list = []  # (key, joint, value) of defaulted overlay values, and notes
    chain = _urdf_chain(path, ov, defaults) if kind == "urdf" else _mjcf_chain(path, ov, defaults)
    joints = []
    for lk in chain.links:
        lim = {}
        for key, src in (("position_rad", "position_rad"), ("velocity_rad_s", "velocity_rad_s"),
                         ("torque_Nm", "torque_Nm")):
            v = ov.joint_value(lk.joint, f"limits.{key}")
            if v is None:
                v = lk.limits.get(src)
            bad = v is None or (key != "position_rad" and not (0 < v < 1e30))
            if bad:
                raise RobotSpecError(f"{path}: joint {lk.joint!r} has no {key.split('_')[0]} limit; give it in the "
                                     f"overlay (joints: {{{lk.joint}: {{limits: {{{key}: ...}}}}}})")
            lim[key] = v
        lo, hi = lim["position_rad"]
        if not lo < hi:
            raise RobotSpecError(f"{path}: joint {lk.joint!r}: position limits [{lo}, {hi}] are not lower < upper")
        get = lambda key: _value(ov, lk, key, lim, path, defaults)  # noqa: E731
        lim["acceleration_rad_s2"] = get("limits.acceleration_rad_s2")
        eig = np.linalg.eigvalsh(0.5 * (lk.inertia_com_kgm2 + lk.inertia_com_kgm2.T))
        if eig[0] <= 0:
            raise RobotSpecError(f"{path}: link {lk.link!r} (joint {lk.joint!r}): the inertia tensor about the COM "
                                 f"is not positive definite (principal moments {eig.tolist()})")
        joints.append(JointSpec(
            name=lk.joint, origin_xyz_m=np.asarray(lk.p_parent_m, dtype=float),
            origin_rpy_rad=matrix_to_rpy(lk.R_parent),
            q_min_rad=float(lo), q_max_rad=float(hi), dq_max_rad_s=float(lim["velocity_rad_s"]),
            ddq_max_rad_s2=float(lim["acceleration_rad_s2"]), tau_max_Nm=float(lim["torque_Nm"]),
            link=LinkInertial(lk.mass_kg, np.asarray(lk.com_m, dtype=float),
                              0.5 * (lk.inertia_com_kgm2 + lk.inertia_com_kgm2.T)),
            drive_inertia_kgm2=get("drive.inertia_kgm2"), gear_ratio=get("drive.gear_ratio"),
            fv_link_Nms_rad=get("friction.link.viscous_Nms_rad"), fc_link_Nm=get("friction.link.coulomb_Nm"),
            fv_motor_Nms_rad=get("friction.motor.viscous_Nms_rad"), fc_motor_Nm=get("friction.motor.coulomb_Nm"),
            offset_motor_Nm=get("friction.motor.offset_Nm"),
            q_std_rad=get("sensors.q_std_rad"), encoder_resolution_rad=get("sensors.encoder_resolution_rad"),
            tau_joint_std_Nm=get("sensors.tau_joint_std_Nm"), tau_motor_std_Nm=get("sensors.tau_motor_std_Nm"),
        ))
    names = [j.name for j in joints]
    unknown = set(ov.joints) - set(names) - {"default"}
    if unknown:
        raise OverlayError(f"{ov.path or 'overlay'}: field 'joints': unknown joint(s) {sorted(unknown)}; the moving "
                           f"joints are {names}")
    n = len(joints)
    lo = np.array([j.q_min_rad for j in joints])
    hi = np.array([j.q_max_rad for j in joints])
    if ov.home_rad is not None:
        if len(ov.home_rad) != n:
            raise OverlayError(f"{ov.path}: field 'home_rad': expected {n} numbers, got {len(ov.home_rad)}")
        home = np.asarray(ov.home_rad, dtype=float)
        if np.any(home < lo) or np.any(home > hi):
            raise OverlayError(f"{ov.path}: field 'home_rad': outside the position limits")
    else:
        home = np.where((lo <= 0) & (hi >= 0), 0.0, 0.5 * (lo + hi))
        defaults.append("home: zero where the limits allow it, else the middle of the range")
    coupling = None
    if ov.coupling_matrix is not None:
        coupling = np.asarray(ov.coupling_matrix, dtype=float)
        if coupling.shape != (n, n) or abs(np.linalg.det(coupling)) < 1e-9:
            raise OverlayError(f"{ov.path}: field 'coupling_matrix': expected an invertible {n} x {n} matrix")
    if ov.gravity_m_s2 is None:
        defaults.append("gravity [0, 0, -9.81] m/s^2 (along -z of the base)")
    if ov.torque_channel is None:
        defaults.append("torque channel: joint_sensors (joint-torque sensors)")
    info = ImportInfo(model_path=path.resolve(), kind=kind, link_names=tuple(lk.link for lk in chain.links),
                      axis_rotations=tuple(lk.axis_rotation for lk in chain.links), flange_frame=chain.flange,
                      locked_joints=chain.locked, overlay_path=ov.path, defaults_used=_summarise_defaults(defaults))
    return RobotSpec(
        name=ov.name or chain.name,
        description=f"imported from {path.name}" + (f" with overlay {Path(ov.path).name}" if ov.path else ""),
        source=path.resolve(),
        gravity_m_s2=np.asarray(ov.gravity_m_s2 if ov.gravity_m_s2 is not None else [0.0, 0.0, -9.81], dtype=float),
        coulomb_smoothing_rad_s=ov.coulomb_smoothing_rad_s or 0.01,
        flange_xyz_m=np.asarray(chain.p_flange_m, dtype=float), flange_rpy_rad=matrix_to_rpy(chain.R_flange),
        home_rad=home, joints=tuple(joints), coupling_matrix=coupling,
        has_joint_torque_sensors=(ov.torque_channel or "joint_sensors") == "joint_sensors",
        imported=info,
    )


def describe_import(spec: RobotSpec) -> str:
    """A short text of what the import did and which defaults it used (printed by the run)."""
    info = spec.imported
    if info is None:
        return f"robot {spec.name}: from the robot file {spec.source}"
    lines = [f"robot {spec.name}: imported {info.kind.upper()} {info.model_path} ({spec.n_joints} joints: "
             f"{', '.join(spec.joint_names)}; flange frame {info.flange_frame}"
             + (f"; locked {dict(info.locked_joints)}" if info.locked_joints else "") + ")"]
    if info.defaults_used:
        lines.append(f"  defaults used ({len(info.defaults_used)}; override them in robot.overlay):")
        lines += [f"    {d}" for d in info.defaults_used]
    return "\n".join(lines)
