"""KUKA LBR iiwa Sunrise FRI: our own minimal protobuf (proto2-style) wire codec, the
monitoring and command messages, and the HAL backend.

Protobuf wire format written by hand: a field is a key ``(number << 3) | wire_type`` as a
varint, then a varint (wire type 0), 8 little-endian bytes (1: doubles), a varint length and
the bytes (2: sub-messages) or 4 bytes (5). ``JointValues`` is ``repeated double value = 1``
written UNPACKED (one key per element; a packed field is also accepted when reading). Unknown
fields are skipped; groups (wire types 3, 4) and truncation are ProtocolErrors.

Messages (field numbers from ``/work/shared/controllers.md``):

    FRIMonitoringMessage: 1 header {1 messageIdentifier (0x245142), 2 sequenceCounter,
        3 reflectedSequenceCounter}, 2 robotInfo {1 numberOfJoints, 2 safetyState},
        3 monitorData {1 measuredJointPosition, 2 measuredTorque, 3 commandedJointPosition
        (FRI 1.x, optional), 4 commandedTorque, 5 externalTorque, 15 timestamp {1 sec, 2 nanosec}},
        4 connectionInfo {1 sessionState (IDLE, MONITORING_WAIT, MONITORING_READY,
        COMMANDING_WAIT, COMMANDING_ACTIVE = 0..4), 2 quality, 3 sendPeriod (ms),
        4 receiveMultiplier}, 5 ipoData {1 jointPosition, 10 clientCommandMode}
    FRICommandMessage: 1 header (messageIdentifier 0x34001), 2 commandData {1 jointPosition,
        3 jointTorque}

A 7-joint monitoring message with measured position and torque, commanded and external torque,
timestamp, connection info and the interpolator position is about 379 bytes.

Backend (:class:`SunriseFriBackend`, ``backend=sunrise_fri``): answers every
receiveMultiplier-th message (sequenceCounter divisible by it) with reflectedSequenceCounter =
that counter; sends commandData only in COMMANDING_WAIT (the interpolator position, to hold)
and COMMANDING_ACTIVE (the reference through the command guard). Monitoring mode records
measuredJointPosition and measuredTorque (joint-torque sensors) and aligns them with the
reference through ipoData.jointPosition. No motor currents: ``tau_motor_Nm`` repeats the joint
torque as a placeholder, ``metadata["motor_torque_available"] = False``.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from .base import Packet, ProtocolError, RealBackend

MONITORING_ID, COMMAND_ID = 0x245142, 0x34001
IDLE, MONITORING_WAIT, MONITORING_READY, COMMANDING_WAIT, COMMANDING_ACTIVE = range(5)
SESSION_STATES = ("IDLE", "MONITORING_WAIT", "MONITORING_READY", "COMMANDING_WAIT", "COMMANDING_ACTIVE")
_D = struct.Struct("<d")


# --------------------------------------------------------------------------- wire format
def encode_varint(n: int) -> bytes:
    n = int(n)
    if n < 0:
        n &= (1 << 64) - 1  # two's complement, 10 bytes, as protobuf writes negative int32/int64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtocolError("protobuf: truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtocolError("protobuf: varint longer than 10 bytes")


def _key(number: int, wire_type: int) -> bytes:
    return encode_varint((number << 3) | wire_type)


def field_varint(number: int, value: int) -> bytes:
    return _key(number, 0) + encode_varint(value)


def field_double(number: int, value: float) -> bytes:
    return _key(number, 1) + _D.pack(float(value))


def field_bytes(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + encode_varint(len(payload)) + payload


_JV_DTYPE = np.dtype([("key", "u1"), ("value", "<f8")])  # one unpacked element: key 0x09 + double


def joint_values(values) -> bytes:
    """``repeated double value = 1``, unpacked (key 0x09 before each little-endian double)."""
    v = np.asarray(values, dtype=float).reshape(-1)
    a = np.empty(v.size, dtype=_JV_DTYPE)
    a["key"] = 0x09
    a["value"] = v
    return a.tobytes()


def parse_fields(buf: bytes) -> dict[int, list]:
    """number -> list of values (int for varints, bytes for length-delimited, 8 or 4 raw bytes)."""
    out: dict[int, list] = {}
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = decode_varint(buf, pos)
        number, wt = key >> 3, key & 7
        if number == 0:
            raise ProtocolError("protobuf: field number 0")
        if wt == 0:
            v, pos = decode_varint(buf, pos)
        elif wt == 1:
            if pos + 8 > n:
                raise ProtocolError("protobuf: truncated fixed64")
            v, pos = buf[pos:pos + 8], pos + 8
        elif wt == 2:
            ln, pos = decode_varint(buf, pos)
            if pos + ln > n:
                raise ProtocolError(f"protobuf: length-delimited field {number} of {ln} bytes is truncated")
            v, pos = buf[pos:pos + ln], pos + ln
        elif wt == 5:
            if pos + 4 > n:
                raise ProtocolError("protobuf: truncated fixed32")
            v, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ProtocolError(f"protobuf: unsupported wire type {wt} (field {number})")
        out.setdefault(number, []).append(v)
    return out


def parse_joint_values(buf: bytes) -> np.ndarray:
    if len(buf) % 9 == 0:  # the usual unpacked layout, read in one go
        a = np.frombuffer(bytes(buf), dtype=_JV_DTYPE)
        if np.all(a["key"] == 0x09):
            return a["value"].astype(float)
    vals = []
    for v in parse_fields(buf).get(1, []):  # fixed64 (8 bytes) or a packed run of doubles
        if not isinstance(v, (bytes, bytearray)) or len(v) % 8:
            raise ProtocolError("protobuf: JointValues.value must be doubles")
        vals.extend(struct.unpack(f"<{len(v) // 8}d", v))
    return np.array(vals, dtype=float)


def _one(fields: dict, number: int, default=None):
    v = fields.get(number)
    return default if not v else v[-1]  # proto2: the last occurrence wins for a singular field


# --------------------------------------------------------------------------- messages
@dataclass
class Monitoring:
    sequence_counter: int = 0
    reflected_sequence_counter: int = 0
    message_identifier: int = MONITORING_ID
    number_of_joints: int = 7
    safety_state: int = 0
    measured_joint_position: np.ndarray | None = None
    measured_torque: np.ndarray | None = None
    commanded_joint_position: np.ndarray | None = None  # FRI 1.x only
    commanded_torque: np.ndarray | None = None
    external_torque: np.ndarray | None = None
    timestamp_sec: int = 0
    timestamp_nanosec: int = 0
    session_state: int = IDLE
    quality: int = 0
    send_period_ms: int = 1
    receive_multiplier: int = 1
    ipo_joint_position: np.ndarray | None = None
    client_command_mode: int = 0


@dataclass
class Command:
    sequence_counter: int = 0
    reflected_sequence_counter: int = 0
    message_identifier: int = COMMAND_ID
    joint_position: np.ndarray | None = None
    joint_torque: np.ndarray | None = None


def _header(ident: int, seq: int, refl: int) -> bytes:
    return field_bytes(1, field_varint(1, ident) + field_varint(2, seq & 0xFFFFFFFF)
                       + field_varint(3, refl & 0xFFFFFFFF))


def encode_monitoring(m: Monitoring) -> bytes:
    mon = b""
    for num, name in ((1, "measured_joint_position"), (2, "measured_torque"), (3, "commanded_joint_position"),
                      (4, "commanded_torque"), (5, "external_torque")):
        v = getattr(m, name)
        if v is not None:
            mon += field_bytes(num, joint_values(v))
    mon += field_bytes(15, field_varint(1, m.timestamp_sec) + field_varint(2, m.timestamp_nanosec))
    ipo = b"" if m.ipo_joint_position is None else field_bytes(1, joint_values(m.ipo_joint_position))
    ipo += field_varint(10, m.client_command_mode)
    return (_header(m.message_identifier, m.sequence_counter, m.reflected_sequence_counter)
            + field_bytes(2, field_varint(1, m.number_of_joints) + field_varint(2, m.safety_state))
            + field_bytes(3, mon)
            + field_bytes(4, field_varint(1, m.session_state) + field_varint(2, m.quality)
                          + field_varint(3, m.send_period_ms) + field_varint(4, m.receive_multiplier))
            + field_bytes(5, ipo))


def _parse_header(f: dict, expected_id: int, what: str) -> tuple[int, int, int]:
    h = _one(f, 1)
    if not isinstance(h, (bytes, bytearray)):
        raise ProtocolError(f"Sunrise FRI {what}: no header")
    hf = parse_fields(h)
    ident = _one(hf, 1)
    if ident != expected_id:
        raise ProtocolError(f"Sunrise FRI {what}: messageIdentifier {ident!r}, expected 0x{expected_id:x}")
    seq, refl = _one(hf, 2, 0), _one(hf, 3, 0)
    if not isinstance(seq, int) or not isinstance(refl, int):
        raise ProtocolError(f"Sunrise FRI {what}: malformed sequence counters")
    return ident, seq, refl


def _sub(f: dict, number: int) -> dict:
    v = _one(f, number)
    if v is None:
        return {}
    if not isinstance(v, (bytes, bytearray)):
        raise ProtocolError(f"Sunrise FRI: field {number} should be a message")
    return parse_fields(v)


def _jv(f: dict, number: int):
    v = _one(f, number)
    if v is None:
        return None
    if not isinstance(v, (bytes, bytearray)):
        raise ProtocolError(f"Sunrise FRI: field {number} should be JointValues")
    return parse_joint_values(v)


def decode_monitoring(buf: bytes) -> Monitoring:
    f = parse_fields(bytes(buf))
    ident, seq, refl = _parse_header(f, MONITORING_ID, "monitoring message")
    ri, md, ci, ipo = _sub(f, 2), _sub(f, 3), _sub(f, 4), _sub(f, 5)
    ts = parse_fields(_one(md, 15, b"")) if isinstance(_one(md, 15, b""), (bytes, bytearray)) else {}
    m = Monitoring(sequence_counter=seq, reflected_sequence_counter=refl, message_identifier=ident,
                   number_of_joints=_one(ri, 1, 0), safety_state=_one(ri, 2, 0),
                   measured_joint_position=_jv(md, 1), measured_torque=_jv(md, 2),
                   commanded_joint_position=_jv(md, 3), commanded_torque=_jv(md, 4), external_torque=_jv(md, 5),
                   timestamp_sec=_one(ts, 1, 0), timestamp_nanosec=_one(ts, 2, 0),
                   session_state=_one(ci, 1, IDLE), quality=_one(ci, 2, 0), send_period_ms=_one(ci, 3, 0),
                   receive_multiplier=_one(ci, 4, 1), ipo_joint_position=_jv(ipo, 1),
                   client_command_mode=_one(ipo, 10, 0))
    for name in ("number_of_joints", "session_state", "receive_multiplier", "send_period_ms"):
        if not isinstance(getattr(m, name), int):
            raise ProtocolError(f"Sunrise FRI monitoring message: {name} is not an integer")
    if m.session_state > COMMANDING_ACTIVE:
        raise ProtocolError(f"Sunrise FRI monitoring message: unknown session state {m.session_state}")
    return m


def encode_command(c: Command) -> bytes:
    data = b""
    if c.joint_position is not None:
        data += field_bytes(1, joint_values(c.joint_position))
    if c.joint_torque is not None:
        data += field_bytes(3, joint_values(c.joint_torque))
    out = _header(c.message_identifier, c.sequence_counter, c.reflected_sequence_counter)
    return out + (field_bytes(2, data) if data else b"")


def decode_command(buf: bytes) -> Command:
    f = parse_fields(bytes(buf))
    ident, seq, refl = _parse_header(f, COMMAND_ID, "command message")
    cd = _sub(f, 2)
    return Command(seq, refl, ident, _jv(cd, 1), _jv(cd, 3))


# --------------------------------------------------------------------------- backend
class SunriseFriBackend(RealBackend):
    """The Sunrise FRI client (see the module doc and :mod:`hal.real.base`)."""

    backend = "sunrise_fri"
    seq_bits = 32
    motor_torque_note = ("Sunrise FRI has no motor currents: tau_motor_Nm repeats measuredTorque "
                         "(joint-torque sensors) as a placeholder")

    def __init__(self, spec, config, emulator=None):
        super().__init__(spec, config, emulator)
        self._send_seq = 0

    def _decode(self, data: bytes) -> Packet:
        m = decode_monitoring(data)
        n = self.info.n_joints
        q, tau, ipo = m.measured_joint_position, m.measured_torque, m.ipo_joint_position
        if ipo is None:
            ipo = m.commanded_joint_position
        for name, v in (("measuredJointPosition", q), ("measuredTorque", tau), ("ipoData.jointPosition", ipo)):
            if v is None or v.shape != (n,) or not np.all(np.isfinite(v)):
                raise ProtocolError(f"Sunrise FRI monitoring message: {name} missing, not {n} values or not finite")
        return Packet(m.sequence_counter, q, tau, ipo, state=m.session_state,
                      extra={"receive_multiplier": max(1, m.receive_multiplier)})

    def _will_reply(self, pkt: Packet) -> bool:
        return pkt.seq % pkt.extra["receive_multiplier"] == 0

    def _encode_reply(self, pkt: Packet, q_cmd_rad):
        if not self._will_reply(pkt):
            return None
        c = Command(self._send_seq, pkt.seq)
        if pkt.state in (COMMANDING_WAIT, COMMANDING_ACTIVE) and q_cmd_rad is not None:
            c.joint_position = q_cmd_rad  # the guard's command (None in monitoring mode)
        self._send_seq = (self._send_seq + 1) & 0xFFFFFFFF
        return encode_command(c)

    def _ready_monitor(self, pkt: Packet) -> bool:
        return pkt.state == MONITORING_READY

    def _ready_command(self, pkt: Packet) -> bool:
        return pkt.state == COMMANDING_ACTIVE

    def _commanding(self, pkt: Packet) -> bool:
        return pkt.state == COMMANDING_ACTIVE

    def _stride(self, pkt: Packet) -> int:
        return int(pkt.extra["receive_multiplier"])
