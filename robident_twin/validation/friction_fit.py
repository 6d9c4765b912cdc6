"""The CLOOS twin's extra friction, fitted so that the total friction of each axis dissipates.

Friction cannot feed energy into the drive: the total friction torque f of an axis must satisfy
f(v) v >= 0 at every velocity v. On the twin, f is the regressor's Coulomb and viscous terms plus
the extra terms of :func:`robident_twin.validation.twin_vs_real.extra_torque_Nm` (Stribeck,
quadratic viscous, load-dependent Coulomb), all with the twin's smoothed sign ``tanh(v / eps)``:

    f(v, |tau|) = tanh(v/eps) (fc + stribeck exp(-|v|/v_s) + load |tau|) + fv v + visc2 v |v|.

f is odd in v, so f(v) >= 0 for v > 0 suffices. It has to hold for every load torque, so
``load >= 0`` and f(v, 0) >= 0 on a grid of the speeds the fit saw; both are linear in the fitted
coefficients (stribeck, visc2, load), and the least squares become a small quadratic program
(cvxpy + Clarabel). Where the unconstrained fit already dissipates, it is returned unchanged.
"""
from __future__ import annotations

import numpy as np


def total_friction_Nm(v_rad_s, fc_Nm, fv_Nms_rad, stribeck_Nm, stribeck_vel_rad_s, visc2_Nms2_rad2,
                      load_coulomb, eps_rad_s, tau_abs_Nm=0.0):
    """Total friction torque of one axis (regressor Coulomb + viscous + the extra terms)."""
    v = np.asarray(v_rad_s, dtype=float)
    s = np.tanh(v / eps_rad_s)
    return (s * (fc_Nm + stribeck_Nm * np.exp(-np.abs(v) / stribeck_vel_rad_s) + load_coulomb * tau_abs_Nm)
            + fv_Nms_rad * v + visc2_Nms2_rad2 * v * np.abs(v))


def speed_grid_rad_s(v_max_rad_s: float, n: int = 400) -> np.ndarray:
    """Positive speeds up to ``v_max_rad_s``: dense near zero (where Stribeck acts), then linear."""
    v_max = float(v_max_rad_s)
    return np.unique(np.concatenate([np.geomspace(1e-5, v_max, n // 2), np.linspace(v_max / n, v_max, n // 2)]))


def dissipation_rows(v_rad_s, fc_Nm, fv_Nms_rad, stribeck_vel_rad_s, eps_rad_s):
    """Linear constraints ``G @ [stribeck, visc2, load] >= h`` for f(v, |tau|) >= 0 at the speeds
    ``v_rad_s`` (> 0) and every load torque."""
    v = np.asarray(v_rad_s, dtype=float)
    s = np.tanh(v / eps_rad_s)
    G = np.column_stack([s * np.exp(-v / stribeck_vel_rad_s), v * v, np.zeros_like(v)])
    h = -(s * fc_Nm + fv_Nms_rad * v)
    return np.vstack([G, [0.0, 0.0, 1.0]]), np.append(h, 0.0)


def constrained_lstsq(F, y, G, h, idx) -> np.ndarray:
    """min ||F c - y||^2 subject to G @ c[idx] >= h. The plain least squares where it is feasible
    (to 1e-9 of the constraint scale), else the QP on the QR factor of F (cvxpy + Clarabel)."""
    c, *_ = np.linalg.lstsq(F, y, rcond=None)
    scale = 1.0 + np.max(np.abs(h))
    if np.all(G @ c[idx] >= h - 1e-9 * scale):
        return c
    import cvxpy as cp

    Q, R = np.linalg.qr(F)
    # columns scaled to unit norm for the solver; the constraints in the scaled coefficients
    d = np.linalg.norm(R, axis=0)
    d[d == 0] = 1.0
    x = cp.Variable(F.shape[1])
    Gs = G / d[idx]
    prob = cp.Problem(cp.Minimize(cp.sum_squares((R / d) @ x - Q.T @ y)), [Gs @ x[idx] >= h])
    prob.solve(solver=cp.CLARABEL)
    if x.value is None:
        raise RuntimeError(f"dissipative friction fit: the solver returned {prob.status}")
    return np.asarray(x.value) / d
