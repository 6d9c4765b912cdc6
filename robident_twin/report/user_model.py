"""Export back into the user's own robot description (issue 16): the identified inertials,
friction and armature written into a COPY of the URDF / MJCF the robot was imported from,
every other element (names, meshes, collision geometry, transmissions, sites, actuators) kept.

Where the identified values go:

* each moving joint's merged link (its child link plus the fixed and locked links merged into
  it on import) gets the identified inertial in the child link, rotated back from the
  importer's axis-aligned frame into the user's link frame; the other links of the merged group
  get an explicit zero inertial (their mass is in the identified one), so that loaders that
  give a link without ``<inertial>`` a default mass (PyBullet: 1 kg) see the identified model;
* links of the chain without an ``<inertial>`` (a tool or flange frame) get an explicit zero one
  for the same reason;
* URDF: ``<dynamics damping="Fv" friction="Fc">`` per moving joint (link plus motor side);
  URDF has no armature tag, so the drive is written in Drake's extension of the ``<transmission>``
  element (:func:`add_drive_transmissions`): ``<drake:rotor_inertia value=...>`` (the rotor's own
  inertia, joint-side drive inertia / gear ratio^2) and ``<drake:gear_ratio value=...>`` in the
  joint's actuator (Drake reflects rotor_inertia x gear_ratio^2 onto the joint; ROS and PyBullet
  ignore the tags). An existing ``<transmission>`` of the joint keeps its elements and gets the
  two tags; a joint without one gets a ``SimpleTransmission``;
* MJCF (``MjSpec``): body inertials as above, ``damping``, ``frictionloss`` and ``armature``
  per hinge. For a robot imported from a URDF the MJCF is the exported URDF compiled by MuJoCo.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.model.builders import DRAKE_NS
from robident_twin.model.robot import RobotSpec

ET.register_namespace("drake", DRAKE_NS)  # written as drake:rotor_inertia, the literal tag Drake's parser reads


def add_drive_transmissions(root: ET.Element, spec: RobotSpec) -> None:
    """Write each moving joint's drive into the URDF tree ``root`` (Drake's ``<transmission>``
    convention): rotor inertia = drive inertia (joint side) / gear ratio^2, and the gear ratio.
    Robots with coupled drives are left unchanged (a simple transmission per joint cannot
    express a coupling)."""
    if spec.is_coupled:
        return
    by_joint: dict[str, ET.Element] = {}
    for tr in root.findall("transmission"):
        for jt in tr.findall("joint"):
            by_joint.setdefault(jt.get("name"), tr)
    for j in spec.joints:
        ratio = float(j.gear_ratio)
        if not (np.isfinite(ratio) and ratio != 0):
            raise ConfigError(f"export: joint {j.name!r} has gear ratio {ratio!r}; a transmission needs a finite, "
                              "non-zero one")
        tr = by_joint.get(j.name)
        if tr is None:
            tr = ET.SubElement(root, "transmission", name=f"{j.name}_transmission")
            ET.SubElement(tr, "type").text = "transmission_interface/SimpleTransmission"
            ET.SubElement(tr, "joint", name=j.name)
        act = tr.find("actuator")
        if act is None:
            act = ET.SubElement(tr, "actuator", name=f"{j.name}_motor")
        for tag, value in (("rotor_inertia", j.drive_inertia_kgm2 / ratio**2), ("gear_ratio", ratio)):
            el = act.find(f"{{{DRAKE_NS}}}{tag}")
            if el is None:
                el = ET.SubElement(act, f"{{{DRAKE_NS}}}{tag}")
            el.set("value", _fmt(value))


def read_drive_transmissions(path: str | Path) -> dict[str, tuple[float, float]]:
    """Joint name -> (rotor inertia kg m^2, gear ratio) of the Drake transmission tags of a URDF."""
    out = {}
    for tr in ET.parse(path).getroot().findall("transmission"):
        act, jt = tr.find("actuator"), tr.find("joint")
        if act is None or jt is None:
            continue
        ri, gr = act.find(f"{{{DRAKE_NS}}}rotor_inertia"), act.find(f"{{{DRAKE_NS}}}gear_ratio")
        if ri is not None:
            out[jt.get("name")] = (float(ri.get("value")), float(gr.get("value")) if gr is not None else 1.0)
    return out


def _user_inertial(spec: RobotSpec, i: int) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass, COM, inertia about the COM) of joint i's merged link in the user's joint frame."""
    R = spec.imported.axis_rotations[i]
    link = spec.joints[i].link
    return link.mass_kg, R @ link.com_m, R @ link.inertia_com_kgm2 @ R.T


def _fmt(x) -> str:
    return repr(float(x))


def _set_urdf_inertial(link_el: ET.Element, mass: float, com: np.ndarray, I: np.ndarray) -> None:
    inert = link_el.find("inertial")
    if inert is None:
        inert = ET.SubElement(link_el, "inertial")
    for child in list(inert):
        inert.remove(child)
    ET.SubElement(inert, "origin", xyz=" ".join(map(_fmt, com)), rpy="0 0 0")
    ET.SubElement(inert, "mass", value=_fmt(mass))
    ET.SubElement(inert, "inertia", ixx=_fmt(I[0, 0]), ixy=_fmt(I[0, 1]), ixz=_fmt(I[0, 2]),
                  iyy=_fmt(I[1, 1]), iyz=_fmt(I[1, 2]), izz=_fmt(I[2, 2]))


def _urdf_groups(root: ET.Element, spec: RobotSpec) -> dict[str, tuple[list[str], list[str]]]:
    """Moving joint name -> (the URDF links rigidly merged into its link, its child first; the
    links behind locked joints, which keep their own inertials)."""
    moving = set(spec.joint_names)
    locked = {name for name, _ in spec.imported.locked_joints}
    children: dict[str, list[tuple[str, str]]] = {}
    child_of = {}
    for j in root.findall("joint"):
        p, c = j.find("parent").get("link"), j.find("child").get("link")
        children.setdefault(p, []).append((j.get("name"), c))
        child_of[j.get("name")] = c
    groups = {}
    for name in spec.joint_names:
        fixed, kept, stack = [], [], [(child_of[name], False)]
        while stack:
            lk, behind_lock = stack.pop()
            (kept if behind_lock else fixed).append(lk)
            stack += [(c, behind_lock or jn in locked) for jn, c in children.get(lk, []) if jn not in moving]
        groups[name] = (fixed, kept)
    return groups


def _second_moment(m: float, c: np.ndarray, I: np.ndarray) -> np.ndarray:
    """Rotational inertia about the frame origin of a body (mass m, COM c, inertia I about the COM)."""
    return I + m * (c @ c * np.eye(3) - np.outer(c, c))


def _urdf_inertia(inert: ET.Element):
    """pinocchio Inertia of a URDF <inertial> in its link's frame."""
    import pinocchio as pin

    from robident_twin.model.builders import rpy_to_matrix

    o = inert.find("origin")
    xyz = np.array([float(x) for x in (o.get("xyz", "0 0 0") if o is not None else "0 0 0").split()])
    rpy = np.array([float(x) for x in (o.get("rpy", "0 0 0") if o is not None else "0 0 0").split()])
    t = inert.find("inertia")
    g = (lambda k: float(t.get(k, 0.0))) if t is not None else (lambda k: 0.0)
    Ic = np.array([[g("ixx"), g("ixy"), g("ixz")], [g("ixy"), g("iyy"), g("iyz")], [g("ixz"), g("iyz"), g("izz")]])
    R = rpy_to_matrix(rpy)
    return pin.Inertia(float(inert.find("mass").get("value")), xyz, R @ Ic @ R.T)


def _kept_inertia(spec: RobotSpec, link: str, kept: list[str], links: dict) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass, first moment, second moment about the origin) in ``link``'s frame of the links behind
    locked joints, at the locked positions (pinocchio on the user's URDF)."""
    import pinocchio as pin

    if not kept:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    model = pin.buildModelFromUrdf(str(spec.imported.model_path))
    data = model.createData()
    q = pin.neutral(model)
    for name, pos in spec.imported.locked_joints:
        q[model.joints[model.getJointId(name)].idx_q] = pos
    pin.framesForwardKinematics(model, data, q)
    ref = data.oMf[model.getFrameId(link, pin.FrameType.BODY)]
    m, h, J = 0.0, np.zeros(3), np.zeros((3, 3))
    for name in kept:
        inert = links[name].find("inertial")
        if inert is None or inert.find("mass") is None:
            continue
        M = ref.actInv(data.oMf[model.getFrameId(name, pin.FrameType.BODY)])  # link frame in the reference frame
        Y = M.act(_urdf_inertia(inert))
        m += Y.mass
        h += Y.mass * Y.lever
        J += _second_moment(Y.mass, Y.lever, Y.inertia)
    return m, h, J


def export_user_urdf(spec: RobotSpec, out_path: str | Path) -> Path:
    """A copy of the user's URDF with the identified inertials and friction of ``spec`` (a robot
    imported from that URDF, with identified parameters)."""
    info = spec.imported
    if info is None or info.kind != "urdf":
        raise ConfigError(f"export: robot {spec.name} was not imported from a URDF; there is no user URDF to update")
    tree = ET.parse(info.model_path)
    root = tree.getroot()
    links = {lk.get("name"): lk for lk in root.findall("link")}
    joints = {j.get("name"): j for j in root.findall("joint")}
    for i, (name, (fixed, kept)) in enumerate(_urdf_groups(root, spec).items()):
        m, c, I = _user_inertial(spec, i)
        # links behind locked joints (gripper fingers) keep their inertials: the child link gets the rest
        mk, hk, Jk = _kept_inertia(spec, fixed[0], kept, links)
        m_rest = m - mk
        if m_rest <= 0:
            raise ConfigError(f"export: the identified mass of {fixed[0]!r} ({m:.4g} kg) does not exceed that of the "
                              f"locked links behind it ({mk:.4g} kg)")
        c_rest = (m * c - hk) / m_rest
        I_rest = _second_moment(m, c, I) - Jk - m_rest * (c_rest @ c_rest * np.eye(3) - np.outer(c_rest, c_rest))
        _set_urdf_inertial(links[fixed[0]], m_rest, c_rest, 0.5 * (I_rest + I_rest.T))
        for other in fixed[1:]:
            _set_urdf_inertial(links[other], 0.0, np.zeros(3), np.zeros((3, 3)))
        j = spec.joints[i]
        dyn = joints[name].find("dynamics")
        if dyn is None:
            dyn = ET.SubElement(joints[name], "dynamics")
        dyn.set("damping", _fmt(j.fv_link_Nms_rad + j.fv_motor_Nms_rad))
        dyn.set("friction", _fmt(j.fc_link_Nm + j.fc_motor_Nm))
    add_drive_transmissions(root, spec)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tree.write(out, encoding="unicode", xml_declaration=True)
    return out


def export_user_mjcf(spec: RobotSpec, out_path: str | Path, urdf_copy: str | Path | None = None) -> Path:
    """A copy of the user's MJCF (or, for a URDF robot, ``urdf_copy`` compiled by MuJoCo) with the
    identified inertials, friction (damping, frictionloss) and armature, written with MjSpec."""
    import mujoco

    info = spec.imported
    if info is None:
        raise ConfigError(f"export: robot {spec.name} was not imported from a URDF or MJCF")
    src = Path(info.model_path) if info.kind == "mjcf" else Path(urdf_copy) if urdf_copy else None
    if src is None:
        raise ConfigError("export: a URDF robot's MJCF is compiled from its exported URDF; pass urdf_copy")
    if info.kind == "urdf":
        # MuJoCo cannot read the URDF's package:// meshes (they are for the user's ROS tools and carry
        # no dynamics): a URDF-born MJCF keeps bodies, joints and inertials, compiled by MuJoCo
        import tempfile

        tree = ET.parse(src)
        for lk in tree.getroot().findall("link"):
            for tag in ("visual", "collision"):
                for e in lk.findall(tag):
                    lk.remove(e)
        with tempfile.TemporaryDirectory() as tmp:
            stripped = Path(tmp) / src.name
            tree.write(stripped)
            ms = mujoco.MjSpec.from_file(str(stripped))
            ms.compile()
    else:
        ms = mujoco.MjSpec.from_file(str(src))
    by_joint = {ms.joints[k].name: ms.joints[k] for k in range(len(ms.joints))}
    body_of = {}
    for b in ms.bodies:
        for jt in b.joints:
            body_of[jt.name] = b
    moving = set(spec.joint_names)

    def group(b) -> list:
        out, stack = [], [b]
        while stack:
            x = stack.pop()
            out.append(x)
            for c in x.bodies:
                if any(jt.name in moving for jt in c.joints):
                    continue
                if len(c.joints):  # behind a locked joint
                    raise ConfigError(f"export: body {c.name!r} hangs on a locked joint; writing identified inertials "
                                      "into an MJCF with locked joints is not supported (export the URDF)")
                stack.append(c)
        return out

    for i, name in enumerate(spec.joint_names):
        if name not in by_joint:
            raise ConfigError(f"export: {src} has no joint {name!r}")
        jt, b = by_joint[name], body_of[name]
        j = spec.joints[i]
        damping = np.zeros(np.size(jt.damping))  # MuJoCo 4: [linear, higher-order terms]
        damping[0] = j.fv_link_Nms_rad + j.fv_motor_Nms_rad
        jt.damping = damping if damping.size > 1 else float(damping[0])
        jt.frictionloss = j.fc_link_Nm + j.fc_motor_Nm
        jt.armature = j.drive_inertia_kgm2
        if info.kind == "urdf":  # the inertials came with the exported URDF
            continue
        mass, com, I = _user_inertial(spec, i)  # in the user's joint frame: origin at the joint anchor
        anchor = np.asarray(jt.pos, dtype=float)
        Rj = np.eye(3)  # MJCF joints have no frame of their own: the user frame is the body frame
        b.explicitinertial = True
        b.mass = mass
        b.ipos = anchor + Rj @ com
        b.iquat = [1.0, 0.0, 0.0, 0.0]
        b.inertia = [0.0, 0.0, 0.0]  # MjSpec: a diagonal inertia and a full one exclude each other
        b.fullinertia = [I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]]
        for other in group(b)[1:]:
            other.explicitinertial = True
            other.mass = 0.0
            other.ipos = [0.0, 0.0, 0.0]
            other.inertia = [0.0, 0.0, 0.0]
            other.fullinertia = [np.nan, 0, 0, 0, 0, 0]
    m = ms.compile()
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_full_precision(ms.to_xml(), m))
    return out


_ORIENTATIONS = ("quat", "axisangle", "euler", "xyaxes", "zaxis")


def _full_precision(xml: str, m) -> str:
    """MjSpec.to_xml writes 6 significant digits, which moves torques by ~1e-5 N m; rewrite the
    body frames, inertials and joint dynamics with the compiled model's doubles (an XML tree edit,
    matched by name; everything else stays as MuJoCo wrote it)."""
    import mujoco

    root = ET.fromstring(xml)
    vec = lambda a: " ".join(_fmt(x) for x in a)  # noqa: E731
    # bodies inside <frame> elements (left by fused static bodies) move up to their parent body:
    # the compiled body_pos/body_quat are relative to it
    parent = {c: p for p in root.iter() for c in p}
    for el in list(root.iter("body")):
        holder = parent.get(el)
        if holder is None or holder.tag != "frame":
            continue
        up = holder
        while up.tag == "frame":
            up = parent[up]
        holder.remove(el)
        up.append(el)
        parent[el] = up
    for el in root.iter("body"):
        b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, el.get("name") or "")
        if b < 0:
            continue
        for k in _ORIENTATIONS:
            el.attrib.pop(k, None)
        el.set("pos", vec(m.body_pos[b]))
        el.set("quat", vec(m.body_quat[b]))
        inert = el.find("inertial")
        if inert is None:
            inert = ET.Element("inertial")
            el.insert(0, inert)
        inert.attrib.clear()
        inert.set("pos", vec(m.body_ipos[b]))
        inert.set("quat", vec(m.body_iquat[b]))
        inert.set("mass", _fmt(m.body_mass[b]))
        inert.set("diaginertia", vec(m.body_inertia[b]))
    for el in root.iter("joint"):
        j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, el.get("name") or "")
        if j < 0 or m.jnt_type[j] not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            continue
        dof = m.jnt_dofadr[j]
        el.set("pos", vec(m.jnt_pos[j]))
        el.set("axis", vec(m.jnt_axis[j]))
        for key, arr in (("armature", m.dof_armature), ("damping", m.dof_damping), ("frictionloss", m.dof_frictionloss)):
            el.set(key, _fmt(arr[dof]))
    return ET.tostring(root, encoding="unicode")
