"""Speed of the recorded-file importers and exporters (hal/files/) against the raw library calls.

    python benchmarks/bench_files.py [--samples 20000] [--joints 7]

For a random recording (samples x joints, with joint torques and commands) prints, per format,
write and read times, the file size and whether the round trip is exact, and the ratios:
CSV read over ``numpy.loadtxt`` of the same file, MCAP read over the raw loop
(``mcap`` reader + ``rosbags`` CDR deserialisation of every message), MCAP write over the raw
loop (CDR serialisation + ``mcap`` writer).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from hal.files import load_recording, save_recording
from hal.protocol import Recording


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def raw_mcap_read(path: Path) -> int:
    from mcap.reader import make_reader
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    n = 0
    with open(path, "rb") as f:
        for _, ch, msg in make_reader(f).iter_messages():
            ts.deserialize_cdr(msg.data, "sensor_msgs/msg/JointState")
            n += 1
    return n


def raw_mcap_write(path: Path, rec: Recording) -> None:
    from mcap.writer import Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    JS, H, T = ts.types["sensor_msgs/msg/JointState"], ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    names = [f"j{i}" for i in range(rec.n_joints)]
    e = np.zeros(0)
    with open(path, "wb") as f:
        w = Writer(f)
        w.start()
        sid = w.register_schema(JS.__msgtype__, "ros2msg", ts.generate_msgdef(JS.__msgtype__, ros_version=2)[0].encode())
        for topic, pos, eff in (("/a", rec.q_rad, rec.tau_motor_Nm), ("/b", e, rec.tau_joint_Nm), ("/c", rec.q_cmd_rad, e)):
            cid = w.register_channel(topic, "cdr", sid)
            for k, t in enumerate(rec.t_s):
                ns = int(round(t * 1e9))
                m = JS(header=H(stamp=T(sec=ns // 10**9, nanosec=ns % 10**9), frame_id=""), name=names,
                       position=pos[k] if pos.ndim == 2 else e, velocity=e, effort=eff[k] if eff.ndim == 2 else e)
                w.add_message(cid, ns, bytes(ts.serialize_cdr(m, JS.__msgtype__)), ns)
        w.finish()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--joints", type=int, default=7)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    N, n = a.samples, a.joints
    rec = Recording(np.arange(N) / 1000.0, rng.normal(size=(N, n)), rng.normal(size=(N, n)), rng.normal(size=(N, n)),
                    rng.normal(size=(N, n)), 1000.0, N // 2, 2, {"source": "bench"})
    d = Path(tempfile.mkdtemp())
    times = {}
    for ext in ("csv", "npz", "mat", "mcap"):
        p, tw = timed(lambda: save_recording(rec, d / f"r.{ext}"))
        r, tr = timed(lambda: load_recording(p))
        ok = all(np.array_equal(getattr(r, k), getattr(rec, k)) for k in ("q_rad", "tau_motor_Nm", "tau_joint_Nm", "q_cmd_rad"))
        times[ext] = (tw, tr)
        print(f"{ext:5s} {N} samples x {n} joints: write {tw:6.2f} s, read {tr:6.2f} s, "
              f"{p.stat().st_size / 1e6:6.1f} MB, exact round trip {ok}")
    _, t_loadtxt = timed(lambda: np.loadtxt(d / "r.csv", delimiter=",", comments="#", skiprows=6))
    _, t_raw_read = timed(lambda: raw_mcap_read(d / "r.mcap"))
    _, t_raw_write = timed(lambda: raw_mcap_write(d / "raw.mcap", rec))
    print(f"CSV read / numpy.loadtxt:            {times['csv'][1] / t_loadtxt:5.2f}")
    print(f"MCAP read / raw mcap+rosbags loop:   {times['mcap'][1] / t_raw_read:5.2f}")
    print(f"MCAP write / raw rosbags+mcap loop:  {times['mcap'][0] / t_raw_write:5.2f}")


if __name__ == "__main__":
    main()
