"""The HAL: protocol checks, the MuJoCo twin's controller, sensors and seeds."""
import numpy as np
import pytest

from hal.factory import make_robot
from hal.motion import approach
from hal.protocol import JointTrajectory, Recording, Robot
from robident_twin.errors import ConfigError, RecordingError, TrajectoryError


def _sine_reference(n=7, rate=1000.0, period=2.0, amp=0.2):
    t = np.arange(int(rate * period)) / rate
    w = 2 * np.pi / period
    ph = np.linspace(0, 1, n)
    q = amp * np.sin(w * t[:, None] + ph)
    dq = amp * w * np.cos(w * t[:, None] + ph)
    ddq = -amp * w**2 * np.sin(w * t[:, None] + ph)
    return JointTrajectory(t, q, dq, ddq, period_s=period)


@pytest.fixture(scope="module")
def twin(iiwa):
    return make_robot(iiwa, {"name": "mujoco"}, {"enabled": False}, seed=0)


def test_twin_is_a_robot(twin):
    assert isinstance(twin, Robot)
    assert twin.info.is_simulation and twin.info.n_joints == 7


def test_twin_tracks_and_records_whole_periods(iiwa):
    robot = make_robot(iiwa, {"name": "mujoco"}, {"enabled": False}, seed=0)
    ref = _sine_reference()
    rec = robot.run(ref, periods=2, transient_periods=1)
    assert rec.period_samples == ref.n_samples and rec.n_periods == 2
    assert rec.q_rad.shape == (2 * ref.n_samples, 7)
    # PD + feed-forward on the twin's own model: tracking error well below a milliradian
    assert np.max(np.abs(rec.q_rad - np.vstack([ref.q_rad] * 2))) < 1e-5
    # periodic steady state: both recorded periods give the same torques
    P = ref.n_samples
    np.testing.assert_allclose(rec.tau_motor_Nm[:P], rec.tau_motor_Nm[P:], atol=1e-6)
    # the joint torque differs from the motor torque by the drive inertia term
    assert np.max(np.abs(rec.tau_motor_Nm - rec.tau_joint_Nm)) > 0.1


def test_noise_is_seeded_and_has_the_configured_std(iiwa):
    noise = {"torque_std_Nm": 0.5, "q_std_rad": 0.0, "encoder_resolution_rad": 0.0}
    ref = _sine_reference(period=1.0, amp=0.1)
    clean = make_robot(iiwa, {"name": "mujoco"}, {"enabled": False}).run(ref, periods=2)
    r1 = make_robot(iiwa, {"name": "mujoco"}, noise, seed=5).run(ref, periods=2)
    r2 = make_robot(iiwa, {"name": "mujoco"}, noise, seed=5).run(ref, periods=2)
    r3 = make_robot(iiwa, {"name": "mujoco"}, noise, seed=6).run(ref, periods=2)
    np.testing.assert_array_equal(r1.tau_joint_Nm, r2.tau_joint_Nm)
    assert not np.array_equal(r1.tau_joint_Nm, r3.tau_joint_Nm)
    e = r1.tau_joint_Nm - clean.tau_joint_Nm
    np.testing.assert_allclose(e.std(axis=0), 0.5, rtol=0.05)


def test_trajectory_beyond_a_limit_is_refused_with_joint_and_time(twin, iiwa):
    ref = _sine_reference(amp=0.2)
    q = ref.q_rad.copy()
    q[1500, 3] = iiwa.q_max_rad[3] + 0.1
    bad = JointTrajectory(ref.t_s, q, ref.dq_rad_s, ref.ddq_rad_s2, period_s=ref.period_s)
    with pytest.raises(TrajectoryError, match=r"position limit of joint A4 at t = 1\.500 s"):
        twin.run(bad)
    fast = JointTrajectory(ref.t_s, ref.q_rad, ref.dq_rad_s * 50, ref.ddq_rad_s2, period_s=ref.period_s)
    with pytest.raises(TrajectoryError, match="velocity limit of joint"):
        twin.run(fast)


def test_wrong_rate_and_bad_config_are_refused(twin, iiwa):
    ref = _sine_reference(rate=500.0)
    with pytest.raises(ConfigError, match="500 Hz.*1000 Hz"):
        twin.run(ref)
    with pytest.raises(ConfigError, match="unknown backend 'gazebo'"):
        make_robot(iiwa, {"name": "gazebo"})
    with pytest.raises(ConfigError, match="noise.torque_sdt_Nm: unknown key"):
        make_robot(iiwa, {"name": "mujoco"}, {"torque_sdt_Nm": 1.0})
    with pytest.raises(ConfigError, match="noise.torque_std_Nm"):
        make_robot(iiwa, {"name": "mujoco"}, {"torque_std_Nm": [1.0, 2.0]})


def test_nan_in_a_recording_is_refused_naming_channel_and_sample():
    N = 10
    q = np.zeros((N, 2))
    tau = np.ones((N, 2))
    tau[4, 1] = np.nan
    with pytest.raises(RecordingError, match=r"channel tau_motor_Nm .* at sample 4 .*joint 2"):
        Recording(np.arange(N) / 100.0, q, tau, None, q, 100.0)
    with pytest.raises(RecordingError, match="not strictly increasing"):
        Recording(np.zeros(N), q, np.ones((N, 2)), None, q, 100.0)


def test_approach_is_smooth_and_within_limits(twin):
    info = twin.info
    z = np.zeros(7)
    target = np.full(7, 0.5)
    ap = approach(info, z, z, z, target, np.full(7, 0.3), z)
    np.testing.assert_allclose(ap.q_rad[0], z)
    assert np.all(np.abs(ap.dq_rad_s) <= 0.8 * info.dq_max_rad_s + 1e-12)
    assert np.all(np.abs(ap.ddq_rad_s2) <= 0.8 * info.ddq_max_rad_s2 + 1e-12)
    # continuity into the target state one control period after the last sample
    np.testing.assert_allclose(ap.q_rad[-1] + ap.dq_rad_s[-1] / info.control_rate_hz, target, atol=1e-3)


def test_lead_in_and_lead_out_stay_on_the_trajectory_path_and_inside_the_limits():
    """Entering a moving periodic trajectory near a position limit: the lead-in ends exactly
    on the trajectory's start state (position, velocity, acceleration) and the lead-out stops
    at rest, both inside every limit."""
    from hal.motion import lead_in, lead_out
    from hal.protocol import JointTrajectory, check_reference_limits
    from hal.sim.mujoco_backend import robot_info
    from robident_twin.model.robot import load_robot

    spec = load_robot("lwr4p")
    info = robot_info(spec, "test", 1000.0)
    P, n = 10.0, 10000
    t = np.arange(n) / 1000.0
    w = 2 * np.pi / P
    amp = np.full(7, 0.4)
    off = spec.q_max_rad - 0.45  # oscillate close to the upper position limits
    q = off + amp * np.sin(w * t)[:, None]
    traj = JointTrajectory(t, q, amp * w * np.cos(w * t)[:, None], -amp * w**2 * np.sin(w * t)[:, None], period_s=P)
    lin = lead_in(info, traj, spec.home_rad, np.zeros(7))
    check_reference_limits(lin, info)
    dt = 1e-3
    # one step after the lead-in's last sample is the trajectory's first sample
    nxt = lin.q_rad[-1] + lin.dq_rad_s[-1] * dt + 0.5 * lin.ddq_rad_s2[-1] * dt**2
    np.testing.assert_allclose(nxt, traj.q_rad[0], atol=1e-6)
    np.testing.assert_allclose(lin.dq_rad_s[-1] + lin.ddq_rad_s2[-1] * dt, traj.dq_rad_s[0], atol=1e-5)
    np.testing.assert_allclose(lin.q_rad[0], spec.home_rad, atol=1e-12)
    lout = lead_out(info, traj)
    check_reference_limits(lout, info)
    # the lead-out's first sample is the next period's first sample (no sample skipped: the
    # last period ends with q_rad[-1], one step before q_rad[0])
    np.testing.assert_allclose(lout.q_rad[0], traj.q_rad[0], atol=1e-6)
    np.testing.assert_allclose(lout.q_rad[0] - traj.q_rad[-1], traj.dq_rad_s[0] * dt, atol=1e-6)
    np.testing.assert_allclose(lout.dq_rad_s[-1], 0.0, atol=1e-12)


def test_sensor_model_gain_error_coloured_noise_and_ripple():
    """Motor torque = (1 + gain error) x true torque + ripple + noise; coloured noise keeps its
    variance and has the configured lag-1 autocorrelation; bad values are refused."""
    from hal.factory import make_noise
    from robident_twin.errors import ConfigError
    from robident_twin.model.robot import load_robot

    spec = load_robot("iiwa14")
    N = 20000
    q = np.tile(np.linspace(-1, 1, N)[:, None], (1, 7))
    tau = np.ones((N, 7)) * 10.0
    exact = make_noise(spec, {"enabled": True, "q_std_rad": 0.0, "encoder_resolution_rad": 0.0,
                              "torque_std_Nm": 0.0, "motor_torque_std_Nm": 0.0, "motor_gain_error": 0.05,
                              "ripple_Nm": 0.2, "ripple_per_rev": 6})
    _, tm, tj = exact.measure(np.random.default_rng(0), q, tau, tau)
    ripple = 0.2 * np.sin(6 * spec.gear_ratio * q)
    np.testing.assert_allclose(tm, 10.5 + ripple, atol=1e-12)
    np.testing.assert_allclose(tj, tau)  # the joint-torque sensor has no gain error or ripple
    coloured = make_noise(spec, {"torque_std_Nm": 0.3, "torque_noise_ar1": 0.8})
    _, _, tj = coloured.measure(np.random.default_rng(1), q, tau, tau)
    e = tj[:, 0] - 10.0
    assert abs(e.std() / 0.3 - 1) < 0.05
    assert abs(np.corrcoef(e[1:], e[:-1])[0, 1] - 0.8) < 0.02
    for bad in ({"torque_noise_ar1": 1.0}, {"motor_gain_error": 2.0}, {"ripple_Nm": -1.0}):
        with pytest.raises(ConfigError, match="noise."):
            make_noise(spec, bad)
