"""Stage timings of the default identification and the regressor-stacking overhead.

    python benchmarks/bench_stages.py [--samples 10000] [--repeat 3]

Prints each pipeline stage's wall time for the default run (iiwa 14, MuJoCo twin,
WLS) and the ratio of ``Regressor.stack`` (pinocchio regressor + Khalil reordering
+ drive/friction columns) over N samples to N raw
``pinocchio.computeJointTorqueRegressor`` calls, and the MuJoCo twin's simulated
steps per second against raw ``mujoco.mj_step`` (RK4).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from _timing import best_of


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import mujoco
    import pinocchio as pin
    from hydra import compose, initialize_config_dir

    from robident_twin.model.builders import mujoco_model
    from robident_twin.paths import CONF_DIR
    from robident_twin.pipeline import identify
    from robident_twin.model.regressor import Regressor
    from robident_twin.model.robot import load_robot

    spec = load_robot("iiwa14")
    reg = Regressor(spec)
    q, dq, ddq = reg.random_states(args.samples, np.random.default_rng(0))
    m, d = reg.model, reg.data

    def raw():
        for k in range(args.samples):
            pin.computeJointTorqueRegressor(m, d, q[k], dq[k], ddq[k])

    t_raw = best_of(raw, args.repeat)
    t_stack = best_of(lambda: reg.stack(q, dq, ddq), args.repeat)
    print(f"regressor: {args.samples} samples, raw pinocchio {t_raw * 1e3:.1f} ms, "
          f"Regressor.stack {t_stack * 1e3:.1f} ms, ratio {t_stack / t_raw:.2f}")

    mm = mujoco_model(spec)
    md = mujoco.MjData(mm)
    n_steps = 20000
    t_mj = best_of(lambda: mujoco.mj_step(mm, md, nstep=n_steps), args.repeat)

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=["output.plots=false"])
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(cfg, resolve=True)
    t0 = time.perf_counter()
    res = identify(plain, out_dir=None)
    total = time.perf_counter() - t0
    timings = res.summary["timings_s"]
    print(f"default identification: {total:.2f} s wall")
    for k, v in timings.items():
        print(f"  {k:<16} {v:8.3f} s  ({100 * v / total:5.1f} %)")
    # simulated steps in the acquisition: approach + transient + recorded, two trajectories
    steps = res.data.n_samples * (plain["acquisition"]["periods"] + plain["acquisition"]["transient_periods"]) * 2
    per_step_twin = timings["acquisition"] / steps
    per_step_raw = t_mj / n_steps
    print(f"twin acquisition {per_step_twin * 1e6:.1f} us/step (>= {steps} steps incl. approach) vs raw "
          f"mj_step RK4 {per_step_raw * 1e6:.1f} us/step: ratio <= {per_step_twin / per_step_raw:.2f}")


if __name__ == "__main__":
    main()
