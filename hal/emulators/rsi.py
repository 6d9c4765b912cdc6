"""An emulated KUKA KRC4 running RSI (XML over UDP), serving the MuJoCo twin.

Built on :class:`hal.emulators.common.ControllerEmulator` (the lock-step cycle loop on
127.0.0.1, session states, fault injection, stop on missed replies): the controller *sends
first* every cycle a ``<Rob TYPE="KUKA">`` message (:mod:`hal.real.rsi_codec`) to the
client's port, with the measured axis positions AIPos, the set-point ASPos, the mapped torque
channels, the Delay count and the IPOC (``ipoc0 + cycle_ms x cycle``); the client's ``<Sen>``
reply must echo that IPOC. Its axis correction AK (deg) is relative to the set-point where
the session (RSI_ON) started; in command ("correction") mode the set-point of the next cycle
is that pose plus the correction, held when a reply is missing or late. In monitor mode the
controller plays its own program and the corrections are ignored. It runs faster than real
time (the next cycle starts when the reply is in).

Late replies: besides the common faults (lost, delayed and jittered, duplicated, reordered,
truncated, malformed and wrong-IPOC messages), :class:`RsiFaults` adds the reply path: a lost
reply, and a reply delay (with a probability) plus jitter; a reply whose injected latency
exceeds the cycle is late and discarded. Every missing or late reply increments Delay
(``status.missed_replies``); ``stop_after_missed`` of them in a row stop the robot (the
status records the reason, the cycle and the speed after braking).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robident_twin.errors import ConfigError

from ..real.rsi_codec import RobMessage, RsiFormat, RsiMessageError, decode_sen, encode_rob
from ..sim.stepper import StepResult, TwinStepper
from .common import ControllerEmulator, Faults

IPOC0 = 4208163072  # an arbitrary first time stamp (ms)


@dataclass(frozen=True)
class RsiFaults(Faults):
    """The common faults plus the reply path: lost replies, reply delay (probability and
    seconds) and uniform jitter; a reply later than one cycle is late."""

    reply_loss: float = 0.0
    reply_delay_prob: float = 0.0
    reply_delay_s: float = 0.0
    reply_jitter_s: float = 0.0
    reply_blackout_after_cycles: int | None = None  # every reply lost from this session cycle on

    def __post_init__(self):
        super().__post_init__()
        for k in ("reply_loss", "reply_delay_prob"):
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0.0 <= float(v) <= 1.0:
                raise ConfigError(f"backend.emulator.faults.{k}: a probability in [0, 1], got {v!r}")
        for k in ("reply_delay_s", "reply_jitter_s"):
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0.0 <= float(v) <= 10.0:
                raise ConfigError(f"backend.emulator.faults.{k}: seconds in [0, 10], got {v!r}")
        v = self.reply_blackout_after_cycles
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise ConfigError(f"backend.emulator.faults.reply_blackout_after_cycles: a cycle count >= 0 or null, "
                              f"got {v!r}")


class InterpolatingStepper:
    """The emulated controller's set-point interpolation around a :class:`TwinStepper`: a
    position-only command stream (RSI corrections) is applied ``delay`` = 2 cycles late, with
    central-difference velocity and acceleration and the model feed-forward of the next
    set-point (a first-order-hold torque reaches its command one cycle later), as a
    controller's interpolator with a short look-ahead does. Without it (backward differences,
    feed-forward one cycle late) the twin tracks worse, its motion carries harmonics above
    the excitation's, and friction identified with the design's harmonics is biased by ~4 %
    (IR 361). Commands with an explicit velocity (a program, a hold) pass straight through."""

    delay = 2

    def __init__(self, stepper: TwinStepper):
        self.stepper = stepper
        self._buf: list[np.ndarray] = []

    def __getattr__(self, name):  # info, spec, noise, current, state, feedforward, reset ...
        return getattr(self.stepper, name)

    def step(self, q_cmd_rad, dq_cmd_rad_s=None, ddq_cmd_rad_s2=None, tau_ff_Nm=None):
        q = np.asarray(q_cmd_rad, dtype=float)
        if dq_cmd_rad_s is not None:
            self._buf = [q.copy()] * 4
            return self.stepper.step(q, dq_cmd_rad_s, ddq_cmd_rad_s2, tau_ff_Nm)
        if not self._buf:
            self._buf = [np.asarray(self.stepper.state()[0], dtype=float)] * 4
        self._buf = self._buf[1:] + [q.copy()]
        c3, c2, c1, c0 = self._buf  # commands of cycles k-3 .. k; apply k-2
        dt = self.stepper.dt_s
        dq = (c1 - c3) / (2 * dt)
        ddq = (c1 - 2 * c2 + c3) / dt**2
        twin = self.stepper.twin
        if twin.controller.feedforward:
            ff = twin.truth.torques(c1, (c0 - c2) / (2 * dt), (c0 - 2 * c1 + c2) / dt**2)[1][0]
            lim = self.stepper.info.tau_max_Nm  # a drive delivers no more (a held set-point's catch-up)
            ff = np.clip(ff, -lim, lim)
        else:
            ff = np.zeros_like(q)
        return self.stepper.step(c2, dq, ddq, tau_ff_Nm=ff)


class RsiEmulator(ControllerEmulator):
    """The controller side of RSI (see the module doc). ``channel_scale`` maps a channel role
    to the factor from N m to the unit the controller sends (e.g. A per N m for a current)."""

    seq_bits = 32
    name = "rsi"

    def __init__(self, stepper: TwinStepper, client_address: tuple[str, int], fmt: RsiFormat,
                 cycle_ms: int = 4, faults: RsiFaults | None = None, channel_scale: dict | None = None,
                 ipoc0: int = IPOC0, stop_tag: str = "Stop", **kw):
        if fmt.n_axes != stepper.info.n_joints:
            raise ConfigError(f"rsi emulator: the RSI format has {fmt.n_axes} axes, the twin "
                              f"{stepper.spec.name} has {stepper.info.n_joints}")
        if abs(stepper.info.control_rate_hz * cycle_ms - 1000.0) > 1e-6:
            raise ConfigError(f"rsi emulator: the twin steps at {stepper.info.control_rate_hz:g} Hz, the RSI "
                              f"cycle is {cycle_ms} ms")
        self.fmt = fmt
        self.cycle_ms = int(cycle_ms)
        self.cycle_s = self.cycle_ms / 1000.0
        self.ipoc0 = int(ipoc0)
        self.stop_tag = stop_tag
        self.channel_scale = {k: float(v) for k, v in (channel_scale or {}).items()}
        self.q_start: np.ndarray | None = None
        self.stop_requests = 0       # replies that carried the stop element
        self.reply_faults = {"reply_loss": 0, "reply_delayed": 0, "late_by_delay": 0}
        self._cycles0 = 0
        super().__init__(stepper, client_address, faults or RsiFaults(), **kw)

    def begin_session(self, mode: str) -> None:
        self.end_session()  # the previous session is over before its start pose is forgotten
        self._cycles0 = self.status.cycles
        self.q_start = None  # RSI_ON: corrections are relative to the set-point at the first message
        super().begin_session(mode)

    # ------------------------------------------------------------------ protocol hooks
    def ipoc(self, seq: int) -> int:
        return self.ipoc0 + self.cycle_ms * int(seq)

    def _encode(self, res: StepResult, seq: int, refl: int, q_cmd: np.ndarray, state: str) -> bytes:
        if self.q_start is None:
            self.q_start = np.asarray(q_cmd, dtype=float).copy()
        chans = {}
        for role in self.fmt.channels:
            if role == "joint_torque":
                v = res.tau_joint_Nm if res.tau_joint_Nm is not None else res.tau_joint_true_Nm
            else:  # motor torque, or a current proportional to it (channel_scale)
                v = res.tau_motor_Nm
            chans[role] = np.asarray(v, dtype=float) * self.channel_scale.get(role, 1.0)
        msg = RobMessage(ipoc=self.ipoc(seq), aipos_deg=np.degrees(res.q_meas_rad), aspos_deg=np.degrees(q_cmd),
                         delay=self.status.missed_replies, channels=chans)
        return encode_rob(msg, self.fmt)

    def _decode_reply(self, data: bytes):
        sen = decode_sen(data, self.fmt)
        d = sen.ipoc - self.ipoc0
        if d % self.cycle_ms:
            raise RsiMessageError(f"RSI <Sen>: IPOC {sen.ipoc} is not a cycle's time stamp")
        if f"<{self.stop_tag}>1</{self.stop_tag}>".encode() in data:
            self.stop_requests += 1
        cmd = None if self.q_start is None else self.q_start + np.radians(sen.correction_deg)
        return (d // self.cycle_ms) % (1 << self.seq_bits), cmd

    def _wrong_id(self, data: bytes) -> bytes:
        """A message whose IPOC is not this cycle's: off the cycle grid, or far ahead."""
        s = data.decode("ascii")
        a, b = s.index("<IPOC>") + 6, s.index("</IPOC>")
        ipoc = int(s[a:b])
        wrong = ipoc + int(self.rng.choice([1, -1, 4 * 10**8 + 2]))
        return (s[:a] + str(wrong) + s[b:]).encode("ascii")

    def _malformed(self, data: bytes) -> bytes:
        """Broken XML or a bad value (never a valid message)."""
        s = data.decode("ascii")
        variants = (s.replace("</Rob>", ""), s.replace('A1="', 'A1="x', 1), s.replace("<IPOC>", "<IPOC>-", 1),
                    s.replace("<Rob ", "<Robot ", 1), s.replace("<AIPos ", "<AIPos A1= ", 1), "\x00" + s,
                    s.replace('A1="', 'A1="nan', 1), s.replace("<AIPos", "<AIPosX", 1),
                    '<!DOCTYPE r [<!ENTITY a "aaaa">]>' + s)
        return variants[int(self.rng.integers(len(variants)))].encode("latin-1")

    def _send(self, data: bytes, session_cycle: int) -> bool:
        if self.state == "stopped":  # RSI is off once the robot was stopped: nothing more is sent
            return False
        return super()._send(data, session_cycle)

    def _wait_reply(self, seq: int):
        reply = super()._wait_reply(seq)
        if reply is None:
            return None
        f, r = self.faults, self.rng
        if f.reply_blackout_after_cycles is not None and \
                self.status.cycles - self._cycles0 >= f.reply_blackout_after_cycles:
            self.reply_faults["reply_loss"] += 1
            return None
        if f.reply_loss and r.random() < f.reply_loss:
            self.reply_faults["reply_loss"] += 1
            return None
        latency = 0.0
        if f.reply_delay_prob and r.random() < f.reply_delay_prob:
            latency += f.reply_delay_s
            self.reply_faults["reply_delayed"] += 1
        if f.reply_jitter_s:
            latency += r.uniform(0.0, f.reply_jitter_s)
        if latency > self.cycle_s:  # arrives after the cycle: late, discarded
            self.reply_faults["late_by_delay"] += 1
            self.status.late_replies += 1
            return None
        return reply

    def summary(self) -> dict:
        """The status plus the RSI reply-path counters (for a recording's metadata)."""
        return {**self.status.as_dict(), **self.reply_faults, "stop_requests": self.stop_requests,
                "delay_count": self.status.missed_replies}


def start_rsi_emulator(spec, client_address, fmt: RsiFormat | None = None, noise=None, seed: int = 0,
                       control_rate_hz: float | None = None, controller=None, cycle_ms: int = 4,
                       **kw) -> RsiEmulator:
    """A running RSI emulator serving a fresh twin of ``spec`` (stepped once per RSI cycle)
    to the client at ``client_address``."""
    from ..sim.mujoco_backend import ControllerConfig

    rate = 1000.0 / cycle_ms
    if control_rate_hz is not None and abs(control_rate_hz - rate) > 1e-6:
        raise ConfigError(f"rsi emulator: control_rate_hz {control_rate_hz:g} contradicts the {cycle_ms} ms cycle")
    stepper = TwinStepper(spec, noise, seed=seed, control_rate_hz=rate, controller=controller or ControllerConfig())
    fmt = fmt or RsiFormat(n_axes=spec.n_joints)
    return RsiEmulator(InterpolatingStepper(stepper), client_address, fmt, cycle_ms=cycle_ms, **kw)
