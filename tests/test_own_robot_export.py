"""Export back into the user's own files (issue 16): identified inertials, friction and armature
written into a copy of the user's URDF and MJCF; the copies loaded with the engines' ordinary
loaders (pinocchio.buildModelFromUrdf, mujoco.MjModel.from_xml_path, pybullet.loadURDF)
reproduce the identified model's torques."""
from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from robident_twin.model.dynamics import TruthModel
from robident_twin.model.importer import import_robot
from robident_twin.model.overlay import parse_overlay
from robident_twin.model.robot import LinkInertial
from robident_twin.report.user_model import export_user_mjcf, export_user_urdf

from test_own_robot_import import PANDA_LOCK, erd_robot, pin_reference, random_arm_urdf, ur5_urdf  # noqa: F401 (fixture)

ROBOTS = {"ur5": ("ur_description/urdf/ur5_robot.urdf", {}),
          "panda": ("panda_description/urdf/panda.urdf", PANDA_LOCK)}


def identified_like(spec, rng):
    """The imported robot with other (physically consistent) inertials, friction and drive inertia,
    standing in for an identification result."""
    joints = []
    for j in spec.joints:
        L = j.link
        A = rng.normal(size=(3, 3)) * 0.01
        joints.append(dataclasses.replace(
            j, link=LinkInertial(L.mass_kg * rng.uniform(0.9, 1.1), L.com_m + rng.uniform(-0.01, 0.01, 3),
                                 L.inertia_com_kgm2 + A @ A.T),
            fv_link_Nms_rad=rng.uniform(0.05, 0.5), fc_link_Nm=rng.uniform(0.05, 0.5),
            drive_inertia_kgm2=rng.uniform(0.01, 0.3)))
    return dataclasses.replace(spec, joints=tuple(joints), _cache={})


def without(tree_root: ET.Element, source: ET.Element | None = None) -> str:
    """The URDF with every <inertial>, joint <dynamics> and drive tag (Drake's drake:rotor_inertia and
    drake:gear_ratio, and the <transmission> elements the export adds: those not in ``source``)
    removed, canonicalised."""
    root = ET.fromstring(ET.tostring(tree_root))
    theirs = {t.get("name") for t in (source.findall("transmission") if source is not None else [])}
    for tr in root.findall("transmission"):
        if source is not None and tr.get("name") not in theirs:
            root.remove(tr)
            continue
        for act in tr.findall("actuator"):
            for e in list(act):
                if e.tag.startswith("{http://drake.mit.edu}"):
                    act.remove(e)
    for lk in root.findall("link"):
        for e in lk.findall("inertial"):
            lk.remove(e)
    for j in root.findall("joint"):
        for e in j.findall("dynamics"):
            j.remove(e)
    for e in root.iter():
        e.tail = None
        e.text = (e.text or "").strip() or None
    return ET.canonicalize(ET.tostring(root, encoding="unicode"))


def strip_geometry(urdf, out):
    """PyBullet cannot resolve ROS package:// mesh paths outside ROS; geometry carries no dynamics."""
    tree = ET.parse(urdf)
    for lk in tree.getroot().findall("link"):
        for tag in ("visual", "collision"):
            for e in lk.findall(tag):
                lk.remove(e)
    tree.write(out)
    return out


@pytest.mark.parametrize("robot", ["ur5", "panda", "random_arm"])
def test_exports_into_the_users_urdf_and_mjcf_reproduce_the_identified_torques(robot, tmp_path):
    import mujoco
    import pinocchio as pin
    import pybullet as pb

    if robot == "random_arm":  # random axes, fixed links between joints, a tool0 without <inertial>
        src, lock = tmp_path / "arm.urdf", {}
        src.write_text(random_arm_urdf(np.random.default_rng(5), 6))
    else:
        rel, lock = ROBOTS[robot]
        src = erd_robot(rel)
    spec = import_robot(src, parse_overlay({"lock": lock}))
    rng = np.random.default_rng(7)
    ident = identified_like(spec, rng)
    urdf = export_user_urdf(ident, tmp_path / f"{robot}_identified.urdf")
    mjcf = export_user_mjcf(ident, tmp_path / f"{robot}_identified.xml", urdf)

    # the copy differs from the user's file only in inertials and joint dynamics
    assert without(ET.parse(urdf).getroot(), ET.parse(src).getroot()) == without(ET.parse(src).getroot())
    n = spec.n_joints
    Q = rng.uniform(-1.0, 1.0, size=(6, 3, n))
    truth = TruthModel(ident)
    ref = np.array([truth.rnea_links(*x)[0] for x in Q])  # identified rigid-body torques (W chi, rigid part)

    # pinocchio: the user reduces the locked joints as the importer did
    model = pin_reference(urdf, lock)
    data = model.createData()
    tau_pin = np.array([pin.rnea(model, data, *x) for x in Q])

    # MuJoCo: qfrc_inverse (constraints off: frictionloss is a constraint) = rigid + armature ddq + damping dq
    m = mujoco.MjModel.from_xml_path(str(mjcf))
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    d = mujoco.MjData(m)
    qadr = [m.joint(nm).qposadr[0] for nm in spec.joint_names]
    vadr = [m.joint(nm).dofadr[0] for nm in spec.joint_names]
    np.testing.assert_allclose(m.dof_armature[vadr], ident.drive_inertia_kgm2, rtol=1e-12)
    np.testing.assert_allclose(m.dof_damping[vadr], ident.fv_link_Nms_rad, rtol=1e-12)
    np.testing.assert_allclose(m.dof_frictionloss[vadr], ident.fc_link_Nm, rtol=1e-12)
    tau_mj = []
    for q, dq, ddq in Q:
        d.qpos[:], d.qvel[:], d.qacc[:] = 0.0, 0.0, 0.0
        d.qpos[qadr], d.qvel[vadr], d.qacc[vadr] = q, dq, ddq
        mujoco.mj_inverse(m, d)
        tau_mj.append(d.qfrc_inverse[vadr] - ident.drive_inertia_kgm2 * ddq - ident.fv_link_Nms_rad * dq)
    tau_mj = np.array(tau_mj)

    # PyBullet: plain loadURDF (inertia from the file); the massless tool frames carry explicit zero inertials
    c = pb.connect(pb.DIRECT)
    try:
        body = pb.loadURDF(str(strip_geometry(urdf, tmp_path / "pb.urdf")), useFixedBase=True,
                           flags=pb.URDF_USE_INERTIA_FROM_FILE, physicsClientId=c)
        pb.setGravity(0, 0, -9.81, physicsClientId=c)
        movable = [i for i in range(pb.getNumJoints(body, physicsClientId=c))
                   if pb.getJointInfo(body, i, physicsClientId=c)[2] != pb.JOINT_FIXED]
        names = [pb.getJointInfo(body, i, physicsClientId=c)[1].decode() for i in movable]
        idx = [names.index(nm) for nm in spec.joint_names]
        tau_pb = []
        for x in Q:
            full = np.zeros((3, len(movable)))
            full[:, idx] = x
            for name, pos in lock.items():
                full[0, names.index(name)] = pos
            tau_pb.append(np.array(pb.calculateInverseDynamics(body, *(r.tolist() for r in full),
                                                               physicsClientId=c))[idx])
        tau_pb = np.array(tau_pb)
    finally:
        pb.disconnect(c)
    errs = {eng: float(np.abs(t - ref).max()) for eng, t in (("pinocchio", tau_pin), ("mujoco", tau_mj),
                                                             ("pybullet", tau_pb))}
    print(f"{robot}: exported user files vs identified torques, max |error| [N m]: {errs}")
    assert max(errs.values()) < 1e-6, errs


def test_export_into_the_users_own_mjcf(ur5_urdf, tmp_path):
    """A robot imported from an MJCF: the identified values go into a copy of that MJCF (MjSpec), which
    MuJoCo's plain loader reproduces; names, geoms and the rest of the file are kept."""
    import mujoco

    from test_own_robot_import import urdf_to_mjcf

    src = urdf_to_mjcf(ur5_urdf, tmp_path / "ur5.xml")
    limits = {j: {"limits": {"velocity_rad_s": 3.0, "torque_Nm": 150.0}} for j in
              ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
               "wrist_3_joint")}
    spec = import_robot(src, parse_overlay({"joints": limits}))
    rng = np.random.default_rng(11)
    ident = identified_like(spec, rng)
    out = export_user_mjcf(ident, tmp_path / "ur5_identified.xml")
    m0, m = mujoco.MjModel.from_xml_path(str(src)), mujoco.MjModel.from_xml_path(str(out))
    assert [m.body(i).name for i in range(m.nbody)] == [m0.body(i).name for i in range(m0.nbody)]
    assert (m.ngeom, m.njnt) == (m0.ngeom, m0.njnt)
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    d = mujoco.MjData(m)
    truth = TruthModel(ident)
    err = 0.0
    for q, dq, ddq in rng.uniform(-1, 1, size=(6, 3, spec.n_joints)):
        d.qpos[:], d.qvel[:], d.qacc[:] = q, dq, ddq
        mujoco.mj_inverse(m, d)
        tau = d.qfrc_inverse - ident.drive_inertia_kgm2 * ddq - ident.fv_link_Nms_rad * dq
        err = max(err, float(np.abs(tau - truth.rnea_links(q, dq, ddq)[0]).max()))
    print(f"ur5 from MJCF: exported MJCF vs identified torques, max |error| {err:.2e} N m")
    assert err < 1e-6
