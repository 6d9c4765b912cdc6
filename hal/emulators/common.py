"""What every controller emulator shares: a thread that advances a :class:`TwinStepper` one
controller cycle at a time and talks to a client through a real UDP socket on 127.0.0.1.

Each cycle: encode the measurement of the current instant and send it to the client (through
the fault injector), wait for the client's answer (lock step: up to ``reply_timeout_s``; the
emulator runs faster than real time, the client waits on its socket), pick the command of
the cycle and step the twin. Sessions (``begin_session(mode)`` .. ``end_session()``, what a
controller program's open/close of the interface does) go through the generic states

    idle -> wait -> ready [-> command_wait -> commanding]      (stopped on communication loss)

``ready`` after ``ready_after`` consecutive answered cycles; in command mode the state goes to
``command_wait`` and to ``commanding`` when the client's answers carry position commands.
Monitor mode: :meth:`ControllerEmulator.start_program` makes the controller play the client's
planned motion (lead-in, transient and recorded periods, lead-out; or plans a trajectory from
its exact state like ``MujocoTwin.run``); the measurement carries the program's commanded position. Command mode:
the client's position command of cycle k is applied in cycle k (held when it misses).

Stop: ``stop_after_missed`` consecutive cycles without a valid answer stop the robot: the
program is aborted, the position at the stop is held for ``hold_after_stop_cycles`` cycles
(the robot comes to rest) and the session ends. :class:`EmulatorStatus` records it
(``stopped``, ``stop_reason``, ``stop_cycle``, ``dq_after_stop_rad_s``).

Faults (:class:`Faults`, per packet from a seeded generator): loss, delay (probability and
seconds) and jitter, duplicates, reordering (a packet sent after its successor), truncated,
malformed (random bytes) and wrong-id packets, and a blackout from a cycle on.
"""
from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from robident_twin.errors import ConfigError

from ..protocol import JointTrajectory
from ..sim.playback import plan_run
from ..sim.stepper import StepResult, TwinStepper


_PROBABILITIES = ("loss", "delay_prob", "duplicate", "reorder", "truncate", "malformed", "wrong_id", "oversize",
                  "burst_loss", "foreign")
_SECONDS = ("delay_s", "jitter_s")
_CYCLES = ("blackout_after_cycles", "blackout_cycles", "counter_jump_at_cycles", "mode_drop_at_cycles",
           "report_offset_cycles")


@dataclass(frozen=True)
class Faults:
    loss: float = 0.0  # probability a measurement packet is dropped
    delay_prob: float = 0.0  # probability a packet is delayed by delay_s
    delay_s: float = 0.0
    jitter_s: float = 0.0  # uniform extra delay in [0, jitter_s] for every packet
    duplicate: float = 0.0
    reorder: float = 0.0  # the packet is sent after the next one
    truncate: float = 0.0
    malformed: float = 0.0  # random bytes of the right length
    wrong_id: float = 0.0
    blackout_after_cycles: int | None = None  # drop every packet from this session cycle on
    seed: int = 0
    blackout_cycles: int | None = None  # the blackout lasts this many cycles (None: to the end)
    oversize: float = 0.0  # probability a packet carries extra trailing bytes
    burst_loss: float = 0.0  # probability a burst of burst_cycles lost packets starts
    burst_cycles: int = 5
    foreign: float = 0.0  # probability another port of the controller host also sends (shifted positions)
    counter_jump: int = 0  # the sequence counter (RSI: IPOC / cycle) jumps by this much ...
    counter_jump_at_cycles: int | None = None  # ... at this session cycle
    mode_drop_at_cycles: int | None = None  # commanding -> not commanding (FRI MON, COMMANDING_WAIT) ...
    mode_drop_cycles: int = 50  # ... for this many cycles, then commanding again
    report_offset_rad: float = 0.0  # the reported (measured and commanded) position of one joint is off ...
    report_offset_joint: int = 0
    report_offset_cycles: int | None = None  # ... for this many session cycles (None: the whole session)

    def __post_init__(self):
        for k in _PROBABILITIES:
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0.0 <= float(v) <= 1.0:
                raise ConfigError(f"backend.emulator.faults.{k}: a probability in [0, 1], got {v!r}")
        for k in _SECONDS:
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0.0 <= float(v) <= 10.0:
                raise ConfigError(f"backend.emulator.faults.{k}: seconds in [0, 10], got {v!r}")
        for k in _CYCLES:
            v = getattr(self, k)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise ConfigError(f"backend.emulator.faults.{k}: a cycle count >= 0 or null, got {v!r}")
        for k, lo, hi in (("burst_cycles", 1, 100000), ("mode_drop_cycles", 1, 100000), ("seed", 0, 2**63 - 1),
                          ("counter_jump", -(2**31), 2**31), ("report_offset_joint", 0, 63)):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise ConfigError(f"backend.emulator.faults.{k}: an integer in [{lo}, {hi}], got {v!r}")
        v = self.report_offset_rad
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not abs(float(v)) <= 10.0:
            raise ConfigError(f"backend.emulator.faults.report_offset_rad: radians in [-10, 10], got {v!r}")

    @classmethod
    def from_config(cls, cfg) -> "Faults":
        """The faults of ``backend.emulator.faults`` (:class:`hal.config.FaultsConfig`; a mapping of its keys)."""
        d = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)} if dataclasses.is_dataclass(cfg) \
            else dict(cfg or {})
        try:
            return cls(**d)
        except TypeError as exc:
            raise ConfigError(f"backend.emulator.faults: {exc}; expected keys {sorted(cls.__dataclass_fields__)}"
                              ) from None


@dataclass
class EmulatorStatus:
    cycles: int = 0
    sent: int = 0
    dropped: int = 0
    delayed: int = 0
    duplicated: int = 0
    reordered: int = 0
    truncated: int = 0
    malformed: int = 0
    wrong_id: int = 0
    replies: int = 0
    missed_replies: int = 0
    late_replies: int = 0
    bad_replies: int = 0
    commands_applied: int = 0
    max_command_step_rad: float = 0.0
    stopped: bool = False
    stop_reason: str | None = None
    stop_cycle: int | None = None
    dq_after_stop_rad_s: float | None = None
    sessions: int = 0
    states: list = field(default_factory=list)  # (cycle, state) transitions
    oversized: int = 0
    foreign_sent: int = 0
    counter_jumps: int = 0
    mode_drops: int = 0
    # every position command that reached the emulator's socket, in arrival order: (cycle, state,
    # the position the robot held when it arrived, command) -- checked by the fault-injection tests
    wire_commands: list = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("wire_commands")
        return d


class ControllerEmulator:
    """The protocol-independent emulator (see the module doc). A protocol subclass provides
    ``seq_bits``, ``_encode(res, seq, refl, q_cmd, state)``, ``_decode_reply(data)`` ->
    (reflected counter, command or None), ``_wrong_id(data)`` and may override
    ``_wants_reply(seq)``."""

    seq_bits = 16
    name = "controller"

    def __init__(self, stepper: TwinStepper, client_address: tuple[str, int], faults: Faults | None = None,
                 reply_timeout_s: float = 0.2, stop_after_missed: int = 20, hold_after_stop_cycles: int = 500,
                 ready_after: int = 10, start_seq: int = 0, program_delay_cycles: int = 20):
        if client_address[0] not in ("127.0.0.1", "localhost"):
            raise ConfigError(f"emulator: serves 127.0.0.1 only, got client {client_address[0]}")
        self.stepper = stepper
        self.client = ("127.0.0.1", int(client_address[1]))
        self.faults = faults or Faults()
        self.reply_timeout_s = float(reply_timeout_s)
        self.stop_after_missed = int(stop_after_missed)
        self.hold_after_stop_cycles = int(hold_after_stop_cycles)
        self.ready_after = int(ready_after)
        self.program_delay_cycles = int(program_delay_cycles)
        self.rng = np.random.default_rng(self.faults.seed)
        self.status = EmulatorStatus()
        self.seq = int(start_seq) % (1 << self.seq_bits)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.address = self.sock.getsockname()
        self.state = "idle"
        self.mode = "monitor"
        self._recent: deque = deque(maxlen=100)
        self.quality = 0
        self._session = threading.Event()
        self._end = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._pending_program = None
        self._program = None
        self._deferred: list[tuple[float, bytes]] = []  # (send time, data)
        self._withheld: bytes | None = None
        self._burst_left = 0
        self._mode_drop_left = 0
        self._held = None  # the position the robot holds (what a command is compared with)
        self._foreign_sock: socket.socket | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=f"{self.name}-emulator", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ control (client side, out of band)
    def begin_session(self, mode: str) -> None:
        """What the controller program's opening of the interface does (mode monitor|command)."""
        if mode not in ("monitor", "command"):
            raise ConfigError(f"emulator: mode must be monitor or command, got {mode!r}")
        self.end_session()
        with self._lock:
            self.mode = mode
            self._program = self._pending_program = None
        self._end.clear()
        self._idle.clear()
        self._session.set()

    def start_program(self, trajectory: JointTrajectory, periods: int = 1, transient_periods: int = 0,
                      reference: JointTrajectory | None = None) -> None:
        """Monitor mode: the controller plays ``reference`` (a whole planned motion from its
        current position), or plans ``trajectory`` itself from its exact state like ``MujocoTwin.run``."""
        with self._lock:
            self._pending_program = (trajectory, periods, transient_periods, reference)

    def end_session(self, timeout_s: float = 10.0) -> None:
        self._end.set()
        self._session.clear()
        self._idle.wait(timeout_s)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until the current session is over (e.g. the robot was stopped and held)."""
        return self._idle.wait(timeout_s)

    def stop(self) -> None:
        self._closing.set()
        self.end_session(2.0)
        self._thread.join(5.0)
        self.sock.close()
        if self._foreign_sock is not None:
            self._foreign_sock.close()

    def noise_dict(self) -> dict:
        return self.stepper.noise.as_dict()

    # ------------------------------------------------------------------ protocol hooks
    def _encode(self, res: StepResult, seq: int, refl: int, q_cmd: np.ndarray, state: str) -> bytes:
        raise NotImplementedError

    def _decode_reply(self, data: bytes) -> tuple[int, np.ndarray | None]:
        raise NotImplementedError

    def _wrong_id(self, data: bytes) -> bytes:
        raise NotImplementedError

    def _wants_reply(self, seq: int) -> bool:
        return True

    def _malformed(self, data: bytes) -> bytes:
        """A corrupted packet (random bytes of the same length; a protocol may break it its own way)."""
        return self.rng.integers(0, 256, len(data), dtype=np.uint8).tobytes()

    # ------------------------------------------------------------------ loop
    def _loop(self) -> None:
        try:
            while not self._closing.is_set():
                if not self._session.wait(0.05):
                    continue
                try:
                    self._run_session()
                finally:
                    self._set_state("idle")
                    self._idle.set()
                    self._session.clear()
        except BaseException as exc:  # surfaced to the client through .error and the watchdog
            self.error = exc
            self._idle.set()

    def _set_state(self, s: str) -> None:
        if s != self.state:
            self.state = s
            self.status.states.append((self.status.cycles, s))

    def _run_session(self) -> None:
        st = self.status
        st.sessions += 1
        self._recent.clear()
        self._recent.extend([1] * 20)  # the link quality builds up from BAD
        self.quality = 0
        self._set_state("wait")
        q_hold = self.stepper.state()[0]
        q_cmd = q_hold.copy()
        last_applied = q_cmd.copy()
        good = 0
        consecutive_missed = 0
        stop_left = None
        session_cycle = 0
        refl = 0
        res = self.stepper.current
        while not self._end.is_set() and not self._closing.is_set():
            # -------- program (monitor mode)
            with self._lock:
                if self._pending_program is not None and self.state != "stopped":
                    traj, periods, transient, reference = self._pending_program
                    self._pending_program = None
                    if reference is None:
                        q0, v0 = self.stepper.state()
                        reference = plan_run(self.stepper.info, self.name, traj, q0, v0, periods, transient).reference
                    self._program = [reference, self.stepper.feedforward(reference), -self.program_delay_cycles]
            prog = self._program
            if prog is not None and prog[2] >= 0 and prog[2] < prog[0].n_samples:
                q_cmd = prog[0].q_rad[prog[2]]
            # -------- faults of the controller itself
            f = self.faults
            if f.counter_jump and session_cycle == f.counter_jump_at_cycles:
                self.seq = (self.seq + f.counter_jump) % (1 << self.seq_bits)
                st.counter_jumps += 1
            if (f.mode_drop_at_cycles is not None and session_cycle >= f.mode_drop_at_cycles
                    and self.state == "commanding" and st.mode_drops == 0):
                self._mode_drop_left = f.mode_drop_cycles  # the controller leaves commanding and holds
                st.mode_drops += 1
                q_hold = last_applied.copy()
                self._set_state("command_wait")
            self._held = (last_applied if self.state == "commanding" else q_hold).copy()
            # -------- send the measurement
            seq = self.seq
            res_out, q_cmd_out = res, q_cmd
            if f.report_offset_rad and (f.report_offset_cycles is None or session_cycle < f.report_offset_cycles):
                j = min(f.report_offset_joint, len(q_cmd) - 1)  # a controller reporting a position it is not at
                off = np.zeros(len(q_cmd))
                off[j] = f.report_offset_rad
                res_out = dataclasses.replace(res, q_meas_rad=res.q_meas_rad + off)
                q_cmd_out = np.asarray(q_cmd, dtype=float) + off
            data = self._encode(res_out, seq, refl, q_cmd_out, self.state)
            sent = self._send(data, session_cycle)
            reply = None
            if sent and self._wants_reply(seq) and self.state != "stopped":
                reply = self._wait_reply(seq)
                if reply is None:
                    st.missed_replies += 1
                    consecutive_missed += 1
                    good = 0
                else:
                    st.replies += 1
                    consecutive_missed = 0
                    good += 1
                    refl = seq
            elif not sent and self.state != "stopped":
                st.missed_replies += 1
                consecutive_missed += 1
                good = 0
            self._recent.append(0 if reply is not None or not self._wants_reply(seq) else 1)
            self.quality = quality_from_misses(self._recent)
            # -------- states
            if self.state == "stopped":
                pass
            elif consecutive_missed >= self.stop_after_missed:
                self._stop(f"no valid answer from the client for {consecutive_missed} cycles")
                stop_left = self.hold_after_stop_cycles
                q_hold = self.stepper.state()[0]
                self._program = None
            elif self.state == "wait" and good >= self.ready_after:
                self._set_state("ready" if self.mode == "monitor" else "command_wait")
            elif self._mode_drop_left > 0:
                self._mode_drop_left -= 1
            elif self.state == "command_wait" and reply is not None and reply[1] is not None:
                self._set_state("commanding")
            # -------- the command of this cycle
            if self.state == "stopped":
                res = self.stepper.step(q_hold, np.zeros_like(q_hold), np.zeros_like(q_hold))
                stop_left -= 1
                if stop_left <= 0:
                    st.dq_after_stop_rad_s = float(np.max(np.abs(self.stepper.state()[1])))
                    break
            elif prog is not None and prog[2] < prog[0].n_samples:
                k = prog[2]
                if k < 0:
                    res = self.stepper.step(q_hold, np.zeros_like(q_hold), np.zeros_like(q_hold))
                else:
                    ref, ff = prog[0], prog[1]
                    res = self.stepper.step(ref.q_rad[k], ref.dq_rad_s[k], ref.ddq_rad_s2[k], tau_ff_Nm=ff[k])
                prog[2] += 1
                if prog[2] == prog[0].n_samples:
                    q_hold = prog[0].q_rad[-1].copy()
                    q_cmd = q_hold.copy()
            else:
                if self.state == "commanding" and reply is not None and reply[1] is not None:
                    q_cmd = np.asarray(reply[1], dtype=float)
                    st.commands_applied += 1
                    st.max_command_step_rad = max(st.max_command_step_rad, float(np.max(np.abs(q_cmd - last_applied))))
                    last_applied = q_cmd.copy()
                    res = self.stepper.step(q_cmd)
                elif self.state == "commanding":
                    res = self.stepper.step(last_applied)  # a missed command: hold the last one
                else:
                    res = self.stepper.step(q_hold, np.zeros_like(q_hold), np.zeros_like(q_hold))
                    q_cmd = q_hold
                    last_applied = q_hold.copy()
            self.seq = (self.seq + 1) % (1 << self.seq_bits)
            st.cycles += 1
            session_cycle += 1
        self._flush()

    def _stop(self, reason: str) -> None:
        st = self.status
        st.stopped = True
        st.stop_reason = reason
        st.stop_cycle = st.cycles
        self._set_state("stopped")

    # ------------------------------------------------------------------ link with faults
    def _send(self, data: bytes, session_cycle: int) -> bool:
        """Send through the fault injector; False when the client cannot answer this packet
        (dropped, withheld, corrupted)."""
        f, st, r = self.faults, self.status, self.rng
        if f.blackout_after_cycles is not None and session_cycle >= f.blackout_after_cycles and (
                f.blackout_cycles is None or session_cycle < f.blackout_after_cycles + f.blackout_cycles):
            st.dropped += 1
            return False
        if f.foreign and r.random() < f.foreign:
            self._send_foreign(data)
        if self._burst_left > 0 or (f.burst_loss and r.random() < f.burst_loss):
            self._burst_left = (self._burst_left or f.burst_cycles) - 1
            st.dropped += 1
            return False
        if f.loss and r.random() < f.loss:
            st.dropped += 1
            return False
        answerable = True
        if f.oversize and r.random() < f.oversize:
            data = data + self.rng.integers(0, 256, 1 + int(r.integers(200)), dtype=np.uint8).tobytes()
            st.oversized += 1
            answerable = False
        elif f.truncate and r.random() < f.truncate:
            data = data[: max(1, len(data) // 2)]
            st.truncated += 1
            answerable = False
        elif f.malformed and r.random() < f.malformed:
            data = self._malformed(data)
            st.malformed += 1
            answerable = False
        elif f.wrong_id and r.random() < f.wrong_id:
            data = self._wrong_id(data)
            st.wrong_id += 1
            answerable = False
        if answerable and f.reorder and self._withheld is None and r.random() < f.reorder:
            self._withheld = data  # goes out after the next packet
            st.reordered += 1
            return False
        delay = 0.0
        if f.delay_prob and r.random() < f.delay_prob:
            delay += f.delay_s
            st.delayed += 1
        if f.jitter_s:
            delay += r.uniform(0, f.jitter_s)
        if delay > 0:
            time.sleep(delay)  # the packet arrives late; the controller cycle waits with it
        self.sock.sendto(data, self.client)
        st.sent += 1
        if self._withheld is not None:
            self.sock.sendto(self._withheld, self.client)
            self._withheld = None
        if answerable and f.duplicate and r.random() < f.duplicate:
            self.sock.sendto(data, self.client)
            st.duplicated += 1
        return answerable

    def _send_foreign(self, data: bytes) -> None:
        """The same packet from another port of the controller host (a foreign sender)."""
        if self._foreign_sock is None:
            self._foreign_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._foreign_sock.bind(("127.0.0.1", 0))
        self._foreign_sock.sendto(data, self.client)
        self.status.foreign_sent += 1

    def _flush(self) -> None:
        if self._withheld is not None:
            self.sock.sendto(self._withheld, self.client)
            self._withheld = None

    def _wait_reply(self, seq: int):
        """The client's answer to packet ``seq`` within ``reply_timeout_s`` (older answers are late)."""
        deadline = time.monotonic() + self.reply_timeout_s
        st = self.status
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data, addr = self.sock.recvfrom(65536)
            except socket.timeout:
                return None
            except OSError:
                continue
            if addr != self.client:
                continue
            try:
                refl, cmd = self._decode_reply(data)
            except Exception:
                st.bad_replies += 1
                continue
            if cmd is not None:
                st.wire_commands.append((st.cycles, self.state, None if self._held is None else self._held.copy(),
                                         np.array(cmd, dtype=float)))
            if refl == seq:
                return refl, cmd
            st.late_replies += 1


def quality_from_misses(recent: deque) -> int:
    """FRI-style link quality 0..3 (BAD, UNACCEPTABLE, OK, PERFECT) from recent misses."""
    m = sum(recent)
    return 3 if m == 0 else 2 if m <= 2 else 1 if m <= 10 else 0
