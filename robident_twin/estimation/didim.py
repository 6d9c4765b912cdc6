"""DIDIM: Gautier's direct and inverse dynamic identification model, the closed-loop
output-error method (Gautier, Janot, Vandanjon, IEEE TCST 2013).

The identified model is simulated in closed loop, under the same controller and reference as
the robot, with the current estimate; the output is the simulated control torque
``tau_s(beta) = W_s(beta) beta`` (W_s: the inverse-dynamic base regressor of the simulated
states, which reproduces the controller torque exactly). Gauss-Newton on the torque error
``tau - tau_s(beta)`` with Gautier's sensitivity ``d tau_s / d beta ~ W_s`` (the closed loop
keeps the simulated states near the reference, so the states' sensitivity to beta is second
order) gives the update

    beta_{k+1} = beta_k + (W_s' W_s)^-1 W_s' (tau - W_s beta_k) = (W_s' W_s)^-1 W_s' tau,

iterated to a relative change below ``tol``. The simulated regressor is noise free, so the
measurement noise enters only through tau: the estimate is consistent in closed loop where
OLS on the noisy measured states is not. Covariance: sigma^2 (W_s' W_s)^-1 with sigma^2 from
the output error (per-joint weighted like WLS when variances are given).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from robident_twin.errors import IdentificationError
from robident_twin.estimation.estimators import Estimate, _dof, _solve, check_rank


def didim(W: np.ndarray, tau_Nm: np.ndarray, names, simulated_regressor: Callable[[np.ndarray], np.ndarray],
          max_iter: int = 20, tol: float = 1e-8, sigma2_joint_Nm2: np.ndarray | None = None,
          beta0: np.ndarray | None = None) -> Estimate:
    """DIDIM estimate of the base parameters.

    ``W``: the measured base regressor (only for the starting OLS/WLS estimate when ``beta0``
    is None); ``tau_Nm``: measured torques (samples x channels, the same samples as the
    simulation records); ``simulated_regressor(beta) -> W_s``: the base regressor of the model
    simulated in closed loop with ``beta`` (e.g. :func:`robident_twin.estimation.estimators.
    closed_loop_instruments`). ``sigma2_joint_Nm2``: per-joint variances weighting the rows."""
    N, n = tau_Nm.shape
    y = tau_Nm.reshape(-1)
    w = np.ones(y.size) if sigma2_joint_Nm2 is None else np.tile(1.0 / np.sqrt(np.asarray(sigma2_joint_Nm2, float)), N)
    yw = y * w
    if beta0 is None:
        check_rank(W * w[:, None], names)
        beta, _ = _solve(W * w[:, None], yw)
    else:
        beta = np.asarray(beta0, dtype=float).copy()
    it, change, history = 0, np.inf, []
    for it in range(1, int(max_iter) + 1):
        Ws = np.asarray(simulated_regressor(beta), dtype=float)
        if Ws.shape != (y.size, len(names)):
            raise IdentificationError(f"DIDIM: the simulated regressor has shape {Ws.shape}, expected "
                                      f"{(y.size, len(names))} (the simulation must record the measured samples)")
        Wsw = Ws * w[:, None]
        cond = check_rank(Wsw, names)
        step, _ = _solve(Wsw, yw - Wsw @ beta)  # Gauss-Newton step on the weighted torque error
        new = beta + step
        change = float(np.linalg.norm(new - beta) / max(np.linalg.norm(new), 1e-300))
        history.append(float(np.sqrt(np.mean((yw - Wsw @ beta) ** 2))))
        beta = new
        if change < tol:
            break
    r = (y - Ws @ beta).reshape(N, n)
    dof = _dof(y, beta.size)
    sigma2 = float(np.sum((r.reshape(-1) * w) ** 2) / dof)
    cov = sigma2 * np.linalg.inv(Wsw.T @ Wsw)
    s2j = np.full(n, sigma2) if sigma2_joint_Nm2 is None else sigma2 * np.asarray(sigma2_joint_Nm2, float)
    return Estimate("didim", tuple(names), beta, cov, r, s2j, cond,
                    sigma2 if sigma2_joint_Nm2 is not None else 1.0,
                    extra={"iterations": it, "last_relative_change": change, "converged": bool(change < tol),
                           "weighted_rms_history": history})
