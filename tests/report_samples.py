"""Small report directories of every kind, for the layout test (tests/test_report_layout.py) and the
screenshots (docs/make_screenshots.py). The Monte-Carlo, sweep, robustness, control and
twin-vs-real inputs are synthetic but shaped like the real ones: the iiwa 14's 57 base parameter
names, 8 twin columns x 6 estimators, the CLOOS's 6 joints; the identification run is a real one
(the ``identify_run`` fixture or a run made by the caller).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from robident_twin.report import html as hr


def mc_job(out: Path, names: Sequence[str], noise_scale: float = 1.0, seed: int = 1, n_runs: int = 200,
           biased: int | None = None) -> Path:
    """A Monte-Carlo job directory as ``validation.sweeps.run_job`` writes it, from Gaussian draws
    around a truth with a known covariance (parameter ``biased`` shifted by 10 standard errors)."""
    from robident_twin.validation.statistics import MonteCarloResult

    rng = np.random.default_rng(seed)
    p = len(names)
    A = rng.standard_normal((p, p))
    scale = 10.0 ** rng.uniform(-3, 0, p)
    crlb = (A @ A.T / p + np.eye(p)) * np.outer(scale, scale) * (0.01 * noise_scale) ** 2
    truth = scale * rng.uniform(0.5, 2.0, p)
    est = truth + rng.standard_normal((n_runs, p)) @ np.linalg.cholesky(crlb).T
    if biased is not None:
        est[:, biased] += 10 * np.sqrt(crlb[biased, biased] / n_runs)
    res = MonteCarloResult("exact", "wls", tuple(names), ("SI",) * p, truth, crlb, est,
                           np.tile(np.sqrt(np.diag(crlb)), (n_runs, 1)), np.full(n_runs, 1.0), np.arange(n_runs),
                           {"robot": "iiwa14", "measurement": "joint_torque", "n_samples": 2000, "wall_s": 1.0})
    write_mc_job(out, res, {"name": "iiwa14", "excitation": "synthetic", "validation": "synthetic"}, noise_scale, seed)
    return out


def write_mc_job(out: Path, res, robot: dict, noise_scale: float, seed: int):
    """Write ``res`` (a ``MonteCarloResult`` of WLS in exact mode on ``robot``) into ``out`` as
    ``validation.sweeps.run_job`` does (summary.json, the parquet tables, the estimates); returns
    its summary and consistency tests."""
    import pandas as pd

    from robident_twin.config import validate
    from robident_twin.validation.statistics import consistency_tests, summarise
    from robident_twin.validation.sweeps import config_hash, config_record, tidy_row, write_json_atomic

    summary, tests = summarise(res), consistency_tests(res)
    run = validate({"robot": robot, "backend": {"name": "mujoco"}, "estimator": {"name": "wls"},
                    "montecarlo": {"noise_scale": noise_scale, "seed": seed}})
    cfg = config_record(run)  # as run_job records it
    key = config_hash(run)
    row = tidy_row(run, res, summary, tests, key)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([{"config_hash": key, "robot": robot["name"], "estimator": "wls", "mode": "exact",
                   "noise_scale": noise_scale, "friction": "matched", **q} for q in summary["parameters"]]
                 ).to_parquet(out / "parameters.parquet", index=False)
    write_json_atomic({"summary": summary, "tests": tests.__dict__, "row": row, "config": cfg}, out / "summary.json")
    np.savez(out / hr.ESTIMATES, estimates=res.estimates, truth=res.truth, crlb_std=np.sqrt(np.diag(res.crlb)),
             names=np.array(res.names))
    pd.DataFrame([row]).to_parquet(out / "result.parquet", index=False)
    return summary, tests


def sweep(out: Path, names: Sequence[str]) -> Path:
    """Three jobs at noise scales 0.5, 1, 2 and their aggregate (equal RMS bias in two of them would
    once have drawn a '1e-13 + 1.0494' axis)."""
    from robident_twin.validation.sweeps import aggregate

    for k, s in enumerate((0.5, 1.0, 2.0)):
        mc_job(out / str(k), names, s, seed=10 + k, n_runs=60)
    aggregate(out, plots=False)
    return out / "aggregate"


def robustness(out: Path) -> Path:
    """A robustness.json of 6 estimators x 8 twin columns."""
    from robident_twin.validation import robustness as rb

    rng = np.random.default_rng(3)
    ests = ["ols", "wls", "wls_residual", "wls_sample", "tls", "iv_ref"]
    cols = ["ideal", "closed_loop", "elasticity", "friction_unmodelled", "sensor", "closed_loop+sensor",
            "elasticity+friction_unmodelled", "all"]
    cells = []
    for e in ests:
        for c in cols:
            r = float(np.exp(rng.uniform(0, 1.8)))
            ok = r < 2.5
            cells.append(rb.Cell(e, c, 30, 1.0 if ok else 0.4, 2.0 * r, r / 2, r, 1.5, ok, 2.0 * r, 3.4,
                                 0 if ok else int(rng.integers(1, 57)), 0.01))
    table = {"robot": "iiwa14", "measurement": "joint_torque", "runs": 30, "seed": 0, "alpha": 0.01,
             "estimators": ests, "columns": cols, "q_noise_scale": 1.0, "n_params": 57,
             "cells": [c.__dict__ for c in cells], "best": rb.best_per_column(cells), "wall_s": 576.0, "cpu_s": 900.0,
             "load_average": [8.0, 8.0, 8.0]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "robustness.json").write_text(json.dumps(table))
    return out


def control(out: Path) -> Path:
    """A task=control summary (CLOOS-like, three feed-forward sources) and its report."""
    joints = [f"A{j}" for j in range(1, 7)]
    none = [0.8, 1.2, 0.9, 0.3, 0.25, 0.4]
    ffs = {"none": {"rms_deg": none, "ratio_to_none": [1.0] * 6}}
    for name, f in (("nominal", 0.7), ("identified", 0.05)):
        ffs[name] = {"rms_deg": [f * x for x in none], "ratio_to_none": [f] * 6}
    summary = {"control": {"joints": joints, "feedforward": ffs,
                           "info": {"robot": "cloos_qrc350", "backend": "mujoco", "trajectory": "validation",
                                    "duration_s": 3.0, "controller": {"kind": "P position + PI velocity"},
                                    "error": "q_ref - q_true (rad), recorded window"}}}
    out.mkdir(parents=True, exist_ok=True)
    hr.write_control_report(out, summary)
    return out


def twin_vs_real(out: Path, n_joints: int = 6, seed: int = 4) -> Path:
    """A twin_vs_real.json from two synthetic FitStatistics through the experiment's own ``compare``."""
    from robident_twin.report.sections import twin_vs_real_results
    from robident_twin.validation import twin_vs_real as tv

    rng = np.random.default_rng(seed)

    def stats(source, f):
        return tv.FitStatistics(source, rng.normal(size=35), f * rng.uniform(0.5, 2, 35),
                                f * rng.uniform(2, 8, n_joints), f ** 2 * rng.uniform(0.5, 2, (500, n_joints)),
                                {0.010: rng.uniform(0, 1, n_joints), 0.100: rng.uniform(-0.2, 0.5, n_joints)},
                                {n: f * rng.uniform(3, 9, n_joints) for n in ("C", "P1", "P2")}, 4.0 * f)

    real, twin = stats("real", 1.0), stats("twin", 0.8)
    cmp = tv.compare(real, twin, n_rep_twin=50)
    res = twin_vs_real_results(real, twin, cmp, tv.TARGETS, repetitions=50, seed=0, wall_s=411.0)
    out.mkdir(parents=True, exist_ok=True)
    (out / hr.TWIN_VS_REAL).write_text(json.dumps(res))
    return out


def all_reports(tmp: Path, identify_dir: Path, names: Sequence[str], rebuild_identify: bool = True) -> dict[str, Path]:
    """kind -> report.html of every report kind (the identification run's is rebuilt into ``tmp``,
    or with ``rebuild_identify=False`` the page the run wrote itself)."""
    tmp = Path(tmp)
    (tmp / "identify").mkdir(parents=True, exist_ok=True)
    ident = hr.build_report(identify_dir, tmp / "identify") if rebuild_identify else Path(identify_dir) / hr.REPORT
    return {"identify": ident,
            "montecarlo": hr.build_report(mc_job(tmp / "mc", names, biased=3)),
            "sweep": hr.build_report(sweep(tmp / "sweep", names)),
            "robustness": hr.build_report(robustness(tmp / "robustness")),
            "control": control(tmp / "control") / hr.REPORT,
            "twin_vs_real": hr.build_report(twin_vs_real(tmp / "tvr"))}
