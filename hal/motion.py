"""Motions every backend needs: a smooth approach from the current state to a trajectory's start."""
from __future__ import annotations

import numpy as np

from robident_twin.errors import TrajectoryError

from .protocol import JointTrajectory, RobotInfo


def quintic(p0, v0, a0, p1, v1, a1, T: float, t: np.ndarray):
    """Quintic polynomial per joint meeting position, velocity and acceleration at both ends.

    Returns (q, dq, ddq), each (len(t), joints).
    """
    p0, v0, a0, p1, v1, a1 = (np.asarray(x, dtype=float) for x in (p0, v0, a0, p1, v1, a1))
    c0, c1, c2 = p0, v0, a0 / 2
    d = p1 - (c0 + c1 * T + c2 * T**2)
    e = v1 - (c1 + 2 * c2 * T)
    f = a1 - 2 * c2
    A = np.array([[T**3, T**4, T**5], [3 * T**2, 4 * T**3, 5 * T**4], [6 * T, 12 * T**2, 20 * T**3]])
    c3, c4, c5 = np.linalg.solve(A, np.vstack([d, e, f]))
    tt = t[:, None]
    q = c0 + c1 * tt + c2 * tt**2 + c3 * tt**3 + c4 * tt**4 + c5 * tt**5
    dq = c1 + 2 * c2 * tt + 3 * c3 * tt**2 + 4 * c4 * tt**3 + 5 * c5 * tt**4
    ddq = 2 * c2 + 6 * c3 * tt + 12 * c4 * tt**2 + 20 * c5 * tt**3
    return q, dq, ddq


def approach(info: RobotInfo, q0, dq0, ddq0, q1, dq1, ddq1, scale: float = 0.8,
             max_duration_s: float = 120.0) -> JointTrajectory:
    """The shortest quintic (on a 5 % grid of durations) from state 0 to state 1 that
    stays inside ``scale`` times the velocity and acceleration limits (the full limits
    if the target state itself needs them) and inside the position limits. Sampled
    at the controller rate, first sample at state 0; the last sample is one control
    period before state 1."""
    try:
        return _approach(info, q0, dq0, ddq0, q1, dq1, ddq1, scale, max_duration_s)
    except TrajectoryError:
        if scale >= 1.0:
            raise
        return _approach(info, q0, dq0, ddq0, q1, dq1, ddq1, 1.0, max_duration_s)


def _approach(info, q0, dq0, ddq0, q1, dq1, ddq1, scale, max_duration_s) -> JointTrajectory:
    dt = 1.0 / info.control_rate_hz
    dist = np.abs(np.asarray(q1) - np.asarray(q0))
    T = max(0.5, float(np.max(1.9 * dist / (scale * info.dq_max_rad_s))),
            float(np.max(np.sqrt(6 * dist / (scale * info.ddq_max_rad_s2)))))
    while T <= max_duration_s:
        n = int(np.ceil(T / dt))
        T = n * dt
        t = np.arange(n) * dt
        q, dq, ddq = quintic(q0, dq0, ddq0, q1, dq1, ddq1, T, t)
        ok = (np.all(np.abs(dq) <= np.maximum(scale * info.dq_max_rad_s, np.abs(dq1) + 1e-12))
              and np.all(np.abs(ddq) <= np.maximum(scale * info.ddq_max_rad_s2, np.abs(ddq1) + 1e-12))
              and np.all(q >= info.q_min_rad) and np.all(q <= info.q_max_rad))
        if ok:
            return JointTrajectory(t, q, dq, ddq)
        T *= 1.05
    raise TrajectoryError(f"no smooth approach within {max_duration_s} s reaches the trajectory start "
                          f"inside the limits (start {np.round(q1, 4).tolist()} rad)")
