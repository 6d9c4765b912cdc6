"""Least-squares estimators of the base parameters: OLS and WLS.

Rows of the stacked system are sample-major (row k*n + j is joint j of sample
k), as built by :meth:`robident_twin.regressor.Regressor.stack`.

OLS (Gautier): sigma^2 = ||y - W beta||^2 / (r - b), cov = sigma^2 (W'W)^-1.
WLS: each joint's rows are divided by that joint's noise standard deviation.
The per-joint variances come either from the spread between periods of a
periodic recording (``weights="period"``, Swevers; cov = (W' S^-1 W)^-1 is
then the Cramer-Rao bound for Gaussian torque noise) or from the per-joint
OLS residuals (``weights="residual"``, Gautier's two-step WLS).
The reduced chi-square of the weighted residuals is reported: near 1 the
noise model explains the residuals; well above 1 the model misses something.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import ConfigError, IdentificationError


@dataclass(frozen=True)
class Estimate:
    """Result of an estimator. ``beta`` is in the base-parameter order of ``names``."""

    method: str
    names: tuple[str, ...]
    beta: np.ndarray
    cov: np.ndarray
    residuals_Nm: np.ndarray  # samples x joints
    sigma2_joint_Nm2: np.ndarray  # per-joint noise variance used for the covariance
    cond: float  # condition number of the column-normalised (weighted) regressor
    chi2_per_dof: float
    extra: dict = field(default_factory=dict)

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(np.diag(self.cov))

    @property
    def rsd_percent(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return 100.0 * self.std / np.abs(self.beta)

    @property
    def residual_rms_Nm(self) -> np.ndarray:
        return np.sqrt(np.mean(self.residuals_Nm**2, axis=0))


def check_rank(W: np.ndarray, names, tol: float = 1e-10) -> float:
    """Condition number of the column-normalised regressor; a clear error naming the
    parameters that the data do not excite when it is rank deficient."""
    norms = np.linalg.norm(W, axis=0)
    dead = [names[i] for i in np.flatnonzero(norms <= tol * max(norms.max(), 1e-300))]
    if dead:
        raise IdentificationError(f"the regressor is rank deficient: the data do not excite "
                                  f"{', '.join(dead)} (zero columns)")
    Wn = W / norms
    _, s, Vt = np.linalg.svd(Wn, full_matrices=False)
    if s[-1] <= tol * s[0]:
        null = Vt[s <= tol * s[0]]
        involved = np.flatnonzero(np.max(np.abs(null), axis=0) > 0.1)
        raise IdentificationError(
            f"the regressor is rank deficient ({int(np.sum(s <= tol * s[0]))} direction(s) not "
            f"excited); parameters involved: {', '.join(names[i] for i in involved)}")
    return float(s[0] / s[-1])


def _solve(W: np.ndarray, y: np.ndarray):
    Q, R = np.linalg.qr(W)
    beta = np.linalg.solve(R, Q.T @ y)
    Rinv = np.linalg.inv(R)
    return beta, Rinv @ Rinv.T


def ols(W: np.ndarray, tau_Nm: np.ndarray, names) -> Estimate:
    """Ordinary least squares. ``tau_Nm`` is samples x joints."""
    N, n = tau_Nm.shape
    y = tau_Nm.reshape(-1)
    cond = check_rank(W, names)
    beta, inv = _solve(W, y)
    r = (y - W @ beta).reshape(N, n)
    dof = y.size - beta.size
    if dof <= 0:
        raise IdentificationError(f"{y.size} equations for {beta.size} parameters: not enough samples")
    sigma2 = float(np.sum(r**2) / dof)
    return Estimate("ols", tuple(names), beta, sigma2 * inv, r, np.full(n, sigma2), cond, 1.0)


def wls(W: np.ndarray, tau_Nm: np.ndarray, names, sigma2_joint_Nm2: np.ndarray | None = None,
        weights: str = "period") -> Estimate:
    """Weighted least squares with per-joint weights 1/sigma_j.

    ``weights="period"`` uses ``sigma2_joint_Nm2`` (variance of the averaged torque
    estimated from the periods); ``"residual"`` estimates it from OLS residuals."""
    N, n = tau_Nm.shape
    y = tau_Nm.reshape(-1)
    if weights == "period":
        if sigma2_joint_Nm2 is None:
            raise ConfigError("estimator.weights=period needs the per-period noise variance; the data "
                              "have a single period: use estimator.weights=residual")
        s2 = np.asarray(sigma2_joint_Nm2, dtype=float)
    elif weights == "residual":
        first = ols(W, tau_Nm, names)
        dof_j = N - W.shape[1] / n
        s2 = np.sum(first.residuals_Nm**2, axis=0) / max(dof_j, 1.0)
    else:
        raise ConfigError(f"estimator.weights: expected 'period' or 'residual', got '{weights}'")
    if s2.shape != (n,) or np.any(~np.isfinite(s2)) or np.any(s2 <= 0):
        raise IdentificationError(f"WLS needs a positive noise variance per joint, got {s2.tolist()} "
                                  "(noise-free data: use estimator=ols)")
    w = np.tile(1.0 / np.sqrt(s2), N)
    Ww = W * w[:, None]
    yw = y * w
    cond = check_rank(Ww, names)
    beta, cov = _solve(Ww, yw)
    r = (y - W @ beta).reshape(N, n)
    dof = y.size - beta.size
    chi2 = float(np.sum((r.reshape(-1) * w) ** 2) / dof)
    return Estimate(f"wls-{weights}", tuple(names), beta, cov, r, s2, cond, chi2)


def estimate(method: str, W: np.ndarray, tau_Nm: np.ndarray, names, sigma2_joint_Nm2=None,
             weights: str = "period") -> Estimate:
    """Dispatch by estimator name (``ols`` or ``wls``)."""
    if method == "ols":
        return ols(W, tau_Nm, names)
    if method == "wls":
        return wls(W, tau_Nm, names, sigma2_joint_Nm2, weights)
    raise ConfigError(f"estimator.name: expected 'ols' or 'wls', got '{method}'")
