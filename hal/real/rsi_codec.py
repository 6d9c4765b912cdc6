"""KUKA RobotSensorInterface (RSI) messages: XML over UDP, our own encoder and decoder.

Controller -> PC, every IPO cycle (4 ms IPO_FAST or 12 ms)::

    <Rob TYPE="KUKA">
      <RIst X=".." Y=".." Z=".." A=".." B=".." C=".."/>      actual Cartesian pose (mm, deg)
      <RSol X=".." .. C=".."/>                              set-point Cartesian pose
      <AIPos A1=".." .. An=".."/>                          actual axis positions (deg)
      <ASPos A1=".." .. An=".."/>                          set-point axis positions (deg)
      <MotTorque A1=".." .. An=".."/>                      channels mapped in the controller's
                                                           RSI XML config (tag names configurable)
      <Delay D="0"/>                                       late-reply count
      <IPOC>4208163072</IPOC>                              interpolation cycle time stamp (ms)
    </Rob>

PC -> controller, once per received message and before the next cycle::

    <Sen Type="ImFree"><AK A1=".." .. An=".."/><IPOC>4208163072</IPOC></Sen>

with the axis correction AK (deg, relative to the pose where RSI started) and the IPOC
echoed. Axis values are in degrees on the wire; :class:`RobMessage` and :class:`SenMessage`
hold them in degrees too (conversion to radians is the backend's business).

The number of axes is configurable (:class:`RsiFormat`), since the IR 361 twin has three.
Parsing uses :mod:`xml.etree.ElementTree`; anything that is not a well-formed message of the
expected shape (document type declarations and entities included) raises
:class:`RsiMessageError`, never anything else.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

from robident_twin.errors import ConfigError, RecordingError

CARTESIAN = ("X", "Y", "Z", "A", "B", "C")
MAX_DATAGRAM_BYTES = 65507


class RsiMessageError(RecordingError):
    """A received RSI datagram is malformed (not XML, wrong root, missing or bad element)."""


@dataclass(frozen=True)
class RsiFormat:
    """What the controller's RSI XML configuration maps into the messages.

    ``channels`` maps a role (``motor_torque``, ``joint_torque``, ``motor_current`` ...) to
    the element tag carrying it (attributes A1..An). ``decimals``: digits after the point
    written for every number (6 gives 1.7e-8 rad on an axis in degrees)."""

    n_axes: int = 6
    sen_type: str = "ImFree"
    correction_tag: str = "AK"
    channels: dict = field(default_factory=lambda: {"motor_torque": "MotTorque"})
    decimals: int = 6

    def __post_init__(self):
        if not 1 <= int(self.n_axes) <= 12:
            raise ConfigError(f"rsi: n_axes must be 1..12, got {self.n_axes}")
        tags = [self.correction_tag, *self.channels.values()]
        reserved = {"RIst", "RSol", "AIPos", "ASPos", "Delay", "IPOC"}
        for t in tags:
            if not isinstance(t, str) or not t.isidentifier():
                raise ConfigError(f"rsi: element name {t!r} is not a valid XML tag")
        if reserved & set(self.channels.values()):
            raise ConfigError(f"rsi: channel element names {sorted(reserved & set(self.channels.values()))} "
                              f"clash with the standard RSI elements")
        if len(set(self.channels.values())) != len(self.channels):
            raise ConfigError(f"rsi: two channels share an element name: {self.channels}")

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(f"A{i + 1}" for i in range(self.n_axes))


@dataclass
class RobMessage:
    """One controller message (axis values in deg, Cartesian in mm / deg)."""

    ipoc: int
    aipos_deg: np.ndarray
    aspos_deg: np.ndarray | None = None
    rist: np.ndarray | None = None
    rsol: np.ndarray | None = None
    delay: int = 0
    channels: dict = field(default_factory=dict)  # role -> array (n_axes,)


@dataclass
class SenMessage:
    """One PC reply: the axis correction (deg) and the echoed IPOC."""

    ipoc: int
    correction_deg: np.ndarray
    sen_type: str = "ImFree"


# --------------------------------------------------------------------------- encoding


def _num(x: float, decimals: int) -> str:
    if not math.isfinite(x):
        raise ConfigError(f"rsi: refusing to encode a non-finite value {x}")
    s = f"{x:.{decimals}f}"
    return "0" if s.lstrip("-").strip("0.") == "" else s


def _attrs(names, values, decimals: int) -> str:
    v = np.asarray(values, dtype=float).reshape(-1)
    if v.size != len(names):
        raise ConfigError(f"rsi: expected {len(names)} values ({' '.join(names)}), got {v.size}")
    return " ".join(f'{n}="{_num(float(x), decimals)}"' for n, x in zip(names, v))


def encode_rob(msg: RobMessage, fmt: RsiFormat) -> bytes:
    """The controller's ``<Rob TYPE="KUKA">`` datagram (used by the emulator and tests)."""
    d = fmt.decimals
    parts = ['<Rob TYPE="KUKA">']
    if msg.rist is not None:
        parts.append(f"<RIst {_attrs(CARTESIAN, msg.rist, d)}/>")
    if msg.rsol is not None:
        parts.append(f"<RSol {_attrs(CARTESIAN, msg.rsol, d)}/>")
    parts.append(f"<AIPos {_attrs(fmt.axes, msg.aipos_deg, d)}/>")
    if msg.aspos_deg is not None:
        parts.append(f"<ASPos {_attrs(fmt.axes, msg.aspos_deg, d)}/>")
    for role, values in msg.channels.items():
        if role not in fmt.channels:
            raise ConfigError(f"rsi: channel {role!r} is not mapped (mapped: {sorted(fmt.channels)})")
        parts.append(f"<{fmt.channels[role]} {_attrs(fmt.axes, values, d)}/>")
    parts.append(f'<Delay D="{int(msg.delay)}"/>')
    parts.append(f"<IPOC>{int(msg.ipoc)}</IPOC></Rob>")
    return "".join(parts).encode("ascii")


def encode_sen(msg: SenMessage, fmt: RsiFormat) -> bytes:
    """The PC's ``<Sen Type="...">`` reply with the correction element and the IPOC echoed."""
    return (f'<Sen Type="{fmt.sen_type}"><{fmt.correction_tag} '
            f'{_attrs(fmt.axes, msg.correction_deg, fmt.decimals)}/>'
            f"<IPOC>{int(msg.ipoc)}</IPOC></Sen>").encode("ascii")


# --------------------------------------------------------------------------- decoding


def _parse(data: bytes, root_tag: str) -> ET.Element:
    if not isinstance(data, (bytes, bytearray)):
        raise RsiMessageError(f"RSI {root_tag}: expected bytes, got {type(data).__name__}")
    if len(data) == 0:
        raise RsiMessageError(f"RSI {root_tag}: empty datagram")
    if len(data) > MAX_DATAGRAM_BYTES:
        raise RsiMessageError(f"RSI {root_tag}: datagram of {len(data)} bytes is too long")
    if b"<!" in data:  # DOCTYPE / ENTITY / CDATA: never in an RSI message, refused (entity expansion)
        raise RsiMessageError(f"RSI {root_tag}: declarations (<!...>) are not allowed")
    try:
        root = ET.fromstring(bytes(data))
    except ET.ParseError as exc:
        raise RsiMessageError(f"RSI {root_tag}: not well-formed XML ({exc})") from None
    if root.tag != root_tag:
        raise RsiMessageError(f"RSI: expected root element <{root_tag}>, got <{root.tag}>")
    return root


def _values(root: ET.Element, tag: str, names, required: bool, what: str) -> np.ndarray | None:
    el = root.find(tag)
    if el is None:
        if required:
            raise RsiMessageError(f"RSI {what}: element <{tag}> is missing")
        return None
    out = np.empty(len(names))
    for i, n in enumerate(names):
        s = el.get(n)
        if s is None:
            raise RsiMessageError(f"RSI {what}: element <{tag}> has no attribute {n} "
                                  f"(expected {' '.join(names)})")
        try:
            out[i] = float(s)
        except ValueError:
            raise RsiMessageError(f"RSI {what}: <{tag} {n}={s!r}> is not a number") from None
        if not math.isfinite(out[i]):
            raise RsiMessageError(f"RSI {what}: <{tag} {n}={s!r}> is not finite")
    return out


def _ipoc(root: ET.Element, what: str) -> int:
    el = root.find("IPOC")
    if el is None or el.text is None:
        raise RsiMessageError(f"RSI {what}: element <IPOC> is missing or empty")
    s = el.text.strip()
    if not s.isdigit():
        raise RsiMessageError(f"RSI {what}: <IPOC>{s!r}</IPOC> is not a non-negative integer")
    return int(s)


def decode_rob(data: bytes, fmt: RsiFormat) -> RobMessage:
    """Parse a controller datagram; :class:`RsiMessageError` for anything malformed."""
    root = _parse(data, "Rob")
    what = "<Rob>"
    delay_el = root.find("Delay")
    delay = 0
    if delay_el is not None:
        s = (delay_el.get("D") or "").strip()
        if not s.isdigit():
            raise RsiMessageError(f"RSI {what}: <Delay D={s!r}> is not a non-negative integer")
        delay = int(s)
    channels = {role: _values(root, tag, fmt.axes, True, what) for role, tag in fmt.channels.items()}
    return RobMessage(
        ipoc=_ipoc(root, what), aipos_deg=_values(root, "AIPos", fmt.axes, True, what),
        aspos_deg=_values(root, "ASPos", fmt.axes, False, what),
        rist=_values(root, "RIst", CARTESIAN, False, what), rsol=_values(root, "RSol", CARTESIAN, False, what),
        delay=delay, channels=channels)


def decode_sen(data: bytes, fmt: RsiFormat) -> SenMessage:
    """Parse a PC reply (used by the emulator); :class:`RsiMessageError` if malformed."""
    root = _parse(data, "Sen")
    what = "<Sen>"
    return SenMessage(ipoc=_ipoc(root, what),
                      correction_deg=_values(root, fmt.correction_tag, fmt.axes, True, what),
                      sen_type=root.get("Type", ""))
