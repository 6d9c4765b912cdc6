"""The hardware abstraction layer's protocol and data types.

Every backend (MuJoCo twin, PyBullet twin, real controllers, recorded files)
implements :class:`Robot`: it is told a reference trajectory and returns a
:class:`Recording`. Nothing downstream of the HAL knows which backend ran.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from robident_twin.errors import RecordingError, TrajectoryError


@dataclass(frozen=True)
class RobotInfo:
    """What a backend tells about the robot behind it."""

    name: str
    backend: str
    joint_names: tuple[str, ...]
    control_rate_hz: float
    is_simulation: bool
    q_min_rad: np.ndarray
    q_max_rad: np.ndarray
    dq_max_rad_s: np.ndarray
    ddq_max_rad_s2: np.ndarray
    tau_max_Nm: np.ndarray
    #: True: every ``make_robot`` of this backend gives an independent copy of the robot (a
    #: simulator), so two experiments may run at once, each on its own copy; False: one robot
    #: (a real arm, even an emulated one behind its UDP port), one motion at a time
    replicable: bool = False

    @property
    def n_joints(self) -> int:
        return len(self.joint_names)


@dataclass(frozen=True)
class JointTrajectory:
    """A joint reference sampled at the controller rate (samples x joints).

    ``period_s`` is set for a periodic excitation: the samples then hold exactly
    one period and a backend may repeat them.
    """

    t_s: np.ndarray
    q_rad: np.ndarray
    dq_rad_s: np.ndarray
    ddq_rad_s2: np.ndarray
    period_s: float | None = None

    def __post_init__(self):
        n = self.q_rad.shape
        if self.t_s.ndim != 1 or len(n) != 2 or n[0] != self.t_s.shape[0]:
            raise TrajectoryError(f"trajectory: expected t (N,) and q (N, joints), got {self.t_s.shape} and {n}")
        for name in ("dq_rad_s", "ddq_rad_s2"):
            if getattr(self, name).shape != n:
                raise TrajectoryError(f"trajectory: {name} has shape {getattr(self, name).shape}, expected {n}")
        for name in ("t_s", "q_rad", "dq_rad_s", "ddq_rad_s2"):
            a = getattr(self, name)
            if not np.all(np.isfinite(a)):
                row = int(np.argwhere(~np.isfinite(a))[0][0])
                raise TrajectoryError(f"trajectory: {name} is not finite at sample {row}")

    @property
    def n_samples(self) -> int:
        return self.t_s.shape[0]

    @property
    def rate_hz(self) -> float:
        return 1.0 / float(self.t_s[1] - self.t_s[0])


def check_reference_limits(traj: JointTrajectory, info: RobotInfo, what: str = "trajectory",
                           rel_tol: float = 1e-9) -> None:
    """Refuse a reference that leaves the robot's position, velocity or acceleration limits.

    The error names the joint, the kind of limit, the time and the value.
    """
    checks = (
        ("position", traj.q_rad, info.q_min_rad, info.q_max_rad, "rad"),
        ("velocity", traj.dq_rad_s, -info.dq_max_rad_s, info.dq_max_rad_s, "rad/s"),
        ("acceleration", traj.ddq_rad_s2, -info.ddq_max_rad_s2, info.ddq_max_rad_s2, "rad/s^2"),
    )
    for kind, x, lo, hi, unit in checks:
        span = np.maximum(np.abs(hi - lo), 1e-12)
        bad = (x < lo - rel_tol * span) | (x > hi + rel_tol * span)
        if bad.any():
            k, j = (int(v) for v in np.argwhere(bad)[0])
            excess = np.where(x < lo, lo - x, x - hi)
            worst_k, worst_j = np.unravel_index(int(np.argmax(excess)), x.shape)
            raise TrajectoryError(
                f"{what} exceeds the {kind} limit of joint {info.joint_names[j]} at t = "
                f"{traj.t_s[k]:.3f} s: {x[k, j]:.6g} {unit} outside [{lo[j]:.6g}, {hi[j]:.6g}] "
                f"(worst: joint {info.joint_names[worst_j]} at t = {traj.t_s[worst_k]:.3f} s, "
                f"{x[worst_k, worst_j]:.6g} {unit})")


@dataclass
class Recording:
    """Signals recorded by a backend, samples x joints, SI units.

    ``tau_joint_Nm`` is None where the robot has no joint-torque sensors.
    ``period_samples`` and ``n_periods`` are set when a periodic excitation was
    recorded over whole periods (the first sample is the start of a period).
    ``valid`` (optional, bool per sample) marks samples that were received; False marks a
    gap (a lost packet): its values are finite fill-ins (interpolated) that processing
    must ignore. Values stay finite everywhere (NaN is refused). A recording whose
    ``metadata["motor_torque_available"]`` is False (e.g. FRI, which has no motor currents)
    carries the joint-torque sensor in ``tau_motor_Nm`` as a placeholder and refuses the
    motor-torque measurement models.
    """

    t_s: np.ndarray
    q_rad: np.ndarray
    tau_motor_Nm: np.ndarray
    tau_joint_Nm: np.ndarray | None
    q_cmd_rad: np.ndarray
    sample_rate_hz: float
    period_samples: int | None = None
    n_periods: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    valid: np.ndarray | None = None

    def __post_init__(self):
        self.validate()

    def channels(self) -> dict[str, np.ndarray]:
        out = {"t_s": self.t_s, "q_rad": self.q_rad, "tau_motor_Nm": self.tau_motor_Nm,
               "q_cmd_rad": self.q_cmd_rad}
        if self.tau_joint_Nm is not None:
            out["tau_joint_Nm"] = self.tau_joint_Nm
        if self.valid is not None:
            out["valid"] = self.valid
        return out

    def validate(self) -> None:
        """Raise RecordingError naming the channel, sample and joint of any defect."""
        src = self.metadata.get("source", "recording")
        N = self.t_s.shape[0]
        for name, a in self.channels().items():
            if a.shape[0] != N:
                raise RecordingError(f"{src}: channel {name} has {a.shape[0]} samples, t_s has {N}")
            bad = ~np.isfinite(a)
            if bad.any():
                idx = np.argwhere(bad)[0]
                joint = f", joint {int(idx[1]) + 1}" if a.ndim == 2 else ""
                raise RecordingError(f"{src}: channel {name} has a non-finite value ({a[tuple(idx)]}) "
                                     f"at sample {int(idx[0])} (t = {self.t_s[int(idx[0])] if np.isfinite(self.t_s[int(idx[0])]) else 'nan'}){joint}")
        if self.valid is not None and (self.valid.shape != (N,) or self.valid.dtype != bool):
            raise RecordingError(f"{src}: field valid must be a bool array of {N} samples, got "
                                 f"{self.valid.dtype} {self.valid.shape}")
        if N > 1 and np.any(np.diff(self.t_s) <= 0):
            k = int(np.argmax(np.diff(self.t_s) <= 0))
            raise RecordingError(f"{src}: time is not strictly increasing at sample {k + 1}")
        if self.period_samples is not None and self.n_periods is not None:
            if self.period_samples * self.n_periods != N:
                raise RecordingError(f"{src}: {N} samples is not {self.n_periods} periods of "
                                     f"{self.period_samples} samples")

    @property
    def n_joints(self) -> int:
        return self.q_rad.shape[1]

    def torque(self, measurement: str) -> np.ndarray:
        """The torque channels an identification model uses (samples x channels):
        ``motor_torque``, ``joint_torque``, ``both`` (joint then motor channels) or
        ``difference`` (motor minus joint torque, for independent drives)."""
        if measurement in ("motor_torque", "both", "difference") and \
                self.metadata.get("motor_torque_available", True) is False:
            raise RecordingError(f"{self.metadata.get('source', 'recording')}: no motor-torque channel "
                                 f"({self.metadata.get('tau_motor_note', 'the backend records none')}), so "
                                 f"model.measurement={measurement} is impossible; use joint_torque")
        if measurement == "motor_torque":
            return self.tau_motor_Nm
        if measurement in ("joint_torque", "both", "difference"):
            if self.tau_joint_Nm is None:
                raise RecordingError(f"{self.metadata.get('source', 'recording')}: no joint-torque "
                                     f"channel, so model.measurement={measurement} is impossible")
            if measurement == "joint_torque":
                return self.tau_joint_Nm
            if measurement == "both":
                return np.hstack([self.tau_joint_Nm, self.tau_motor_Nm])
            return self.tau_motor_Nm - self.tau_joint_Nm
        raise RecordingError(f"unknown measurement '{measurement}'")


@runtime_checkable
class Robot(Protocol):
    """A robot behind the HAL: a simulated twin or a real controller."""

    info: RobotInfo

    def move_to(self, q_rad: np.ndarray) -> None:
        """Move smoothly from the current state to rest at q_rad."""

    def run(self, trajectory: JointTrajectory, periods: int = 1, transient_periods: int = 0) -> Recording:
        """Approach the trajectory's start smoothly, play it and record.

        Periodic references are played ``transient_periods + periods`` times and
        the last ``periods`` are recorded.
        """

    def close(self) -> None:
        """Release the backend."""
