"""KUKA LBR iiwa Sunrise FRI backend against the Sunrise emulator serving the twin, over real
UDP sockets (issue 6): our protobuf wire codec, session states, receiveMultiplier, sequence
wrap-around, faults, the stop when the client goes silent, and monitoring equal to the twin."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from hal.factory import make_robot
from hal.real import sunrise_fri as sf
from hal.real.base import CommunicationLost, ProtocolError
from hal.safety import SafetyError
from robident_twin.model.robot import load_robot

from test_real_fri import certify, real_robot, sine


@pytest.fixture(scope="module")
def iiwa14():
    return load_robot("iiwa14")


# --------------------------------------------------------------------------- codec


@pytest.mark.parametrize("n, wire", [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"),
                                     (300, b"\xac\x02"), (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
                                     (-1, b"\xff" * 9 + b"\x01")])
def test_varints(n, wire):
    assert sf.encode_varint(n) == wire
    assert sf.decode_varint(wire, 0) == (n & (2**64 - 1), len(wire))


def test_monitoring_message_round_trip_size_and_unpacked_joint_values():
    rng = np.random.default_rng(0)
    m = sf.Monitoring(sequence_counter=2**32 - 1, reflected_sequence_counter=123456,
                      measured_joint_position=rng.normal(size=7), measured_torque=rng.normal(size=7),
                      commanded_torque=rng.normal(size=7), external_torque=np.zeros(7), timestamp_sec=1700000000,
                      timestamp_nanosec=999_000_000, session_state=sf.COMMANDING_ACTIVE, quality=3,
                      send_period_ms=1, receive_multiplier=2, ipo_joint_position=rng.normal(size=7),
                      client_command_mode=1)
    buf = sf.encode_monitoring(m)
    print(f"7-joint monitoring message: {len(buf)} bytes")
    assert 370 <= len(buf) <= 390  # "about 379 bytes"
    d = sf.decode_monitoring(buf)
    for k, v in vars(m).items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(getattr(d, k), v)  # doubles: exact
        else:
            assert getattr(d, k) == v, k
    # JointValues is written unpacked: key 0x09 (field 1, fixed64) before every double
    jv = sf.joint_values(m.measured_torque)
    assert len(jv) == 7 * 9 and all(jv[i] == 0x09 for i in range(0, 63, 9))
    assert struct.unpack_from("<d", jv, 1)[0] == m.measured_torque[0]
    # a packed encoding (key 0x0a, one length) is read too
    packed = b"\x0a" + sf.encode_varint(56) + struct.pack("<7d", *m.measured_torque)
    np.testing.assert_array_equal(sf.parse_joint_values(packed), m.measured_torque)
    # unknown fields are skipped; a later singular occurrence wins (proto2)
    extra = buf + sf.field_varint(99, 5) + sf.field_bytes(4, sf.field_varint(1, sf.MONITORING_READY))
    assert sf.decode_monitoring(extra).session_state == sf.MONITORING_READY
    c = sf.Command(7, 2**32 - 1, joint_position=m.ipo_joint_position)
    dc = sf.decode_command(sf.encode_command(c))
    assert (dc.sequence_counter, dc.reflected_sequence_counter, dc.message_identifier) == (7, 2**32 - 1, 0x34001)
    np.testing.assert_array_equal(dc.joint_position, c.joint_position)
    assert dc.joint_torque is None and sf.decode_command(sf.encode_command(sf.Command(1, 1))).joint_position is None


@pytest.mark.parametrize("mutate, match", [
    (lambda b: b[:-5], "truncated"),
    (lambda b: b.replace(sf.encode_varint(0x245142), sf.encode_varint(0x245143), 1), "messageIdentifier"),
    (lambda b: b"\x0b" + b, "wire type 3"),
    (lambda b: b"\x00" + b, "field number 0"),
    (lambda b: b"\x08" + b"\xff" * 11, "varint"),
])
def test_malformed_monitoring_messages_are_refused(mutate, match):
    buf = sf.encode_monitoring(sf.Monitoring(measured_joint_position=np.ones(7), measured_torque=np.ones(7),
                                             ipo_joint_position=np.ones(7)))
    with pytest.raises(ProtocolError, match=match):
        sf.decode_monitoring(mutate(buf))


# --------------------------------------------------------------------------- over sockets


def test_monitoring_equals_the_twin_with_receive_multiplier_and_counter_wrap(iiwa14, tmp_path, monkeypatch):
    # bit for bit against the twin's run: both on the numpy passive-force callback, which the
    # emulator's per-cycle stepper runs (the compiled one equals it to rounding only)
    monkeypatch.setenv("ROBIDENT_NATIVE", "0")
    traj = sine(iiwa14)
    certify(iiwa14, traj, tmp_path)
    robot = real_robot(iiwa14, "sunrise_fri", tmp_path, emulator={"receive_multiplier": 2, "start_seq": 2**32 - 1500})
    try:
        with pytest.raises(SafetyError):
            robot.run(sine(iiwa14, amp=0.11), periods=1)  # not dry-run: refused, nothing sent
        assert robot.emulator.status.sent == 0
        rec = robot.run(traj, periods=2, transient_periods=1)
        st = robot.emulator.status
    finally:
        robot.close()
    direct = make_robot(iiwa14, {"name": "mujoco"}, {"enabled": False}, seed=0).run(traj, periods=2,
                                                                                     transient_periods=1)
    np.testing.assert_array_equal(rec.q_rad, direct.q_rad)  # doubles on the wire: the twin's values
    np.testing.assert_array_equal(rec.tau_joint_Nm, direct.tau_joint_Nm)
    assert st.cycles > 1500  # the uint32 counter wrapped
    # every second message answered, reflecting its counter
    assert st.replies == rec.metadata["link"]["replies"] and abs(st.replies - st.cycles / 2) <= 1
    assert st.late_replies == st.missed_replies == 0
    assert [s for _, s in st.states] == ["wait", "ready", "idle"]  # MONITORING_WAIT, MONITORING_READY, IDLE


def test_commanding_session_states_and_tracking(iiwa14, tmp_path):
    traj = sine(iiwa14)
    certify(iiwa14, traj, tmp_path)
    robot = real_robot(iiwa14, "sunrise_fri", tmp_path, mode="command")
    try:
        rec = robot.run(traj, periods=1)
        st = robot.emulator.status
    finally:
        robot.close()
    assert [s for _, s in st.states] == ["wait", "command_wait", "commanding", "idle"]
    assert st.max_command_step_rad <= np.max(iiwa14.dq_max_rad_s) / 1000.0 * 1.05
    assert np.max(np.abs(rec.q_rad - traj.q_rad)) < 2e-3


def test_faults_over_sunrise(iiwa14, tmp_path):
    traj = sine(iiwa14)
    certify(iiwa14, traj, tmp_path)
    faults = {"loss": 0.05, "duplicate": 0.02, "reorder": 0.02, "truncate": 0.01, "malformed": 0.01,
              "wrong_id": 0.01, "seed": 2}
    robot = real_robot(iiwa14, "sunrise_fri", tmp_path, emulator={"faults": faults})
    try:
        rec = robot.run(traj, periods=2)
        st = robot.emulator.status
    finally:
        robot.close()
    link = rec.metadata["link"]
    corrupted = st.truncated + st.malformed + st.wrong_id
    assert corrupted > 0 and st.reordered > 0 and st.duplicated > 0
    assert corrupted - 2 <= link["malformed"] <= corrupted
    assert st.dropped + corrupted - 3 <= link["lost"] <= st.dropped + corrupted
    assert st.reordered - 2 <= link["reordered"] <= st.reordered
    assert rec.valid is not None and 0.03 < (~rec.valid).mean() < 0.12


def test_client_going_silent_stops_the_robot_and_trips_the_watchdog(iiwa14, tmp_path, monkeypatch):
    from hal.real.sunrise_fri import SunriseFriBackend

    traj = sine(iiwa14)
    certify(iiwa14, traj, tmp_path)
    robot = real_robot(iiwa14, "sunrise_fri", tmp_path, mode="command", watchdog_s=0.5,
                       emulator={"reply_timeout_s": 0.02, "stop_after_missed": 10, "hold_after_stop_cycles": 800})
    answered = {"n": 0}
    original = SunriseFriBackend._reply

    def reply_then_hang(self, pkt, q):
        answered["n"] += 1
        if answered["n"] < 700:  # the client process hangs after 700 answers
            original(self, pkt, q)

    monkeypatch.setattr(SunriseFriBackend, "_reply", reply_then_hang)
    try:
        with pytest.raises(CommunicationLost, match="watchdog"):
            robot.run(traj, periods=2)
        st = robot.emulator.status
    finally:
        robot.close()
    assert st.stopped and "no valid answer from the client for 10 cycles" in st.stop_reason
    assert st.dq_after_stop_rad_s < 1e-2
    assert "commanding" in [s for _, s in st.states] and [s for _, s in st.states][-2:] == ["stopped", "idle"]


def _reference_schema():
    """The Sunrise FRI messages as a proto2 schema for Google's protobuf runtime (an
    independent implementation of the wire format, to cross-check our hand-written codec)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="fri_check.proto", package="fricheck", syntax="proto2")

    def msg(name, *fields):
        m = fdp.message_type.add(name=name)
        for fname, num, ftype, rep in fields:
            f = m.field.add(name=fname, number=num, label=F.LABEL_REPEATED if rep else F.LABEL_OPTIONAL)
            if isinstance(ftype, str):
                f.type, f.type_name = F.TYPE_MESSAGE, f".fricheck.{ftype}"
            else:
                f.type = ftype

    u32, i32, dbl = F.TYPE_UINT32, F.TYPE_INT32, F.TYPE_DOUBLE
    msg("JointValues", ("value", 1, dbl, True))
    msg("TimeStamp", ("sec", 1, u32, False), ("nanosec", 2, u32, False))
    msg("MessageHeader", ("messageIdentifier", 1, u32, False), ("sequenceCounter", 2, u32, False),
        ("reflectedSequenceCounter", 3, u32, False))
    msg("RobotInformation", ("numberOfJoints", 1, i32, False), ("safetyState", 2, u32, False))
    msg("MessageMonitorData", ("measuredJointPosition", 1, "JointValues", False),
        ("measuredTorque", 2, "JointValues", False), ("commandedTorque", 4, "JointValues", False),
        ("externalTorque", 5, "JointValues", False), ("timestamp", 15, "TimeStamp", False))
    msg("ConnectionInfo", ("sessionState", 1, u32, False), ("quality", 2, u32, False), ("sendPeriod", 3, u32, False),
        ("receiveMultiplier", 4, u32, False))
    msg("MessageIpoData", ("jointPosition", 1, "JointValues", False), ("clientCommandMode", 10, u32, False))
    msg("FRIMonitoringMessage", ("header", 1, "MessageHeader", False), ("robotInfo", 2, "RobotInformation", False),
        ("monitorData", 3, "MessageMonitorData", False), ("connectionInfo", 4, "ConnectionInfo", False),
        ("ipoData", 5, "MessageIpoData", False))
    msg("CommandData", ("jointPosition", 1, "JointValues", False), ("jointTorque", 3, "JointValues", False))
    msg("FRICommandMessage", ("header", 1, "MessageHeader", False), ("commandData", 2, "CommandData", False))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"fricheck.{n}"))
            for n in ("FRIMonitoringMessage", "FRICommandMessage")}


def test_codec_is_byte_compatible_with_googles_protobuf_runtime():
    cls = _reference_schema()
    rng = np.random.default_rng(5)
    m = sf.Monitoring(sequence_counter=2**32 - 2, reflected_sequence_counter=77, measured_joint_position=rng.normal(size=7),
                      measured_torque=rng.normal(size=7), commanded_torque=rng.normal(size=7),
                      external_torque=rng.normal(size=7), timestamp_sec=12, timestamp_nanosec=345,
                      session_state=sf.MONITORING_READY, quality=2, send_period_ms=2, receive_multiplier=3,
                      ipo_joint_position=rng.normal(size=7), client_command_mode=1)
    ours = sf.encode_monitoring(m)
    ref = cls["FRIMonitoringMessage"]()
    ref.ParseFromString(ours)  # Google's runtime reads our bytes ...
    assert ref.header.messageIdentifier == 0x245142 and ref.header.sequenceCounter == 2**32 - 2
    assert list(ref.monitorData.measuredTorque.value) == m.measured_torque.tolist()
    assert ref.connectionInfo.receiveMultiplier == 3 and ref.ipoData.clientCommandMode == 1
    assert ref.SerializeToString() == ours  # ... and writes exactly the same bytes (unpacked doubles)
    d = sf.decode_monitoring(ref.SerializeToString())
    np.testing.assert_array_equal(d.ipo_joint_position, m.ipo_joint_position)
    cmd = cls["FRICommandMessage"]()
    cmd.header.messageIdentifier, cmd.header.sequenceCounter, cmd.header.reflectedSequenceCounter = 0x34001, 5, 2**32 - 2
    cmd.commandData.jointPosition.value.extend(m.ipo_joint_position.tolist())
    mine = sf.encode_command(sf.Command(5, 2**32 - 2, joint_position=m.ipo_joint_position))
    assert cmd.SerializeToString() == mine
    np.testing.assert_array_equal(sf.decode_command(cmd.SerializeToString()).joint_position, m.ipo_joint_position)
