"""The per-step helpers of the CLOOS twin's replay loop
(:meth:`robident_twin.validation.twin_vs_real.CloosTwin.replay`): the same operations as the
plain numpy calls they replace, bit for bit, with less Python work per step (the replay runs
tens of thousands of 1 ms steps; tests/test_twin_vs_real.py checks the equality)."""
from __future__ import annotations

import numpy as np


try:  # np.linalg.solve's own LAPACK gufunc for one right-hand side, without its Python checks
    from numpy.linalg._umath_linalg import solve1 as _gufunc_solve1

    def solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``np.linalg.solve(A, b)`` bit for bit (float64, A square, b a vector) at a fifth of its
        cost on 6 axes; a singular A gives NaN, which the replay's divergence check reports."""
        return _gufunc_solve1(A, b, signature="dd->d")
except ImportError:  # a numpy without the private module
    solve = np.linalg.solve


def pick(idx: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``np.where(mask, x, y)`` for the mask's indices ``idx`` (a third of its cost on 6 axes)."""
    r = y.copy()
    r[idx] = x[idx]
    return r


class ExtraTorque:
    """``twin_vs_real.extra_torque_Nm`` of one state (``fx``: the twin's ``TwinEffects``), bit for bit
    (the same operations in the same order), with the arrays that do not depend on the step
    computed once, ``tanh(dqm / eps)`` passed in, and the two flanks of the transmission error
    evaluated in one array (``transmission_error_torque_Nm``)."""

    def __init__(self, fx):
        self.fx = fx
        self.w_ripple = 2 * np.pi * fx.ripple_cyc_rad
        te = fx.te
        if te is not None:
            w = (2 * np.pi * te.cycles_per_rad)[..., None]  # (n, k, 1)
            self.te_w, self.te_phase, self.te_blend = w, te.phase_rad, te.blend_velocity_rad_s
            self.te_aw, self.te_aw2 = te.amplitude_rad * w, -te.amplitude_rad * w * w

    def friction(self, dqm, s, tau_rigid_Nm):
        """The extra friction alone (Stribeck, quadratic viscous, load-dependent Coulomb)."""
        fx = self.fx
        a = np.abs(dqm)
        return (fx.stribeck_Nm * s * np.exp(-a / fx.stribeck_vel_rad_s) + fx.visc2_Nms2_rad2 * dqm * a
                + fx.load_coulomb * np.abs(tau_rigid_Nm) * s)

    def __call__(self, qm, dqm, s, tau_rigid_Nm, ddqm, inertia_kgm2, friction_weight=None):
        """``friction_weight`` (per axis): the share of the extra friction acting here (None: all)."""
        fx = self.fx
        ripple = (fx.ripple_Nm * np.sin(self.w_ripple * qm[:, None] + fx.ripple_phase_rad)).sum(axis=-1)
        fr = self.friction(dqm, s, tau_rigid_Nm)
        if friction_weight is not None:
            fr = friction_weight * fr
        if fx.te is not None:
            up = 0.5 * (1.0 + np.tanh(dqm / self.te_blend))
            ph = self.te_w * qm[:, None, None] + self.te_phase  # (n, k, 2 flanks)
            e = self.te_aw2 * np.sin(ph) * (dqm * dqm)[:, None, None] + 2 * (self.te_aw * np.cos(ph)) * ddqm[:, None, None]
            flank = e.sum(axis=1)
            fr = fr + inertia_kgm2 * ((0.0 + up * flank[:, 0]) + (1.0 - up) * flank[:, 1])
        return ripple + fr
