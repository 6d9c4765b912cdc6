"""Controller cycles per second through the real-controller backends and their emulators.

    python benchmarks/bench_real_backends.py [--period 1.0] [--repeat 2]

For the LWR4+ FRI and the Sunrise FRI backend in monitor mode (the emulator serving the MuJoCo
twin over UDP on 127.0.0.1, lock step, no faults) prints the wall time per controller cycle and
its ratio to the MuJoCo twin's own ``run`` of the same trajectory (the same physics without
sockets, codecs and threads), plus the per-message codec costs against a raw ``struct.pack``.
"""
from __future__ import annotations

import argparse
import struct
import tempfile

import numpy as np
from _timing import best_of


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--period", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    from hal.factory import make_robot
    from hal.protocol import JointTrajectory
    from hal.real import lwr_fri, sunrise_fri
    from robident_twin.design.dryrun import design_checks, dry_run, safety_config
    from robident_twin.model.robot import load_robot

    records = tempfile.mkdtemp()
    for robot_name, backend in (("lwr4p", "lwr_fri"), ("iiwa14", "sunrise_fri")):
        spec = load_robot(robot_name)
        t = np.arange(int(1000 * args.period)) / 1000.0
        w = 2 * np.pi / args.period
        ph = np.linspace(0, 1, spec.n_joints)
        amp = 0.05
        traj = JointTrajectory(t, spec.home_rad + amp * np.sin(w * t[:, None] + ph), amp * w * np.cos(w * t[:, None] + ph),
                               -amp * w**2 * np.sin(w * t[:, None] + ph), period_s=args.period)
        safety = {"dryrun": {"simulate": False}}
        dry_run(traj, spec, safety_config(safety), records_dir=records)
        robot = make_robot(spec, {"name": backend, "emulate": True, "records_dir": records, "safety": safety},
                           {"enabled": False}, checks=design_checks(spec, safety, records))
        cycles = {}

        def over_udp():
            before = robot.emulator.status.cycles
            robot.run(traj, periods=2)
            cycles["n"] = robot.emulator.status.cycles - before

        try:
            t_udp = best_of(over_udp, args.repeat)
        finally:
            robot.close()
        twin = make_robot(spec, {"name": "mujoco"}, {"enabled": False})
        n_twin = {}

        def direct():
            from hal.sim.playback import plan_run

            plan = plan_run(twin.info, "mujoco", traj, *twin.state(), 2, 0)
            n_twin["n"] = plan.reference.n_samples
            twin.run(traj, periods=2)

        t_twin = best_of(direct, args.repeat)
        per_udp = t_udp / cycles["n"] * 1e6
        per_twin = t_twin / n_twin["n"] * 1e6
        print(f"{backend:12s} {per_udp:8.1f} us per cycle over UDP, MuJoCo twin run {per_twin:6.1f} us per cycle: "
              f"ratio {per_udp / per_twin:5.2f}")

    q = np.linspace(-1, 1, 7)
    raw = struct.Struct("<7f")
    n = 20000
    t_raw = best_of(lambda: [raw.pack(*q.tolist()) for _ in range(n)], args.repeat) / n
    t_lwr = best_of(lambda: [lwr_fri.encode_msr_lean(1, 2, 3, 1, 3, 1e-3, 1.0, 0.0, 0, 1, q, q, q)
                             for _ in range(n)], args.repeat) / n
    buf = lwr_fri.encode_msr_lean(1, 2, 3, 1, 3, 1e-3, 1.0, 0.0, 0, 1, q, q, q)
    t_lwr_d = best_of(lambda: [lwr_fri.decode_msr_lean(buf) for _ in range(n)], args.repeat) / n
    m = sunrise_fri.Monitoring(measured_joint_position=q, measured_torque=q, commanded_torque=q, external_torque=q,
                               ipo_joint_position=q)
    t_sf = best_of(lambda: [sunrise_fri.encode_monitoring(m) for _ in range(n // 10)], args.repeat) / (n // 10)
    mb = sunrise_fri.encode_monitoring(m)
    t_sf_d = best_of(lambda: [sunrise_fri.decode_monitoring(mb) for _ in range(n // 10)], args.repeat) / (n // 10)
    print(f"codec per message vs raw struct.pack of 7 floats ({t_raw * 1e6:.2f} us): FRI encode x{t_lwr / t_raw:.1f}, "
          f"decode x{t_lwr_d / t_raw:.1f}; Sunrise protobuf encode x{t_sf / t_raw:.1f}, decode x{t_sf_d / t_raw:.1f}")


if __name__ == "__main__":
    main()
