"""Plausibility of a recording against the robot it is said to come from, checked before estimation.

A file that parses is not yet a good recording: positions in degrees labelled rad, torques in
mNm labelled Nm, or a sample rate that disagrees with the time column all load and would give
an ordinary-looking (and wrong) identification. :func:`check_recording` refuses them with a
:class:`~robident_twin.errors.RecordingError` naming the recording, the channel, the joint and
the sample, what was expected and, where the numbers fit a known slip, what it looks like:

- every value finite, time strictly increasing;
- the stated sample rate equal to the time column's (median step) to ``RATE_RTOL``;
- measured and commanded positions within the joint limits plus ``POSITION_TOL_RAD``
  ("looks like degrees" when the values in radians would fit);
- motor and joint torques within ``TORQUE_FACTOR`` x the torque limits ("looks like mNm
  (x1000)" when a thousandth would fit).

Positions and torques are compared with the robot file's limits, not with its (true) dynamic
parameters: the check needs no model and no ground truth.
"""
from __future__ import annotations

import numpy as np

from robident_twin.errors import RecordingError
from robident_twin.model.robot import RobotSpec

#: Positions may exceed the limits by this much (encoder noise, soft-limit overshoot), rad.
POSITION_TOL_RAD = 0.02
#: Torques may exceed the torque limits by this factor (peak vs rated torque), -.
TORQUE_FACTOR = 2.0
#: Largest relative difference between the stated sample rate and the time column's.
RATE_RTOL = 1e-3


def _source(rec, what: str) -> str:
    src = rec.metadata.get("source")
    return f"{what} {src}" if src else what


def _check_finite(rec, spec: RobotSpec, where: str) -> None:
    for name, a in rec.channels().items():
        if name == "valid":
            continue
        bad = ~np.isfinite(a)
        if bad.any():
            idx = np.argwhere(bad)[0]
            joint = f", joint {spec.joint_names[int(idx[1])]}" if a.ndim == 2 and idx[1] < spec.n_joints else ""
            raise RecordingError(f"{where}: channel {name}{joint}, sample {int(idx[0])}: value {a[tuple(idx)]} is "
                                 "not finite; expected finite numbers")


def _check_time(rec, where: str) -> None:
    t = rec.t_s
    d = np.diff(t)
    if np.any(d <= 0):
        k = int(np.argmax(d <= 0)) + 1
        raise RecordingError(f"{where}: channel t_s, sample {k}: time {t[k]!r} s follows {t[k - 1]!r} s; expected "
                             "strictly increasing time")
    if t.size > 1:
        from_time = 1.0 / float(np.median(d))
        rate = float(rec.sample_rate_hz)
        if not np.isfinite(rate) or abs(rate - from_time) > RATE_RTOL * from_time:
            raise RecordingError(f"{where}: sample_rate_hz is {rate:.9g} Hz but the time column t_s is sampled at "
                                 f"{from_time:.9g} Hz (median step {1.0 / from_time:.6g} s); expected them to agree "
                                 f"to {RATE_RTOL:g} (relative)")


def _check_positions(name: str, q: np.ndarray, spec: RobotSpec, where: str) -> None:
    lo, hi = spec.q_min_rad - POSITION_TOL_RAD, spec.q_max_rad + POSITION_TOL_RAD
    out = (q < lo) | (q > hi)
    if not out.any():
        return
    excess = np.where(q < lo, lo - q, np.where(q > hi, q - hi, 0.0))
    k, j = np.unravel_index(int(np.argmax(excess)), q.shape)
    n_out = int(out[:, j].sum())
    hint = ""
    qj = np.radians(q[:, j])
    if np.all((qj >= lo[j]) & (qj <= hi[j])):
        hint = " - looks like degrees (the values in radians would lie within the limits)"
    raise RecordingError(
        f"{where}: channel {name}, joint {spec.joint_names[j]}, sample {k}: {q[k, j]:.6g} rad is outside the "
        f"joint limits [{spec.q_min_rad[j]:.6g}, {spec.q_max_rad[j]:.6g}] rad of {spec.name} (tolerance "
        f"{POSITION_TOL_RAD:g} rad; {n_out} sample(s) of this joint outside){hint}; expected positions in rad "
        "within the limits")


def _check_torques(name: str, tau: np.ndarray, spec: RobotSpec, where: str) -> None:
    bound = TORQUE_FACTOR * spec.tau_max_Nm
    ratio = np.abs(tau) / bound
    if not np.any(ratio > 1.0):
        return
    k, j = np.unravel_index(int(np.argmax(ratio)), tau.shape)
    hint = ""
    if np.all(np.abs(tau[:, j]) / 1000.0 <= bound[j]):
        hint = " - looks like mNm or a factor 1000 (a thousandth would lie within the limit)"
    raise RecordingError(
        f"{where}: channel {name}, joint {spec.joint_names[j]}, sample {k}: |{tau[k, j]:.6g}| Nm exceeds "
        f"{TORQUE_FACTOR:g} x the torque limit {spec.tau_max_Nm[j]:.6g} Nm of {spec.name}{hint}; expected torques "
        f"in Nm within {TORQUE_FACTOR:g} x the limits")


def check_recording(rec, spec: RobotSpec, what: str = "recording") -> None:
    """Refuse a recording that cannot come from ``spec`` (see the module docstring)."""
    where = _source(rec, what)
    if rec.n_joints != spec.n_joints:
        raise RecordingError(f"{where}: {rec.n_joints} joints; expected the {spec.n_joints} joints of {spec.name}")
    _check_finite(rec, spec, where)
    _check_time(rec, where)
    _check_positions("q_rad", rec.q_rad, spec, where)
    if rec.metadata.get("q_cmd_recorded", True):
        _check_positions("q_cmd_rad", rec.q_cmd_rad, spec, where)
    _check_torques("tau_motor_Nm", rec.tau_motor_Nm, spec, where)
    if rec.tau_joint_Nm is not None:
        _check_torques("tau_joint_Nm", rec.tau_joint_Nm, spec, where)
