"""Model reduction of the base parameters.

- :func:`essential_parameters` (Xu 2020, Pham & Gautier): starting from the base
  parameters, repeatedly drop the poorly identified parameter (RSD above
  ``rsd_max_percent`` and, optionally, |value| below ``abs_max``) with the largest
  relative standard deviation and re-estimate, until none is left.
  Xu 2020 uses 40 % and 0.01; both are configurable.
- :func:`f_test_reduction` (Jubien, Gautier, Janot 2014; Janot et al. 2014):
  drop parameters in decreasing RSD order while the F-statistic of the nested
  models, F = ((||rho_c||^2 - ||rho_b||^2) / (b - b_c)) / (||rho_b||^2 / (r - b)),
  stays below the Fisher-Snedecor quantile F(1 - alpha; b - b_c, r - b). The
  test assumes Gaussian residuals, checked first by a Kolmogorov-Smirnov test on
  the standardised residuals of the full model.

Both work on any estimator of :mod:`robident_twin.estimation.estimators` that takes (W, tau, names)
(OLS by default, or a function such as ``lambda W, t, n: wls(W, t, n, s2)``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from robident_twin.errors import ConfigError, IdentificationError
from robident_twin.estimation.estimators import Estimate, ols


@dataclass(frozen=True)
class Reduction:
    """Result of a model reduction: ``keep`` indexes the original base parameters."""

    method: str
    keep: np.ndarray
    removed: tuple[str, ...]
    estimate: Estimate
    cond_before: float
    cond_after: float
    history: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return self.estimate.names

    def full_vector(self, n_base: int) -> np.ndarray:
        """The reduced estimate as a base vector (zeros for removed parameters)."""
        out = np.zeros(n_base)
        out[self.keep] = self.estimate.beta
        return out


def _fit(estimator, W, tau, names, keep) -> Estimate:
    return estimator(W[:, keep], tau, [names[i] for i in keep])


def essential_parameters(W: np.ndarray, tau_Nm: np.ndarray, names, rsd_max_percent: float = 40.0,
                         abs_max: float | None = None,
                         estimator: Callable[..., Estimate] = ols, min_params: int = 1) -> Reduction:
    """Iterative removal of the largest-RSD parameter (Xu 2020, section II-A).

    A parameter qualifies for removal when its RSD exceeds ``rsd_max_percent`` and (when
    ``abs_max`` is given) |value| < ``abs_max``. At each step the qualifying parameter
    with the largest RSD is removed and the rest re-estimated, until none qualifies
    (Xu 2020: rsd_max_percent=40, abs_max=0.01)."""
    if not rsd_max_percent > 0:
        raise ConfigError(f"reduction.rsd_max_percent must be positive, got {rsd_max_percent}")
    names = list(names)
    keep = np.arange(len(names))
    est = _fit(estimator, W, tau_Nm, names, keep)
    cond0 = est.cond
    removed, history = [], []
    while keep.size > min_params:
        rsd = np.where(np.isfinite(est.rsd_percent), est.rsd_percent, np.inf)
        qualifies = rsd > rsd_max_percent
        if abs_max is not None:
            qualifies &= np.abs(est.beta) < abs_max
        if not qualifies.any():
            break
        i = int(np.argmax(np.where(qualifies, rsd, -np.inf)))
        history.append({"removed": names[keep[i]], "rsd_percent": float(rsd[i]), "value": float(est.beta[i]),
                        "cond": est.cond})
        removed.append(names[keep[i]])
        keep = np.delete(keep, i)
        est = _fit(estimator, W, tau_Nm, names, keep)
    return Reduction("essential", keep, tuple(removed), est, cond0, est.cond, history,
                     {"rsd_max_percent": rsd_max_percent, "abs_max": abs_max})


def ks_normality(residuals: np.ndarray) -> tuple[float, float]:
    """Kolmogorov-Smirnov test of the standardised residuals (per joint) against N(0, 1):
    (statistic, p-value)."""
    from scipy import stats

    r = np.asarray(residuals, dtype=float)
    r = r if r.ndim == 2 else r[:, None]
    z = ((r - r.mean(axis=0)) / r.std(axis=0, ddof=1)).reshape(-1)
    res = stats.kstest(z, "norm")
    return float(res.statistic), float(res.pvalue)


def f_test_reduction(W: np.ndarray, tau_Nm: np.ndarray, names, alpha: float = 0.05,
                     ks_alpha: float = 0.05, on_non_normal: str = "error",
                     estimator: Callable[..., Estimate] = ols, min_params: int = 1) -> Reduction:
    """F-statistic reduction with a Kolmogorov-Smirnov normality check (Jubien 2014).

    Parameters are tried in decreasing RSD order (recomputed on the current model); a
    parameter is removed when the F-statistic of the reduced model against the FULL
    model is below F(1 - alpha; b - b_c, r - b); the procedure stops at the first
    rejection. The residual norms are those of the (weighted) system the estimator
    solves: for WLS pass a weighted estimator and weighted data, or use OLS.
    ``on_non_normal``: ``"error"`` raises if the KS test rejects normality of the
    full-model residuals at ``ks_alpha``; ``"warn"`` records it and continues."""
    from scipy import stats

    if not 0 < alpha < 1 or not 0 < ks_alpha < 1:
        raise ConfigError(f"reduction: alpha and ks_alpha must be in (0, 1), got {alpha}, {ks_alpha}")
    if on_non_normal not in ("error", "warn"):
        raise ConfigError(f"reduction.on_non_normal: expected 'error' or 'warn', got '{on_non_normal}'")
    names = list(names)
    keep = np.arange(len(names))
    full = _fit(estimator, W, tau_Nm, names, keep)
    ks_stat, ks_p = ks_normality(full.residuals_Nm)
    normal = ks_p >= ks_alpha
    if not normal and on_non_normal == "error":
        raise IdentificationError(
            f"F-test reduction: the Kolmogorov-Smirnov test rejects normal residuals (p = {ks_p:.3g} < "
            f"{ks_alpha}); the F-statistic is not valid (fix the model or the filtering, or pass "
            "on_non_normal='warn')")
    r_rows = tau_Nm.size
    b = len(names)
    rss_b = float(np.sum(full.residuals_Nm**2))
    dof = r_rows - b
    if dof <= 0:
        raise IdentificationError(f"{r_rows} equations for {b} parameters: not enough samples")
    est = full
    removed, history = [], []
    while keep.size > min_params:
        rsd = est.rsd_percent
        order = np.argsort(-np.where(np.isfinite(rsd), rsd, np.inf))
        i = int(order[0])
        trial_keep = np.delete(keep, i)
        trial = _fit(estimator, W, tau_Nm, names, trial_keep)
        rss_c = float(np.sum(trial.residuals_Nm**2))
        q = b - trial_keep.size
        F = ((rss_c - rss_b) / q) / (rss_b / dof)
        Fd = float(stats.f.ppf(1 - alpha, q, dof))
        history.append({"candidate": names[keep[i]], "rsd_percent": float(rsd[i]), "F": float(F), "F_crit": Fd,
                        "accepted": bool(F <= Fd)})
        if F > Fd:
            break
        removed.append(names[keep[i]])
        keep, est = trial_keep, trial
    return Reduction("f-test", keep, tuple(removed), est, full.cond, est.cond, history,
                     {"alpha": alpha, "ks_statistic": ks_stat, "ks_pvalue": ks_p, "residuals_normal": normal})
