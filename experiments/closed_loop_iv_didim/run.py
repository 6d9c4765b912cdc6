"""Closed-loop IDIM-IV and DIDIM (task=identify's estimator=iv / didim) against OLS, WLS and IV with
the reference as instruments, on the ideal iiwa 14 twin and in the setting where closed-loop
measurement noise makes OLS fail the Monte-Carlo bias test (tests/test_robustness.py's contrast:
the ``closed_loop`` twin effect, differentiation band widened to 1500 harmonics).

    PYTHONPATH=. ROBIDENT_SHARED=../shared python experiments/closed_loop_iv_didim/run.py [runs] [periods]

Prints estimator x {ideal, closed_loop}: bias test pass/FAIL (Bonferroni over the parameters,
false-alarm rate 1 %), max |t|, failing parameters, median RMSE / Cramer-Rao std; writes results.json.
The model loop of IV/DIDIM uses the twin's controller gains (as task=identify) and never its truth.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from hal.sim.mujoco_backend import MujocoTwin
from robident_twin.design.stored import reference, resolve_design
from robident_twin.estimation import estimators as E
from robident_twin.estimation.closed_loop_sim import ModelLoop, loop_controller
from robident_twin.model.build import build_model, resolve_robot
from robident_twin.model.regressor import ModelOptions
from robident_twin.processing.signal import process_periodic
from robident_twin.validation import robustness as rb
from robident_twin.validation.montecarlo import _twin_recordings, run_seeds
from robident_twin.validation.statistics import MonteCarloResult, crlb

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
PERIODS = int(sys.argv[2]) if len(sys.argv) > 2 else 2
H, DEC, RATE, SEED = 1500, 10, 1000.0, 5
BACKEND = {"name": "mujoco", "control_rate_hz": RATE, "controller": {}}
METHODS = ("ols", "wls", "iv_ref", "iv", "didim")


def main() -> None:
    spec = resolve_robot({"name": "iiwa14"})
    model = build_model(spec, ModelOptions(measurement="joint_torque"))
    traj = resolve_design("excitation/iiwa14_default.yaml", spec)
    controller = loop_controller(MujocoTwin(spec, control_rate_hz=RATE), {})  # the gains only
    truth = model.true_base()
    _, q, dq, ddq = traj.sample(RATE / DEC)
    std = np.asarray(spec.tau_joint_std_Nm, float)
    bound = crlb(model.base.columns(model.regressor.stack(q, dq, ddq)), std**2 / PERIODS)
    names = model.base.names
    out, rows = {}, []
    for column in ("ideal", "closed_loop"):
        tc = None if column == "ideal" else rb.column_twin(column)
        seeds = run_seeds(SEED, RUNS)
        est = {m: np.empty((RUNS, len(truth))) for m in METHODS}
        iters = {m: [] for m in ("iv", "didim")}
        loop = None
        t0 = time.perf_counter()
        from tqdm import tqdm

        with tqdm(total=None, disable=True) as bar:
            for r, rec in _twin_recordings("batch", spec, BACKEND, {"enabled": True}, reference(traj, RATE), seeds,
                                           PERIODS, 1, None, RUNS, bar, 1, tc):
                data = process_periodic(rec, "joint_torque", H, DEC)
                W = model.base_regressor(data)
                t = np.arange(data.n_samples) / data.sample_rate_hz
                Z = model.base.columns(model.regressor.stack(*traj.evaluate(t)))
                if loop is None:
                    loop = ModelLoop(model.regressor, model.base, traj.evaluate, t, controller)
                s2 = data.tau_var_Nm2
                est["ols"][r] = E.ols(W, data.tau_Nm, names).beta
                est["wls"][r] = E.wls(W, data.tau_Nm, names, s2).beta
                est["iv_ref"][r] = E.iv(W, data.tau_Nm, names, Z, sigma2_joint_Nm2=s2).beta
                ctx = {"instruments": loop, "simulated_regressor": loop, "start_instruments": Z}
                for m in ("iv", "didim"):
                    e = E.estimate(m, W, data.tau_Nm, names, s2, context=ctx, options={"max_iter": 20, "tol": 1e-6})
                    est[m][r] = e.beta
                    iters[m].append(int(e.extra["iterations"]))
                print(f"{column} run {r + 1}/{RUNS} ({time.perf_counter() - t0:.0f} s)", flush=True)
        for m in METHODS:
            res = MonteCarloResult("twin", m, tuple(names), tuple(model.base.units), truth, bound, est[m],
                                   np.full_like(est[m], np.nan), np.zeros(RUNS), seeds, {"column": column})
            c = rb.cell_stats(res, 0.01)
            row = {"estimator": m, "column": column, "passed": c.bias_test_passed, "max_abs_t": c.bias_test_max_t,
                   "threshold": c.bias_test_threshold, "failing": c.bias_test_failing,
                   "median_rmse_over_crlb": c.median_rmse_over_crlb,
                   "iterations": iters.get(m) or None}
            rows.append(row)
        out[column] = {"wall_s": time.perf_counter() - t0}
    print(f"\niiwa 14, {RUNS} runs x {PERIODS} periods, {H} harmonics, decimate {DEC}; bias test at 1 % "
          f"(Bonferroni over {len(truth)} parameters)\n")
    print("| estimator | ideal | closed_loop |\n|---|---|---|")
    for m in METHODS:
        cells = []
        for column in ("ideal", "closed_loop"):
            r = next(x for x in rows if x["estimator"] == m and x["column"] == column)
            cells.append(f"{'pass' if r['passed'] else 'FAIL'} |t| {r['max_abs_t']:.1f} ({r['failing']} fail), "
                         f"RMSE/CR {r['median_rmse_over_crlb']:.2f}")
        print(f"| {m} | {cells[0]} | {cells[1]} |")
    Path(__file__).with_name("results.json").write_text(json.dumps(
        {"runs": RUNS, "periods": PERIODS, "n_harmonics": H, "decimate": DEC, "seed": SEED, "alpha": 0.01,
         "rows": rows, "columns": out}, indent=1))


if __name__ == "__main__":
    main()
