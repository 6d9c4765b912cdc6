"""Monte-Carlo validation of an estimator against the twin's ground truth (Swevers 1997, Sec. IV).

Two modes:

- ``exact`` (Swevers): the regressor is built from the designed trajectory, the
  "measured" torque is the true torque plus zero-mean Gaussian noise of known
  per-joint variance, so WLS with those variances is the maximum-likelihood
  estimator and its covariance ``(W' Sigma^-1 W)^-1`` is exactly the
  Cramer-Rao lower bound (CRLB).
- ``twin``: every run simulates the robot through the HAL
  (:func:`hal.factory.make_robot`) with its sensor noise, processes the periodic
  recording (:func:`robident_twin.signal.process_periodic`) and estimates
  (:func:`robident_twin.estimate.estimate`). The CRLB is that of the processed
  data: the designed trajectory's regressor with the true torque-noise variance
  divided by the number of averaged periods.

Statistics per parameter: mean, bias, bias over the standard error of the mean,
empirical std, CRLB std, efficiency ratio var/CRLB with its chi-square 90 %
interval, 68 % confidence-interval coverage, RMSE against the truth; overall:
log-determinant ratio of the empirical covariance to the CRLB, torque NRMS.

Statistical tests with a controlled false-alarm rate ``alpha`` (default 1 %,
shared equally between the two tests, so a correct efficient estimator fails
with probability at most ``alpha`` whatever the seed):

- mean consistency: ``N d' CRLB^-1 d ~ chi2(p)`` with ``d`` the bias of the mean;
- efficiency: each ``(N-1) s_i^2 / sigma_i^2 ~ chi2(N-1)`` inside its
  Bonferroni-corrected two-sided interval (level ``alpha / 2 / p`` per side pair).

Estimators: ``wls`` (weights from the known noise variance in exact mode, from the
spread between periods in twin mode), ``ols``, ``wls_residual`` and the
deliberately biased ``ols_noisy_q``: OLS on a regressor built from noisy positions
differentiated by central differences (errors in variables), which must fail.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from scipy import stats

from .errors import ConfigError
from .estimate import ols, wls

MODES = ("exact", "twin")
ESTIMATORS = ("wls", "ols", "wls_residual", "ols_noisy_q")
FRICTIONS = ("matched", "stribeck")
Z68 = float(stats.norm.ppf(0.5 + 0.68 / 2))  # 0.9945: half-width of a 68 % interval in sigmas


# ----------------------------------------------------------------------------- results

@dataclass
class MonteCarloResult:
    """Raw output of a Monte-Carlo: one row per run (``runs x p``)."""

    mode: str
    estimator: str
    names: tuple[str, ...]
    units: tuple[str, ...]
    truth: np.ndarray  # (p,) true base parameters
    crlb: np.ndarray  # (p, p) Cramer-Rao bound of one run's estimate
    estimates: np.ndarray  # (runs, p)
    reported_std: np.ndarray  # (runs, p) std reported by the estimator for each run
    torque_nrms_percent: np.ndarray  # (runs,) 100 * RMS(residual) / RMS(torque), all joints
    seeds: np.ndarray  # (runs,) seed of every run
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_runs(self) -> int:
        return int(self.estimates.shape[0])

    @property
    def n_params(self) -> int:
        return int(self.estimates.shape[1])


@dataclass(frozen=True)
class TestOutcome:
    """The two false-alarm-controlled tests of :func:`consistency_tests`."""

    alpha: float
    mean_statistic: float  # N d' CRLB^-1 d
    mean_threshold: float  # chi2(p) quantile 1 - alpha/2
    mean_p_value: float
    mean_ok: bool
    ratio_interval: tuple[float, float]  # Bonferroni-corrected interval for var/CRLB
    ratios_outside: tuple[str, ...]  # names of the parameters whose ratio is outside
    variance_ok: bool

    @property
    def passed(self) -> bool:
        return self.mean_ok and self.variance_ok


def chi2_ratio_interval(n_runs: int, level: float) -> tuple[float, float]:
    """Two-sided interval of s^2 / sigma^2 for ``n_runs`` Gaussian samples at confidence ``level``."""
    dof = n_runs - 1
    lo, hi = stats.chi2.ppf([(1 - level) / 2, (1 + level) / 2], dof)
    return float(lo / dof), float(hi / dof)


def expected_log10_det_ratio(n_runs: int, p: int) -> float:
    """E[log10 det(S) / det(C)] for the sample covariance S of ``n_runs`` Gaussian draws
    with covariance C (Wishart): negative when n_runs is not much larger than p, so the
    determinant ratio of an efficient estimator is compared with this, not with 0."""
    if n_runs <= p:
        return float("nan")
    from scipy.special import digamma

    dof = n_runs - 1
    val = np.sum(digamma((dof - np.arange(p)) / 2.0)) + p * math.log(2.0) - p * math.log(dof)
    return float(val / math.log(10))


def summarise(res: MonteCarloResult) -> dict[str, Any]:
    """Per-parameter and overall statistics (plain floats and lists, JSON-ready)."""
    N, p = res.estimates.shape
    if N < 2:
        raise ConfigError(f"montecarlo.runs: statistics need at least 2 runs, got {N}")
    est, truth = res.estimates, res.truth
    mean = est.mean(axis=0)
    bias = mean - truth
    emp_std = est.std(axis=0, ddof=1)
    crlb_std = np.sqrt(np.diag(res.crlb))
    sem = emp_std / math.sqrt(N)
    ratio = emp_std**2 / crlb_std**2
    lo90, hi90 = chi2_ratio_interval(N, 0.90)
    mean_in_68 = np.abs(bias) <= Z68 * crlb_std / math.sqrt(N)
    coverage68 = np.mean(np.abs(est - truth) <= Z68 * res.reported_std, axis=0)
    rmse = np.sqrt(np.mean((est - truth) ** 2, axis=0))
    emp_cov = np.cov(est, rowvar=False, ddof=1)
    s_emp, ld_emp = np.linalg.slogdet(emp_cov) if N > p else (0.0, float("nan"))
    s_crlb, ld_crlb = np.linalg.slogdet(res.crlb)
    params = []
    for i, name in enumerate(res.names):
        params.append({
            "name": name, "unit": res.units[i], "true": float(truth[i]), "mean": float(mean[i]),
            "bias": float(bias[i]), "bias_over_sem": float(bias[i] / sem[i]) if sem[i] > 0 else float("inf"),
            "bias_over_crlb_sem": float(bias[i] / (crlb_std[i] / math.sqrt(N))),
            "emp_std": float(emp_std[i]), "crlb_std": float(crlb_std[i]),
            "efficiency_ratio": float(ratio[i]), "ratio_in_chi2_90": bool(lo90 <= ratio[i] <= hi90),
            "mean_in_68": bool(mean_in_68[i]), "coverage68": float(coverage68[i]), "rmse": float(rmse[i]),
        })
    overall = {
        "n_runs": N, "n_params": p,
        "chi2_90_interval": [lo90, hi90],
        "share_means_in_68": float(np.mean(mean_in_68)),
        "share_ratios_in_chi2_90": float(np.mean((ratio >= lo90) & (ratio <= hi90))),
        "mean_coverage68": float(np.mean(coverage68)),
        "mean_efficiency_ratio": float(np.mean(ratio)),
        "max_abs_bias_over_sem": float(np.max(np.abs(bias / sem))),
        "log10_det_crlb": float(ld_crlb / math.log(10)) if s_crlb > 0 else float("nan"),
        "log10_det_ratio": float((ld_emp - ld_crlb) / math.log(10)) if N > p and s_emp > 0 else float("nan"),
        "log10_det_ratio_expected": expected_log10_det_ratio(N, p),
        "torque_nrms_percent": float(np.mean(res.torque_nrms_percent)),
    }
    return {"parameters": params, "overall": overall}


def consistency_tests(res: MonteCarloResult, alpha: float = 0.01) -> TestOutcome:
    """Mean-consistency and Bonferroni efficiency tests, jointly at false-alarm rate ``alpha``.

    For an unbiased estimator whose per-run estimates are Gaussian with covariance
    CRLB (WLS in exact mode), the probability that either test fails is <= alpha."""
    if not 0 < alpha < 1:
        raise ConfigError(f"montecarlo.alpha: expected a probability in (0, 1), got {alpha}")
    N, p = res.estimates.shape
    a = alpha / 2  # union bound over the two tests
    d = res.estimates.mean(axis=0) - res.truth
    L = np.linalg.cholesky(res.crlb)
    z = np.linalg.solve(L, d)
    T = float(N * z @ z)
    thr = float(stats.chi2.ppf(1 - a, p))
    dof = N - 1
    lo, hi = stats.chi2.ppf([a / (2 * p), 1 - a / (2 * p)], dof) / dof
    ratio = res.estimates.var(axis=0, ddof=1) / np.diag(res.crlb)
    outside = tuple(n for n, r in zip(res.names, ratio) if not lo <= r <= hi)
    return TestOutcome(alpha, T, thr, float(stats.chi2.sf(T, p)), T <= thr, (float(lo), float(hi)),
                       outside, not outside)


# ----------------------------------------------------------------------------- helpers

def run_seeds(seed: int, n_runs: int) -> np.ndarray:
    """Independent per-run seeds spawned from one master seed."""
    ss = np.random.SeedSequence(int(seed)).spawn(int(n_runs))
    return np.array([int(s.generate_state(1, dtype=np.uint32)[0]) for s in ss], dtype=np.int64)


def crlb(W: np.ndarray, sigma2_joint_Nm2: np.ndarray) -> np.ndarray:
    """(W' Sigma^-1 W)^-1 for sample-major stacked rows and per-joint noise variances."""
    n = len(sigma2_joint_Nm2)
    w = np.tile(1.0 / np.sqrt(np.asarray(sigma2_joint_Nm2, float)), W.shape[0] // n)
    _, R = np.linalg.qr(W * w[:, None])
    Rinv = np.linalg.inv(R)
    return Rinv @ Rinv.T


def nrms_percent(residuals_Nm: np.ndarray, tau_Nm: np.ndarray) -> float:
    return float(100.0 * np.sqrt(np.mean(residuals_Nm**2)) / np.sqrt(np.mean(tau_Nm**2)))


def central_derivatives(q_rad: np.ndarray, rate_hz: float):
    """Velocity and acceleration of one period of q by periodic central differences."""
    dt = 1.0 / rate_hz
    qp, qm = np.roll(q_rad, -1, axis=0), np.roll(q_rad, 1, axis=0)
    return (qp - qm) / (2 * dt), (qp - 2 * q_rad + qm) / dt**2


def with_stribeck(spec, ratio: float, velocity_rad_s: float):
    """The robot with a Stribeck term on the link-side friction of every joint
    (static level ``ratio`` x Coulomb), for friction-mismatch studies."""
    from .robot import FrictionVariant

    if not ratio > 0 or not velocity_rad_s > 0:
        raise ConfigError(f"montecarlo.stribeck: ratio and velocity_rad_s must be positive, got "
                          f"{ratio}, {velocity_rad_s}")
    joints = tuple(dataclasses.replace(j, friction_link_variant=FrictionVariant(
        "stribeck", stribeck_Nm=ratio * j.fc_link_Nm, stribeck_velocity_rad_s=velocity_rad_s))
        for j in spec.joints)
    return dataclasses.replace(spec, joints=joints, _cache={})


def _estimate(name: str, W, tau, names, sigma2):
    if name == "wls":
        return wls(W, tau, names, sigma2, "period")
    if name == "wls_residual":
        return wls(W, tau, names, None, "residual")
    if name in ("ols", "ols_noisy_q"):
        return ols(W, tau, names)
    raise ConfigError(f"montecarlo.estimator: expected one of {ESTIMATORS}, got '{name}'")


def _progress(n: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=n, desc=desc, disable=not enabled, unit="run", smoothing=0.1)


# ----------------------------------------------------------------------------- exact mode

def run_exact(model, traj, rate_hz: float, tau_std_Nm: np.ndarray, n_runs: int, seed: int,
              estimator: str = "wls", noisy_q_std_rad: float = 1e-4, truth_spec=None,
              progress: bool = False, callback: Callable[[int], None] | None = None) -> MonteCarloResult:
    """Swevers' simulation: torque noise only, regressor from the designed trajectory.

    ``model``: :class:`robident_twin.pipeline.IdentificationModel`; ``traj``: the
    Fourier design, sampled at ``rate_hz`` over one period; ``tau_std_Nm``: per-joint
    torque-noise std. ``truth_spec`` (optional) simulates the torque with another
    robot (e.g. :func:`with_stribeck`) while the regressor keeps the model's.
    ``ols_noisy_q`` builds each run's regressor from positions with Gaussian noise
    of std ``noisy_q_std_rad`` differentiated by central differences."""
    if estimator not in ESTIMATORS:
        raise ConfigError(f"montecarlo.estimator: expected one of {ESTIMATORS}, got '{estimator}'")
    _, q, dq, ddq = traj.sample(rate_hz)
    W = model.base.columns(model.regressor.stack(q, dq, ddq))
    truth = model.true_base()
    n = q.shape[1]
    std = np.broadcast_to(np.asarray(tau_std_Nm, float), (n,)).copy()
    if np.any(~np.isfinite(std)) or np.any(std <= 0):
        raise ConfigError(f"montecarlo: torque noise std must be positive per joint, got {std.tolist()}")
    if truth_spec is None:
        tau_true = (W @ truth).reshape(q.shape)
    else:
        from .dynamics import TruthModel

        tj, tm = TruthModel(truth_spec).torques(q, dq, ddq)
        tau_true = tj if model.regressor.options.measurement == "joint_torque" else tm
    sigma2 = std**2
    bound = crlb(W, sigma2)
    seeds = run_seeds(seed, n_runs)
    p = W.shape[1]
    est = np.empty((n_runs, p))
    rstd = np.empty((n_runs, p))
    nrms = np.empty(n_runs)
    names = model.base.names
    with _progress(n_runs, f"exact {estimator}", progress) as bar:
        for r, s in enumerate(seeds):
            rng = np.random.default_rng(int(s))
            tau = tau_true + rng.standard_normal(tau_true.shape) * std
            Wr = W
            if estimator == "ols_noisy_q":
                qn = q + rng.standard_normal(q.shape) * noisy_q_std_rad
                dqn, ddqn = central_derivatives(qn, rate_hz)
                Wr = model.base.columns(model.regressor.stack(qn, dqn, ddqn))
            e = _estimate(estimator, Wr, tau, names, sigma2)
            est[r], rstd[r] = e.beta, e.std
            nrms[r] = nrms_percent(e.residuals_Nm, tau)
            bar.update(1)
            if callback is not None:
                callback(r)
    return MonteCarloResult("exact", estimator, tuple(names), tuple(model.base.units), truth, bound, est, rstd,
                            nrms, seeds, {"n_samples": int(q.shape[0]), "rate_hz": float(rate_hz),
                                          "tau_std_Nm": std.tolist(), "cond": float(np.linalg.cond(
                                              W / np.linalg.norm(W, axis=0)))})


# ----------------------------------------------------------------------------- twin mode

def run_twin(model, traj, backend_cfg: Mapping[str, Any], noise_cfg: Mapping[str, Any] | None, n_runs: int,
             seed: int, estimator: str = "wls", periods: int = 5, transient_periods: int = 1,
             n_harmonics: int | None = None, progress: bool = False,
             callback: Callable[[int], None] | None = None) -> MonteCarloResult:
    """Full twin: simulate every run through the HAL with its sensor noise, process, estimate."""
    from hal.factory import make_noise, make_robot

    from .pipeline import reference
    from .signal import process_periodic

    if estimator not in ESTIMATORS or estimator == "ols_noisy_q":
        raise ConfigError(f"montecarlo.estimator: twin mode expects one of "
                          f"{[e for e in ESTIMATORS if e != 'ols_noisy_q']}, got '{estimator}' "
                          "(the twin's positions are already measured with noise)")
    if periods < 2 and estimator == "wls":
        raise ConfigError(f"montecarlo.periods: wls needs at least 2 periods, got {periods}")
    spec = model.spec
    measurement = model.regressor.options.measurement
    noise = make_noise(spec, noise_cfg)
    std = noise.tau_joint_std_Nm if measurement == "joint_torque" else noise.tau_motor_std_Nm
    if np.any(std <= 0):
        raise ConfigError(f"montecarlo: twin mode needs torque noise on every joint for the CRLB, got "
                          f"{std.tolist()}")
    rate = float(backend_cfg.get("control_rate_hz") or 1000.0)
    _, q, dq, ddq = traj.sample(rate)
    W_design = model.base.columns(model.regressor.stack(q, dq, ddq))
    bound = crlb(W_design, std**2 / periods)
    truth = model.true_base()
    names = model.base.names
    H = int(n_harmonics or traj.n_harmonics)
    ref = reference(traj, rate)
    seeds = run_seeds(seed, n_runs)
    p = len(names)
    est = np.empty((n_runs, p))
    rstd = np.empty((n_runs, p))
    nrms = np.empty(n_runs)
    with _progress(n_runs, f"twin {estimator}", progress) as bar:
        for r, s in enumerate(seeds):
            robot = make_robot(spec, backend_cfg, noise_cfg, seed=int(s))
            try:
                rec = robot.run(ref, periods=periods, transient_periods=transient_periods)
            finally:
                robot.close()
            data = process_periodic(rec, measurement, H)
            W = model.base_regressor(data)
            e = _estimate(estimator, W, data.tau_Nm, names, data.tau_var_Nm2)
            est[r], rstd[r] = e.beta, e.std
            nrms[r] = nrms_percent(e.residuals_Nm, data.tau_Nm)
            bar.update(1)
            if callback is not None:
                callback(r)
    return MonteCarloResult("twin", estimator, tuple(names), tuple(model.base.units), truth, bound, est, rstd,
                            nrms, seeds, {"n_samples": int(q.shape[0]), "rate_hz": rate, "periods": periods,
                                          "tau_std_Nm": std.tolist()})


# ----------------------------------------------------------------------------- config-driven entry

def validate_config(mc: Mapping[str, Any], where: str = "montecarlo") -> dict[str, Any]:
    """Check every montecarlo key and value; the error names the offending key."""
    allowed = {"mode", "runs", "seed", "estimator", "design", "sample_rate_hz", "tau_std_Nm",
               "noise_scale", "friction", "stribeck", "noisy_q_std_rad", "periods", "transient_periods",
               "alpha", "progress", "name", "sweep_dir"}
    mc = dict(mc)
    unknown = sorted(set(mc) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; expected {sorted(allowed)}")

    def need(cond: bool, key: str, expected: str):
        if not cond:
            raise ConfigError(f"{where}.{key}: expected {expected}, got {mc.get(key)!r}")

    need(mc.get("mode") in MODES, "mode", f"one of {MODES}")
    runs = mc.get("runs")
    need(isinstance(runs, int) and not isinstance(runs, bool) and runs >= 2, "runs", "an integer >= 2")
    need(isinstance(mc.get("seed", 0), int) and mc.get("seed", 0) >= 0, "seed", "a non-negative integer")
    est = mc.get("estimator")
    need(est is None or est in ESTIMATORS, "estimator", f"null (the estimator group) or one of {ESTIMATORS}")
    ns = mc.get("noise_scale", 1.0)
    need(isinstance(ns, (int, float)) and not isinstance(ns, bool) and math.isfinite(ns) and ns > 0,
         "noise_scale", "a positive number")
    need(mc.get("friction", "matched") in FRICTIONS, "friction", f"one of {FRICTIONS}")
    sr = mc.get("sample_rate_hz")
    need(sr is None or (isinstance(sr, (int, float)) and sr > 0), "sample_rate_hz", "null or a positive rate")
    ts = mc.get("tau_std_Nm")
    if ts is not None:
        arr = np.atleast_1d(np.asarray(ts, dtype=float))
        need(bool(np.all(np.isfinite(arr)) and np.all(arr > 0)), "tau_std_Nm", "null or positive numbers")
    a = mc.get("alpha", 0.01)
    need(isinstance(a, float) and 0 < a < 1, "alpha", "a probability in (0, 1)")
    per = mc.get("periods", 5)
    need(isinstance(per, int) and per >= 1, "periods", "an integer >= 1")
    need(isinstance(mc.get("transient_periods", 1), int) and mc.get("transient_periods", 1) >= 0,
         "transient_periods", "an integer >= 0")
    nq = mc.get("noisy_q_std_rad", 1e-4)
    need(isinstance(nq, (int, float)) and nq > 0, "noisy_q_std_rad", "a positive number")
    st = mc.get("stribeck") or {}
    need(set(st) <= {"ratio", "velocity_rad_s"}, "stribeck", "keys ratio, velocity_rad_s")
    if mc.get("mode") == "twin" and mc.get("friction", "matched") == "stribeck":
        raise ConfigError(f"{where}.friction: 'stribeck' needs a twin backend that simulates Stribeck "
                          "friction; use mode=exact for friction-mismatch studies")
    return mc


def run_from_config(cfg: Mapping[str, Any], progress: bool | None = None) -> tuple[MonteCarloResult, dict, TestOutcome]:
    """Run the Monte-Carlo that a resolved (Hydra) config describes; returns the raw
    result, its summary and the consistency tests."""
    from .pipeline import build_model, model_options, resolve_design, resolve_robot

    mc = validate_config(cfg["montecarlo"])
    spec = resolve_robot(cfg["robot"])
    options = model_options(cfg["model"], cfg["robot"])
    model = build_model(spec, options, int(cfg["base"]["n_samples"]), int(cfg["base"]["seed"]))
    traj = resolve_design(mc.get("design") or cfg["robot"]["excitation"], spec)
    est_name = mc.get("estimator") or cfg["estimator"]["name"]
    if est_name == "wls" and (cfg["estimator"].get("weights") or "period") == "residual" and not mc.get("estimator"):
        est_name = "wls_residual"
    show = bool(mc.get("progress", True)) if progress is None else progress
    scale = float(mc.get("noise_scale", 1.0))
    t0 = time.perf_counter()
    if mc["mode"] == "exact":
        if mc.get("tau_std_Nm") is not None:
            std = np.asarray(mc["tau_std_Nm"], float)
        else:
            std = spec.tau_joint_std_Nm if options.measurement == "joint_torque" else spec.tau_motor_std_Nm
        rate = float(mc.get("sample_rate_hz") or cfg["backend"].get("control_rate_hz") or 1000.0)
        truth_spec = None
        if mc.get("friction", "matched") == "stribeck":
            st = mc.get("stribeck") or {}
            truth_spec = with_stribeck(spec, float(st.get("ratio", 1.5)), float(st.get("velocity_rad_s", 0.05)))
        res = run_exact(model, traj, rate, np.asarray(std, float) * scale, int(mc["runs"]), int(mc.get("seed", 0)),
                        est_name, float(mc.get("noisy_q_std_rad", 1e-4)), truth_spec, show)
    else:
        noise = dict(cfg.get("noise") or {})
        key = "torque_std_Nm" if options.measurement == "joint_torque" else "motor_torque_std_Nm"
        base_std = noise.get(key)
        if base_std is None:
            base_std = spec.tau_joint_std_Nm if options.measurement == "joint_torque" else spec.tau_motor_std_Nm
        noise[key] = (np.asarray(base_std, float) * scale).tolist()
        res = run_twin(model, traj, cfg["backend"], noise, int(mc["runs"]), int(mc.get("seed", 0)), est_name,
                       int(mc.get("periods", 5)), int(mc.get("transient_periods", 1)),
                       (cfg.get("processing") or {}).get("n_harmonics"), show)
    res.meta["wall_s"] = time.perf_counter() - t0
    res.meta["robot"] = spec.name
    res.meta["measurement"] = model.regressor.options.measurement
    summary = summarise(res)
    tests = consistency_tests(res, float(mc.get("alpha", 0.01)))
    return res, summary, tests


# ----------------------------------------------------------------------------- report

def format_table(summary: Mapping[str, Any], tests: TestOutcome | None = None, max_rows: int | None = None) -> str:
    """A text table in the form of Swevers' Table II plus the summary figures."""
    rows = summary["parameters"]
    o = summary["overall"]
    lo, hi = o["chi2_90_interval"]
    head = (f"{'#':>3} {'name':<10} {'true':>11} {'mean':>11} {'bias/SEM':>9} {'crlb std':>10} "
            f"{'emp std':>10} {'var/CRLB':>9} {'cov68':>6}")
    lines = [head, "-" * len(head)]
    for i, r in enumerate(rows[:max_rows] if max_rows else rows):
        flag = (" " if r["mean_in_68"] else "m") + (" " if r["ratio_in_chi2_90"] else "v")
        lines.append(f"{i + 1:>3} {r['name']:<10} {r['true']:>11.4g} {r['mean']:>11.4g} {r['bias_over_sem']:>9.2f} "
                     f"{r['crlb_std']:>10.3g} {r['emp_std']:>10.3g} {r['efficiency_ratio']:>9.3f} "
                     f"{r['coverage68']:>6.2f} {flag}")
    lines.append(f"runs {o['n_runs']}, parameters {o['n_params']}; means inside their 68 % interval: "
                 f"{100 * o['share_means_in_68']:.0f} %; variance ratios inside the chi-square 90 % interval "
                 f"[{lo:.3f}, {hi:.3f}]: {100 * o['share_ratios_in_chi2_90']:.0f} %")
    lines.append(f"log10 det(CRLB) {o['log10_det_crlb']:.3f}; log10 det(emp cov)/det(CRLB) {o['log10_det_ratio']:.3f} "
                 f"(efficient: {o['log10_det_ratio_expected']:.3f}); "
                 f"torque NRMS {o['torque_nrms_percent']:.3f} %; mean 68 % coverage {o['mean_coverage68']:.3f}")
    if tests is not None:
        lines.append(f"tests (false alarm <= {tests.alpha:g}): mean N d'C^-1 d = {tests.mean_statistic:.1f} "
                     f"(limit {tests.mean_threshold:.1f}, p = {tests.mean_p_value:.3g}) "
                     f"{'ok' if tests.mean_ok else 'FAIL'}; variance ratios in [{tests.ratio_interval[0]:.3f}, "
                     f"{tests.ratio_interval[1]:.3f}]: {'ok' if tests.variance_ok else 'FAIL ' + ','.join(tests.ratios_outside[:8])}")
    return "\n".join(lines)
