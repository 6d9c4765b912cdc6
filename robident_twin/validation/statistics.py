"""Statistics of Monte-Carlo estimates against the truth: bias, coverage, chi-square variance
ratios, the Bonferroni bias test with a stated false-alarm rate, Cramer-Rao bounds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from robident_twin.errors import ConfigError

Z68 = float(stats.norm.ppf(0.5 + 0.68 / 2))  # 0.9945: half-width of a 68 % interval in sigmas


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
        "n_bias_over_3_sem": int(np.sum(np.abs(bias) > 3.0 * sem)),
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


@dataclass(frozen=True)
class BiasTest:
    """Bonferroni-corrected per-parameter t-tests of zero bias (:func:`bias_test`)."""

    alpha: float
    threshold: float  # |t| limit: Student-t (N-1) quantile 1 - alpha / (2 p)
    t: tuple[float, ...]  # bias / (empirical std / sqrt(N)) per parameter
    failing: tuple[str, ...]  # parameters with |t| above the threshold
    n_over_3: int  # parameters with |bias| above 3 standard errors of the mean (reported, not tested)

    @property
    def passed(self) -> bool:
        return not self.failing

    @property
    def max_abs_t(self) -> float:
        return float(np.max(np.abs(self.t)))


def bias_test(res: MonteCarloResult, alpha: float = 0.01) -> BiasTest:
    """Zero-bias test at false-alarm rate ``alpha`` that needs no CRLB: each parameter's
    ``t_i = bias_i / (s_i / sqrt(N))`` (s_i the empirical std) is Student-t with N-1 degrees
    of freedom for unbiased Gaussian estimates; the test fails when any |t_i| exceeds the
    quantile ``1 - alpha / (2 p)``, which by Bonferroni happens with probability <= alpha."""
    if not 0 < alpha < 1:
        raise ConfigError(f"montecarlo.alpha: expected a probability in (0, 1), got {alpha}")
    N, p = res.estimates.shape
    if N < 3:
        raise ConfigError(f"montecarlo.runs: the bias test needs at least 3 runs, got {N}")
    bias = res.estimates.mean(axis=0) - res.truth
    sem = res.estimates.std(axis=0, ddof=1) / math.sqrt(N)
    t = np.where(sem > 0, bias / np.where(sem > 0, sem, 1.0), np.where(bias == 0, 0.0, np.inf))
    thr = float(stats.t.ppf(1 - alpha / (2 * p), N - 1))
    failing = tuple(n for n, ti in zip(res.names, t) if abs(ti) > thr)
    return BiasTest(alpha, thr, tuple(float(x) for x in t), failing, int(np.sum(np.abs(t) > 3.0)))


def crlb(W: np.ndarray, sigma2_joint_Nm2: np.ndarray) -> np.ndarray:
    """(W' Sigma^-1 W)^-1 for sample-major stacked rows and per-joint noise variances."""
    n = len(sigma2_joint_Nm2)
    w = np.tile(1.0 / np.sqrt(np.asarray(sigma2_joint_Nm2, float)), W.shape[0] // n)
    _, R = np.linalg.qr(W * w[:, None])
    Rinv = np.linalg.inv(R)
    return Rinv @ Rinv.T


def nrms_percent(residuals_Nm: np.ndarray, tau_Nm: np.ndarray) -> float:
    return float(100.0 * np.sqrt(np.mean(residuals_Nm**2)) / np.sqrt(np.mean(tau_Nm**2)))
