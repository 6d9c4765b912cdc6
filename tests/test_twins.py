"""Every robot's twin: generated models, measurement models, engines and base-parameter counts."""
import dataclasses

import mujoco
import numpy as np
import pytest

from robident_twin.model import dynamics as dyn
from robident_twin.model.base_params import compute_base_parameters
from robident_twin.model.builders import mujoco_model, pinocchio_model
from robident_twin.errors import ConfigError, RobotSpecError
from robident_twin.model.regressor import ModelOptions, Regressor
from robident_twin.model.robot import available_robots, load_robot, with_friction_variant

ROBOTS = available_robots()


def _measurements(spec):
    out = ["motor_torque"]
    if spec.has_joint_torque_sensors:
        out += ["joint_torque", "both"]
        if not spec.is_coupled:
            out.append("difference")
    return out


def _variants(spec):
    """The robot, and with its payload mounted if it has one."""
    out = [spec]
    if spec.payload is not None:
        out.append(spec.with_payload(not spec.payload_attached))
    return out


def test_all_four_robots_are_there():
    assert set(ROBOTS) >= {"iiwa14", "lwr4p", "kuka_ir361", "cloos_qrc350"}
    for name in ("iiwa14", "lwr4p", "kuka_ir361", "cloos_qrc350"):
        assert load_robot(name).name == name


@pytest.mark.parametrize("name", ROBOTS)
def test_regressor_times_true_parameters_equals_the_truth_for_every_measurement_model(name):
    """Jubien's models A (motor), B (joint), C (both) and D (difference), with offsets,
    springs, coupled drives and a mounted payload: W chi = truth to 1e-10 relative."""
    for spec in _variants(load_robot(name)):
        truth = dyn.TruthModel(spec)
        for payload in ([False, True] if spec.payload is not None else [False]):
            for meas in _measurements(spec):
                reg = Regressor(spec, ModelOptions(measurement=meas, offsets=True, payload=payload))
                q, dq, ddq = reg.random_states(60, np.random.default_rng(3))
                tj, tm = truth.torques(q, dq, ddq)
                tau = {"joint_torque": tj, "motor_torque": tm, "both": np.hstack([tj, tm]),
                       "difference": tm - tj}[meas]
                W = reg.stack(q, dq, ddq)
                np.testing.assert_allclose(W @ reg.true_parameters(), tau.reshape(-1),
                                           atol=1e-10 * np.abs(tau).max(), err_msg=f"{spec.name} {meas}")


@pytest.mark.parametrize("name", ROBOTS)
def test_mujoco_inverse_dynamics_equals_the_truth_model(name):
    """MuJoCo inverse dynamics (armature on joints or on the coupled drives' tendons) plus the
    twin's springs and friction equals the pinocchio truth model, 1e-8 relative, 100 states."""
    for spec in _variants(load_robot(name)):
        m = mujoco_model(spec)
        d = mujoco.MjData(m)
        truth = dyn.TruthModel(spec)
        q, dq, ddq = Regressor(spec, ModelOptions(measurement="motor_torque")).random_states(100, np.random.default_rng(7))
        worst = 0.0
        for k in range(q.shape[0]):
            d.qpos[:], d.qvel[:], d.qacc[:] = q[k], dq[k], ddq[k]
            mujoco.mj_inverse(m, d)
            tau_joint_side = (d.qfrc_inverse + dyn.link_friction_Nm(spec, dq[k])
                              - dyn.spring_torque_Nm(spec, q[k])[0])
            tau_mj = (spec.coupling.T @ tau_joint_side
                      + dyn.motor_side_friction_Nm(spec, dyn.to_motor(spec, dq[k])))
            tau_pin = truth.torques(q[k], dq[k], ddq[k])[1][0]
            worst = max(worst, np.max(np.abs(tau_mj - tau_pin)) / np.max(np.abs(tau_pin)))
        assert worst < 1e-8, f"{spec.name}: {worst:.2e}"


@pytest.mark.parametrize("name", ROBOTS)
def test_mujoco_twin_forward_dynamics_with_its_passive_forces_matches_the_truth(name):
    """The twin's passive-force callback (friction, springs, coupled motor friction) and
    actuators in motor coordinates: the motor torque applied is what the truth model needs
    for the acceleration MuJoCo computes."""
    from hal.sim.mujoco_backend import MujocoTwin
    from hal.sim.sensors import SensorNoise

    spec = load_robot(name)
    tw = MujocoTwin(spec, SensorNoise.from_config(spec, enabled=False))
    q, dq, _ = Regressor(spec, ModelOptions(measurement="motor_torque")).random_states(20, np.random.default_rng(3))
    rng = np.random.default_rng(0)
    mujoco.set_mjcb_passive(tw._passive_callback())
    try:
        for k in range(q.shape[0]):
            tw.data.qpos[:], tw.data.qvel[:] = q[k], dq[k]
            tw.data.act[:] = rng.normal(size=spec.n_joints) * 20
            mujoco.mj_forward(tw.model, tw.data)
            tau = tw.truth.torques(q[k], dq[k], tw.data.qacc.copy())[1][0]
            np.testing.assert_allclose(tau, tw.data.act, atol=1e-9 * max(1.0, np.max(np.abs(tau))))
    finally:
        mujoco.set_mjcb_passive(None)


def _mdh_chain(alpha, d, theta0, r, q, base_z=0.0):
    """Khalil MDH forward kinematics: frame origins and z axes."""
    def rx(a):
        c, s = np.cos(a), np.sin(a)
        return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1]])

    def rz(a):
        c, s = np.cos(a), np.sin(a)
        return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])

    def tr(x, y, z):
        T = np.eye(4)
        T[:3, 3] = [x, y, z]
        return T

    T = tr(0, 0, base_z)
    out = []
    for a, dd, t0, rr, qq in zip(alpha, d, theta0, r, q):
        T = T @ rx(a) @ tr(dd, 0, 0) @ rz(t0 + qq) @ tr(0, 0, rr)
        out.append(T.copy())
    return out


@pytest.mark.parametrize("name, mdh", [
    ("lwr4p", dict(alpha=[0, np.pi / 2, -np.pi / 2, -np.pi / 2, np.pi / 2, np.pi / 2, -np.pi / 2], d=[0] * 7,
                   theta0=[0] * 7, r=[0.3105, 0, 0.4, 0, 0.39, 0, 0])),
    ("kuka_ir361", dict(alpha=[0, -np.pi / 2, 0], d=[0, 0, 0.48], theta0=[0, -np.pi / 2, 0], r=[1.02, 0, 0])),
])
def test_link_frames_are_the_papers_mdh_frames(name, mdh):
    import pinocchio as pin

    spec = load_robot(name)
    model = pinocchio_model(spec)
    data = model.createData()
    rng = np.random.default_rng(0)
    for _ in range(10):
        q = rng.uniform(spec.q_min_rad, spec.q_max_rad)
        pin.forwardKinematics(model, data, q)
        ref = _mdh_chain(mdh["alpha"], mdh["d"], mdh["theta0"], mdh["r"], q)
        for j in range(spec.n_joints):
            np.testing.assert_allclose(data.oMi[j + 1].homogeneous, ref[j], atol=1e-12)


def test_ir361_spring_nearly_cancels_gravity_on_axis_2():
    spec = load_robot("kuka_ir361")
    truth = dyn.TruthModel(spec)
    q = np.array([[0.0, 0.8, 0.0]])
    z = np.zeros_like(q)
    gravity = truth.rnea_links(q, z, z)[0, 1]
    spring = dyn.spring_torque_Nm(spec, q)[0, 1]
    assert abs(spring) > 100 and abs(gravity + -spring) < 0.5 * abs(gravity)
    names = Regressor(spec, ModelOptions(measurement="motor_torque")).names
    assert "KS2" in names and "KS1" not in names


def test_jubien_2014_base_parameter_counts_for_the_lwr4p_with_payload():
    """Jubien 2014: with the payload as link 8 and offsets, models A 79, B 74, C 102, D 28."""
    spec = load_robot("lwr4p")
    counts = {}
    for meas, paper in (("motor_torque", 79), ("joint_torque", 74), ("both", 102), ("difference", 28)):
        base = compute_base_parameters(Regressor(spec, ModelOptions(measurement=meas, payload=True, offsets=True)))
        counts[meas] = base.n_base
        print(f"LWR4+ model {meas}: {base.n_base} base parameters (Jubien 2014: {paper})")
    assert counts == {"motor_torque": 79, "joint_torque": 74, "both": 102, "difference": 28}


def test_base_parameter_counts_printed_against_the_papers():
    iiwa = compute_base_parameters(Regressor(load_robot("iiwa14"), ModelOptions(measurement="joint_torque")))
    print(f"iiwa 14 links + viscous + Coulomb: {iiwa.n_base} (Xu 2020: 57)")
    assert iiwa.n_base == 57
    ir = compute_base_parameters(Regressor(load_robot("kuka_ir361"), ModelOptions(measurement="motor_torque",
                                                                                    offsets=True)))
    # 16 rigid-body (incl. drive inertias Ia3; Ia1, Ia2 regroup into ZZ1R, ZZ2R), the spring force KS2,
    # 3 viscous, 3 Coulomb (link and motor friction regrouped), 3 offsets
    print(f"IR 361 axes 1-3, motor torques with spring and offsets: {ir.n_base}")
    assert ir.n_base == 26
    rel = dict(zip(ir.names, ir.relations()))
    assert rel["KS2"] == "KS2 = KS2"


def test_payload_experiments_identify_link_8():
    """Without the payload-free experiment the payload is not identifiable; with it, it is."""
    spec = load_robot("lwr4p")
    reg = Regressor(spec, ModelOptions(measurement="joint_torque", payload=True))
    q, dq, ddq = reg.random_states(200, np.random.default_rng(1))
    without = np.linalg.matrix_rank(Regressor(spec, ModelOptions(measurement="joint_torque")).stack(q, dq, ddq))
    only_with = np.linalg.matrix_rank(reg.stack(q, dq, ddq, payload_attached=True))
    mixed = np.linalg.matrix_rank(reg.stack(q, dq, ddq, payload_attached=np.arange(200) % 2 == 0))
    assert only_with == without  # with the payload always on, its columns lie in link 7's span
    assert mixed == without + 10  # with and without it, all ten payload parameters are identifiable


def test_friction_variants_change_the_twin_not_the_identification_truth():
    spec = load_robot("lwr4p")
    dq = np.linspace(-0.2, 0.2, 41)[:, None] * np.ones(7)
    nominal = dyn.link_friction_Nm(spec, dq)
    st = with_friction_variant(spec, "stribeck", side="link", stribeck_ratio=2.0, stribeck_velocity_rad_s=0.05)
    fs = dyn.link_friction_Nm(st, dq)
    # at small velocity the Stribeck level approaches 2 Fc, at large velocity the nominal
    i = np.argmin(np.abs(dq[:, 0] - 0.011))
    assert fs[i, 0] > nominal[i, 0] * 1.5
    np.testing.assert_allclose(fs[-1], nominal[-1], rtol=1e-3)
    asym = with_friction_variant(spec, "asymmetric", side="link", negative_ratio=0.5)
    fa = dyn.link_friction_Nm(asym, dq)
    np.testing.assert_allclose(fa[0] - spec.fv_link_Nms_rad * dq[0], -0.5 * spec.fc_link_Nm, rtol=1e-6)
    np.testing.assert_allclose(fa[-1], nominal[-1])
    assert np.array_equal(Regressor(st).true_parameters(), Regressor(spec).true_parameters())
    with pytest.raises(ConfigError, match="unknown friction kind"):
        with_friction_variant(spec, "lugre")


def test_coupled_drives_act_in_motor_coordinates():
    """A differential gear (q_joint = C q_motor): motor torques are C^T tau_joint plus the
    drive terms in motor coordinates; the MuJoCo mass matrix carries C^-T Ia C^-1."""
    spec = load_robot("iiwa14")
    C = np.eye(7)
    C[6, 5] = -227 / 1200
    cs = dataclasses.replace(spec, coupling_matrix=C, _cache={})
    m = mujoco_model(cs)
    d = mujoco.MjData(m)
    d.qpos[:] = 0.3
    mujoco.mj_forward(m, d)
    M = np.zeros((7, 7))
    mujoco.mj_fullM(m, d, M)
    m0 = mujoco_model(dataclasses.replace(spec, joints=tuple(dataclasses.replace(j, drive_inertia_kgm2=0.0)
                                                               for j in spec.joints), _cache={}))
    d0 = mujoco.MjData(m0)
    d0.qpos[:] = 0.3
    mujoco.mj_forward(m0, d0)
    M0 = np.zeros((7, 7))
    mujoco.mj_fullM(m0, d0, M0)
    Ci = np.linalg.inv(C)
    np.testing.assert_allclose(M - M0, Ci.T @ np.diag(spec.drive_inertia_kgm2) @ Ci, atol=1e-12)
    assert abs(M[5, 6] - M0[5, 6]) > 1e-3  # the drives are coupled


def _write(robot_yaml, mutate):
    return robot_yaml(mutate)


def test_bad_robot_files_are_refused_with_the_field(robot_yaml):
    def unknown_kind(d):
        d["joints"][2]["friction"]["link"]["kind"] = "lugre"

    with pytest.raises(RobotSpecError, match=r"joints\[2\].friction.link.kind.*unknown friction kind 'lugre'"):
        load_robot(robot_yaml(unknown_kind))

    def wrong_shape(d):
        d["coupling_matrix"] = [[1, 0], [0, 1]]

    with pytest.raises(RobotSpecError, match=r"coupling_matrix.*7 x 7"):
        load_robot(robot_yaml(wrong_shape))

    def singular(d):
        c = np.eye(7).tolist()
        c[6] = c[5]
        d["coupling_matrix"] = c

    with pytest.raises(RobotSpecError, match=r"coupling_matrix.*singular"):
        load_robot(robot_yaml(singular))

    def payload_missing(d):
        d["payload_attached"] = True

    with pytest.raises(RobotSpecError, match=r"payload_attached.*no 'payload'"):
        load_robot(robot_yaml(payload_missing))


def test_measurements_a_robot_cannot_make_are_refused():
    with pytest.raises(ConfigError, match="joint-torque sensors"):
        Regressor(load_robot("kuka_ir361"), ModelOptions(measurement="joint_torque"))
    with pytest.raises(ConfigError, match="no 'payload'"):
        Regressor(load_robot("iiwa14"), ModelOptions(payload=True))
