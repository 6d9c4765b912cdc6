"""Kinematic limit checks of a Fourier design (position, velocity, acceleration) on a time grid.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robident_twin.design.fourier import FourierTrajectory
from robident_twin.errors import ConfigError, TrajectoryError
from robident_twin.model.robot import RobotSpec

LIMIT_KINDS = ("position", "velocity", "acceleration")
_UNITS = {"position": "rad", "velocity": "rad/s", "acceleration": "rad/s^2"}


# --------------------------------------------------------------------------- limits


@dataclass(frozen=True)
class LimitViolation:
    """The worst violation of one limit of one joint on the check grid.

    kind: 'position', 'velocity' or 'acceleration'; value and limit in rad, rad/s or rad/s^2
    (for position the violated bound, lower or upper). ``margin`` is the fraction of the
    robot's limits that was checked (1.0 = the full limits).
    """

    kind: str
    joint: str
    time_s: float
    value: float
    limit: float
    margin: float

    @property
    def unit(self) -> str:
        return _UNITS[self.kind]

    @property
    def excess(self) -> float:
        """How far beyond the limit the value is (positive)."""
        if self.kind == "position":
            return abs(self.value - self.limit)
        return abs(self.value) - self.limit

    def describe(self) -> str:
        lim = f"{self.margin:g} x limit" if self.margin != 1.0 else "limit"
        if self.kind == "position":
            side = "above upper" if self.value > self.limit else "below lower"
            return (f"joint {self.joint} position {self.value:.6g} rad is {side} {lim} "
                    f"{self.limit:.6g} rad at t = {self.time_s:.4f} s")
        return (f"joint {self.joint} {self.kind} |{self.value:.6g}| {self.unit} exceeds {lim} "
                f"{self.limit:.6g} {self.unit} at t = {self.time_s:.4f} s")


def _check_margin(margin: float) -> float:
    if not (isinstance(margin, (int, float)) and 0 < margin <= 1):
        raise ConfigError(f"margin: expected a fraction of the limits in (0, 1], got {margin!r}")
    return float(margin)


def scaled_limits(spec: RobotSpec, margin: float = 1.0) -> dict[str, np.ndarray]:
    """Limits shrunk by ``margin``: position range about its centre, |dq| and |ddq| bounds."""
    margin = _check_margin(margin)
    centre = 0.5 * (spec.q_max_rad + spec.q_min_rad)
    half = 0.5 * (spec.q_max_rad - spec.q_min_rad)
    return {"q_lo_rad": centre - margin * half, "q_hi_rad": centre + margin * half,
            "dq_max_rad_s": margin * spec.dq_max_rad_s, "ddq_max_rad_s2": margin * spec.ddq_max_rad_s2}


def default_check_points(traj: FourierTrajectory) -> int:
    """Default check grid: 20 points per period per harmonic, at least 2000."""
    return max(2000, 20 * traj.n_harmonics)


def _check_joints(traj: FourierTrajectory, spec: RobotSpec) -> None:
    if traj.n_joints != spec.n_joints:
        raise TrajectoryError(f"trajectory has {traj.n_joints} joints but robot '{spec.name}' has "
                              f"{spec.n_joints}")


def check_limits(traj: FourierTrajectory, spec: RobotSpec, n_grid: int | None = None,
                 margin: float = 1.0) -> list[LimitViolation]:
    """Worst violation per joint and limit kind on ``n_grid`` points over one period.

    Returns an empty list when the trajectory is within ``margin`` x the limits everywhere on
    the grid. ``n_grid`` defaults to :func:`default_check_points`.
    """
    _check_joints(traj, spec)
    lim = scaled_limits(spec, margin)
    n_grid = default_check_points(traj) if n_grid is None else int(n_grid)
    if n_grid < 1:
        raise ConfigError(f"n_grid: expected a positive number of grid points, got {n_grid}")
    t = traj.time_grid(n_grid)
    q, dq, ddq = traj.evaluate(t)
    out: list[LimitViolation] = []
    for j, name in enumerate(spec.joint_names):
        hi = np.argmax(q[:, j])
        if q[hi, j] > lim["q_hi_rad"][j]:
            out.append(LimitViolation("position", name, float(t[hi]), float(q[hi, j]),
                                      float(lim["q_hi_rad"][j]), margin))
        lo = np.argmin(q[:, j])
        if q[lo, j] < lim["q_lo_rad"][j]:
            out.append(LimitViolation("position", name, float(t[lo]), float(q[lo, j]),
                                      float(lim["q_lo_rad"][j]), margin))
        for kind, x, bound in (("velocity", dq, lim["dq_max_rad_s"]),
                               ("acceleration", ddq, lim["ddq_max_rad_s2"])):
            k = np.argmax(np.abs(x[:, j]))
            if abs(x[k, j]) > bound[j]:
                out.append(LimitViolation(kind, name, float(t[k]), float(x[k, j]), float(bound[j]),
                                          margin))
    return out


def assert_within_limits(traj: FourierTrajectory, spec: RobotSpec, n_grid: int | None = None,
                         margin: float = 1.0, name: str = "trajectory") -> None:
    """Raise :class:`TrajectoryError` listing every violated limit (joint, kind, time, value)."""
    violations = check_limits(traj, spec, n_grid=n_grid, margin=margin)
    if violations:
        lines = "\n  ".join(v.describe() for v in violations)
        raise TrajectoryError(f"{name} violates the limits of robot '{spec.name}' "
                              f"({len(violations)} violation(s)):\n  {lines}")
