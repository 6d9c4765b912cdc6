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
    def inside(q, dq, ddq) -> bool:
        return bool(np.all(np.abs(dq) <= np.maximum(scale * info.dq_max_rad_s, np.abs(dq1) + 1e-12))
                    and np.all(np.abs(ddq) <= np.maximum(scale * info.ddq_max_rad_s2, np.abs(ddq1) + 1e-12))
                    and np.all(q >= info.q_min_rad) and np.all(q <= info.q_max_rad))

    while T <= max_duration_s:
        n = int(np.ceil(T / dt))
        T = n * dt
        t = np.arange(n) * dt
        # every 16th sample first: a violation there is one of the full check (most durations fail)
        if inside(*quintic(q0, dq0, ddq0, q1, dq1, ddq1, T, t[::16])):
            q, dq, ddq = quintic(q0, dq0, ddq0, q1, dq1, ddq1, T, t)
            if inside(q, dq, ddq):
                return JointTrajectory(t, q, dq, ddq)
        T *= 1.05
    raise TrajectoryError(f"no smooth approach within {max_duration_s} s reaches the trajectory start "
                          f"inside the limits (start {np.round(q1, 4).tolist()} rad)")


def _fourier_eval(q_period: np.ndarray, period_s: float, tau_s: np.ndarray, rel_tol: float = 1e-12):
    """Trigonometric interpolation of one sampled period (exact for a band-limited
    trajectory such as a finite Fourier series): q, dq, ddq at times ``tau_s``."""
    N = q_period.shape[0]
    Q = np.fft.rfft(q_period, axis=0) / N
    mag = np.abs(Q).max(axis=1)
    keep = np.flatnonzero(mag > rel_tol * max(mag.max(), 1e-300))
    keep = keep[keep < (N + 1) // 2] if N % 2 == 0 else keep  # drop the Nyquist line
    k = keep.astype(float)
    w = 2 * np.pi * k / period_s
    c = np.where(k == 0, 1.0, 2.0)[:, None] * Q[keep]  # (K, joints), one-sided amplitudes
    E = np.exp(1j * np.outer(tau_s, w))  # (M, K)
    q = np.real(E @ c)
    dq = np.real((E * (1j * w)) @ c)
    ddq = np.real((E * (-(w ** 2))) @ c)
    return q, dq, ddq


def _time_warp(info: RobotInfo, trajectory: JointTrajectory, entering: bool, max_duration_s: float):
    """The periodic ``trajectory`` played along its own path with a smooth time warp phi(t):
    entering (phi' from 0 to 1, phi from -Tw/2 to the start, samples t = 0 .. Tw - dt) or
    leaving (phi' from 1 to 0 after the end, samples t = dt .. Tw, phi(dt) = 0 the start of the
    next period, so no sample is skipped). phi'' is zero at both
    ends; the shortest warp on a x1.5 grid inside the limits. Returns (q, dq, ddq)."""
    dt = 1.0 / info.control_rate_hz
    P = float(trajectory.period_s)
    Tw = max(1.0, 0.1 * P)
    while Tw <= max_duration_s:
        n = int(np.ceil(Tw / dt))
        Tw = n * dt
        a = 0.5 * Tw  # trajectory time covered by the warp (mean warp speed 1/2)
        if entering:
            t = np.arange(n) * dt
            ends = ([-a], [0.0], [0.0], [0.0], [1.0], [0.0])
        else:
            t = np.arange(1, n + 1) * dt  # the last period's final sample is at t = 0 (phi = -dt)
            ends = ([-dt], [1.0], [0.0], [a - dt], [0.0], [0.0])
        phi, dphi, ddphi = (x[:, 0] for x in quintic(*ends, Tw, t))
        q, dqt, ddqt = _fourier_eval(trajectory.q_rad, P, phi)
        dq = dqt * dphi[:, None]
        ddq = ddqt * dphi[:, None] ** 2 + dqt * ddphi[:, None]
        if (np.all(np.abs(dq) <= info.dq_max_rad_s) and np.all(np.abs(ddq) <= info.ddq_max_rad_s2)
                and np.all(q >= info.q_min_rad) and np.all(q <= info.q_max_rad) and np.all(dphi >= -1e-12)):
            return q, dq, ddq
        Tw *= 1.5
    what = "lead-in enters" if entering else "lead-out stops"
    raise TrajectoryError(f"no smooth {what} the periodic trajectory within {max_duration_s} s "
                          "inside the velocity and acceleration limits")


def _starts_at_rest(trajectory: JointTrajectory) -> bool:
    """A periodic trajectory whose period starts (and so ends) at rest, e.g. a process motion of
    rest-to-rest segments: it is entered and left with a plain approach, not a time warp (whose
    trigonometric interpolation rings on a motion that is not band-limited)."""
    return bool(np.all(trajectory.dq_rad_s[0] == 0.0) and np.all(trajectory.ddq_rad_s2[0] == 0.0))


def lead_in(info: RobotInfo, trajectory: JointTrajectory, q0, dq0, max_duration_s: float = 120.0) -> JointTrajectory:
    """Reference from the current state to the start of ``trajectory``, ending exactly on it.

    For a periodic trajectory: a rest-to-rest quintic (which never leaves the box between
    its end points) to a point the trajectory passed earlier, then the trajectory itself
    entered with a smooth time warp phi(t) (phi' from 0 to 1, phi'' zero at both ends),
    q(t) = q_traj(phi(t)): it stays on the trajectory's own path, so inside its position
    limits, and matches position, velocity and acceleration at the start. This succeeds
    where a single quintic to a moving start would overshoot a position limit.
    Non-periodic trajectories get the single quintic of :func:`approach`."""
    q0 = np.asarray(q0, dtype=float)
    dq0 = np.asarray(dq0, dtype=float)
    z = np.zeros_like(q0)
    if trajectory.period_s is None or _starts_at_rest(trajectory):  # (a process motion: rest to rest)
        return approach(info, q0, dq0, z, trajectory.q_rad[0], trajectory.dq_rad_s[0], trajectory.ddq_rad_s2[0],
                        max_duration_s=max_duration_s)
    q, dq, ddq = _time_warp(info, trajectory, True, max_duration_s)
    first = approach(info, q0, dq0, z, q[0], z, z, max_duration_s=max_duration_s)
    qa = np.vstack([first.q_rad, q])
    return JointTrajectory(np.arange(qa.shape[0]) / info.control_rate_hz, qa, np.vstack([first.dq_rad_s, dq]),
                           np.vstack([first.ddq_rad_s2, ddq]))


def lead_out(info: RobotInfo, trajectory: JointTrajectory, max_duration_s: float = 120.0) -> JointTrajectory | None:
    """Reference that brings the robot to rest after the last period of a periodic
    trajectory, along the trajectory's own path (time warp with phi' from 1 to 0), so the
    next run starts from rest. None for non-periodic trajectories (they end as they end)."""
    if trajectory.period_s is None or _starts_at_rest(trajectory):  # it ends where it starts: at rest
        return None
    q, dq, ddq = _time_warp(info, trajectory, False, max_duration_s)
    return JointTrajectory(np.arange(q.shape[0]) / info.control_rate_hz, q, dq, ddq)
