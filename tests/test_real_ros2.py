"""Optional ROS 2 backend (issue 6): importable without rclpy, a clear error when it is
missing, and the pure parts (goal points from a reference, /joint_states samples into a
Recording with gaps) checked without ROS."""
from __future__ import annotations

import numpy as np
import pytest

import hal.real.ros2 as ros2
from hal.protocol import JointTrajectory
from hal.real.base import GuardError, StepGuard
from hal.sim.mujoco_backend import robot_info
from hal.sim.playback import plan_run
from robident_twin.errors import ConfigError, RecordingError
from robident_twin.model.robot import load_robot

RATE = 500.0


@pytest.fixture(scope="module")
def spec():
    return load_robot("kuka_ir361")


def periodic(spec, seconds=1.0, amp=0.1):
    t = np.arange(int(seconds * RATE)) / RATE
    w = 2 * np.pi / seconds
    ph = np.arange(spec.n_joints)
    return JointTrajectory(t, spec.home_rad + amp * np.sin(w * t[:, None] + ph),
                           amp * w * np.cos(w * t[:, None] + ph), -amp * w**2 * np.sin(w * t[:, None] + ph),
                           period_s=seconds)


@pytest.mark.skipif(ros2.rclpy is not None, reason="rclpy is installed here: the missing-rclpy error cannot occur")
def test_backend_without_rclpy_says_what_is_needed(spec):
    with pytest.raises(ConfigError, match="needs rclpy .* not on PyPI"):
        ros2.make_ros2_robot(spec, {"name": "ros2"})
    from hal.factory import make_robot

    with pytest.raises(ConfigError, match="source a ROS 2 installation"):
        make_robot(spec, {"name": "ros2", "controller": "arm_controller"})
    with pytest.raises(ConfigError, match="unknown key"):
        ros2.make_ros2_robot(spec, {"name": "ros2", "controler": "x"})


def test_goal_points_thin_the_reference_and_keep_its_end(spec):
    ref = periodic(spec)
    pts = ros2.goal_points(ref, point_rate_hz=100.0)
    assert len(pts) == 101  # every 5th of 500 samples, plus the last
    assert pts[1].time_from_start_s == pytest.approx(0.01) and pts[1].time_from_start == (0, 10_000_000)
    np.testing.assert_array_equal(pts[-1].positions, ref.q_rad[-1])
    np.testing.assert_array_equal(pts[-1].accelerations, ref.ddq_rad_s2[-1])
    assert pts[-1].time_from_start == (0, 998_000_000)
    np.testing.assert_array_equal([p.velocities for p in pts[:-1]], ref.dq_rad_s[::5])
    long = JointTrajectory(np.arange(2000) / 1000.0 + 7.0, np.zeros((2000, 3)), np.zeros((2000, 3)),
                           np.zeros((2000, 3)))
    assert ros2.goal_points(long)[-1].time_from_start == (1, 999_000_000)  # relative to the start


def states_from_plan(plan, names, t0_ns, rate, drop=(), jitter_ns=0, seed=0, order=None):
    """JointState samples of a plant that follows the reference exactly, effort = 10 q."""
    rng = np.random.default_rng(seed)
    out = []
    idx = np.arange(plan.reference.n_samples)
    perm = order if order is not None else [0, 1, 2]
    for k in idx:
        if k in drop:
            continue
        q = plan.reference.q_rad[k]
        stamp = t0_ns + int(round(k / rate * 1e9)) + (int(rng.integers(-jitter_ns, jitter_ns + 1)) if jitter_ns else 0)
        out.append(ros2.JointStateSample(stamp, tuple(names[i] for i in perm), tuple(q[perm]), tuple(10 * q[perm])))
    return out


def test_joint_states_become_a_recording_aligned_with_the_goal(spec):
    info = robot_info(spec, "ros2", RATE)
    traj = periodic(spec)
    plan = plan_run(info, "ros2", traj, spec.home_rad, np.zeros(3), 2, 1)
    names = list(spec.joint_names)
    t0 = 1_700_000_000_123_456_789
    samples = states_from_plan(plan, names, t0, RATE, order=[2, 0, 1])  # joints in another order
    samples.insert(100, samples[99])  # a duplicate
    samples[200], samples[201] = samples[201], samples[200]  # out of order
    rec, st = ros2.recording_from_joint_states(samples, names, plan, RATE, t0)
    assert rec.n_periods == 2 and rec.period_samples == traj.n_samples and rec.valid is None
    np.testing.assert_allclose(rec.q_rad, np.vstack([traj.q_rad] * 2), atol=1e-12)
    np.testing.assert_allclose(rec.tau_motor_Nm, 10 * rec.q_rad, atol=1e-11)
    assert rec.tau_joint_Nm is None and st.duplicated == 1 and st.out_of_order == 1
    # jittered stamps: linear interpolation between the samples around each grid instant
    rec_j, _ = ros2.recording_from_joint_states(states_from_plan(plan, names, t0, RATE, jitter_ns=20_000),
                                                names, plan, RATE, t0)
    assert np.max(np.abs(rec_j.q_rad - rec.q_rad)) < 2 * np.abs(traj.dq_rad_s).max() * 20e-6  # 2 x speed x jitter
    # a gap of 5 samples inside the window is marked, the rest is untouched
    gap = set(range(plan.start + 50, plan.start + 55))
    rec_g, st_g = ros2.recording_from_joint_states(states_from_plan(plan, names, t0, RATE, drop=gap),
                                                   names, plan, RATE, t0, effort_as="joint_torque")
    assert st_g.gap_samples == int((~rec_g.valid).sum()) == 5 and rec_g.valid[49] and not rec_g.valid[52]
    np.testing.assert_allclose(rec_g.q_rad[rec_g.valid], rec.q_rad[rec_g.valid], atol=1e-12)
    assert rec_g.metadata["motor_torque_available"] is False
    np.testing.assert_allclose(rec_g.tau_joint_Nm[rec_g.valid], 10 * rec.q_rad[rec_g.valid], atol=1e-11)


def test_joint_states_errors_name_the_sample(spec):
    info = robot_info(spec, "ros2", RATE)
    plan = plan_run(info, "ros2", periodic(spec), spec.home_rad, np.zeros(3), 1, 0)
    names = list(spec.joint_names)
    s = states_from_plan(plan, names, 0, RATE)
    bad = list(s)
    bad[7] = ros2.JointStateSample(bad[7].stamp_ns, ("A1", "A2"), (0.0, 0.0), (0.0, 0.0))
    with pytest.raises(RecordingError, match=r"sample 7: joint\(s\) \['A3'\] missing"):
        ros2.recording_from_joint_states(bad, names, plan, RATE, 0)
    with pytest.raises(RecordingError, match="no sample inside the recorded window"):
        ros2.recording_from_joint_states(s, names, plan, RATE, 10**12)
    with pytest.raises(RecordingError, match="at least 2"):
        ros2.recording_from_joint_states(s[:1], names, plan, RATE, 0)


def test_commands_are_guarded_before_the_goal_is_sent(spec):
    info = robot_info(spec, "ros2", RATE)
    traj = periodic(spec)
    plan = plan_run(info, "ros2", traj, spec.home_rad, np.zeros(3), 1, 0)
    guard = StepGuard(info)
    ros2.check_commands(guard, plan.reference, spec.home_rad)  # the planned run passes
    q = plan.reference.q_rad.copy()
    q[300, 1] += 0.05
    jump = JointTrajectory(plan.reference.t_s, q, plan.reference.dq_rad_s, plan.reference.ddq_rad_s2)
    with pytest.raises(GuardError, match="joint A2 step"):
        ros2.check_commands(guard, jump, spec.home_rad)
