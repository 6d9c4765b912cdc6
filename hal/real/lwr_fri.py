"""KUKA LWR4+ Fast Research Interface (KRC2lr): our own codec and the HAL backend.

Wire format (from the documented facts, ``/work/shared/controllers.md``): UDP, little-endian,
4-byte packing, float32 values. Header (8 bytes): u16 sendSeqCount, reflSeqCount, packetSize,
datagramId. The PC answers each controller packet with reflSeqCount = its sendSeqCount.

Measurement packet (controller -> PC, 916 bytes, datagramId 0x2006), byte offsets:

    0    header                       140  interface state: u32 timestamp (ms), u16 state
    8    KRL data: realData[16] f32        (OFF 0 / MON 1 / CMD 2), u16 quality (0 BAD ..
    72             intData[16] i32         3 PERFECT), f32 desired msr / cmd sample times (s),
    136            u16 boolData + fill     f32 safety limits, f32 answerRate, latency, jitter,
    180  robot state: u16 power, control,  missRate, u32 missCounter
         error, warning, f32 temperature[7]
    216  msrJntPos[7]   244 msrCartPos[12]   292 cmdJntPos[7]   320 cmdJntPosFriOffset[7]
    348  cmdCartPos[12] 396 cmdCartPosFriOffset[12]             444 msrJntTrq[7]
    472  estExtJntTrq[7] 500 estExtTcpFT[6]  524 jacobian[42]    692 massMatrix[49]
    888  gravity[7]      916 end

Command packet (PC -> controller, 376 bytes, datagramId 0x1005): header, KRL data (132),
u32 cmdFlags @140 (joint position 0x1, joint torque 0x4, stiffness 0x10, damping 0x20,
Cartesian position 0x100, TCP force/torque 0x400), jntPos[7] @144, cartPos[12] @172,
addJntTrq[7] @220, addTcpFT[6] @248, jntStiffness[7] @272, jntDamping[7] @300,
cartStiffness[6] @328, cartDamping[6] @352.

Backend (:class:`LwrFriBackend`, ``backend=lwr_fri``): monitor mode answers with cmdFlags 0
(the KRL program moves the robot; the PC records), command mode streams jntPos with flag 0x1
once the controller is in CMD. FRI has no motor currents: the recording's ``tau_joint_Nm`` is
msrJntTrq (the joint-torque sensors) and ``tau_motor_Nm`` holds the same values as a
placeholder, with ``metadata["motor_torque_available"] = False`` so the motor-torque
measurement models are refused (identify with ``model.measurement=joint_torque``).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from .base import Packet, ProtocolError, RealBackend

MSR_SIZE, CMD_SIZE = 916, 376
MSR_ID, CMD_ID = 0x2006, 0x1005
STATE_OFF, STATE_MON, STATE_CMD = 0, 1, 2
QUALITY_BAD, QUALITY_UNACCEPTABLE, QUALITY_OK, QUALITY_PERFECT = 0, 1, 2, 3
CMD_JOINT_POSITION, CMD_JOINT_TORQUE, CMD_JOINT_STIFFNESS, CMD_JOINT_DAMPING = 0x1, 0x4, 0x10, 0x20
CMD_CART_POSITION, CMD_TCP_FT = 0x100, 0x400
N_JOINTS = 7

_HEADER = struct.Struct("<4H")
_KRL = struct.Struct("<16f16iHH")  # 132 bytes
_INTF = struct.Struct("<IHH3f4fI")  # 40 bytes @140
_ROBOT = struct.Struct("<4H7f")  # 36 bytes @180
_F = {n: struct.Struct(f"<{n}f") for n in (6, 7, 12, 42, 49)}
_U32 = struct.Struct("<I")

# measurement data block: name -> (offset, count)
MSR_FIELDS = {"msr_jnt_pos": (216, 7), "msr_cart_pos": (244, 12), "cmd_jnt_pos": (292, 7),
              "cmd_jnt_pos_fri_offset": (320, 7), "cmd_cart_pos": (348, 12),
              "cmd_cart_pos_fri_offset": (396, 12), "msr_jnt_trq": (444, 7), "est_ext_jnt_trq": (472, 7),
              "est_ext_tcp_ft": (500, 6), "jacobian": (524, 42), "mass_matrix": (692, 49), "gravity": (888, 7)}
CMD_FIELDS = {"jnt_pos": (144, 7), "cart_pos": (172, 12), "add_jnt_trq": (220, 7), "add_tcp_ft": (248, 6),
              "jnt_stiffness": (272, 7), "jnt_damping": (300, 7), "cart_stiffness": (328, 6),
              "cart_damping": (352, 6)}
assert MSR_FIELDS["gravity"][0] + 4 * 7 == MSR_SIZE and CMD_FIELDS["cart_damping"][0] + 4 * 6 == CMD_SIZE


def _zeros(n):
    return field(default_factory=lambda: np.zeros(n))


@dataclass
class KrlData:
    real: np.ndarray = _zeros(16)
    int: np.ndarray = field(default_factory=lambda: np.zeros(16, dtype=np.int32))
    bool: int = 0


@dataclass
class FriMsr:
    """The measurement packet (arrays in SI units: rad, N m)."""

    send_seq: int = 0
    refl_seq: int = 0
    krl: KrlData = field(default_factory=KrlData)
    timestamp_ms: int = 0
    state: int = STATE_OFF
    quality: int = QUALITY_BAD
    desired_msr_sample_time_s: float = 0.001
    desired_cmd_sample_time_s: float = 0.001
    safety_limits: float = 0.0
    answer_rate: float = 0.0
    latency: float = 0.0
    jitter: float = 0.0
    miss_rate: float = 0.0
    miss_counter: int = 0
    power: int = 0
    control: int = 0
    error: int = 0
    warning: int = 0
    temperature: np.ndarray = _zeros(7)
    msr_jnt_pos: np.ndarray = _zeros(7)
    msr_cart_pos: np.ndarray = _zeros(12)
    cmd_jnt_pos: np.ndarray = _zeros(7)
    cmd_jnt_pos_fri_offset: np.ndarray = _zeros(7)
    cmd_cart_pos: np.ndarray = _zeros(12)
    cmd_cart_pos_fri_offset: np.ndarray = _zeros(12)
    msr_jnt_trq: np.ndarray = _zeros(7)
    est_ext_jnt_trq: np.ndarray = _zeros(7)
    est_ext_tcp_ft: np.ndarray = _zeros(6)
    jacobian: np.ndarray = _zeros(42)
    mass_matrix: np.ndarray = _zeros(49)
    gravity: np.ndarray = _zeros(7)


@dataclass
class FriCmd:
    """The command packet."""

    send_seq: int = 0
    refl_seq: int = 0
    krl: KrlData = field(default_factory=KrlData)
    cmd_flags: int = 0
    jnt_pos: np.ndarray = _zeros(7)
    cart_pos: np.ndarray = _zeros(12)
    add_jnt_trq: np.ndarray = _zeros(7)
    add_tcp_ft: np.ndarray = _zeros(6)
    jnt_stiffness: np.ndarray = _zeros(7)
    jnt_damping: np.ndarray = _zeros(7)
    cart_stiffness: np.ndarray = _zeros(6)
    cart_damping: np.ndarray = _zeros(6)


def _pack_krl(buf, k: KrlData):
    _KRL.pack_into(buf, 8, *np.asarray(k.real, np.float32).tolist(), *np.asarray(k.int, np.int64).tolist(),
                   int(k.bool) & 0xFFFF, 0)


def _unpack_krl(buf) -> KrlData:
    v = _KRL.unpack_from(buf, 8)
    return KrlData(np.array(v[:16]), np.array(v[16:32], dtype=np.int32), v[32])


def _pack_arrays(buf, obj, fields):
    for name, (off, n) in fields.items():
        a = np.asarray(getattr(obj, name), dtype=float).reshape(-1)
        if a.shape != (n,):
            raise ProtocolError(f"FRI: field {name} needs {n} values, got {a.shape[0]}")
        _F[n].pack_into(buf, off, *a.tolist())


def _check(buf, size: int, ident: int, what: str) -> tuple[int, int]:
    if len(buf) != size:
        raise ProtocolError(f"FRI {what}: {len(buf)} bytes, expected {size}")
    seq, refl, psize, did = _HEADER.unpack_from(buf, 0)
    if psize != size:
        raise ProtocolError(f"FRI {what}: header packetSize {psize}, expected {size}")
    if did != ident:
        raise ProtocolError(f"FRI {what}: datagramId 0x{did:04x}, expected 0x{ident:04x}")
    return seq, refl


def encode_msr(m: FriMsr) -> bytes:
    buf = bytearray(MSR_SIZE)
    _HEADER.pack_into(buf, 0, m.send_seq & 0xFFFF, m.refl_seq & 0xFFFF, MSR_SIZE, MSR_ID)
    _pack_krl(buf, m.krl)
    _INTF.pack_into(buf, 140, int(m.timestamp_ms) & 0xFFFFFFFF, m.state, m.quality, m.desired_msr_sample_time_s,
                    m.desired_cmd_sample_time_s, m.safety_limits, m.answer_rate, m.latency, m.jitter, m.miss_rate,
                    int(m.miss_counter) & 0xFFFFFFFF)
    _ROBOT.pack_into(buf, 180, m.power, m.control, m.error, m.warning, *np.asarray(m.temperature, float).tolist())
    _pack_arrays(buf, m, MSR_FIELDS)
    return bytes(buf)


def decode_msr(buf: bytes) -> FriMsr:
    """Decode and check a measurement packet; ProtocolError on a wrong size, id or content."""
    seq, refl = _check(buf, MSR_SIZE, MSR_ID, "measurement packet")
    intf = _INTF.unpack_from(buf, 140)
    rob = _ROBOT.unpack_from(buf, 180)
    m = FriMsr(send_seq=seq, refl_seq=refl, krl=_unpack_krl(buf), timestamp_ms=intf[0], state=intf[1],
               quality=intf[2], desired_msr_sample_time_s=intf[3], desired_cmd_sample_time_s=intf[4],
               safety_limits=intf[5], answer_rate=intf[6], latency=intf[7], jitter=intf[8], miss_rate=intf[9],
               miss_counter=intf[10], power=rob[0], control=rob[1], error=rob[2], warning=rob[3],
               temperature=np.array(rob[4:]))
    if m.state not in (STATE_OFF, STATE_MON, STATE_CMD) or m.quality > QUALITY_PERFECT:
        raise ProtocolError(f"FRI measurement packet: invalid state {m.state} or quality {m.quality}")
    for name, (off, n) in MSR_FIELDS.items():
        setattr(m, name, np.array(_F[n].unpack_from(buf, off), dtype=float))
    for name in ("msr_jnt_pos", "cmd_jnt_pos", "msr_jnt_trq"):
        if not np.all(np.isfinite(getattr(m, name))):
            raise ProtocolError(f"FRI measurement packet: non-finite {name}")
    return m


_F7 = _F[7]
_STATE_Q = struct.Struct("<HH")


def encode_msr_lean(send_seq: int, refl_seq: int, timestamp_ms: int, state: int, quality: int, sample_time_s: float,
                    answer_rate: float, miss_rate: float, miss_counter: int, power: int, msr_jnt_pos,
                    cmd_jnt_pos, msr_jnt_trq) -> bytes:
    """:func:`encode_msr` of a packet whose other fields are zero (the emulator's per-cycle path)."""
    buf = bytearray(MSR_SIZE)
    _HEADER.pack_into(buf, 0, send_seq & 0xFFFF, refl_seq & 0xFFFF, MSR_SIZE, MSR_ID)
    _INTF.pack_into(buf, 140, int(timestamp_ms) & 0xFFFFFFFF, state, quality, sample_time_s, sample_time_s, 0.0,
                    answer_rate, 0.0, 0.0, miss_rate, int(miss_counter) & 0xFFFFFFFF)
    _ROBOT.pack_into(buf, 180, power, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    _F7.pack_into(buf, 216, *msr_jnt_pos.tolist())
    _F7.pack_into(buf, 292, *cmd_jnt_pos.tolist())
    _F7.pack_into(buf, 444, *msr_jnt_trq.tolist())
    return bytes(buf)


def decode_msr_lean(buf: bytes):
    """(sendSeqCount, state, quality, msrJntPos, cmdJntPos, msrJntTrq) with the checks of
    :func:`decode_msr` (size, packetSize, datagramId, state, quality, finite values)."""
    seq, _ = _check(buf, MSR_SIZE, MSR_ID, "measurement packet")
    state, quality = _STATE_Q.unpack_from(buf, 144)
    if state > STATE_CMD or quality > QUALITY_PERFECT:
        raise ProtocolError(f"FRI measurement packet: invalid state {state} or quality {quality}")
    q = np.frombuffer(buf, "<f4", 7, 216).astype(float)
    qc = np.frombuffer(buf, "<f4", 7, 292).astype(float)
    tau = np.frombuffer(buf, "<f4", 7, 444).astype(float)
    if not (np.isfinite(q).all() and np.isfinite(qc).all() and np.isfinite(tau).all()):
        raise ProtocolError("FRI measurement packet: non-finite joint data")
    return seq, state, quality, q, qc, tau


def encode_cmd_lean(send_seq: int, refl_seq: int, cmd_flags: int, jnt_pos) -> bytes:
    """:func:`encode_cmd` of a joint-position command whose other fields are zero."""
    buf = bytearray(CMD_SIZE)
    _HEADER.pack_into(buf, 0, send_seq & 0xFFFF, refl_seq & 0xFFFF, CMD_SIZE, CMD_ID)
    _U32.pack_into(buf, 140, int(cmd_flags))
    _F7.pack_into(buf, 144, *np.asarray(jnt_pos, dtype=float).tolist())
    return bytes(buf)


def decode_cmd_lean(buf: bytes):
    """(reflSeqCount, jntPos or None without the joint-position flag), checked."""
    _, refl = _check(buf, CMD_SIZE, CMD_ID, "command packet")
    flags = _U32.unpack_from(buf, 140)[0]
    if not flags & CMD_JOINT_POSITION:
        return refl, None
    q = np.frombuffer(buf, "<f4", 7, 144).astype(float)
    if not np.isfinite(q).all():
        raise ProtocolError("FRI command packet: non-finite jntPos")
    return refl, q


def encode_cmd(c: FriCmd) -> bytes:
    buf = bytearray(CMD_SIZE)
    _HEADER.pack_into(buf, 0, c.send_seq & 0xFFFF, c.refl_seq & 0xFFFF, CMD_SIZE, CMD_ID)
    _pack_krl(buf, c.krl)
    _U32.pack_into(buf, 140, int(c.cmd_flags))
    _pack_arrays(buf, c, CMD_FIELDS)
    return bytes(buf)


def decode_cmd(buf: bytes) -> FriCmd:
    seq, refl = _check(buf, CMD_SIZE, CMD_ID, "command packet")
    c = FriCmd(send_seq=seq, refl_seq=refl, krl=_unpack_krl(buf), cmd_flags=_U32.unpack_from(buf, 140)[0])
    for name, (off, n) in CMD_FIELDS.items():
        setattr(c, name, np.array(_F[n].unpack_from(buf, off), dtype=float))
    if (c.cmd_flags & CMD_JOINT_POSITION) and not np.all(np.isfinite(c.jnt_pos)):
        raise ProtocolError("FRI command packet: non-finite jntPos")
    return c


class LwrFriBackend(RealBackend):
    """The LWR4+ FRI client (see the module doc and :mod:`hal.real.base`)."""

    backend = "lwr_fri"
    seq_bits = 16
    motor_torque_note = ("FRI has no motor currents: tau_motor_Nm repeats msrJntTrq (joint-torque sensors) "
                         "as a placeholder")

    def __init__(self, spec, config, emulator=None):
        if spec.n_joints != N_JOINTS:
            from robident_twin.errors import ConfigError

            raise ConfigError(f"backend lwr_fri: FRI carries 7 joints, robot {spec.name} has {spec.n_joints}")
        super().__init__(spec, config, emulator)
        self._send_seq = 0

    def _decode(self, data: bytes) -> Packet:
        seq, state, quality, q, qc, tau = decode_msr_lean(data)
        return Packet(seq, q, tau, qc, state=(state, quality))

    def _encode_reply(self, pkt: Packet, q_cmd_rad):
        """``q_cmd_rad``: the guard's command (None in monitor mode: cmdFlags 0, no position)."""
        command = q_cmd_rad is not None
        data = encode_cmd_lean(self._send_seq, pkt.seq, CMD_JOINT_POSITION if command else 0,
                               q_cmd_rad if command else np.zeros(N_JOINTS))
        self._send_seq = (self._send_seq + 1) & 0xFFFF
        return data

    def _ready_monitor(self, pkt: Packet) -> bool:
        state, quality = pkt.state
        return state in (STATE_MON, STATE_CMD) and quality >= QUALITY_OK

    def _ready_command(self, pkt: Packet) -> bool:
        return pkt.state[0] == STATE_CMD

    def _commanding(self, pkt: Packet) -> bool:
        return pkt.state[0] == STATE_CMD
