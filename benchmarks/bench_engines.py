"""PyBullet against MuJoCo: microseconds per simulated step, raw engine and controlled twin.

    python benchmarks/bench_engines.py [--robot iiwa14] [--steps 5000] [--period 2.0] [--repeat 3]

Raw: ``mujoco.mj_step`` (RK4, the twin's integrator) against ``pybullet.stepSimulation``
(semi-implicit Euler) at 1 ms with zero torque. Twin: the noise-free MuJoCo and PyBullet
twins (``hal.factory.make_robot``) playing one recorded period of a sine reference after
one transient period; microseconds per control period (1 kHz) including the approach,
the controller and the sensor model. Prints the PyBullet / MuJoCo ratios.
"""
from __future__ import annotations

import argparse

import numpy as np
from _timing import best_of


def sine_reference(spec, rate_hz: float, period_s: float, amp_rad: float = 0.1):
    from hal.protocol import JointTrajectory

    t = np.arange(int(round(rate_hz * period_s))) / rate_hz
    w = 2 * np.pi / period_s
    ph = np.linspace(0, 1, spec.n_joints)
    centre = np.clip(spec.home_rad, spec.q_min_rad + amp_rad + 0.05, spec.q_max_rad - amp_rad - 0.05)
    return JointTrajectory(t, centre + amp_rad * np.sin(w * t[:, None] + ph),
                           amp_rad * w * np.cos(w * t[:, None] + ph),
                           -amp_rad * w**2 * np.sin(w * t[:, None] + ph), period_s=period_s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robot", default="iiwa14")
    ap.add_argument("--steps", type=int, default=5000, help="raw engine steps per timing")
    ap.add_argument("--period", type=float, default=2.0, help="reference period (s) for the twin timing")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import mujoco

    from hal.factory import make_robot
    from hal.sim.pybullet_backend import PyBulletTwin
    from hal.sim.sensors import SensorNoise
    from robident_twin.model.builders import mujoco_model
    from robident_twin.model.robot import load_robot

    spec = load_robot(args.robot)

    # raw engines, 1 ms steps, no torque
    mm = mujoco_model(spec, timestep_s=1e-3, integrator="RK4")
    md = mujoco.MjData(mm)

    def mj_raw():
        md.qpos[:] = spec.home_rad
        md.qvel[:] = 0.0
        for _ in range(args.steps):
            mujoco.mj_step(mm, md)

    tw = PyBulletTwin(spec, SensorNoise.from_config(spec, enabled=False))
    pb, body, client = tw.pb, tw.body, tw.client

    def pb_raw():
        tw._set_state(spec.home_rad, np.zeros(spec.n_joints))
        for _ in range(args.steps):
            pb.stepSimulation(physicsClientId=client)

    t_mj = best_of(mj_raw, args.repeat) / args.steps * 1e6
    t_pb = best_of(pb_raw, args.repeat) / args.steps * 1e6
    tw.close()
    print(f"{spec.name} raw engine step (1 ms): MuJoCo RK4 {t_mj:.1f} us, PyBullet {t_pb:.1f} us, "
          f"ratio PyBullet / MuJoCo {t_pb / t_mj:.2f}")

    # controlled twins: one transient and one recorded period after the approach
    ref = sine_reference(spec, 1000.0, args.period)
    per_step = {}
    for backend in ("mujoco", "pybullet"):
        def play():
            robot = make_robot(spec, {"name": backend}, {"enabled": False}, seed=0)
            try:
                rec = robot.run(ref, periods=1, transient_periods=1)
            finally:
                robot.close()
            play.n = int(round(rec.metadata["approach_s"] * 1000)) + 2 * ref.n_samples

        t = best_of(play, args.repeat)
        per_step[backend] = t / play.n * 1e6
    print(f"{spec.name} twin per 1 ms control period (controller, drive chain, sensors): "
          f"MuJoCo {per_step['mujoco']:.1f} us, PyBullet {per_step['pybullet']:.1f} us, "
          f"ratio PyBullet / MuJoCo {per_step['pybullet'] / per_step['mujoco']:.2f}")


if __name__ == "__main__":
    main()
