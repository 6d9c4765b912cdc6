"""The dissipative extra-friction fit of the CLOOS twin (validation.friction_fit, issue 15 item 4):
the constrained least squares keep f(v) v >= 0, equal the plain fit where it already dissipates,
and agree with an independent solver (scipy SLSQP)."""
from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from robident_twin.validation import friction_fit as dfit

FC, FV, VS, EPS = 4.0, 1.0, 0.05, 0.005


def _data(stribeck_Nm, seed=0):
    """One axis: a ripple line and the friction terms (columns as in twin_vs_real.calibrate)."""
    rng = np.random.default_rng(seed)
    v = 0.6 * np.sin(np.linspace(0, 12 * np.pi, 3000)) + 0.02 * rng.standard_normal(3000)
    q = np.cumsum(v) * 1e-3
    tau = 20 + 10 * np.sin(q * 3)
    s = np.tanh(v / EPS)
    F = np.column_stack([np.sin(60 * q), np.cos(60 * q), s * np.exp(-np.abs(v) / VS), v * np.abs(v), tau * s])
    c_true = np.array([0.3, -0.2, stribeck_Nm, -0.5, 0.01])
    return v, F, F @ c_true + 0.05 * rng.standard_normal(v.size)


def _fit(v, F, y):
    G, h = dfit.dissipation_rows(dfit.speed_grid_rad_s(np.max(np.abs(v))), FC, FV, VS, EPS)
    return dfit.constrained_lstsq(F, y, G, h, np.arange(2, 5)), (G, h)


def _f_min(c, v_max):
    v = np.linspace(1e-6, v_max, 20001)  # 50x denser than the constraint grid
    return dfit.total_friction_Nm(v, FC, FV, c[2], VS, c[3], c[4], EPS).min()


def test_fit_with_stribeck_deeper_than_coulomb_is_made_dissipative():
    v, F, y = _data(stribeck_Nm=-6.5)  # as the committed axis 4: -6.55 against Fc 4.13
    c_ls, *_ = np.linalg.lstsq(F, y, rcond=None)
    assert _f_min(c_ls, np.max(np.abs(v))) < -1.0  # the plain fit feeds energy in
    c, (G, h) = _fit(v, F, y)
    assert _f_min(c, np.max(np.abs(v))) >= -1e-6 * FC
    assert c[4] >= -1e-9  # dissipative for any load torque
    # the same optimum as an independent solver
    obj = lambda x: np.sum((F @ x - y) ** 2)
    ref = minimize(obj, c_ls, jac=lambda x: 2 * F.T @ (F @ x - y), method="SLSQP",
                   constraints=[{"type": "ineq", "fun": lambda x: G @ x[2:] - h, "jac": lambda x: np.hstack(
                       [np.zeros((len(h), 2)), G])}], options={"maxiter": 500, "ftol": 1e-14})
    assert ref.success
    assert obj(c) <= obj(ref.x) * (1 + 1e-6)
    np.testing.assert_allclose(c, ref.x, rtol=1e-3, atol=1e-4)


def test_fit_that_already_dissipates_is_the_plain_least_squares():
    v, F, y = _data(stribeck_Nm=-2.0)
    c, _ = _fit(v, F, y)
    c_ls, *_ = np.linalg.lstsq(F, y, rcond=None)
    np.testing.assert_array_equal(c, c_ls)
    assert _f_min(c, np.max(np.abs(v))) > 0
