"""Wall time of a full-twin Monte-Carlo against a raw ``mujoco.rollout`` of the same number of
simulation steps (same robot model, integrator and time step, on the same machine).

    python benchmarks/bench_montecarlo.py                 # 100 runs, 5 + 1 periods (target ratio <= 2.0)
    python benchmarks/bench_montecarlo.py --runs 10 --periods 2
    python benchmarks/bench_montecarlo.py --hal-runs 2    # also time the per-run HAL path

Prints, for the iiwa 14 with its default sensor noise:

- the steps per run (lead-in, transient and recorded periods, lead-out: the twin's whole run);
- the raw rollout: ``mujoco.rollout`` of ``runs`` x steps on the single-robot model with
  ``--threads`` native threads (open loop, zero control, viscous friction as joint damping, no
  Python in the loop);
- the Monte-Carlo (simulation, processing, WLS) along the path ``run_twin`` picks: with sensor
  noise only the motion is seed-independent (``deterministic``: one simulation, a noise draw per
  run), with process noise every run is simulated (``batch``: ``--batch-size`` robots side by
  side in one MuJoCo model, in ``--sim-workers`` forked groups); and each one's ratio to the raw rollout;
- with ``--hal-runs k``: the old path (one HAL twin per run) on k runs, scaled to ``runs``.
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


def raw_rollout_s(spec, runs: int, steps: int, threads: int) -> float:
    """Wall time of mujoco.rollout of ``runs`` x ``steps`` on the single-robot twin model."""
    import mujoco
    from mujoco import rollout

    from robident_twin.model.builders import mujoco_model

    m = mujoco_model(spec, timestep_s=1e-3, integrator="RK4", actuator="ramp")
    m.dof_damping[:] = spec.fv_link_Nms_rad + spec.fv_motor_Nms_rad
    datas = [mujoco.MjData(m) for _ in range(threads)]
    d = datas[0]
    d.qpos[:] = spec.home_rad
    mujoco.mj_forward(m, d)
    state0 = np.empty(mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(m, d, state0, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    init = np.tile(state0, (runs, 1))
    ctrl = np.zeros((runs, steps, m.nu))
    with rollout.Rollout(nthread=threads) as r:
        t0 = time.perf_counter()
        r.rollout(m, datas, init, ctrl)
        return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--periods", type=int, default=5)
    ap.add_argument("--transient", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="raw rollout threads")
    ap.add_argument("--process-noise", type=float, default=0.05, help="Nm per joint; 0 skips the batch case")
    ap.add_argument("--batch-size", type=int, default=50)
    ap.add_argument("--sim-workers", type=int, default=2, help="parallel robot groups of a batch (montecarlo.workers)")
    ap.add_argument("--hal-runs", type=int, default=0)
    ap.add_argument("--robot", default="iiwa14")
    args = ap.parse_args(argv)

    from hal.factory import make_noise
    from hal.sim.batch import BatchTwin
    from robident_twin.validation import montecarlo as mc
    from robident_twin.model.build import build_model, resolve_robot
    from robident_twin.design.stored import reference, resolve_design
    from robident_twin.model.regressor import ModelOptions

    spec = resolve_robot({"name": args.robot})
    model = build_model(spec, ModelOptions(measurement="joint_torque" if spec.has_joint_torque_sensors
                                           else "motor_torque"))
    traj = resolve_design(f"excitation/{args.robot}_default.yaml", spec)
    backend = {"name": "mujoco", "control_rate_hz": 1000.0, "controller": {}}
    noise_cfg = {"enabled": True}
    plan = BatchTwin(spec, 1, make_noise(spec, noise_cfg)).plan(reference(traj, 1000.0), args.periods,
                                                               args.transient)
    steps = plan.reference.n_samples
    total = steps * args.runs
    print(f"robot {spec.name}: {args.runs} runs x {steps} steps = {total} steps (lead-in {plan.lead_in_samples}, "
          f"{args.transient}+{args.periods} periods of {plan.period_samples}, lead-out "
          f"{steps - plan.stop})", flush=True)

    t_raw = raw_rollout_s(spec, args.runs, steps, args.threads)
    print(f"raw mujoco.rollout, {args.threads} thread(s):   {t_raw:8.2f} s ({1e6 * t_raw / total:.1f} us/step)",
          flush=True)

    def report(label: str, wall: float, res=None, extra: str = ""):
        line = f"{label:<40} {wall:8.2f} s  ratio to raw rollout {wall / t_raw:5.2f} (target <= 2.0)"
        if res is not None:
            bt = mc.bias_test(res)
            line += (f"\n{'':<40} simulate {res.meta['simulate_s']:.1f} s, process+estimate "
                     f"{res.meta['estimate_s']:.1f} s; bias test {'ok' if bt.passed else 'FAIL'} "
                     f"(max |bias|/SEM {bt.max_abs_t:.2f}, limit {bt.threshold:.2f}, > 3 SEM: {bt.n_over_3})")
        print(line + extra, flush=True)

    cases = [("deterministic", None)]
    if args.process_noise > 0:
        cases.append(("batch", args.process_noise))
    for path, pn in cases:
        t0 = time.perf_counter()
        res = mc.run_twin(model, traj, backend, noise_cfg, args.runs, 0, "wls", args.periods, args.transient,
                          progress=True, process_noise_Nm=pn, batch_size=args.batch_size,
                          workers=args.sim_workers)
        wall = time.perf_counter() - t0
        assert res.meta["sim_path"] == path
        label = "Monte-Carlo, sensor noise (deterministic)" if pn is None else \
            f"Monte-Carlo, process noise {pn:g} Nm (batch, {args.sim_workers} workers)"
        report(label, wall, res)
    if args.hal_runs > 0:
        t0 = time.perf_counter()
        mc.run_twin(model, traj, backend, noise_cfg, args.hal_runs, 0, "wls", args.periods, args.transient,
                    progress=True, sim="hal")
        wall = (time.perf_counter() - t0) * args.runs / args.hal_runs
        report(f"Monte-Carlo, HAL per run ({args.hal_runs} runs scaled)", wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
