"""Wall time of a full-twin Monte-Carlo against a raw ``mujoco.rollout`` of the same number
of simulation steps (same robot model, same integrator and time step).

    python benchmarks/bench_montecarlo.py              # 100 runs (target ratio <= 2.0)
    python benchmarks/bench_montecarlo.py --runs 5 --periods 2

Prints: steps, the Monte-Carlo's wall time (simulation through the HAL, processing,
estimation, per run), the raw rollout's wall time (open-loop zero control, ``--threads``
native threads) and their ratio.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--periods", type=int, default=5)
    ap.add_argument("--transient", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--robot", default="iiwa14")
    args = ap.parse_args(argv)

    import mujoco
    from mujoco import rollout

    from robident_twin import montecarlo as mc
    from robident_twin.builders import mujoco_model
    from robident_twin.pipeline import build_model, resolve_design, resolve_robot
    from robident_twin.regressor import ModelOptions

    spec = resolve_robot({"name": args.robot})
    model = build_model(spec, ModelOptions(measurement="joint_torque" if spec.has_joint_torque_sensors
                                           else "motor_torque"))
    traj = resolve_design(f"excitation/{args.robot}_default.yaml", spec)
    backend = {"name": "mujoco", "control_rate_hz": 1000.0, "controller": {}}

    t0 = time.perf_counter()
    res = mc.run_twin(model, traj, backend, {"enabled": True}, args.runs, 0, "wls", args.periods,
                      args.transient, progress=True)
    t_mc = time.perf_counter() - t0
    # steps per run: approach + (transient + periods) periods at the control rate; the twin's
    # approach length is recorded in each recording's metadata, measure one here
    from hal.factory import make_robot
    from robident_twin.pipeline import reference

    robot = make_robot(spec, backend, {"enabled": True}, seed=0)
    rec = robot.run(reference(traj, 1000.0), periods=1, transient_periods=0)
    approach_steps = int(round(rec.metadata["approach_s"] * 1000.0))
    n_period = int(round(traj.period_s * 1000.0))
    steps = approach_steps + (args.transient + args.periods) * n_period
    total = steps * args.runs

    m = mujoco_model(spec, timestep_s=1e-3, integrator="RK4", actuator="ramp")
    m.dof_damping[:] = spec.fv_link_Nms_rad + spec.fv_motor_Nms_rad
    datas = [mujoco.MjData(m) for _ in range(args.threads)]
    d = datas[0]
    d.qpos[:] = spec.home_rad
    mujoco.mj_forward(m, d)
    state0 = np.empty(mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(m, d, state0, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    init = np.tile(state0, (args.runs, 1))
    ctrl = np.zeros((args.runs, steps, m.nu))
    with rollout.Rollout(nthread=args.threads) as r:
        t0 = time.perf_counter()
        r.rollout(m, datas, init, ctrl)
        t_raw = time.perf_counter() - t0
    print(f"robot {spec.name}: {args.runs} runs x {steps} steps = {total} steps "
          f"({args.transient}+{args.periods} periods of {n_period} + approach {approach_steps})")
    print(f"full-twin Monte-Carlo (HAL, processing, WLS): {t_mc:.2f} s ({1e6 * t_mc / total:.1f} us/step)")
    print(f"raw mujoco.rollout, {args.threads} thread(s):      {t_raw:.2f} s ({1e6 * t_raw / total:.1f} us/step)")
    print(f"ratio Monte-Carlo / raw rollout: {t_mc / t_raw:.2f} (target <= 2.0)")
    print(f"(mean |bias|/SEM over parameters: "
          f"{np.mean(np.abs([p['bias_over_crlb_sem'] for p in mc.summarise(res)['parameters']])):.2f})"
          if args.runs >= 2 else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
