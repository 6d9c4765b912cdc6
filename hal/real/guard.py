"""The command guard: the one safety invariant every real backend's wire path goes through.

Invariant (no config can switch it off): every position command put on the wire

- is finite and lies inside the joint limits minus ``limit_margin_rad``, and
- differs from the position the robot last held or was last sent, joint by joint, by at most
  the step of ONE command cycle: ``dq_max x cycle time x step_margin`` with ``step_margin`` in
  (0, 1]. The step is never scaled by cycles elapsed or lost: after a gap the robot held still.

:class:`StepGuard` is pure (no sockets, no clock) so that it can be tested on its own; the
backend's single send path (:meth:`hal.real.base.RealBackend._reply`) passes every command
through :meth:`StepGuard.admit`, which returns what may go on the wire (the command, or the
command clamped into the allowed box) and records a violation. :meth:`StepGuard.start`
anchors the guard at the position the controller says it holds; a position outside the limits
is clamped into the limits minus the margin when that is within one step, else refused.

:func:`plan_rejoin` plans the smooth way back onto a reference after a gap, a counter jump or a
mode change (a quintic from the held position at rest to a later reference sample, meeting its
position, velocity and acceleration), sampled so that each step stays within the guard's step.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from robident_twin.errors import ConfigError, RobidentError

from ..motion import quintic
from ..protocol import RobotInfo


class GuardError(RobidentError):
    """A command was refused by the command guard (NaN, position limit or too large a step)."""


def check_step_margin(value, key: str = "backend.step_margin") -> float:
    """``step_margin`` is a fraction of the velocity limit's step: in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) <= 1.0:
        raise ConfigError(f"{key}: the fraction of the velocity limit one command may step per cycle, in (0, 1]; "
                          f"got {value!r}")
    return float(value)


def check_limit_margin(value, key: str = "backend.limit_margin_rad") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 0.5:
        raise ConfigError(f"{key}: the distance in rad every command keeps from the joint limits, in [0, 0.5]; "
                          f"got {value!r}")
    return float(value)


@dataclass
class GuardCounts:
    checked: int = 0  # commands that went through admit()
    clamped: int = 0  # commands that had to be changed to satisfy the invariant
    aborts: int = 0  # sessions aborted to a hold (or refused before the first command)
    rejoins: int = 0  # smooth rejoins planned after a gap, a counter jump or a mode change
    rejoin_samples: int = 0
    gaps: int = 0  # counter jumps between answered packets (lost, jumped forward)
    mode_changes: int = 0  # the controller left commanding mid-stream

    def as_dict(self) -> dict:
        return asdict(self)


class StepGuard:
    """See the module doc. ``stride`` (set by :meth:`start`) is the number of controller cycles
    between two commands (Sunrise's receiveMultiplier; 1 otherwise)."""

    def __init__(self, info: RobotInfo, step_margin: float = 1.0, limit_margin_rad: float = 0.01):
        self.info = info
        self.step_margin = check_step_margin(step_margin)
        self.limit_margin_rad = check_limit_margin(limit_margin_rad)
        self.lo = np.asarray(info.q_min_rad, dtype=float) + self.limit_margin_rad
        self.hi = np.asarray(info.q_max_rad, dtype=float) - self.limit_margin_rad
        if np.any(self.lo > self.hi):
            j = int(np.argmax(self.lo > self.hi))
            raise ConfigError(f"backend.limit_margin_rad: {self.limit_margin_rad} leaves no room inside the limits of "
                              f"joint {info.joint_names[j]}")
        self.dt_s = 1.0 / float(info.control_rate_hz)
        self.cycle_step_rad = np.asarray(info.dq_max_rad_s, dtype=float) * self.dt_s * self.step_margin
        if not (np.all(np.isfinite(self.cycle_step_rad)) and np.all(self.cycle_step_rad > 0)):
            raise ConfigError("robot: the velocity limits must be finite and positive for the command guard")
        self.stride = 1
        self.last: np.ndarray | None = None
        self.counts = GuardCounts()
        self.violation: str | None = None  # the last violation admit() found (None: the command was safe)

    @property
    def step_rad(self) -> np.ndarray:
        return self.cycle_step_rad * self.stride

    def start(self, q_held_rad, stride: int = 1) -> np.ndarray:
        """Anchor at the position the controller holds. Non-finite, or further than one step
        outside the limits minus the margin: GuardError (nothing may be commanded); a hold just
        outside is clamped into them (counted)."""
        if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or not 1 <= int(stride) <= 100:
            self.counts.aborts += 1
            raise GuardError(f"command guard: the controller's command cycle of {stride!r} cycles is not in [1, 100]")
        self.stride = int(stride)
        q = np.asarray(q_held_rad, dtype=float).reshape(-1)
        names = self.info.joint_names
        if q.shape != self.lo.shape or not np.all(np.isfinite(q)):
            self.counts.aborts += 1
            raise GuardError(f"command guard: the controller reports a held position {q.tolist()} that is not "
                             f"{len(names)} finite values; refusing to command")
        c = np.clip(q, self.lo, self.hi)
        far = np.abs(c - q) > self.step_rad
        if far.any():
            j = int(np.argmax(far))
            self.counts.aborts += 1
            raise GuardError(f"command guard: the controller reports joint {names[j]} at {q[j]:.6g} rad, outside the "
                             f"limits minus the margin [{self.lo[j]:.6g}, {self.hi[j]:.6g}] rad by more than one "
                             f"step; refusing to command it")
        if np.any(c != q):
            self.counts.clamped += 1
        self.last = c
        self.violation = None
        return c.copy()

    def admit(self, q_cmd_rad=None) -> np.ndarray:
        """What may go on the wire for ``q_cmd_rad`` (None: hold the last command): the command
        itself, or, on a violation (recorded in ``violation``), the hold or the clamped command."""
        if self.last is None:
            raise GuardError("command guard: no held position to command from (start() first)")
        self.counts.checked += 1
        self.violation = None
        if q_cmd_rad is None:
            return self.last.copy()
        q = np.asarray(q_cmd_rad, dtype=float).reshape(-1)
        names = self.info.joint_names
        if q.shape != self.last.shape:
            self.violation = f"expected {self.last.size} joint positions, got {q.size}"
        elif not np.all(np.isfinite(q)):
            self.violation = f"non-finite command for joint {names[int(np.argmax(~np.isfinite(q)))]}"
        if self.violation is not None:
            self.counts.clamped += 1
            return self.last.copy()
        step = self.step_rad
        c = np.clip(np.clip(q, self.last - step, self.last + step), self.lo, self.hi)
        if np.any(c != q):
            self.counts.clamped += 1
            out = (q < self.lo) | (q > self.hi)
            if out.any():
                j = int(np.argmax(out))
                self.violation = (f"joint {names[j]} command {q[j]:.6g} rad is outside the limits minus the margin "
                                  f"[{self.lo[j]:.6g}, {self.hi[j]:.6g}] rad")
            else:
                d = np.abs(q - self.last) / step
                j = int(np.argmax(d))
                self.violation = (f"joint {names[j]} step {abs(q[j] - self.last[j]):.6g} rad exceeds one cycle's "
                                  f"{step[j]:.6g} rad")
        self.last = c
        return c.copy()

    def check_plan(self, q_rad: np.ndarray, what: str = "reference") -> None:
        """Every sample of a planned command stream inside the limits minus the margin and every
        step between neighbours within one cycle's step; GuardError naming the first violation."""
        q = np.asarray(q_rad, dtype=float)
        names = self.info.joint_names
        if q.ndim != 2 or q.shape[1] != self.lo.size:
            raise GuardError(f"command guard: the {what} has shape {q.shape}, expected (samples, {self.lo.size})")
        bad = ~np.isfinite(q)
        if bad.any():
            k, j = np.argwhere(bad)[0]
            raise GuardError(f"command guard: non-finite command for joint {names[j]} at {what} sample {k}")
        out = (q < self.lo) | (q > self.hi)
        if out.any():
            k, j = np.argwhere(out)[0]
            raise GuardError(f"command guard: joint {names[j]} command {q[k, j]:.6g} rad at {what} sample {k} is "
                             f"outside the limits minus the margin [{self.lo[j]:.6g}, {self.hi[j]:.6g}] rad")
        if q.shape[0] > 1:
            steps = np.abs(np.diff(q, axis=0))
            over = steps > self.cycle_step_rad
            if over.any():
                k, j = np.argwhere(over)[0]
                raise GuardError(f"command guard: joint {names[j]} step {steps[k, j]:.6g} rad at {what} sample "
                                 f"{k + 1} exceeds one cycle's {self.cycle_step_rad[j]:.6g} rad (velocity limit "
                                 f"{self.info.dq_max_rad_s[j]:.6g} rad/s x step_margin {self.step_margin:g})")


def plan_rejoin(guard: StepGuard, q0_rad, q_ref: np.ndarray, dq_ref: np.ndarray, ddq_ref: np.ndarray, i: int,
                dq0_rad_s=None, max_duration_s: float = 30.0,
                accel_search_s: float = 2.0) -> tuple[np.ndarray, int]:
    """The commands for reference indices ``i, i + stride, ...`` that take the commanded position
    from ``q0_rad`` (moving at ``dq0_rad_s``, default at rest) back onto the reference: a quintic
    meeting the reference's position, velocity and acceleration at its last command. Returns
    (commands (n, joints), the reference index of the last command; past the reference's end
    the rejoin comes to rest at its last sample). Every step within the guard's and every
    sample inside its limits (the invariant); the first duration (growing 10 % at a time) whose
    acceleration stays within the robot's limit (or the reference's own), else, when the
    reference itself runs at its acceleration limit, the smoothest one found within
    ``accel_search_s``; GuardError when no rejoin within ``max_duration_s`` keeps the invariant."""
    info = guard.info
    s = guard.stride
    dt = guard.dt_s * s
    q0 = np.asarray(q0_rad, dtype=float)
    z = np.zeros_like(q0)
    v0 = z if dq0_rad_s is None else np.asarray(dq0_rad_s, dtype=float)
    last = q_ref.shape[0] - 1
    ddq_lim = np.asarray(info.ddq_max_rad_s2, dtype=float)
    step = guard.step_rad * (1 - 1e-9)
    best = None  # (acceleration ratio, commands, last index): the smoothest feasible one so far
    n = 2
    while n * dt <= max_duration_s:
        j = i + (n - 1) * s  # commands i, i + s, .., j (past the reference's end: come to rest at its end)
        jt = min(j, last)
        t = np.arange(1, n + 1) * dt
        q, dq, ddq = quintic(q0, v0, z, q_ref[jt], dq_ref[jt], ddq_ref[jt], n * dt, t)
        path = np.vstack([q0, q])
        if np.all(np.abs(np.diff(path, axis=0)) <= step) and np.all(q >= guard.lo) and np.all(q <= guard.hi):
            acc = float(np.max(np.abs(ddq) / np.maximum(ddq_lim, np.abs(ddq_ref[jt]) + 1e-12)))
            if acc <= 1.0:
                return q, j
            if best is None or acc < best[0]:
                best = (acc, q, j)
        if best is not None and n * dt > accel_search_s:
            return best[1], best[2]  # a reference at its acceleration limit leaves no room: the smoothest
        n += max(1, n // 10)
    raise GuardError(f"command guard: no rejoin onto the reference within {max_duration_s:g} s from "
                     f"{np.round(q0, 4).tolist()} rad")
