"""KUKA RSI: cost of the XML codec and of one emulated controller cycle (IR 361, 3 axes).

    python benchmarks/bench_rsi.py [--messages 5000] [--cycles 1500]

Prints, as ratios against the raw library calls, the time per message of
``encode_rob`` + ``decode_rob`` (raw: ``xml.etree.ElementTree.fromstring`` of the same bytes)
and the wall time per RSI cycle of a correction-mode run through the emulator over UDP on
127.0.0.1 (raw: ``TwinStepper.step``, the MuJoCo twin's own cycle), with the headroom against
the 4 ms IPO_FAST cycle (the emulator runs faster than real time; a real controller does not).
"""
from __future__ import annotations

import argparse
import tempfile
import time
import xml.etree.ElementTree as ET

import numpy as np

from hal.real.rsi import make_rsi_robot
from hal.real.rsi_codec import RobMessage, RsiFormat, decode_rob, encode_rob
from hal.sim.sensors import SensorNoise
from hal.sim.stepper import TwinStepper
from robident_twin.design.dryrun import design_checks, dry_run, safety_config
from robident_twin.model.robot import load_robot


def short_reference(spec, seconds: float = 2.0, rate: float = 250.0):
    from hal.protocol import JointTrajectory

    t = np.arange(int(seconds * rate)) / rate
    w = 2 * np.pi / seconds
    ph = np.arange(spec.n_joints)
    a = 0.1
    return JointTrajectory(t, spec.home_rad + a * np.sin(w * t[:, None] + ph), a * w * np.cos(w * t[:, None] + ph),
                           -a * w**2 * np.sin(w * t[:, None] + ph), period_s=seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--cycles", type=int, default=1500)
    args = ap.parse_args()
    spec = load_robot("kuka_ir361")
    fmt = RsiFormat(n_axes=3)
    msg = RobMessage(ipoc=4208163072, aipos_deg=np.array([12.5, -40.25, 80.125]), aspos_deg=np.zeros(3), delay=0,
                     channels={"motor_torque": np.array([120.0, -340.5, 55.25])})
    data = encode_rob(msg, fmt)
    t0 = time.perf_counter()
    for _ in range(args.messages):
        decode_rob(encode_rob(msg, fmt), fmt)
    codec = (time.perf_counter() - t0) / args.messages
    t0 = time.perf_counter()
    for _ in range(args.messages):
        ET.fromstring(data)
    raw = (time.perf_counter() - t0) / args.messages
    print(f"codec: encode + decode {1e6 * codec:.1f} us per message, ElementTree.fromstring {1e6 * raw:.1f} us "
          f"(ratio {codec / raw:.2f}), {len(data)} bytes")

    quiet = SensorNoise.from_config(spec, enabled=False)
    st = TwinStepper(spec, quiet, control_rate_hz=250.0)
    q = st.state()[0]
    t0 = time.perf_counter()
    for k in range(args.cycles):
        st.step(q + 1e-4 * np.sin(k / 50))
    step = (time.perf_counter() - t0) / args.cycles
    ref = short_reference(spec)
    with tempfile.TemporaryDirectory() as tmp:
        rob = make_rsi_robot(spec, {"name": "rsi", "emulate": True, "records_dir": tmp}, quiet, 0)
        rob.attach_checks(design_checks(spec, {"dryrun": {"simulate": False}}, tmp))
        dry_run(ref, spec, safety_config({"dryrun": {"simulate": False}}), records_dir=tmp)
        periods = max(1, int(round(args.cycles / ref.n_samples)) - 1)
        try:
            t0 = time.perf_counter()
            rob.run(ref, periods=periods, transient_periods=1)
            wall = time.perf_counter() - t0
        finally:
            rob.close()
        cycles = rob.emulator.status.cycles
    per = wall / cycles
    print(f"emulated RSI cycle: {1e3 * per:.2f} ms per cycle over {cycles} cycles, TwinStepper.step "
          f"{1e3 * step:.2f} ms (ratio {per / step:.2f}); {4e-3 / per:.1f}x faster than the 4 ms real-time cycle")


if __name__ == "__main__":
    main()
