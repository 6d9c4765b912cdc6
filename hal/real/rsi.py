"""KUKA RobotSensorInterface (RSI) backend: XML over UDP, the PC side.

The controller sends first, every IPO cycle (4 ms IPO_FAST or 12 ms), a ``<Rob TYPE="KUKA">``
message (:mod:`hal.real.rsi_codec`); the PC answers each one before the next cycle with a
``<Sen>`` message that echoes its IPOC and carries the axis correction AK (deg). A late
answer increments the controller's Delay count; too many stop the robot.

Built on :class:`hal.real.base.RealBackend` (safety gate, command guard, watchdog, link
statistics, Recording with gaps). What is RSI's own:

- **Cycle index from the IPOC**: ``(IPOC - IPOC0) / cycle_ms``, so a lost message leaves a gap
  instead of shifting the trajectory, a reordered one fills its own slot, a duplicate is
  recognised. The anchor IPOC0 is taken when two consecutive messages are one cycle apart;
  an IPOC off the cycle grid or implausibly far ahead (``max_gap_cycles``) is refused and
  counted (``wrong_ipoc``).
- **Corrections relative to the start pose**: RSI corrections are relative to the set-point
  where RSI started (the anchor message's ASPos, else AIPos); a position command q (checked
  by the command guard) is sent as AK = q - q_start in degrees. A missing command holds the
  last correction.
- **Modes**: ``correction`` (= the base's ``command``: the PC streams the reference; when it
  is done the reply carries the stop element ``<Stop>1</Stop>``, which the controller's RSI
  config maps to end RSI_MOVECORR) and ``monitor`` (zero correction; the controller's own
  program moves the robot and the PC records).
- **Late replies**: the increase of the controller's Delay count over the session
  (``late_replies_reported``), plus replies this PC sent more than one cycle after the
  message arrived (``late_local``).
- **Torque channels**: whatever the controller's RSI config maps (``channels``: role ->
  element tag and factor to N m), e.g. motor torques or currents times the torque constant.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.model.robot import RobotSpec

from ..protocol import JointTrajectory, Recording
from .base import CommunicationLost, Packet, ProtocolError, RealBackend, RealConfig, make_real_backend
from .rsi_codec import RsiFormat, RsiMessageError, SenMessage, decode_rob, encode_sen

ROLES = ("motor_torque", "joint_torque")


@dataclass(frozen=True)
class RsiConfig:
    """RSI specifics: the cycle, the element names the controller's RSI XML config maps, and
    ``channels`` {role: {tag, to_Nm}} with role ``motor_torque`` or ``joint_torque``."""

    n_axes: int = 6
    cycle_ms: int = 4
    sen_type: str = "ImFree"
    correction_tag: str = "AK"
    stop_tag: str = "Stop"
    channels: Mapping[str, Any] = field(default_factory=lambda: {"motor_torque": {"tag": "MotTorque", "to_Nm": 1.0}})
    decimals: int = 6
    max_gap_cycles: int = 2500
    max_late_in_row: int = 20  # the controller reports this many late replies in a row: the link is broken

    def __post_init__(self):
        if not 1 <= int(self.cycle_ms) <= 100:
            raise ConfigError(f"backend.cycle_ms: the RSI cycle in ms (4 for IPO_FAST, or 12), got {self.cycle_ms!r}")
        if not self.channels:
            raise ConfigError("backend.channels: map at least one torque channel (motor_torque or joint_torque)")
        for role, c in self.channels.items():
            if role not in ROLES:
                raise ConfigError(f"backend.channels: unknown role {role!r}; expected one of {ROLES}")
            if not isinstance(c, Mapping) or "tag" not in c:
                raise ConfigError(f"backend.channels.{role}: expected {{tag: ElementName, to_Nm: factor}}, got {c!r}")
            if not float(c.get("to_Nm", 1.0)) > 0:
                raise ConfigError(f"backend.channels.{role}.to_Nm: expected a positive factor, got {c.get('to_Nm')!r}")
        if not self.stop_tag.isidentifier():
            raise ConfigError(f"backend.stop_tag: {self.stop_tag!r} is not an XML element name")
        self.fmt  # validates the element names

    @property
    def fmt(self) -> RsiFormat:
        return RsiFormat(n_axes=int(self.n_axes), sen_type=self.sen_type, correction_tag=self.correction_tag,
                         channels={r: c["tag"] for r, c in self.channels.items()}, decimals=int(self.decimals))

    def to_Nm(self, role: str) -> float:
        return float(self.channels[role].get("to_Nm", 1.0))


class RsiRobot(RealBackend):
    """The RSI client (see the module doc)."""

    backend = "rsi"
    seq_bits = 48

    def __init__(self, spec: RobotSpec, config: RealConfig, emulator=None, rsi: RsiConfig | None = None):
        rsi = rsi or RsiConfig(n_axes=spec.n_joints)
        if int(rsi.n_axes) != spec.n_joints:
            raise ConfigError(f"backend rsi: {rsi.n_axes} axes configured, robot {spec.name} has {spec.n_joints}")
        if abs(config.control_rate_hz * rsi.cycle_ms - 1000.0) > 1e-6:
            raise ConfigError(f"backend rsi: control_rate_hz {config.control_rate_hz:g} does not match the "
                              f"{rsi.cycle_ms} ms RSI cycle")
        self.rsi = rsi
        self.fmt = rsi.fmt
        self.motor_torque_note = ("motor torques from RSI element "
                                  f"<{rsi.channels['motor_torque']['tag']}>" if "motor_torque" in rsi.channels
                                  else "no motor torque channel mapped in the RSI config")
        super().__init__(spec, config, emulator)
        self._new_session()

    # ------------------------------------------------------------------ session state
    def _new_session(self) -> None:
        self._ipoc0: int | None = None
        self._candidate: tuple[int, np.ndarray] | None = None
        self._q_start: np.ndarray | None = None
        self._corr_deg = np.zeros(self.spec.n_joints)
        self._final = False
        self._delay0: int | None = None
        self._delay_max = 0
        self._late_in_row = 0
        self.rsi_stats = {"wrong_ipoc": 0, "late_local": 0, "late_replies_reported": 0, "stop_sent": False,
                          "last_error": ""}

    def run(self, trajectory: JointTrajectory, periods: int = 1, transient_periods: int = 0) -> Recording:
        self._new_session()
        try:
            rec = super().run(trajectory, periods, transient_periods)
        finally:
            self.rsi_stats["late_replies_reported"] = self.late_replies_reported
            self.last_run = {**self.last_run, "rsi": dict(self.rsi_stats)}
        rec.metadata["rsi"] = {**self.rsi_stats, "cycle_ms": self.rsi.cycle_ms, "ipoc0": self._ipoc0,
                               "q_start_rad": None if self._q_start is None else self._q_start.tolist()}
        if self.emulator is not None and hasattr(self.emulator, "summary"):
            rec.metadata["emulator"] = self.emulator.summary()
        return rec

    @property
    def late_replies_reported(self) -> int:
        """Late or missing replies the controller counted (Delay) since the session's anchor."""
        return 0 if self._delay0 is None else self._delay_max - self._delay0

    # ------------------------------------------------------------------ protocol hooks
    def _refuse(self, why: str, wrong_ipoc: bool = False):
        if wrong_ipoc:
            self.rsi_stats["wrong_ipoc"] += 1
        self.rsi_stats["last_error"] = why
        raise ProtocolError(why)

    def _decode(self, data: bytes) -> Packet:
        t_rx = time.monotonic()
        try:
            msg = decode_rob(data, self.fmt)
        except RsiMessageError as exc:
            self._refuse(str(exc))
        q_set_deg = msg.aspos_deg if msg.aspos_deg is not None else msg.aipos_deg
        cyc = self.rsi.cycle_ms
        if self._ipoc0 is None:  # anchor on two consecutive messages one cycle apart
            cand = self._candidate
            self._candidate = (msg.ipoc, q_set_deg)
            if cand is None or msg.ipoc - cand[0] != cyc:
                self.stats.malformed -= 1  # not malformed: held back until the anchor is known (base adds 1)
                self._refuse(f"RSI: waiting for two consecutive messages to anchor the IPOC (got {msg.ipoc})")
            self._ipoc0 = cand[0]
            self._q_start = np.radians(cand[1])
            self._delay0 = self._delay_max = msg.delay
        d = msg.ipoc - self._ipoc0
        if d % cyc:
            self._refuse(f"RSI: IPOC {msg.ipoc} is off the {cyc} ms cycle grid (anchor {self._ipoc0})", True)
        seq = d // cyc
        newest = getattr(self, "_tracker", None) and self._tracker.newest
        if newest is not None and seq - newest > self.rsi.max_gap_cycles:
            self._refuse(f"RSI: IPOC {msg.ipoc} is {seq - newest} cycles ahead of the newest message "
                         f"(more than max_gap_cycles {self.rsi.max_gap_cycles})", True)
        if msg.delay > self._delay_max:
            self._late_in_row += 1
            self._delay_max = msg.delay
        elif msg.delay == self._delay_max:
            self._late_in_row = 0
        ch = msg.channels
        tm = ch["motor_torque"] * self.rsi.to_Nm("motor_torque") if "motor_torque" in ch else None
        tj = ch["joint_torque"] * self.rsi.to_Nm("joint_torque") if "joint_torque" in ch else None
        return Packet(seq=seq, q_meas_rad=np.radians(msg.aipos_deg), tau_joint_Nm=tj, q_cmd_rad=np.radians(q_set_deg),
                      extra={"ipoc": msg.ipoc, "delay": msg.delay, "t_rx": t_rx}, tau_motor_Nm=tm)

    def _next(self, *args, **kwargs):
        try:
            out = super()._next(*args, **kwargs)
        except CommunicationLost as exc:
            if self._late_in_row:
                raise CommunicationLost(
                    f"{exc}; before it went silent the controller had counted {self._late_in_row} late or "
                    f"missing replies in a row (Delay {self._delay_max}): RSI has stopped the robot") from None
            raise
        if self._late_in_row >= self.rsi.max_late_in_row:
            raise CommunicationLost(
                f"rsi: the controller counted {self._late_in_row} late or missing replies in a row (Delay "
                f"{self._delay_max}); it stops the robot, so this run is aborted (link statistics "
                f"{self.stats.as_dict()}, {self.rsi_stats})")
        return out

    def _encode_reply(self, pkt: Packet, q_cmd_rad: np.ndarray | None) -> bytes:
        if q_cmd_rad is not None:  # the guard's command (None in monitor mode: no correction)
            self._corr_deg = np.degrees(np.asarray(q_cmd_rad, dtype=float) - self._q_start)
        out = encode_sen(SenMessage(pkt.extra["ipoc"], self._corr_deg, self.fmt.sen_type), self.fmt)
        if self._final:
            tag = self.rsi.stop_tag
            out = out.replace(b"</Sen>", f"<{tag}>1</{tag}></Sen>".encode())
            self.rsi_stats["stop_sent"] = True
        if time.monotonic() - pkt.extra["t_rx"] > self.rsi.cycle_ms / 1000.0:
            self.rsi_stats["late_local"] += 1
        return out

    def _reply_final(self, pkt: Packet) -> None:
        self._final = True  # the end of the reference: ask the controller to end RSI_MOVECORR
        super()._reply_final(pkt)

    def _ready_monitor(self, pkt: Packet) -> bool:
        return True

    def _ready_command(self, pkt: Packet) -> bool:
        return True


# --------------------------------------------------------------------------- factory

RSI_KEYS = ("cycle_ms", "sen_type", "correction_tag", "stop_tag", "channels", "decimals", "max_gap_cycles",
            "max_late_in_row")


def rsi_config(spec: RobotSpec, backend_cfg) -> RsiConfig:
    """The RSI specifics of the typed ``backend`` option (:class:`hal.config.RsiBackend`)."""
    kw = {k: getattr(backend_cfg, k) for k in RSI_KEYS if getattr(backend_cfg, k) is not None}
    kw["channels"] = {str(r): dict(c) if isinstance(c, Mapping) else c for r, c in dict(kw["channels"]).items()}
    return RsiConfig(n_axes=spec.n_joints, **kw)


def make_rsi_robot(spec: RobotSpec, backend_cfg, noise=None, seed: int = 0) -> RsiRobot:
    """The RSI backend from its config group (``conf/backend/rsi.yaml``; :class:`hal.config.RsiBackend`,
    or a mapping validated as one); ``emulate: true`` starts the local emulator
    (:mod:`hal.emulators.rsi`) serving the twin."""
    from ..config import RsiBackend, coerce
    from ..emulators.rsi import RsiFaults, start_rsi_emulator

    b = coerce(RsiBackend, backend_cfg, "backend")
    rsi = rsi_config(spec, b)
    if not b.emulate and not b.port:
        raise ConfigError("backend.port: set the UDP port the controller's RSI ETHERNET config sends to "
                          "(port 0, any free port, only works with backend.emulate=true)")
    rate = 1000.0 / rsi.cycle_ms
    mode = "command" if b.mode == "correction" else b.mode
    rsi_faults = RsiFaults.from_config(b.emulator.faults)
    ipoc0 = b.emulator.ipoc0

    def emulator_factory(spec_, client_address, faults=None, **kw):  # the base's faults are replaced by RSI's
        return start_rsi_emulator(spec_, client_address, fmt=rsi.fmt, cycle_ms=rsi.cycle_ms, faults=rsi_faults,
                                  channel_scale={r: 1.0 / rsi.to_Nm(r) for r in rsi.channels},
                                  **({} if ipoc0 is None else {"ipoc0": int(ipoc0)}), **kw)

    backend_cls = functools.partial(RsiRobot, rsi=rsi)
    backend_cls.backend = RsiRobot.backend
    return make_real_backend(backend_cls, emulator_factory, spec, b, noise, seed, mode=mode, control_rate_hz=rate)
