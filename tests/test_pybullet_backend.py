"""The PyBullet twin behind the HAL: engine set-up, inverse dynamics against the regressor,
agreement with the MuJoCo twin, exact measurement model, seeds, and the noise-free
identification through the CLI (issue 3, part 4)."""

import numpy as np
import pinocchio as pin
import pytest

from hal.factory import make_robot
from hal.protocol import JointTrajectory, Robot
from hal.sim.pybullet_backend import PyBulletTwin
from hal.sim.sensors import SensorNoise
from robident_twin.model import dynamics as dyn
from robident_twin.errors import ConfigError
from robident_twin.model.regressor import ModelOptions, Regressor
from robident_twin.model.robot import available_robots, load_robot

ROBOTS = available_robots()


def _variants(spec):
    """The robot, and with its payload mounted (or not) if it has one."""
    out = [spec]
    if spec.payload is not None:
        out.append(spec.with_payload(not spec.payload_attached))
    return out


def _twin(spec, **kw):
    return PyBulletTwin(spec, SensorNoise.from_config(spec, enabled=False), **kw)


def _sine_reference(spec, rate=1000.0, period=2.0, amp=0.1):
    """A periodic reference around home (kept inside the position limits)."""
    t = np.arange(int(rate * period)) / rate
    w = 2 * np.pi / period
    ph = np.linspace(0, 1, spec.n_joints)
    centre = np.clip(spec.home_rad, spec.q_min_rad + amp + 0.05, spec.q_max_rad - amp - 0.05)
    return JointTrajectory(t, centre + amp * np.sin(w * t[:, None] + ph), amp * w * np.cos(w * t[:, None] + ph),
                           -amp * w**2 * np.sin(w * t[:, None] + ph), period_s=period)


@pytest.mark.parametrize("name", ROBOTS)
def test_pybullet_inverse_dynamics_equals_the_regressor_times_the_true_parameters(name):
    """calculateInverseDynamics plus the dynamics.py drive, friction and spring terms equals
    Regressor.stack @ true_parameters, 1e-8 relative, 50 random states, every measurement."""
    for spec in _variants(load_robot(name)):
        twin = _twin(spec)
        try:
            measurements = ["motor_torque"] + (["joint_torque"] if spec.has_joint_torque_sensors else [])
            for meas in measurements:
                reg = Regressor(spec, ModelOptions(measurement=meas, offsets=True))
                q, dq, ddq = reg.random_states(50, np.random.default_rng(11))
                tj, tm = twin.inverse_dynamics(q, dq, ddq)
                tau = tj if meas == "joint_torque" else tm
                pred = (reg.stack(q, dq, ddq) @ reg.true_parameters()).reshape(tau.shape)
                rel = np.max(np.abs(pred - tau)) / np.max(np.abs(tau))
                print(f"{spec.name} payload={spec.payload_attached} {meas}: relative error {rel:.1e}")
                assert rel < 1e-8, (spec.name, meas, rel)
        finally:
            twin.close()


@pytest.mark.parametrize("name", ROBOTS)
def test_engine_step_realises_the_rigid_body_forward_dynamics(name):
    """One PyBullet step from random states with random link torques: (v+ - v) / h equals
    pinocchio's ABA and q+ = q + h v+ (semi-implicit Euler). Fails if a velocity motor,
    link or joint damping, a velocity clamp or the 1 kg default flange mass were left in."""
    spec = load_robot(name)
    twin = _twin(spec)
    try:
        q, dq, _ = Regressor(spec, ModelOptions(measurement="motor_torque")).random_states(
            10, np.random.default_rng(5))
        rng = np.random.default_rng(6)
        for k in range(q.shape[0]):
            tau = rng.uniform(-1, 1, spec.n_joints) * 0.2 * spec.tau_max_Nm
            twin._set_state(q[k], dq[k])
            q1, v1 = twin.step_links(tau)
            a = (v1 - dq[k]) / twin.h_s
            a_ref = pin.aba(twin.truth.model, twin.truth.data, q[k], dq[k], tau)
            np.testing.assert_allclose(a, a_ref, atol=1e-7 * np.max(np.abs(a_ref)))
            np.testing.assert_allclose(q1, q[k] + twin.h_s * v1, atol=1e-12)
    finally:
        twin.close()


@pytest.fixture(scope="module")
def both_engines():
    """Every robot's sine reference played noise-free in MuJoCo and PyBullet: one period right after
    the lead-in, which enters the sine on its own path (no transient period: tracking 1e-7 rad
    against the asserted 1e-4, the engines' largest torque difference the same 7.4e-4 of the range
    as after a transient period, against the asserted 1e-2)."""
    out = {}
    for name in ROBOTS:
        spec = load_robot(name)
        ref = _sine_reference(spec)
        recs = {}
        for backend in ("mujoco", "pybullet"):
            robot = make_robot(spec, {"name": backend}, {"enabled": False}, seed=0)
            try:
                recs[backend] = robot.run(ref, periods=1, transient_periods=0)
            finally:
                robot.close()
        out[name] = (spec, ref, recs)
    return out


@pytest.mark.parametrize("name", ROBOTS)
def test_the_same_trajectory_gives_the_same_torques_in_mujoco_and_pybullet(both_engines, name):
    """Recorded torques agree to 1 % of each joint's torque range (noise off)."""
    spec, ref, recs = both_engines[name]
    mj, bu = recs["mujoco"], recs["pybullet"]
    assert np.max(np.abs(bu.metadata["true_q_rad"] - ref.q_rad)) < 1e-4  # it tracks
    channels = ["tau_motor_Nm"] + (["tau_joint_Nm"] if spec.has_joint_torque_sensors else [])
    for ch in channels:
        a, b = getattr(mj, ch), getattr(bu, ch)
        span = a.max(axis=0) - a.min(axis=0)
        ratio = np.max(np.abs(a - b), axis=0) / span
        print(f"{name} {ch}: max |MuJoCo - PyBullet| / torque range per joint {np.round(100 * ratio, 4)} %")
        assert np.all(ratio < 0.01), (name, ch, ratio)
    if not spec.has_joint_torque_sensors:
        assert bu.tau_joint_Nm is None


@pytest.mark.parametrize("name", ROBOTS)
def test_recorded_torques_satisfy_the_measurement_model_at_every_sample(both_engines, name):
    """With one engine step per control period the samples are the engine's states: the
    recorded joint and motor torques equal the truth model at the positions' central
    differences (what the processing's derivatives converge to), 1e-6 of the range."""
    spec, _, recs = both_engines[name]
    rec = recs["pybullet"]
    assert rec.metadata["substeps"] == 1
    q = rec.metadata["true_q_rad"]
    h = 1.0 / rec.sample_rate_hz
    dq = (q[2:] - q[:-2]) / (2 * h)
    ddq = (q[2:] - 2 * q[1:-1] + q[:-2]) / h**2
    tj, tm = dyn.TruthModel(spec).torques(q[1:-1], dq, ddq)
    for truth, got in ((tm, rec.tau_motor_Nm[1:-1]), (tj, rec.tau_joint_Nm[1:-1] if rec.tau_joint_Nm is not None else None)):
        if got is None:
            continue
        span = truth.max(axis=0) - truth.min(axis=0)
        assert np.max(np.abs(got - truth) / span) < 1e-6


def test_pybullet_twin_is_a_robot_with_seeded_noise(iiwa):
    ref = _sine_reference(iiwa, period=1.0, amp=0.05)
    noise = {"torque_std_Nm": 0.5, "q_std_rad": 0.0, "encoder_resolution_rad": 0.0}
    robots = [make_robot(iiwa, {"name": "pybullet"}, cfg, seed=s)
              for cfg, s in (({"enabled": False}, 0), (noise, 5), (noise, 5), (noise, 6))]
    try:
        assert isinstance(robots[0], Robot) and robots[0].info.backend == "pybullet"
        clean = robots[0].run(ref, periods=2, transient_periods=1)
        r1, r2, r3 = (r.run(ref, periods=2) for r in robots[1:])
    finally:
        for r in robots:
            r.close()
    assert clean.period_samples == ref.n_samples and clean.n_periods == 2
    np.testing.assert_array_equal(r1.tau_joint_Nm, r2.tau_joint_Nm)
    assert not np.array_equal(r1.tau_joint_Nm, r3.tau_joint_Nm)
    np.testing.assert_allclose((r1.tau_joint_Nm - clean.tau_joint_Nm).std(axis=0), 0.5, rtol=0.1)
    # periodic steady state: both recorded periods give the same torques
    P = ref.n_samples
    np.testing.assert_allclose(clean.tau_motor_Nm[:P], clean.tau_motor_Nm[P:], atol=1e-5)


def test_bad_pybullet_config_is_refused(iiwa):
    with pytest.raises(ConfigError, match="backend.substeps"):
        make_robot(iiwa, {"name": "pybullet", "substeps": 0})
    with pytest.raises(ConfigError, match="backend.controller"):
        make_robot(iiwa, {"name": "pybullet", "controller": {"bandwith_hz": 5.0}})
    twin = make_robot(iiwa, {"name": "pybullet"}, {"enabled": False})
    try:
        with pytest.raises(ConfigError, match="500 Hz.*1000 Hz"):
            twin.run(_sine_reference(iiwa, rate=500.0))
    finally:
        twin.close()


def test_noise_free_identification_through_the_cli_recovers_the_iiwa14(tmp_path_factory):
    """`robident-twin backend=pybullet noise=none estimator=ols`: every base parameter within
    0.5 % (1e-4 absolute where |true| < 1e-3), as the MuJoCo run. The session's shared run
    (tests/shared_runs.py, also read by test_identify_robots): one recorded period, no plots."""
    from shared_runs import noise_free_summary

    s = noise_free_summary(tmp_path_factory, "iiwa14", "pybullet")
    assert s["backend"] == "pybullet" and s["robot"] == "iiwa14" and len(s["parameters"]) == 57
    worst_rel, worst_abs = 0.0, 0.0
    for p in s["parameters"]:
        err = abs(p["estimate"] - p["true"])
        if abs(p["true"]) < 1e-3:
            worst_abs = max(worst_abs, err)
            assert err <= 1e-4, p
        else:
            worst_rel = max(worst_rel, err / abs(p["true"]))
            assert err <= 5e-3 * abs(p["true"]), p
    print(f"pybullet noise-free: worst relative error {100 * worst_rel:.4f} %, worst absolute error on "
          f"small parameters {worst_abs:.2e}; acquisition {s['timings_s']['acquisition']:.1f} s")
