"""Optional ROS 2 backend: ``control_msgs/action/FollowJointTrajectory`` + ``/joint_states``.

rclpy is not on PyPI, so this module imports without it; constructing :class:`Ros2Robot`
without a sourced ROS 2 installation raises a :class:`ConfigError` saying so. The pure parts
need no ROS and are tested without it:

- :func:`goal_points`: the FollowJointTrajectory goal's points from a HAL reference (the
  whole run: lead-in, transient and recorded periods, lead-out, as the twins play it),
  thinned to ``point_rate_hz`` (the joint trajectory controller interpolates between points
  with positions, velocities and accelerations; the last sample is always kept), each with
  ``time_from_start`` split into (sec, nanosec).
- :func:`recording_from_joint_states`: JointState samples (header stamp, names, position,
  effort) resampled onto the reference's grid, starting at the goal's start stamp, joints
  picked by name; a grid instant whose neighbouring samples are further apart than
  ``max_gap_s`` is a gap (``Recording.valid`` False, filled by interpolation); duplicated
  and out-of-order stamps are counted and dropped.

:class:`Ros2Robot.run` passes the safety gate, checks every command of the reference with the
command guard (finite, position limits, step per cycle), sends the goal with a start stamp
slightly in the future, records ``/joint_states`` until the result arrives, and builds the
Recording. ``effort`` is read as the motor torque (``effort_as``) or as the joint torque.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from robident_twin.errors import ConfigError, RecordingError
from robident_twin.model.robot import RobotSpec

from ..protocol import JointTrajectory, Recording
from ..safety import (
    SafetyChecks,
    attach_checks_for,
    check_planned_motion,
    gate_trajectory,
)
from ..sim.playback import RunPlan, plan_run
from .guard import StepGuard, check_limit_margin, check_step_margin

try:  # optional: ROS 2 is installed from its own distribution, not from PyPI
    import rclpy  # type: ignore
except ImportError:  # pragma: no cover - the test machine has no ROS 2
    rclpy = None

NEED_RCLPY = ("the ros2 backend needs rclpy (ROS 2's Python client library, which is not on PyPI) and "
              "control_msgs / sensor_msgs: source a ROS 2 installation (e.g. `source /opt/ros/humble/"
              "setup.bash`) in the shell that runs robident-twin. Recorded ROS 2 bags need no ROS: "
              "backend=file reads them.")


# --------------------------------------------------------------------------- pure parts


@dataclass(frozen=True)
class GoalPoint:
    """One trajectory_msgs/JointTrajectoryPoint (rad, rad/s, rad/s^2, s)."""

    positions: tuple[float, ...]
    velocities: tuple[float, ...]
    accelerations: tuple[float, ...]
    time_from_start_s: float

    @property
    def time_from_start(self) -> tuple[int, int]:
        """(sec, nanosec) as builtin_interfaces/Duration holds it."""
        ns = int(round(self.time_from_start_s * 1e9))
        return ns // 1_000_000_000, ns % 1_000_000_000


def goal_points(reference: JointTrajectory, point_rate_hz: float | None = None) -> list[GoalPoint]:
    """The goal's points: every k-th sample of ``reference`` (k = rate / point_rate_hz, rounded;
    None keeps every sample) and always the last one; times from the reference's start."""
    rate = reference.rate_hz
    k = 1 if not point_rate_hz else max(1, int(round(rate / float(point_rate_hz))))
    idx = list(range(0, reference.n_samples, k))
    if idx[-1] != reference.n_samples - 1:
        idx.append(reference.n_samples - 1)
    t0 = float(reference.t_s[0])
    return [GoalPoint(tuple(map(float, reference.q_rad[i])), tuple(map(float, reference.dq_rad_s[i])),
                      tuple(map(float, reference.ddq_rad_s2[i])), float(reference.t_s[i]) - t0) for i in idx]


@dataclass(frozen=True)
class JointStateSample:
    """One sensor_msgs/JointState: header stamp (ns), joint names, positions (rad), efforts (N m)."""

    stamp_ns: int
    name: tuple[str, ...]
    position: tuple[float, ...]
    effort: tuple[float, ...] = ()


@dataclass
class JointStateStats:
    received: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    gap_samples: int = 0
    max_gap_s: float = 0.0

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _block(samples: Sequence[JointStateSample], joint_names: Sequence[str], what: str) -> np.ndarray:
    out = np.empty((len(samples), len(joint_names)))
    cache: dict[tuple[str, ...], list[int]] = {}
    for k, s in enumerate(samples):
        idx = cache.get(s.name)
        if idx is None:
            missing = [j for j in joint_names if j not in s.name]
            if missing:
                raise RecordingError(f"/joint_states sample {k}: joint(s) {missing} missing from name {list(s.name)}")
            idx = cache[s.name] = [s.name.index(j) for j in joint_names]
        vals = getattr(s, what)
        if len(vals) != len(s.name):
            raise RecordingError(f"/joint_states sample {k}: field {what} has {len(vals)} values for "
                                 f"{len(s.name)} joints")
        out[k] = np.asarray(vals, dtype=float)[idx]
    return out


def recording_from_joint_states(samples: Sequence[JointStateSample], joint_names: Sequence[str], plan: RunPlan,
                                rate_hz: float, t0_ns: int, effort_as: str = "motor_torque",
                                max_gap_s: float | None = None, metadata: Mapping[str, Any] | None = None
                                ) -> tuple[Recording, JointStateStats]:
    """The recorded window [plan.start, plan.stop) of a run whose reference sample 0 was
    commanded at ``t0_ns``: each grid instant t0 + k / rate_hz interpolated linearly between
    the JointState samples around it (see the module doc)."""
    if effort_as not in ("motor_torque", "joint_torque"):
        raise ConfigError(f"backend.effort_as: motor_torque or joint_torque, got {effort_as!r}")
    stats = JointStateStats(received=len(samples))
    if len(samples) < 2:
        raise RecordingError(f"/joint_states: {len(samples)} sample(s) received, need at least 2")
    order = sorted(range(len(samples)), key=lambda k: samples[k].stamp_ns)
    stats.out_of_order = sum(1 for a, b in zip(order, order[1:]) if b < a)
    keep, last = [], None
    for k in order:
        if samples[k].stamp_ns == last:
            stats.duplicated += 1
            continue
        keep.append(samples[k])
        last = samples[k].stamp_ns
    t = (np.array([s.stamp_ns for s in keep], dtype=np.int64) - int(t0_ns)) * 1e-9
    q = _block(keep, joint_names, "position")
    eff = _block(keep, joint_names, "effort")
    N = plan.stop - plan.start
    grid = (plan.start + np.arange(N)) / float(rate_hz)
    gap = 2.5 / rate_hz if max_gap_s is None else float(max_gap_s)
    right = np.searchsorted(t, grid, side="left")
    inside = (right > 0) & (right < len(t))
    r = np.clip(right, 1, len(t) - 1)
    near = np.minimum(np.abs(t[r] - grid), np.abs(t[r - 1] - grid))
    exact = near <= 1e-6  # a sample at the instant itself (stamps are rounded to ns)
    span = t[r] - t[r - 1]
    valid = exact | (inside & (span <= gap))
    dt = np.diff(t)
    stats.max_gap_s = float(dt.max()) if dt.size else 0.0
    stats.gap_samples = int(N - valid.sum())
    if not valid.any():
        raise RecordingError(f"/joint_states: no sample inside the recorded window ({grid[0]:.3f} s .. "
                             f"{grid[-1]:.3f} s after the goal's start; samples cover {t[0]:.3f} s .. {t[-1]:.3f} s)")
    qg = np.column_stack([np.interp(grid, t, q[:, j]) for j in range(q.shape[1])])
    eg = np.column_stack([np.interp(grid, t, eff[:, j]) for j in range(eff.shape[1])])
    md = {"source": "ros2 /joint_states", "joint_state_stats": stats.as_dict(), "effort_as": effort_as,
          "lost_samples_in_window": stats.gap_samples, **dict(metadata or {})}
    if effort_as == "joint_torque":
        md.update(motor_torque_available=False, tau_motor_note="effort read as joint torque; no motor torque")
    rec = Recording(t_s=np.arange(N) / rate_hz, q_rad=qg, tau_motor_Nm=eg.copy(),
                    tau_joint_Nm=eg if effort_as == "joint_torque" else None,
                    q_cmd_rad=plan.reference.q_rad[plan.start:plan.stop].copy(), sample_rate_hz=float(rate_hz),
                    period_samples=plan.period_samples, n_periods=plan.periods, metadata=md,
                    valid=None if valid.all() else valid)
    return rec, stats


def check_commands(guard: StepGuard, reference: JointTrajectory, q_now_rad: np.ndarray) -> None:
    """Every command of the reference through the guard, before anything is sent: anchored at
    the robot's position (refused outside the limits), the first sample within one cycle's
    step of it, every sample inside the limits minus the margin, every step within one cycle's."""
    guard.start(q_now_rad)
    guard.check_plan(np.vstack([guard.last, reference.q_rad]), "reference (after the current position)")


# --------------------------------------------------------------------------- the backend


@dataclass(frozen=True)
class Ros2Config:
    controller: str = "joint_trajectory_controller"   # action /<controller>/follow_joint_trajectory
    joint_states_topic: str = "/joint_states"
    joint_names: tuple[str, ...] | None = None          # null: the robot file's joint names
    control_rate_hz: float = 500.0                      # reference sampling and recording grid
    point_rate_hz: float = 100.0                        # goal points per second
    effort_as: str = "motor_torque"
    start_delay_s: float = 0.5                          # the goal starts this long after it is sent
    server_timeout_s: float = 10.0
    max_gap_s: float | None = None
    step_margin: float = 1.0  # the fraction of dq_max x cycle one reference sample may step, in (0, 1]
    limit_margin_rad: float = 0.01
    records_dir: str | None = None
    safety: Mapping[str, Any] | None = None

    def __post_init__(self):
        if self.effort_as not in ("motor_torque", "joint_torque"):
            raise ConfigError(f"backend.effort_as: motor_torque or joint_torque, got {self.effort_as!r}")
        for k in ("control_rate_hz", "point_rate_hz", "server_timeout_s"):
            if not float(getattr(self, k)) > 0:
                raise ConfigError(f"backend.{k}: expected a positive number, got {getattr(self, k)!r}")
        check_step_margin(self.step_margin)
        check_limit_margin(self.limit_margin_rad)


class Ros2Robot:
    """The Robot protocol over ROS 2 (see the module doc); needs rclpy."""

    backend = "ros2"

    def __init__(self, spec: RobotSpec, config: Ros2Config):
        if rclpy is None:
            raise ConfigError(NEED_RCLPY)
        try:
            from control_msgs.action import FollowJointTrajectory  # type: ignore
            from sensor_msgs.msg import JointState  # type: ignore
        except ImportError as exc:
            raise ConfigError(f"{NEED_RCLPY} ({exc})") from None
        from ..sim.mujoco_backend import robot_info

        self.spec, self.cfg = spec, config
        self.joint_names = tuple(config.joint_names or spec.joint_names)
        if len(self.joint_names) != spec.n_joints:
            raise ConfigError(f"backend.joint_names: {len(self.joint_names)} names for {spec.n_joints} joints")
        self.info = robot_info(spec, self.backend, config.control_rate_hz, is_simulation=False)
        self.checks: SafetyChecks | None = None  # injected by the pipeline (attach_checks)
        self.guard = StepGuard(self.info, config.step_margin, config.limit_margin_rad)
        if not rclpy.ok():
            rclpy.init()
        self.node = rclpy.create_node("robident_twin")
        self._samples: list[JointStateSample] = []
        self._recording = False
        self._sub = self.node.create_subscription(JointState, config.joint_states_topic, self._on_state, 1000)
        from rclpy.action import ActionClient  # type: ignore

        self._action = ActionClient(self.node, FollowJointTrajectory,
                                    f"/{config.controller}/follow_joint_trajectory")

    def _on_state(self, msg) -> None:
        self._latest = msg
        if self._recording:
            self._samples.append(JointStateSample(msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec,
                                                  tuple(msg.name), tuple(msg.position), tuple(msg.effort)))

    def _current_q(self) -> np.ndarray:
        t_end = time.monotonic() + self.cfg.server_timeout_s
        self._latest = None
        while self._latest is None:
            if time.monotonic() > t_end:
                raise RecordingError(f"ros2: no message on {self.cfg.joint_states_topic} within "
                                     f"{self.cfg.server_timeout_s:g} s")
            rclpy.spin_once(self.node, timeout_sec=0.05)
        m = self._latest
        s = JointStateSample(0, tuple(m.name), tuple(m.position), tuple(m.effort))
        return _block([s], self.joint_names, "position")[0]

    def attach_checks(self, checks: SafetyChecks) -> None:
        """The design stage's safety checks (settings, simulation requirement, motion check)."""
        self.checks = attach_checks_for(self.spec, checks)

    def move_to(self, q_rad: np.ndarray) -> None:
        raise ConfigError("ros2: move_to is not offered on a real robot; run a trajectory with a passing dry run")

    def _goal(self, reference: JointTrajectory, start_ns: int):
        from control_msgs.action import FollowJointTrajectory  # type: ignore
        from trajectory_msgs.msg import JointTrajectoryPoint  # type: ignore

        goal = FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = list(self.joint_names)
        goal.trajectory.header.stamp.sec, goal.trajectory.header.stamp.nanosec = divmod(start_ns, 1_000_000_000)
        for p in goal_points(reference, self.cfg.point_rate_hz):
            pt = JointTrajectoryPoint()
            pt.positions, pt.velocities, pt.accelerations = list(p.positions), list(p.velocities), list(p.accelerations)
            pt.time_from_start.sec, pt.time_from_start.nanosec = p.time_from_start
            goal.trajectory.points.append(pt)
        return goal

    def run(self, trajectory: JointTrajectory, periods: int = 1, transient_periods: int = 0) -> Recording:
        gate_trajectory(self, trajectory, False, self.cfg.records_dir, self.cfg.safety)
        q0 = self._current_q()
        plan = plan_run(self.info, self.backend, trajectory, q0, np.zeros_like(q0), periods, transient_periods)
        check_planned_motion(self, plan)  # lead-in / lead-out from the measured pose, before anything is sent
        check_commands(self.guard, plan.reference, q0)  # raises GuardError before anything is sent
        if not self._action.wait_for_server(timeout_sec=self.cfg.server_timeout_s):
            raise RecordingError(f"ros2: action server /{self.cfg.controller}/follow_joint_trajectory not available")
        start_ns = self.node.get_clock().now().nanoseconds + int(self.cfg.start_delay_s * 1e9)
        self._samples, self._recording = [], True
        try:
            fut = self._action.send_goal_async(self._goal(plan.reference, start_ns))
            rclpy.spin_until_future_complete(self.node, fut)
            handle = fut.result()
            if handle is None or not handle.accepted:
                raise RecordingError("ros2: the trajectory goal was rejected by the controller")
            res = handle.get_result_async()
            rclpy.spin_until_future_complete(self.node, res)
            code = res.result().result.error_code
            if code != 0:
                raise RecordingError(f"ros2: FollowJointTrajectory failed with error_code {code} "
                                     f"({res.result().result.error_string})")
        finally:
            self._recording = False
        rec, _ = recording_from_joint_states(self._samples, self.joint_names, plan, self.info.control_rate_hz,
                                             start_ns, self.cfg.effort_as, self.cfg.max_gap_s,
                                             {"robot": self.spec.name, "backend": self.backend,
                                              "controller": self.cfg.controller})
        return rec

    def close(self) -> None:
        self.node.destroy_node()


def make_ros2_robot(spec: RobotSpec, backend_cfg) -> Ros2Robot:
    """The ROS 2 backend from its config group (:class:`hal.config.Ros2Backend`, or a mapping validated as one)."""
    from ..config import Ros2Backend, coerce

    b = coerce(Ros2Backend, backend_cfg, "backend")
    return Ros2Robot(spec, Ros2Config(**{k: getattr(b, k) for k in Ros2Config.__dataclass_fields__
                                         if getattr(b, k) is not None}))
