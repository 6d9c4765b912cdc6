"""A joint trajectory as a KRL program for a KUKA KRC4 (``.src`` + ``.dat``), positions in degrees.

The ``.dat`` holds the points, decimated to ``point_rate_hz``:
``DECL E6AXIS XP[n]`` (joint positions, degrees; axes 1-6 -> A1-A6, axes 7-12 -> E1-E6, the
rest 0), ``DECL E6AXIS VP[n]`` (joint velocities, deg/s) and ``DECL REAL TP[n]`` (time of each
point from the start, s). For a periodic trajectory the last point closes the period (the start
point at t = period). The ``.src`` moves to ``XP[1]`` with a PTP at ``approach_vel_percent`` and
then plays the points as one axis spline (``PTP_SPLINE`` of ``SPTP`` segments) timed with
``TIME_BLOCK START / PART / END`` (each segment's duration as its PART, END the total time),
``periods`` times in a ``FOR`` loop. The syntax follows KUKA's KSS 8 spline documentation; the
program has not been run on a controller here - check it in WorkVisual / OfficeLite first.

Written values have 6 decimals (1e-6 deg, 1 us). Both files are written atomically.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..protocol import JointTrajectory
from .common import FileFormatError, write_text_atomic

AXES = [f"A{i}" for i in range(1, 7)] + [f"E{i}" for i in range(1, 7)]


def _e6axis(v_deg: np.ndarray) -> str:
    vals = np.zeros(12)
    vals[: v_deg.size] = v_deg
    return "{" + ",".join(f"{a} {x:.6f}" for a, x in zip(AXES, vals)) + "}"


def krl_points(traj: JointTrajectory, point_rate_hz: float = 20.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t_s, q_deg, dq_deg_s) of the points written: every k-th sample at about point_rate_hz,
    closed by the start point at t = period for a periodic trajectory."""
    rate = traj.rate_hz
    step = max(1, int(round(rate / float(point_rate_hz))))
    idx = np.arange(0, traj.n_samples, step)
    t = traj.t_s[idx] - traj.t_s[0]
    q, dq = np.degrees(traj.q_rad[idx]), np.degrees(traj.dq_rad_s[idx])
    if traj.period_s is not None and t[-1] < traj.period_s - 1e-9:
        t = np.append(t, traj.period_s)
        q, dq = np.vstack([q, q[:1]]), np.vstack([dq, dq[:1]])
    return t, q, dq


def write_krl(traj: JointTrajectory, path: str | Path, point_rate_hz: float = 20.0, periods: int = 1,
              approach_vel_percent: float = 10.0, name: str | None = None) -> Path:
    """Write ``path`` (.src) and its ``.dat``; returns the .src path."""
    path = Path(path).with_suffix(".src")
    n = traj.q_rad.shape[1]
    if n > 12:
        raise FileFormatError(f"{path}: {n} joints; an E6AXIS holds at most 12 (A1-A6, E1-E6)")
    name = name or path.stem
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,23}", name):
        raise FileFormatError(f"{path}: '{name}' is not a KRL module name (letters, digits, _; at most 24 characters)")
    if not 0 < approach_vel_percent <= 100 or periods < 1:
        raise FileFormatError(f"{path}: approach_vel_percent must be in (0, 100] and periods >= 1")
    t, q, dq = krl_points(traj, point_rate_hz)
    m = t.size
    total = float(t[-1] - t[0])
    dat = [f"&ACCESS RVP\nDEFDAT {name} PUBLIC",
           f"; robident-twin excitation: {m} points, {total:.6f} s, {n} joints; positions deg, velocities deg/s",
           f"DECL INT NP={m}", f"DECL E6AXIS XP[{m}]", f"DECL E6AXIS VP[{m}]", f"DECL REAL TP[{m}]"]
    for k in range(m):
        dat += [f"XP[{k + 1}]={_e6axis(q[k])}", f"VP[{k + 1}]={_e6axis(dq[k])}", f"TP[{k + 1}]={t[k]:.6f}"]
    dat.append("ENDDAT")
    src = [f"&ACCESS RVP\nDEF {name}()",
           f"  ; plays the robident-twin excitation: {m} points over {total:.6f} s, {periods} period(s)",
           "  DECL INT I", "  BAS(#INITMOV, 0)", f"  BAS(#VEL_PTP, {approach_vel_percent:g})",
           "  PTP XP[1]  ; approach the start at reduced speed", f"  FOR I=1 TO {periods}", "    PTP_SPLINE",
           "      SPTP XP[1]", "      TIME_BLOCK START"]
    for k in range(1, m):  # each segment's share of the total time follows it
        src += [f"      SPTP XP[{k + 1}]", f"      TIME_BLOCK PART = {t[k] - t[k - 1]:.6f}"]
    src += [f"      TIME_BLOCK END = {total:.6f}", "    ENDSPLINE", "  ENDFOR", "END"]
    write_text_atomic(path.with_suffix(".dat"), "\n".join(dat) + "\n")
    write_text_atomic(path, "\n".join(src) + "\n")
    return path


_POINT_RE = re.compile(r"^(XP|VP)\[(\d+)\]=\{(.*)\}$")
_TIME_RE = re.compile(r"^TP\[(\d+)\]=([-+0-9.eE]+)$")


def read_krl_points(path: str | Path, n_joints: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t_s, q_rad, dq_rad_s) of the points of a ``.dat`` written by :func:`write_krl`."""
    path = Path(path).with_suffix(".dat")
    if not path.is_file():
        raise FileFormatError(f"{path}: file not found")
    pts: dict[str, dict[int, np.ndarray]] = {"XP": {}, "VP": {}}
    times: dict[int, float] = {}
    for i, line in enumerate(path.read_text().splitlines(), 1):
        s = line.strip()
        if m := _POINT_RE.match(s):
            vals = {}
            for item in m.group(3).split(","):
                ax, _, v = item.strip().partition(" ")
                try:
                    vals[ax] = float(v)
                except ValueError:
                    raise FileFormatError(f"{path}: line {i}: axis {ax}: '{v}' is not a number") from None
            pts[m.group(1)][int(m.group(2))] = np.array([vals.get(a, 0.0) for a in AXES[:n_joints]])
        elif m := _TIME_RE.match(s):
            times[int(m.group(1))] = float(m.group(2))
    m = len(times)
    for key, d in (("XP", pts["XP"]), ("VP", pts["VP"])):
        missing = sorted(set(range(1, m + 1)) - set(d))
        if missing or m < 2:
            raise FileFormatError(f"{path}: point {key}[{missing[0] if missing else 1}] missing")
    idx = range(1, m + 1)
    return (np.array([times[k] for k in idx]), np.radians(np.array([pts["XP"][k] for k in idx])),
            np.radians(np.array([pts["VP"][k] for k in idx])))
