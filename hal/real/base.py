"""What every real-controller backend shares.

- **Safety gate**: ``run`` starts with :func:`hal.safety.gate_trajectory` (a passing dry-run
  record certifying exactly this trajectory, robot, payload, settings, rate, torque-check
  parameters and simulation) and, once the motion is planned from the measured pose, re-checks
  its lead-in and lead-out with the injected design-stage checks
  (:func:`hal.safety.check_planned_motion`); nothing is sent otherwise.
- **Command guard** (:mod:`hal.real.guard`): every reply goes through :meth:`RealBackend._reply`,
  the single path to the wire, and every command in it through :meth:`StepGuard.admit`: finite,
  inside the joint limits minus ``limit_margin_rad``, and at most ONE cycle's step
  (``dq_max x cycle x step_margin``, ``step_margin`` in (0, 1]) from the last command sent,
  whatever the cycles elapsed. The guard is anchored at the controller's held position only
  if that lies inside the limits (else nothing is ever commanded). The planned motion is
  checked sample by sample before the first command. After a gap (lost packets, a counter
  jump) whose catch-up would exceed one step, or after the controller left commanding (FRI
  CMD -> MON -> CMD, Sunrise leaving COMMANDING_ACTIVE), the stream rejoins the reference
  along a smooth quintic from the held position (:func:`hal.real.guard.plan_rejoin`); those
  samples are invalid in the recording. A violation is clamped on the wire, then the session
  aborts: the last safe position is held for ``hold_cycles_on_abort`` cycles and
  :class:`GuardError` raised. Counts (checked, clamped, aborts, rejoins, gaps, mode changes)
  go to ``Recording.metadata["guard"]``.
- **Watchdog**: no valid packet from the controller for ``watchdog_s`` ends the run with
  :class:`CommunicationLost` and nothing more is commanded (the controller's own timeout
  then stops the robot).
- **Link statistics** (:class:`LinkStats`): received, lost, late (a wall-clock gap longer than
  ``late_after_s`` before the packet), duplicated, reordered (older than the newest, used to
  fill its gap but never answered), malformed (wrong size, id or content; never crash),
  foreign (from another host, ignored).
- **Recording with gaps**: samples are indexed by the controller's sequence counter
  (unwrapped, :class:`SequenceTracker`); a lost sample is False in ``Recording.valid`` and
  filled by interpolation.
- **Sockets**: standard library UDP only. The backend binds ``bind_host:port`` and accepts and
  answers datagrams from the configured controller ``host:controller_port`` only (both required
  for a real robot; an emulated run takes the emulator's); anything else counts as ``foreign``.

A protocol backend subclasses :class:`RealBackend` and provides ``_decode`` (bytes ->
:class:`Packet`, raising :class:`ProtocolError`), ``_encode_reply`` (the answer, with a
position command or a hold) and the readiness tests ``_ready_monitor`` / ``_ready_command``.

Modes: ``monitor`` (the controller plays the trajectory itself, the PC answers and records;
the recorded samples are aligned with the reference through the controller's commanded
position) and ``command`` (the PC streams one reference sample per controller cycle).
"""
from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from robident_twin.atomic import atomic_path
from robident_twin.errors import ConfigError, RecordingError, RobidentError
from robident_twin.model.robot import RobotSpec

from ..protocol import JointTrajectory, Recording
from ..safety import (
    SafetyChecks,
    attach_checks_for,
    check_planned_motion,
    gate_trajectory,
)
from ..sim.playback import RunPlan, plan_run
from .guard import (  # noqa: F401
    GuardError,
    StepGuard,
    check_limit_margin,
    check_step_margin,
    plan_rejoin,
)
from .link import CommunicationLost, LinkStats, SequenceTracker, UdpEndpoint


class ProtocolError(RobidentError):
    """A datagram does not follow the protocol (size, id, content)."""


@dataclass
class Packet:
    """What a backend needs of one controller datagram (joints,)."""

    seq: int  # the controller's raw sequence counter
    q_meas_rad: np.ndarray
    tau_joint_Nm: np.ndarray
    q_cmd_rad: np.ndarray  # the position the controller commands now (its interpolator)
    state: Any = None
    extra: dict = field(default_factory=dict)
    tau_motor_Nm: np.ndarray | None = None  # where the protocol carries motor torques (RSI)


@dataclass(frozen=True)
class RealConfig:
    host: str = "127.0.0.1"
    port: int = 0
    bind_host: str = "127.0.0.1"
    controller_port: int | None = None
    mode: str = "monitor"
    control_rate_hz: float = 1000.0
    watchdog_s: float = 1.0
    connect_timeout_s: float = 10.0
    late_after_s: float = 0.01
    program_start_timeout_s: float = 30.0
    step_margin: float = 1.0  # the fraction of dq_max x cycle one command may step, in (0, 1]
    limit_margin_rad: float = 0.01  # every command keeps this far inside the joint limits
    hold_cycles_on_abort: int = 20
    ready_cycles: int = 5
    records_dir: str | None = None
    program_dir: str | None = None
    safety: Mapping[str, Any] | None = None  # like the `design` config group of task=dryrun
    dry_run_if_emulated: bool = False  # emulate only: run the dry run when no record exists

    def __post_init__(self):
        if self.mode not in ("monitor", "command"):
            raise ConfigError(f"backend.mode: expected monitor or command, got {self.mode!r}")
        for k in ("watchdog_s", "connect_timeout_s", "late_after_s", "control_rate_hz", "program_start_timeout_s"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < float(v) < 1e6:
                raise ConfigError(f"backend.{k}: expected a positive finite number, got {v!r}")
        if float(self.control_rate_hz) > 100000:
            raise ConfigError(f"backend.control_rate_hz: at most 100000 Hz, got {self.control_rate_hz!r}")
        check_step_margin(self.step_margin)
        check_limit_margin(self.limit_margin_rad)
        for k, lo, hi in (("hold_cycles_on_abort", 0, 100000), ("ready_cycles", 1, 100000), ("port", 0, 65535)):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ConfigError(f"backend.{k}: an integer in [{lo}, {hi}], got {v!r}")
        v = self.controller_port
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 65535):
            raise ConfigError(f"backend.controller_port: the controller's UDP source port, an integer in "
                              f"[1, 65535], got {v!r}")
        if not isinstance(self.host, str) or not self.host:
            raise ConfigError(f"backend.host: the controller's address, got {self.host!r}")


def align_offset(seqs: np.ndarray, q_cmd: np.ndarray, ref: np.ndarray, threshold_rad: float = 1e-4,
                 tol_rad: float = 1e-5, window: int = 300) -> int | None:
    """Counter offset o with q_cmd[k] = ref[seqs[k] - o] (the controller's commanded position
    follows the reference program), found where the motion starts; None until it moved."""
    d = np.max(np.abs(q_cmd - q_cmd[0]), axis=1)
    moving = np.flatnonzero(d > threshold_rad)
    if moving.size == 0:
        return None
    k1 = int(moving[0])
    dj = np.max(np.abs(ref - ref[0]), axis=1)
    jm = np.flatnonzero(dj > threshold_rad)
    if jm.size == 0:
        raise RecordingError("monitor mode: the reference never moves, cannot align the recording")
    j1 = int(jm[0])
    lo, hi = max(0, k1 - 20), min(len(seqs), k1 + window)
    best, best_err = None, np.inf
    for o in range(int(seqs[k1]) - j1 - 8, int(seqs[k1]) - j1 + 9):
        idx = seqs[lo:hi] - o
        sel = (idx >= 0) & (idx < ref.shape[0])
        if sel.sum() < min(10, hi - lo):
            continue
        err = float(np.max(np.abs(q_cmd[lo:hi][sel] - ref[idx[sel]])))
        if err < best_err:
            best, best_err = o, err
    if best is None or best_err > tol_rad:
        raise RecordingError(f"monitor mode: the controller's commanded positions do not follow the reference "
                             f"(best match {best_err:.3g} rad > {tol_rad:g} rad); is the right program running?")
    return best


class RealBackend:
    """The Robot protocol for a real controller over UDP (see the module doc)."""

    backend = "real"
    seq_bits = 16
    motor_torque_note = "no motor currents"

    def __init__(self, spec: RobotSpec, config: RealConfig, emulator=None):
        from ..sim.mujoco_backend import robot_info

        self.spec = spec
        self.cfg = config
        self.info = robot_info(spec, self.backend, config.control_rate_hz, is_simulation=emulator is not None)
        self.emulator = emulator
        self.endpoint = UdpEndpoint(config.host, config.port, config.bind_host, config.controller_port)
        self.checks: SafetyChecks | None = None  # injected by the pipeline (attach_checks)
        self.stats = LinkStats()
        self.guard = self._new_guard()
        self._invalid: set[int] = set()
        self.last_run: dict[str, Any] = {}

    def attach_emulator(self, emulator) -> None:
        """Serve this backend from a local emulator (the info then says simulation)."""
        import dataclasses

        self.emulator = emulator
        self.info = dataclasses.replace(self.info, is_simulation=True)
        self.endpoint.controller_port = emulator.address[1]

    # ------------------------------------------------------------------ protocol hooks
    def _decode(self, data: bytes) -> Packet:  # pragma: no cover - abstract
        raise NotImplementedError

    def _encode_reply(self, pkt: Packet, q_cmd_rad: np.ndarray | None) -> bytes | None:  # pragma: no cover
        raise NotImplementedError

    def _ready_monitor(self, pkt: Packet) -> bool:  # pragma: no cover
        raise NotImplementedError

    def _ready_command(self, pkt: Packet) -> bool:  # pragma: no cover
        raise NotImplementedError

    def _commanding(self, pkt: Packet) -> bool:
        """Whether the controller follows position commands now (FRI: CMD; Sunrise: COMMANDING_ACTIVE)."""
        return True

    def _stride(self, pkt: Packet) -> int:
        """Controller cycles between two commands (Sunrise: receiveMultiplier)."""
        return 1

    def _will_reply(self, pkt: Packet) -> bool:
        """Whether this packet gets an answer (Sunrise: every receiveMultiplier-th)."""
        return True

    # ------------------------------------------------------------------ Robot protocol
    def close(self) -> None:
        if self.emulator is not None:
            self.emulator.stop()
        self.endpoint.close()

    def move_to(self, q_rad: np.ndarray) -> None:
        raise ConfigError(f"{self.backend}: move_to is not offered on a real controller; run a trajectory "
                          "with a passing dry run instead")

    def attach_checks(self, checks: SafetyChecks) -> None:
        """The design stage's safety checks (settings, simulation requirement, motion check)."""
        self.checks = attach_checks_for(self.spec, checks)

    def gate(self, trajectory: JointTrajectory):
        """The safety gate: the passing dry-run record certifying exactly this trajectory on this
        robot (payload state, safety settings, rate, torque-check parameters, simulation), or
        SafetyError naming what changed."""
        return gate_trajectory(self, trajectory, self.emulator is not None, self.cfg.records_dir,
                               self.cfg.safety, self.cfg.dry_run_if_emulated)

    def run(self, trajectory: JointTrajectory, periods: int = 1, transient_periods: int = 0) -> Recording:
        self.gate(trajectory)
        self.stats = LinkStats()
        self.guard = self._new_guard()
        self._invalid = set()
        self._tracker = SequenceTracker(self.seq_bits)
        self._store: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._last_rx: float | None = None
        mode = self.cfg.mode
        if self.emulator is not None:
            self.emulator.begin_session(mode)
        try:
            pkt = self._wait_ready(mode)
            plan = plan_run(self.info, self.backend, trajectory, pkt.q_meas_rad, np.zeros(self.info.n_joints),
                            periods, transient_periods)
            check_planned_motion(self, plan)  # lead-in / lead-out from the measured pose, before any command
            if mode == "monitor":
                offset = self._monitor(plan, pkt, trajectory, periods, transient_periods)
            else:
                offset = self._command(plan, pkt)
        except BaseException:
            if self.emulator is not None:  # the client went silent: let the controller react as it would
                self.emulator.wait_idle(self.cfg.watchdog_s + 30.0)
            raise
        finally:
            if self.emulator is not None:
                self.emulator.end_session()
        self.stats.lost = self._tracker.lost
        return self._recording(plan, offset)

    # ------------------------------------------------------------------ link
    def _next(self, timeout_s: float | None = None) -> tuple[str, int, Packet]:
        """The next decodable packet: (kind, unwrapped counter, packet); the watchdog raises
        after ``timeout_s`` (default ``watchdog_s``) without one."""
        timeout_s = self.cfg.watchdog_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            data = self.endpoint.recv(max(left, 0.0)) if left > 0 else None
            if data is None:
                self.stats.foreign = self.endpoint.foreign
                emu = getattr(self.emulator, "error", None)
                raise CommunicationLost(f"{self.backend}: watchdog: no valid packet from {self.cfg.host} for "
                                        f"{timeout_s:g} s; stopped commanding "
                                        f"(link statistics {self.stats.as_dict()})"
                                        + (f"; the emulator failed: {emu!r}" if emu is not None else ""))
            try:
                pkt = self._decode(data)
            except ProtocolError:
                self.stats.malformed += 1
                continue
            except Exception:  # never crash on what arrives from the network
                self.stats.malformed += 1
                continue
            now = time.monotonic()
            kind, u = self._tracker.classify(pkt.seq)
            if kind == "duplicate":
                self.stats.duplicated += 1
                continue
            self.stats.received += 1
            if kind == "reordered":
                self.stats.reordered += 1
            elif self._last_rx is not None:
                gap = now - self._last_rx
                self.stats.max_gap_s = max(self.stats.max_gap_s, gap)
                if gap > self.cfg.late_after_s:
                    self.stats.late += 1
            if kind == "new":
                self._last_rx = now
            self._store[u] = (pkt.q_meas_rad, pkt.tau_joint_Nm, pkt.q_cmd_rad, pkt.tau_motor_Nm)
            return kind, u, pkt

    def _new_guard(self) -> StepGuard:
        return StepGuard(self.info, self.cfg.step_margin, self.cfg.limit_margin_rad)

    def _reply(self, pkt: Packet, q_cmd_rad: np.ndarray | None = None) -> np.ndarray | None:
        """The single path to the wire. In command mode every reply carries a command, and that
        command is what the guard admits (``q_cmd_rad`` None: hold the last one); a violation
        is left in ``self.guard.violation`` for the caller to abort on. Returns what was sent."""
        q = self.guard.admit(q_cmd_rad) if self.cfg.mode == "command" else None
        data = self._encode_reply(pkt, q)
        if data is not None:
            self.endpoint.send(data)
            self.stats.replies += 1
        return q

    def _wait_ready(self, mode: str) -> Packet:
        ready = self._ready_monitor if mode == "monitor" else self._ready_command
        t_end = time.monotonic() + self.cfg.connect_timeout_s
        good = 0
        while time.monotonic() < t_end:
            first = self._tracker.newest is None
            kind, u, pkt = self._next(self.cfg.connect_timeout_s if first else None)
            if kind != "new":
                continue
            if mode == "command" and self.guard.last is None:
                # anchor at the position the controller holds: refused (nothing is ever sent)
                # when it lies outside the joint limits
                try:
                    self.guard.start(pkt.q_cmd_rad, self._stride(pkt))
                except GuardError as exc:
                    raise GuardError(f"{self.backend}: {exc}") from None
            self._reply(pkt, None)
            good = good + 1 if ready(pkt) else 0
            if good >= self.cfg.ready_cycles:
                return pkt
        raise CommunicationLost(f"{self.backend}: the controller did not become ready for {mode} mode within "
                                f"{self.cfg.connect_timeout_s:g} s")

    # ------------------------------------------------------------------ modes
    def _start_program(self, reference: JointTrajectory, trajectory: JointTrajectory, periods: int,
                       transient_periods: int) -> None:
        """Monitor mode: the controller plays the client's plan (lead-in from the measured start,
        periods, lead-out). The emulator is handed it directly; for a real controller it is written
        as a CSV for the controller program (the operator starts it)."""
        if self.emulator is not None:
            self.emulator.start_program(trajectory, periods, transient_periods, reference=reference)
            return
        d = Path(self.cfg.program_dir or Path.cwd())
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{self.backend}_program.csv"
        with atomic_path(path) as tmp, open(tmp, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["t_s"] + [f"{j}_rad" for j in self.info.joint_names])
            for t, q in zip(reference.t_s, reference.q_rad):
                w.writerow([repr(float(t))] + [repr(float(x)) for x in q])
        print(f"{self.backend}: monitor mode: start the controller program playing {path} "
              f"({reference.n_samples} samples at {self.info.control_rate_hz:g} Hz)")

    def _monitor(self, plan: RunPlan, pkt: Packet, trajectory, periods, transient_periods) -> int:
        ref = plan.reference.q_rad
        self._start_program(plan.reference, trajectory, periods, transient_periods)
        offset = None
        t_start = time.monotonic()
        hold = pkt.q_cmd_rad
        n_moving = 0
        while True:
            kind, u, pkt = self._next()
            if kind == "new":
                self._reply(pkt, None)
            if offset is None:
                if time.monotonic() - t_start > self.cfg.program_start_timeout_s:
                    raise CommunicationLost(f"{self.backend}: monitor mode: the controller program did not start "
                                            f"moving within {self.cfg.program_start_timeout_s:g} s")
                n_moving += int(np.max(np.abs(pkt.q_cmd_rad - hold)) > 1e-4)
                if n_moving > 200:  # the program runs: find where it started
                    seqs = np.array(sorted(self._store))
                    qc = np.array([self._store[s][2] for s in seqs])
                    offset = align_offset(seqs, qc, ref)
            elif self._tracker.newest - offset >= ref.shape[0] - 1:
                return offset

    def _command(self, plan: RunPlan, pkt: Packet) -> int:
        """Stream the plan, one sample per answered controller cycle (sample = counter - u0),
        through the guard; rejoin smoothly after gaps and mode changes (see the module doc)."""
        ref = plan.reference
        N = ref.n_samples
        g = self.guard
        try:
            g.check_plan(ref.q_rad, "planned motion (lead-in, periods, lead-out)")
        except GuardError as exc:
            g.counts.aborts += 1
            self._abort_hold()
            raise GuardError(f"{self.backend}: {exc}; nothing of it was sent, held the last safe position") from None
        u0 = self._tracker.newest + 1  # the next cycle gets ref[0]
        s = g.stride
        last_u = None  # the counter of the last answered packet in the stream
        rejoin = None  # (commands, first sample, last sample) of a rejoin under way
        interrupted = False  # the controller left commanding: rejoin when it is back
        prev_sent = None  # the command before the last one (the commanded speed before a gap)
        while True:
            kind, u, pkt = self._next()
            if kind != "new" or not self._will_reply(pkt):
                continue
            if self._stride(pkt) != s:
                g.counts.aborts += 1
                self._reply(pkt, None)
                self._abort_hold()
                raise GuardError(f"{self.backend}: the controller changed its command cycle from {s} to "
                                 f"{self._stride(pkt)} cycles mid-stream; held the last safe position")
            if not self._commanding(pkt):
                if not interrupted:
                    g.counts.mode_changes += 1
                interrupted, rejoin, prev_sent = True, None, None
                self._invalid.add(u)
                self._reply(pkt, None)  # hold; the robot holds where it was
                last_u = u
                continue
            i = u - u0
            if i < 0:
                self._reply(pkt, None)
                last_u = u
                continue
            gap = last_u is not None and u - last_u != s
            if gap:
                g.counts.gaps += 1
            if gap or interrupted or last_u is None:
                if rejoin is not None and i <= rejoin[2] and (i - rejoin[1]) % s == 0:
                    direct = rejoin[0][(i - rejoin[1]) // s]
                else:
                    rejoin = None
                    direct = ref.q_rad[min(i, N - 1)]
                if interrupted or np.any(np.abs(direct - g.last) > g.step_rad):
                    # the robot held still: come back onto the reference smoothly, never in one jump;
                    # after a short gap the commanded motion goes on at the speed it had
                    v0 = None if interrupted or prev_sent is None or u - last_u > 10 * s else \
                        (g.last - prev_sent) / (s * g.dt_s)
                    try:
                        cmds, j = plan_rejoin(g, g.last, ref.q_rad, ref.dq_rad_s, ref.ddq_rad_s2, i, v0)
                    except GuardError as exc:
                        g.counts.aborts += 1
                        self._reply(pkt, None)
                        self._abort_hold()
                        raise GuardError(f"{self.backend}: {exc}; held the last safe position") from None
                    rejoin = (cmds, i, j)
                    g.counts.rejoins += 1
                interrupted = False
            last_u = u
            if rejoin is not None:
                cmds, i0, j = rejoin
                want = cmds[(i - i0) // s]
                self._invalid.add(u)
                g.counts.rejoin_samples += 1
                if i >= j:
                    rejoin = None
            elif i >= N:
                self._reply_final(pkt)
                return u0
            else:
                want = ref.q_rad[i]
            prev_sent = g.last.copy()
            self._reply(pkt, want)
            if g.violation is not None:
                g.counts.aborts += 1
                msg = g.violation
                self._abort_hold()
                raise GuardError(f"{self.backend}: command guard: {msg} at cycle {u}; clamped on the wire, then "
                                 f"held the last safe position")

    def _reply_final(self, pkt: Packet) -> None:
        """The answer after the last reference sample (a protocol may add its end-of-motion flag)."""
        self._reply(pkt, None)

    def _abort_hold(self) -> None:
        """Answer with the last safe position for ``hold_cycles_on_abort`` cycles, then stop."""
        if self.guard.last is None:
            return
        for _ in range(self.cfg.hold_cycles_on_abort):
            try:
                kind, u, p = self._next()
            except CommunicationLost:
                return
            if kind == "new" and self._will_reply(p):
                self._reply(p, None)

    # ------------------------------------------------------------------ recording
    def _recording(self, plan: RunPlan, offset: int) -> Recording:
        self.stats.foreign = self.endpoint.foreign
        n = self.info.n_joints
        N = plan.stop - plan.start
        q = np.zeros((N, n))
        tau = np.zeros((N, n))
        tau_m = np.zeros((N, n))
        valid = np.zeros(N, dtype=bool)
        has_joint = has_motor = True
        for u, (qm, tj, _, tm) in self._store.items():
            i = u - offset - plan.start
            if 0 <= i < N:
                q[i], valid[i] = qm, u not in self._invalid
                has_joint &= tj is not None
                has_motor &= tm is not None
                if tj is not None:
                    tau[i] = tj
                if tm is not None:
                    tau_m[i] = tm
        if not valid.any():
            raise RecordingError(f"{self.backend}: no sample of the recorded window was received")
        if not valid.all():
            k = np.arange(N)
            for a in (q, tau, tau_m):
                for j in range(n):
                    a[~valid, j] = np.interp(k[~valid], k[valid], a[valid, j])
        md = {"source": f"{self.backend} controller at {self.cfg.host}", "robot": self.spec.name,
              "backend": self.backend, "mode": self.cfg.mode, "link": self.stats.as_dict(),
              "lost_samples_in_window": int(N - valid.sum()),
              "guard": self.guard.counts.as_dict(), "motor_torque_available": has_motor,
              "tau_motor_note": self.motor_torque_note, "approach_s": plan.lead_in_samples / self.info.control_rate_hz,
              "transient_periods": plan.transient_periods, "emulated": self.emulator is not None}
        if self.emulator is not None:
            md["noise"] = self.emulator.noise_dict()
        self.last_run = md
        if not has_motor and not has_joint:
            raise RecordingError(f"{self.backend}: the controller sent no torque channel")
        return Recording(t_s=np.arange(N) / self.info.control_rate_hz, q_rad=q,
                         tau_motor_Nm=tau_m if has_motor else tau.copy(),
                         tau_joint_Nm=tau if has_joint else None,
                         q_cmd_rad=plan.reference.q_rad[plan.start:plan.stop].copy(),
                         sample_rate_hz=self.info.control_rate_hz, period_samples=plan.period_samples,
                         n_periods=plan.periods, metadata=md, valid=None if valid.all() else valid)


_EMULATOR_KEYS = ("reply_timeout_s", "stop_after_missed", "hold_after_stop_cycles", "ready_after", "start_seq",
                  "program_delay_cycles", "receive_multiplier", "faults")


def make_real_backend(backend_cls, emulator_factory, spec: RobotSpec, backend_cfg, noise=None, seed: int = 0,
                      **overrides):
    """A real backend from its config group (:mod:`hal.config`'s typed option, or a mapping validated
    as one); with ``emulate: true`` the local emulator
    (``emulator_factory(spec, client_address, noise=, seed=, control_rate_hz=, controller=, **emulator)``)
    serves the twin to it on 127.0.0.1. ``overrides``: RealConfig fields a backend derives itself
    (RSI: the mode and the rate of its cycle)."""
    from ..config import as_backend
    from ..emulators.common import Faults
    from ..sim.mujoco_backend import controller_of

    b = as_backend(backend_cfg)
    kw = {k: getattr(b, k) for k in RealConfig.__dataclass_fields__ if getattr(b, k, None) is not None}
    kw.update(overrides)
    emulate = b.emulate
    if emulate and kw.get("host", "127.0.0.1") not in ("127.0.0.1", "localhost"):
        raise ConfigError(f"backend.host: the emulator serves 127.0.0.1 only, got {kw['host']!r}")
    if emulate:
        kw["port"] = 0  # the emulator's client listens on a free port of 127.0.0.1
        kw.pop("controller_port", None)  # the emulator's own port (attach_emulator)
    config = RealConfig(**kw)  # types and ranges first
    if not emulate:  # a real robot: answer exactly one sender, never whoever writes first
        if not kw.get("host"):
            raise ConfigError(f"backend.host: the controller's IP address is required for a real robot "
                              f"({backend_cls.backend}); set backend.host=<controller address>")
        if kw.get("controller_port") is None:
            raise ConfigError(f"backend.controller_port: the UDP port the controller sends from is required for a "
                              f"real robot ({backend_cls.backend}); packets from any other port are dropped")
    backend = backend_cls(spec, config)
    if emulate:
        controller = controller_of(b.controller)
        emu_kw = {k: getattr(b.emulator, k) for k in _EMULATOR_KEYS
                   if k != "faults" and getattr(b.emulator, k, None) is not None}
        # the link faults every emulator injects (RSI's reply faults go to its own emulator, hal/real/rsi.py)
        emu_kw["faults"] = Faults.from_config({k: getattr(b.emulator.faults, k) for k in Faults.__dataclass_fields__})
        try:
            emulator = emulator_factory(spec, backend.endpoint.address, noise=noise, seed=seed,
                                        control_rate_hz=config.control_rate_hz, controller=controller, **emu_kw)
        except TypeError as exc:
            backend.close()
            raise ConfigError(f"backend.emulator: {exc}") from None
        backend.attach_emulator(emulator)
    return backend
