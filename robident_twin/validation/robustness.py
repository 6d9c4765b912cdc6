"""The robustness table: every estimator against every twin effect (issue 15, Build 3).

For each column (a twin: ``ideal``, one effect of :data:`hal.sim.effects.EFFECTS` alone, ``all``
of them, or effects joined by ``+``) the runs are simulated once through the Monte-Carlo's
simulation paths (:func:`robident_twin.validation.montecarlo._twin_recordings`: batched MuJoCo
robots for the ideal twin and every effect but ``elasticity``, one HAL twin per run with
elasticity), each run is processed once (:func:`robident_twin.processing.signal.process_periodic`)
and every estimator is applied to the same processed data (common random numbers: the
differences between estimators in a column are not sampling noise between columns).

Estimators (:data:`ESTIMATORS`): ``ols``, ``wls`` (per-joint weights from the spread between
periods), ``wls_residual`` (per-joint weights from the OLS residual), ``wls_sample`` (per-sample
weights, ICMA 2020 eq. 7), ``tls`` and ``iv_ref``: IDIM-IV whose instruments are the base
regressor of the *reference* trajectory (the noise-free Fourier design the controller tracks,
evaluated at the processed samples, as :func:`robident_twin.estimation.estimators.estimator_context`
builds them), weighted like WLS. ``iv_ref`` is not the closed-loop-simulated IDIM-IV of Gautier
et al. 2013 (its instruments need one closed-loop simulation of the model per iteration and run):
its instruments are noise free, hence uncorrelated with the measurement noise that enters the
regressor through the closed loop, which is the property IV needs.

Cell statistics (:func:`cell_stats`), with ``bias`` the mean estimate minus the truth, ``std``
the empirical standard deviation of one run's estimate and ``crlb_std`` the Cramer-Rao std of
the processed data (as :func:`robident_twin.validation.montecarlo.run_twin` computes it):

- ``share_within_3std``: share of parameters with ``|bias| <= 3 std``;
- ``max_bias_over_std`` / ``median_bias_over_std``: of ``|bias| / std`` over the parameters;
- ``median_rmse_over_crlb``: median over the parameters of ``RMSE / crlb_std``
  (1 = efficient and unbiased; bias and excess variance both raise it);
- ``val_nrmse_percent``: mean over the runs of 100 RMS(tau_val - W_val beta) / RMS(tau_val) on the
  robot's validation trajectory, recorded once per column on the same twin;
- the bias test (:func:`robident_twin.validation.statistics.bias_test`, Bonferroni over the
  parameters, false-alarm rate ``alpha`` per cell).

Per column the estimator that holds up best is the one with the smallest
``median_rmse_over_crlb``; "by how much" is the runner-up's value over the best one's.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from hal.sim.effects import EFFECTS
from robident_twin.errors import ConfigError, IdentificationError
from robident_twin.validation.statistics import MonteCarloResult, bias_test, crlb, nrms_percent

ESTIMATORS = ("ols", "wls", "wls_residual", "wls_sample", "tls", "iv_ref", "iv_cl", "didim", "ml", "wls_sdp",
              "wls_xu")
DEFAULT_COLUMNS = ("ideal",) + EFFECTS + ("all",)


# ----------------------------------------------------------------------------- columns

def column_twin(column: str) -> dict[str, Any]:
    """The ``twin`` config of a column name: ``ideal``, ``all``, an effect, or effects joined by ``+``."""
    if not isinstance(column, str) or not column:
        raise ConfigError(f"robustness.effects: expected effect names, got {column!r}")
    if column == "ideal":
        return {"name": "ideal", "effects": []}
    if column == "all":
        return {"name": "realistic", "effects": list(EFFECTS)}
    parts = column.split("+")
    bad = [p for p in parts if p not in EFFECTS]
    if bad:
        raise ConfigError(f"robustness.effects: unknown effect(s) {bad} in '{column}'; expected 'ideal', 'all', "
                          f"or effects from {list(EFFECTS)} (joined by '+')")
    return {"name": "realistic", "effects": parts}


# ----------------------------------------------------------------------------- estimators

def _iv_instruments(model, traj, data, decimate: int) -> np.ndarray:
    """Base regressor of the reference (noise-free Fourier design) at the processed samples."""
    t = np.arange(data.n_samples) / data.sample_rate_hz  # processed samples start at the period's start
    q, dq, ddq = traj.evaluate(t)
    return model.base.columns(model.regressor.stack(q, dq, ddq))


def apply_estimator(name: str, model, W: np.ndarray, data, Z: np.ndarray | None = None, run=None) -> np.ndarray:
    """Base-parameter estimate of estimator ``name`` on processed ``data`` with regressor ``W``
    (``run``: the :class:`robident_twin.validation.robustness_estimators.RunInputs` that ``iv_cl``,
    ``didim``, ``ml``, ``wls_sdp`` and ``wls_xu`` need)."""
    from robident_twin.estimation import estimators as E
    from robident_twin.validation.montecarlo import _fast_estimate

    names = model.base.names
    if name in ("ols", "wls", "wls_residual"):
        return _fast_estimate(name, W, data.tau_Nm, names, data.tau_var_Nm2).beta
    if name == "wls_sample":
        return E.wls_sample(W, data.tau_Nm, names, data.tau_var_sample_Nm2).beta
    if name == "tls":
        return E.tls(W, data.tau_Nm, names).beta
    if name == "iv_ref":
        if Z is None:
            raise ConfigError("robustness: iv_ref needs the reference instruments")
        return E.iv(W, data.tau_Nm, names, Z, sigma2_joint_Nm2=data.tau_var_Nm2).beta
    if name in ESTIMATORS:
        from robident_twin.validation.robustness_estimators import estimate_extra

        if run is None:
            raise ConfigError(f"robustness: {name} needs the run's inputs (RunInputs)")
        return estimate_extra(name, run)
    raise ConfigError(f"robustness.estimators: expected some of {list(ESTIMATORS)}, got '{name}'")


# ----------------------------------------------------------------------------- one column

def run_column(model, traj, val_traj, backend_cfg, noise_cfg,
               column: str, estimators: Sequence[str], runs: int, seed: int, periods: int = 5,
               transient_periods: int = 1, n_harmonics: int | None = None, decimate: int = 1,
               batch_size: int = 50, workers: int = 1, progress: bool = False,
               closed_loop=None) -> dict[str, MonteCarloResult]:
    """Simulate ``runs`` runs of the twin ``column``, process each once and apply every estimator.
    Returns one :class:`MonteCarloResult` per estimator; ``meta['val_nrmse_percent']`` holds the
    per-run validation NRMSE, ``meta['simulate_s']`` / ``meta['estimate_s']`` the times and
    ``meta['estimator_s']`` each estimator's time. ``closed_loop``: the hook ``beta -> W_s`` of the
    closed-loop-simulated estimators (None: :func:`robustness_estimators.model_loop_hook` under the
    column's twin controller)."""
    from robident_twin.validation import robustness_estimators as rx
    from hal.factory import make_noise, make_twin_setup
    from robident_twin.design.stored import reference
    from robident_twin.processing.signal import process_periodic
    from robident_twin.validation.montecarlo import _twin_recordings, run_seeds, twin_sim_path

    bad = [e for e in estimators if e not in ESTIMATORS]
    if bad or not estimators:
        raise ConfigError(f"robustness.estimators: expected a non-empty list from {list(ESTIMATORS)}, got "
                          f"{list(estimators)}")
    if periods < 2:
        raise ConfigError(f"robustness.periods: expected an integer >= 2 (WLS weights), got {periods}")
    twin_cfg = column_twin(column)
    spec = model.spec
    twin = make_twin_setup(spec, twin_cfg)
    from hal.config import as_backend

    backend = as_backend(backend_cfg)  # the typed backend option (hal.config); a mapping is validated once here
    path = twin_sim_path(backend, None, "auto")
    if not twin.ideal:
        path = "hal" if path == "hal" else "batch"
    measurement = model.regressor.options.measurement
    noise = make_noise(spec, noise_cfg)
    std = noise.tau_joint_std_Nm if measurement == "joint_torque" else noise.tau_motor_std_Nm
    if np.any(std <= 0):
        raise ConfigError(f"robustness: the Cramer-Rao bound needs torque noise on every joint, got {std.tolist()}")
    rate = float(getattr(backend, "control_rate_hz", None) or 1000.0)
    _, q, dq, ddq = traj.sample(rate / decimate)
    bound = crlb(model.base.columns(model.regressor.stack(q, dq, ddq)), std**2 / periods)
    truth = model.true_base()
    H = int(n_harmonics or traj.n_harmonics)
    tc = None if twin.ideal else twin_cfg
    from tqdm import tqdm

    # validation recording: one run of the same twin on the validation trajectory (its own seed)
    with tqdm(total=None, disable=True) as bar:
        val_seed = run_seeds(seed + 7919, 1)
        _, val_rec = next(iter(_twin_recordings(path, spec, backend, noise_cfg, reference(val_traj, rate),
                                                val_seed, periods, transient_periods, None, 1, bar, 1, tc)))
    val = process_periodic(val_rec, measurement, int(n_harmonics or val_traj.n_harmonics), decimate)
    W_val = model.base_regressor(val)
    nominal = None
    if any(e in estimators for e in rx.CLOSED_LOOP_AND_PHYSICAL):
        from robident_twin.estimation.postprocess import nominal_model

        nominal = nominal_model(spec)  # the CAD-like robot: priors, bounds, gains (never the truth)
    if closed_loop is None and any(e in rx.CLOSED_LOOP for e in estimators):
        # the model in the loop the column's twin runs: its controller, its rate, the same reference
        closed_loop = rx.model_loop_hook(model, traj, rate, decimate,
                                         rx.twin_loop_controller(spec, backend, noise_cfg, tc))

    seeds = run_seeds(seed, runs)
    p = len(truth)
    est = {e: np.empty((runs, p)) for e in estimators}
    fit_nrms = {e: np.empty(runs) for e in estimators}
    val_nrms = {e: np.empty(runs) for e in estimators}
    t_sim = 0.0
    inputs: list = [None] * runs
    with tqdm(total=None, desc=f"{column} simulate ({path})", disable=not progress, unit="step",
              unit_scale=True) as sim_bar:
        t0 = time.perf_counter()
        for r, rec in _twin_recordings(path, spec, backend, noise_cfg, reference(traj, rate), seeds, periods,
                                       transient_periods, None, batch_size, sim_bar, workers, tc):
            data = process_periodic(rec, measurement, H, decimate)
            W = model.base_regressor(data)
            Z = _iv_instruments(model, traj, data, decimate) if "iv_ref" in estimators else None
            ml = rx.ml_context(model, data, rec, traj, decimate) if "ml" in estimators else None
            inputs[r] = rx.RunInputs(model, data, W, None, traj, decimate, Z, closed_loop, nominal, {}, ml)
        t_sim = time.perf_counter() - t0
    t1 = time.perf_counter()
    betas, t_each = estimate_runs(inputs, estimators, workers)
    t_est = time.perf_counter() - t1
    for r, run in enumerate(inputs):
        data, W = run.data, run.W
        for e in estimators:
            b = betas[r][e]
            est[e][r] = b
            fit_nrms[e][r] = nrms_percent(data.tau_Nm - (W @ b).reshape(data.tau_Nm.shape), data.tau_Nm)
            val_nrms[e][r] = nrms_percent(val.tau_Nm - (W_val @ b).reshape(val.tau_Nm.shape), val.tau_Nm)
    out = {}
    for e in estimators:
        meta = {"column": column, "twin": twin.as_dict(), "sim_path": path, "periods": periods, "n_harmonics": H,
                "val_nrmse_percent": val_nrms[e], "simulate_s": t_sim, "estimate_s": t_est, "estimator_s": t_each,
                "validation_data": val, "last_run_data": data, "decimate": decimate}
        out[e] = MonteCarloResult("twin", e, tuple(model.base.names), tuple(model.base.units), truth, bound,
                                  est[e], np.full_like(est[e], np.nan), fit_nrms[e], seeds, meta)
    return out


# ----------------------------------------------------------------------------- estimation in parallel

_WORK: dict[str, Any] = {}  # the runs a forked estimation worker reads (inherited, never pickled)


def _estimate_run(r: int) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    run, estimators = _WORK["inputs"][r], _WORK["estimators"]
    betas, times = {}, {}
    for e in estimators:
        t0 = time.process_time()
        try:
            betas[e] = apply_estimator(e, run.model, run.W, run.data, run.Z_ref, run)
        except IdentificationError:  # e.g. the closed-loop simulation of a bad estimate diverges:
            betas[e] = np.full(len(run.model.base.names), np.nan)  # the run counts as failed in the cell
        else:
            run.done[e] = betas[e]
        times[e] = time.process_time() - t0
    return betas, times


def estimate_runs(inputs, estimators: Sequence[str], workers: int = 1):
    """Every estimator on every run: ``workers`` forked processes (each takes whole runs, so the
    estimates do not depend on the split). Returns the per-run ``{estimator: beta}`` and each
    estimator's total CPU time."""
    import os

    _WORK.update(inputs=inputs, estimators=list(estimators))
    try:
        if workers > 1 and len(inputs) > 1 and hasattr(os, "fork"):
            import multiprocessing as mp

            with mp.get_context("fork").Pool(min(workers, len(inputs))) as pool:
                out = pool.map(_estimate_run, range(len(inputs)), chunksize=1)
        else:
            out = [_estimate_run(r) for r in range(len(inputs))]
    finally:
        _WORK.clear()
    t_each = {e: float(sum(t[e] for _, t in out)) for e in estimators}
    return [b for b, _ in out], t_each


# ----------------------------------------------------------------------------- cells

@dataclass(frozen=True)
class Cell:
    """One estimator against one twin (see the module docstring for each figure)."""

    estimator: str
    column: str
    runs: int
    share_within_3std: float
    max_bias_over_std: float
    median_bias_over_std: float
    median_rmse_over_crlb: float
    val_nrmse_percent: float
    bias_test_passed: bool
    bias_test_max_t: float
    bias_test_threshold: float
    bias_test_failing: int
    alpha: float
    failed_runs: int = 0  # runs where the estimator raised (its simulation diverged): left out of the figures


def cell_stats(res: MonteCarloResult, alpha: float = 0.01) -> Cell:
    """The figures of one cell from a Monte-Carlo result (runs whose estimate is not finite, where
    the estimator failed, are counted in ``failed_runs`` and left out)."""
    ok = np.all(np.isfinite(res.estimates), axis=1)
    failed = int(np.sum(~ok))
    if failed:
        import dataclasses

        if ok.sum() < 3:
            return Cell(res.estimator, str(res.meta.get("column", "")), int(ok.sum()), *([math.nan] * 5), False,
                        math.nan, math.nan, len(res.names), float(alpha), failed)
        val_all = res.meta.get("val_nrmse_percent")
        meta = dict(res.meta, val_nrmse_percent=None if val_all is None else np.asarray(val_all)[ok])
        res = dataclasses.replace(res, estimates=res.estimates[ok], reported_std=res.reported_std[ok],
                                  torque_nrms_percent=res.torque_nrms_percent[ok], seeds=np.asarray(res.seeds)[ok],
                                  meta=meta)
    bias = res.estimates.mean(axis=0) - res.truth
    std = res.estimates.std(axis=0, ddof=1)
    ratio = np.abs(bias) / np.where(std > 0, std, np.nan)
    ratio = np.where(std > 0, ratio, np.where(bias == 0, 0.0, np.inf))
    rmse = np.sqrt(np.mean((res.estimates - res.truth) ** 2, axis=0))
    crlb_std = np.sqrt(np.diag(res.crlb))
    bt = bias_test(res, alpha)
    val = res.meta.get("val_nrmse_percent")
    return Cell(res.estimator, str(res.meta.get("column", "")), res.n_runs,
                float(np.mean(ratio <= 3.0)), float(np.max(ratio)), float(np.median(ratio)),
                float(np.median(rmse / crlb_std)),
                float(np.mean(val)) if val is not None else float("nan"),
                bt.passed, bt.max_abs_t, bt.threshold, len(bt.failing), float(alpha), failed)


def best_per_column(cells: Sequence[Cell]) -> dict[str, dict[str, Any]]:
    """Per column: the estimator with the smallest median RMSE/CR std, the runner-up and their ratio,
    and which estimators pass and fail the bias test (an estimator that failed on some run is not
    ranked before one that did not)."""
    out: dict[str, dict[str, Any]] = {}
    for col in dict.fromkeys(c.column for c in cells):
        cs = sorted((c for c in cells if c.column == col),  # an estimator that failed on a run cannot be best
                    key=lambda c: (c.failed_runs > 0, math.inf if math.isnan(c.median_rmse_over_crlb)
                                   else c.median_rmse_over_crlb))
        best = cs[0]
        second = cs[1] if len(cs) > 1 else None
        out[col] = {"best": best.estimator, "best_rmse_over_crlb": best.median_rmse_over_crlb,
                    "runner_up": second.estimator if second else None,
                    "factor": (second.median_rmse_over_crlb / best.median_rmse_over_crlb) if second else None,
                    "passing": [c.estimator for c in cs if c.bias_test_passed],
                    "failing": [c.estimator for c in cs if not c.bias_test_passed]}
    return out


def format_robustness_table(cells: Sequence[Cell], best: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """Text table, one block per figure: rows estimators, columns twins."""
    cols = list(dict.fromkeys(c.column for c in cells))
    ests = list(dict.fromkeys(c.estimator for c in cells))
    at = {(c.estimator, c.column): c for c in cells}
    w = max(12, *(len(c) + 1 for c in cols))
    figures = [("share of parameters with |bias| <= 3 std", lambda c: f"{100 * c.share_within_3std:.0f} %"),
               ("max |bias|/std", lambda c: f"{c.max_bias_over_std:.2f}"),
               ("median |bias|/std", lambda c: f"{c.median_bias_over_std:.2f}"),
               ("median RMSE / Cramer-Rao std", lambda c: f"{c.median_rmse_over_crlb:.2f}"),
               ("validation torque NRMSE", lambda c: f"{c.val_nrmse_percent:.2f} %"),
               ("bias test (Bonferroni)", lambda c: ("pass" if c.bias_test_passed else f"FAIL {c.bias_test_failing}")
                + (f" ({c.failed_runs} runs failed)" if c.failed_runs else ""))]
    lines = []
    for title, fmt in figures:
        lines.append(f"{title}:")
        lines.append(f"{'':<14}" + "".join(f"{c:>{w}}" for c in cols))
        for e in ests:
            lines.append(f"{e:<14}" + "".join(f"{fmt(at[(e, c)]) if (e, c) in at else '-':>{w}}" for c in cols))
        lines.append("")
    if cells:
        c0 = cells[0]
        lines.append(f"bias test: false-alarm rate {c0.alpha:g} per cell (Bonferroni over the parameters, "
                     f"|t| limit {c0.bias_test_threshold:.2f} with {c0.runs} runs); FAIL n = n parameters biased")
    for col, b in (best or {}).items():
        by = f", {b['factor']:.2f}x better than {b['runner_up']}" if b.get("runner_up") else ""
        lines.append(f"{col}: best {b['best']} (median RMSE/CR std {b['best_rmse_over_crlb']:.2f}{by}); "
                     f"bias test passed by {', '.join(b['passing']) or 'none'}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the table

def run_table(cfg, progress: bool = True, log=print) -> dict[str, Any]:
    """The whole table of a run config (a :class:`robident_twin.config.RunConfig`; a mapping, e.g. a
    resolved Hydra config, is validated once here): its ``robustness`` block + robot, backend,
    noise, model, processing, base. Returns a JSON-ready dict: cells, best, wall time, settings."""
    from robident_twin.config import validate
    from robident_twin.design.stored import resolve_design
    from robident_twin.model.build import build_model, model_options, resolve_robot

    run = validate(cfg)
    rb = run.robustness
    estimators = list(rb.estimators or ESTIMATORS)
    columns = list(rb.effects or DEFAULT_COLUMNS)
    for c in columns:
        column_twin(c)
    runs, seed = int(rb.runs), int(rb.seed)
    if runs < 3:
        raise ConfigError(f"robustness.runs: the bias test needs at least 3 runs, got {runs}")
    alpha = float(rb.alpha)
    spec = resolve_robot(run.robot)
    options = model_options(run.model, run.robot)
    model = build_model(spec, options, int(run.base.n_samples), int(run.base.seed))
    traj = resolve_design(run.robot.excitation, spec)
    val_traj = resolve_design(run.robot.validation, spec)
    noise = run.noise
    qs = float(rb.q_noise_scale)
    if qs != 1.0:
        base_q = spec.q_std_rad if noise.q_std_rad is None else noise.q_std_rad
        noise = dataclasses.replace(
            noise, q_std_rad=(np.broadcast_to(np.asarray(base_q, float), (spec.n_joints,)) * qs).tolist())
    from threadpoolctl import threadpool_limits

    t_all, cpu0 = time.perf_counter(), _cpu_s()
    cells: list[Cell] = []
    timing = {}
    # one BLAS thread: the fits are small (7000 x 57 on the iiwa at decimate 10) and a threaded BLAS on a
    # loaded 2-core machine is ~70x slower on them (measured: SVD 2.9 s vs 0.04 s)
    with threadpool_limits(1):
        cells, timing = _columns(model, traj, val_traj, run.backend, noise, columns, estimators, runs, seed, alpha,
                                 rb, run.processing.n_harmonics, progress, log)
    wall = time.perf_counter() - t_all
    best = best_per_column(cells)
    return {"robot": spec.name, "measurement": options.measurement, "runs": runs, "seed": seed, "alpha": alpha,
            "estimators": estimators, "columns": columns, "q_noise_scale": qs,
            "n_harmonics": run.processing.n_harmonics, "decimate": int(rb.decimate),
            "n_params": len(model.base.names),
            "cells": [asdict(c) for c in cells], "best": best, "timing": timing, "wall_s": wall,
            "cpu_s": _cpu_s() - cpu0,
            "load_average": list(_loadavg())}


def _columns(model, traj, val_traj, backend, noise, columns, estimators, runs, seed, alpha, rb, n_harmonics,
             progress, log):
    cells: list[Cell] = []
    timing = {}
    for col in columns:
        t0 = time.perf_counter()
        res = run_column(model, traj, val_traj, backend, noise, col, estimators, runs, seed,
                         int(rb.periods), int(rb.transient_periods), n_harmonics,
                         int(rb.decimate), int(rb.batch_size), int(rb.workers), progress)
        cells.extend(cell_stats(res[e], alpha) for e in estimators)
        r0 = res[estimators[0]]
        timing[col] = {"wall_s": time.perf_counter() - t0, "simulate_s": r0.meta["simulate_s"],
                       "estimate_s": r0.meta["estimate_s"], "sim_path": r0.meta["sim_path"],
                       "estimator_s": dict(r0.meta["estimator_s"])}
        if log:
            log(f"robustness: column {col} ({r0.meta['sim_path']}) {timing[col]['wall_s']:.1f} s")
    return cells, timing


def _cpu_s() -> float:
    """CPU time of this process and its finished children (the forked batch workers)."""
    import os

    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _loadavg():
    try:
        import os

        return os.getloadavg()
    except OSError:  # pragma: no cover
        return (math.nan, math.nan, math.nan)


def cells_from(table: Mapping[str, Any]) -> list[Cell]:
    return [Cell(**c) for c in table["cells"]]
