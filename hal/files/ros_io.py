"""ROS 2 recordings: rosbag2 (MCAP or SQLite3) and bare ``.mcap`` files, read and written without
ROS through the PyPI packages ``rosbags`` (CDR (de)serialisation, rosbag2 reader) and ``mcap``
(MCAP writer).

Import: ``sensor_msgs/msg/JointState`` messages on a configurable topic (default
``/joint_states``) become a Recording: ``position`` -> q [rad], ``effort`` -> motor torque [Nm]
(``effort_as="joint_torque"`` reads it as the joint-torque-sensor torque; the motor torque is then
read from ``motor_torque_topic``, or, absent, the recording is joint-torque only:
``metadata["motor_torque_available"]`` False, motor-torque models refused). The optional topics ``joint_torque_topic`` (default
``/joint_torques``, JointState ``effort`` = joint-sensor torque) and ``command_topic`` (default
``/joint_commands``, JointState ``position`` = commanded position) are read when present; their
stamps must equal the main topic's. The joints are taken by name in the order of
``joint_names`` (default: the order of the first message), so messages may list them in any
order. Time is the header stamp (``time_source="log"``: the bag's receive time), made relative
to the first message (the absolute start is ``metadata["t0_ns"]``).

Export: a Recording as JointState messages on those three topics (joint names: the
recording's own, else its robot file's, see ``recording_joint_names``), and a JointTrajectory as one
``trajectory_msgs/msg/JointTrajectory`` message (``/joint_trajectory``; positions, velocities,
accelerations, time_from_start). A bare ``.mcap`` file with ROS 2 schemas (``ros2msg``) and CDR
messages, as ``ros2 bag record -s mcap`` writes them; an MCAP metadata record ``robident`` holds
the sample rate, the period information and the recording's metadata. Values round-trip
exactly (float64), times to 1 ns.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..protocol import JointTrajectory, Recording
from .common import (FileFormatError, atomic_path, json_metadata, make_recording, placeholder_supported,
                     recording_valid)

JOINT_STATE = "sensor_msgs/msg/JointState"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
META_NAME = "robident"


def _typestore():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE)


def _read_meta(path: Path) -> dict[str, Any]:
    """The ``robident`` MCAP metadata record of a bare .mcap file ({} if none)."""
    if not path.is_file() or path.suffix != ".mcap":
        return {}
    try:
        from mcap.reader import make_reader

        out: dict[str, Any] = {}
        with open(path, "rb") as f:
            for m in make_reader(f).iter_metadata():
                if m.name == META_NAME:
                    out.update(m.metadata)
                elif m.name == META_NAME + "_valid":
                    out["valid"] = m.metadata.get("valid", "")
        return out
    except Exception:  # a file without a summary section still has readable messages
        return {}


def _messages(path: Path, topics: Sequence[str], msgtype: str) -> dict[str, list[tuple[int, Any]]]:
    """{topic: [(log time ns, message)]} for those of ``topics`` present in the bag; refuses
    a missing first topic or a wrong message type, naming file and topic."""
    from rosbags.highlevel import AnyReader

    if not path.exists():
        raise FileFormatError(f"{path}: file not found")
    try:
        reader = AnyReader([path], default_typestore=_typestore())
        reader.open()
    except Exception as exc:  # rosbags raises several types for unreadable bags
        raise FileFormatError(f"{path}: not a readable rosbag2 / MCAP file: {exc}") from exc
    try:
        present = {c.topic: c.msgtype for c in reader.connections}
        if topics[0] not in present:
            raise FileFormatError(f"{path}: topic {topics[0]} not found; topics are "
                                  f"{', '.join(f'{t} ({m})' for t, m in sorted(present.items())) or 'none'}")
        out: dict[str, list] = {}
        for topic in topics:
            if topic not in present:
                continue
            if present[topic] != msgtype:
                raise FileFormatError(f"{path}: topic {topic} carries {present[topic]}, expected {msgtype}")
            conns = [c for c in reader.connections if c.topic == topic]
            out[topic] = []
            try:
                for c, ts, raw in reader.messages(connections=conns):
                    out[topic].append((ts, reader.deserialize(raw, c.msgtype)))
            except Exception as exc:  # a damaged chunk or message: name where reading stopped
                raise FileFormatError(f"{path}: topic {topic}, message {len(out[topic])}: unreadable (damaged chunk "
                                      f"or message: {type(exc).__name__}: {exc}); expected CDR-encoded {msgtype}") \
                    from None
        return out
    finally:
        reader.close()


def _stamp_ns(msg) -> int:
    return int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)


def _joint_block(path: Path, topic: str, msgs, field: str, joint_names: Sequence[str]) -> np.ndarray:
    """(messages x joints) of a JointState field, the joints picked by name."""
    out = np.empty((len(msgs), len(joint_names)))
    order_cache: dict[tuple[str, ...], np.ndarray] = {}
    for k, (_, m) in enumerate(msgs):
        names = tuple(m.name)
        idx = order_cache.get(names)
        if idx is None:
            missing = [n for n in joint_names if n not in names]
            if missing:
                raise FileFormatError(f"{path}: topic {topic}, message {k}: joint(s) {missing} missing from "
                                      f"field name {list(names)}")
            idx = np.array([names.index(n) for n in joint_names])
            order_cache[names] = idx
        vals = np.asarray(getattr(m, field), dtype=float)
        if vals.shape[0] != len(names):
            raise FileFormatError(f"{path}: topic {topic}, message {k}: field {field} has {vals.shape[0]} "
                                  f"values, field name has {len(names)} joints")
        out[k] = vals[idx]
    return out


def read_recording_mcap(path: str | Path, topic: str = "/joint_states", joint_names: Sequence[str] | None = None,
                        effort_as: str = "motor_torque", joint_torque_topic: str = "/joint_torques",
                        motor_torque_topic: str = "/motor_torques", command_topic: str = "/joint_commands",
                        time_source: str = "header") -> Recording:
    """Import JointState messages of a rosbag2 directory or a bare .mcap / .db3 file."""
    path = Path(path)
    if effort_as not in ("motor_torque", "joint_torque"):
        raise FileFormatError(f"{path}: effort_as must be motor_torque or joint_torque, got {effort_as!r}")
    if time_source not in ("header", "log"):
        raise FileFormatError(f"{path}: time_source must be header or log, got {time_source!r}")
    topics = [topic, joint_torque_topic, command_topic, motor_torque_topic]
    msgs = _messages(path, topics, JOINT_STATE)
    main = msgs[topic]
    if len(main) < 2:
        raise FileFormatError(f"{path}: topic {topic}: {len(main)} message(s), need at least 2")
    names = list(joint_names) if joint_names else list(main[0][1].name)
    if not names:
        raise FileFormatError(f"{path}: topic {topic}, message 0: field name is empty (pass joint_names)")

    def stamps(topic_msgs):
        return np.array([_stamp_ns(m) if time_source == "header" else ts for ts, m in topic_msgs], dtype=np.int64)

    ns = stamps(main)
    d = np.diff(ns)
    if np.any(d <= 0):
        k = int(np.argmax(d <= 0)) + 1
        raise FileFormatError(f"{path}: topic {topic}, message {k}: {time_source} time is not strictly "
                              f"increasing ({ns[k - 1]} ns then {ns[k]} ns)")
    channels: dict[str, np.ndarray | None] = {"q_rad": _joint_block(path, topic, main, "position", names)}
    effort = _joint_block(path, topic, main, "effort", names)
    cols: dict[str, list[str]] = {"t_s": [f"{topic}.header.stamp"],
                                  "q_rad": [f"{topic}.position[{n}]" for n in names]}

    def aligned(other: str, field: str) -> np.ndarray | None:
        if other not in msgs or other == topic:
            return None
        o = msgs[other]
        ons = stamps(o)
        if ons.shape != ns.shape or np.any(ons != ns):
            k = int(np.argmax(ons[: ns.size] != ns[: ons.size])) if ons.size and ns.size else 0
            raise FileFormatError(f"{path}: topic {other}: {ons.size} messages whose stamps differ from topic "
                                  f"{topic} ({ns.size} messages) from message {k} on; expected the same stamps")
        cols[{"position": "q_cmd_rad", "effort": "tau"}[field]] = [f"{other}.{field}[{n}]" for n in names]
        return _joint_block(path, other, o, field, names)

    if effort_as == "motor_torque":
        channels["tau_motor_Nm"] = effort
        cols["tau_motor_Nm"] = [f"{topic}.effort[{n}]" for n in names]
        channels["tau_joint_Nm"] = aligned(joint_torque_topic, "effort")
        cols["tau_joint_Nm"] = cols.pop("tau", None)
    else:
        channels["tau_joint_Nm"] = effort
        cols["tau_joint_Nm"] = [f"{topic}.effort[{n}]" for n in names]
        channels["tau_motor_Nm"] = aligned(motor_torque_topic, "effort")
        if channels["tau_motor_Nm"] is None and not placeholder_supported():
            raise FileFormatError(f"{path}: effort_as=joint_torque needs the motor torque on topic "
                                  f"{motor_torque_topic}, which is absent")
        cols["tau_motor_Nm"] = cols.pop("tau", None)
    channels["q_cmd_rad"] = aligned(command_topic, "position")
    meta = _read_meta(path)
    md: dict[str, Any] = {}
    if meta.get("metadata"):
        try:
            extra = json.loads(meta["metadata"])
        except json.JSONDecodeError as exc:
            raise FileFormatError(f"{path}: MCAP metadata record {META_NAME}, field metadata: expected a JSON "
                                  f"object: {exc}") from None
        if not isinstance(extra, dict):
            raise FileFormatError(f"{path}: MCAP metadata record {META_NAME}, field metadata: expected a JSON "
                                  f"object, got a JSON {type(extra).__name__}")
        md.update(extra)
    md.update({"source": str(path), "format": "rosbag2/mcap", "topic": topic, "joint_names": names,
               "t0_ns": int(ns[0]), "time_source": time_source,
               "units": {"t": "s", "q": "rad", "tau": "Nm"}})

    def num(key):
        v = meta.get(key)
        return None if v in (None, "", "None") else v

    valid = None
    if meta.get("valid"):
        codes = np.frombuffer(meta["valid"].encode(), dtype=np.uint8)
        if not np.all(np.isin(codes, (ord("0"), ord("1")))):
            raise FileFormatError(f"{path}: MCAP metadata record {META_NAME}_valid, field valid: expected a string "
                                  "of 0 and 1, one per message")
        valid = codes == ord("1")
    return make_recording(path, t_s=(ns - ns[0]) * 1e-9, **channels, valid=valid, sample_rate_hz=num("sample_rate_hz"),
                          period_samples=num("period_samples"), n_periods=num("n_periods"),
                          metadata=md, row=lambda k: f"message {k}", columns=cols,
                          rate_field=f"MCAP metadata record {META_NAME}, field sample_rate_hz")


def _writer(tmp: Path, ts):
    from mcap.writer import Writer

    f = open(tmp, "wb")
    w = Writer(f)
    w.start(profile="ros2", library="robident-twin")
    schema_ids: dict[str, int] = {}

    def channel(topic: str, msgtype: str) -> int:
        if msgtype not in schema_ids:
            schema_ids[msgtype] = w.register_schema(msgtype, "ros2msg",
                                                    ts.generate_msgdef(msgtype, ros_version=2)[0].encode())
        return w.register_channel(topic, "cdr", schema_ids[msgtype])

    return f, w, channel


def recording_joint_names(rec: Recording) -> list[str]:
    """The joint names of a recording: its ``metadata["joint_names"]`` (an imported ROS bag), else
    those of the robot file named by ``metadata["robot"]`` (a twin's recording), else joint1..n."""
    n = rec.n_joints
    names = rec.metadata.get("joint_names")
    if isinstance(names, (list, tuple)) and len(names) == n and all(isinstance(x, str) for x in names):
        return list(names)
    robot = rec.metadata.get("robot")
    if isinstance(robot, str):
        from robident_twin.model.robot import available_robots, load_robot

        if robot in available_robots():
            spec_names = list(load_robot(robot).joint_names)
            if len(spec_names) == n:
                return spec_names
    return [f"joint{j + 1}" for j in range(n)]


def _ns_times(t_s: np.ndarray, t0_ns: int) -> np.ndarray:
    return t0_ns + np.round(np.asarray(t_s, dtype=float) * 1e9).astype(np.int64)


def write_recording_mcap(rec: Recording, path: str | Path, joint_names: Sequence[str] | None = None,
                         topic: str = "/joint_states", joint_torque_topic: str = "/joint_torques",
                         command_topic: str = "/joint_commands", t0_ns: int | None = None) -> Path:
    """Export a recording as JointState messages in a bare .mcap file; atomic."""
    ts = _typestore()
    JS = ts.types[JOINT_STATE]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    names = list(joint_names) if joint_names else recording_joint_names(rec)
    if len(names) != rec.n_joints:
        raise FileFormatError(f"{path}: {len(names)} joint names for a recording of {rec.n_joints} joints")
    t0 = int(rec.metadata.get("t0_ns", 0)) if t0_ns is None else int(t0_ns)
    stamps = _ns_times(rec.t_s, t0)
    empty = np.zeros(0)
    streams = [(topic, rec.q_rad, rec.tau_motor_Nm)]
    if rec.tau_joint_Nm is not None:
        streams.append((joint_torque_topic, empty, rec.tau_joint_Nm))
    if rec.metadata.get("q_cmd_recorded", True):
        streams.append((command_topic, rec.q_cmd_rad, empty))
    md = json_metadata({k: v for k, v in rec.metadata.items()
                        if k not in ("source", "format", "units", "t0_ns", "topic", "time_source")})
    with atomic_path(path, suffix=".mcap") as tmp:
        f, w, channel = _writer(tmp, ts)
        try:
            for tp, pos, eff in streams:
                cid = channel(tp, JOINT_STATE)
                for k, ns in enumerate(stamps):
                    msg = JS(header=Header(stamp=Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000)),
                                           frame_id=""), name=names,
                             position=pos[k] if pos.ndim == 2 else empty, velocity=empty,
                             effort=eff[k] if eff.ndim == 2 else empty)
                    w.add_message(cid, log_time=int(ns), publish_time=int(ns),
                                  data=bytes(ts.serialize_cdr(msg, JOINT_STATE)), sequence=k)
            w.add_metadata(META_NAME, {"kind": "recording", "sample_rate_hz": repr(rec.sample_rate_hz),
                                       "period_samples": str(rec.period_samples), "n_periods": str(rec.n_periods),
                                       "metadata": json.dumps(md)})
            valid = recording_valid(rec)
            if valid is not None:
                w.add_metadata(META_NAME + "_valid", {"valid": "".join("1" if v else "0" for v in valid)})
            w.finish()
        finally:
            f.close()
    return Path(path)


def write_trajectory_mcap(traj: JointTrajectory, path: str | Path, joint_names: Sequence[str] | None = None,
                          topic: str = "/joint_trajectory", t0_ns: int = 0) -> Path:
    """Export a trajectory as one trajectory_msgs/JointTrajectory message in a bare .mcap file; atomic."""
    ts = _typestore()
    JT, JTP = ts.types[JOINT_TRAJECTORY], ts.types["trajectory_msgs/msg/JointTrajectoryPoint"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    Duration = ts.types["builtin_interfaces/msg/Duration"]
    n = traj.q_rad.shape[1]
    names = list(joint_names) if joint_names else [f"joint{j + 1}" for j in range(n)]
    if len(names) != n:
        raise FileFormatError(f"{path}: {len(names)} joint names for a trajectory of {n} joints")
    tfs = np.round((traj.t_s - traj.t_s[0]) * 1e9).astype(np.int64)
    points = [JTP(positions=traj.q_rad[k].copy(), velocities=traj.dq_rad_s[k].copy(),
                  accelerations=traj.ddq_rad_s2[k].copy(), effort=np.zeros(0),
                  time_from_start=Duration(sec=int(v // 1_000_000_000), nanosec=int(v % 1_000_000_000)))
              for k, v in enumerate(tfs)]
    msg = JT(header=Header(stamp=Time(sec=t0_ns // 1_000_000_000, nanosec=t0_ns % 1_000_000_000), frame_id=""),
             joint_names=names, points=points)
    with atomic_path(path, suffix=".mcap") as tmp:
        f, w, channel = _writer(tmp, ts)
        try:
            cid = channel(topic, JOINT_TRAJECTORY)
            w.add_message(cid, log_time=t0_ns, publish_time=t0_ns, data=bytes(ts.serialize_cdr(msg, JOINT_TRAJECTORY)))
            w.add_metadata(META_NAME, {"kind": "trajectory", "period_s": repr(traj.period_s),
                                       "t_start_s": repr(float(traj.t_s[0]))})
            w.finish()
        finally:
            f.close()
    return Path(path)


def read_trajectory_mcap(path: str | Path, topic: str = "/joint_trajectory", index: int = 0) -> JointTrajectory:
    """Import the ``index``-th trajectory_msgs/JointTrajectory message of a topic (times to 1 ns)."""
    path = Path(path)
    msgs = _messages(path, [topic], JOINT_TRAJECTORY)[topic]
    if index >= len(msgs):
        raise FileFormatError(f"{path}: topic {topic} has {len(msgs)} message(s), no message {index}")
    m = msgs[index][1]
    n = len(m.joint_names)
    pts = m.points
    if len(pts) < 2:
        raise FileFormatError(f"{path}: topic {topic}, message {index}: {len(pts)} point(s), need at least 2")
    arr = {f: np.empty((len(pts), n)) for f in ("positions", "velocities", "accelerations")}
    tns = np.empty(len(pts), dtype=np.int64)
    for k, p in enumerate(pts):
        for f, a in arr.items():
            v = np.asarray(getattr(p, f), dtype=float)
            if v.shape[0] != n:
                raise FileFormatError(f"{path}: topic {topic}, point {k}: field {f} has {v.shape[0]} values, "
                                      f"joint_names has {n}")
            a[k] = v
        tns[k] = int(p.time_from_start.sec) * 1_000_000_000 + int(p.time_from_start.nanosec)
    if np.any(np.diff(tns) <= 0):
        k = int(np.argmax(np.diff(tns) <= 0)) + 1
        raise FileFormatError(f"{path}: topic {topic}, point {k}: time_from_start is not strictly increasing")
    meta = _read_meta(path)
    period = meta.get("period_s")
    t0 = float(meta.get("t_start_s", "0.0"))
    return JointTrajectory(t0 + tns * 1e-9, arr["positions"], arr["velocities"], arr["accelerations"],
                           period_s=None if period in (None, "None") else float(period))
