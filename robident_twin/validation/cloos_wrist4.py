"""Axis 4 of the CLOOS twin with presliding (Dahl) friction, calibrated on Trajectory A (issue 15,
item 4; session 9; opt-in ``experiments/twin_vs_real_cloos/run.py --wrist4``).

The real J4 residual of the A fit sits at low speed and after axis 4's reversals (RMS 5.4 Nm below
0.02 rad/s against 1.5 Nm overall), where the regressor's Coulomb step is too sharp; the real J4 standing
on process 2 holds within 0.66 encoder counts (deg_e) while its motor torque stays within 0.053 Nm std
against 0.69 Nm std of model coupling torque: about 7e5 Nm/rad, far above its position loop (README,
session 9). Both point to presliding friction (:mod:`robident_twin.validation.presliding`).

:func:`calibrate_presliding` gives an axis two parallel Dahl elements in place of the twin's fc tanh(v / eps)
and drops its Stribeck term (which the dissipative fit drives to -Fc): a stiction element (weight w, its
presliding stiffness the hold stiffness of :func:`hold_requirement`) and a sliding element (weight 1 - w,
distance x2). Per x2 of a grid, w and the axis's other effect columns (transmission error, ripple,
quadratic viscous, load-dependent Coulomb; with ``dissipative`` constrained as
:func:`robident_twin.validation.twin_vs_real.calibrate` does) by least squares on the real A residual;
the x2 with the least squares wins. Identification data (A, the process-2 identification file) and deg_e only.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from robident_twin.datasets.cloos_model import model_torque_Nm
from robident_twin.validation import friction_fit as dfit
from robident_twin.validation import presliding
from robident_twin.validation import twin_vs_real as tv

#: The axes given presliding friction (axis 4).
PRESLIDING_AXES = (3,)
#: Presliding distances [rad, motor coordinates on the joint side] of the sliding element scanned on A.
PRESLIDING_GRID_RAD = tuple(np.geomspace(1e-4, 0.1, 31))
#: The process whose deg_e (controller error without feed-forward) and identification file show axis 4
#: standing still (process 2: J4's desired path is constant).
HOLD_PROCESS = 2


@dataclasses.dataclass(frozen=True)
class PreslidingFit:
    """The scan of one axis on A: residual sum of squares of the real residual per sliding-element
    distance (``ss``, the stiction element's weight fitted at each), the calibrated Stribeck form's
    (``ss_stribeck``), the total; the best distance, its stiction weight, the hold stiffness and the
    stiction element's distance it gives."""

    axis: int
    grid_rad: np.ndarray
    ss: np.ndarray
    weight: np.ndarray  # stiction element's weight per grid point
    ss_stribeck: float
    ss_total: float
    best_rad: float
    hold_stiffness_Nm_rad: float
    stiction_rad: float


def _columns(cal: tv.Calibration, j: int, qm, dqm, ddqm, J, tau_model):
    """Axis j's effect columns without the Stribeck one: transmission error (per line, per flank),
    ripple sin/cos, v|v|, |tau| sgn(v); the transmission-error and ripple column counts."""
    fx = cal.effects
    F = tv._features(qm[:, j], dqm[:, j], tau_model[:, j], fx.ripple_cyc_rad[j], fx.stribeck_vel_rad_s, fx.sign_eps_rad_s)
    n_r = 2 * len(fx.ripple_cyc_rad[j])
    F = np.delete(F, n_r, axis=1)  # the Stribeck column
    T = np.hstack([tv._te_basis(k, qm[:, j], dqm[:, j], ddqm[:, j], J[:, j]) for k in fx.te.cycles_per_rad[j]])
    return np.hstack([T, F]), T.shape[1], n_r


def hold_requirement(real: tv.FitStatistics, model, root=None, axis: int = 3) -> tuple[float, float, float, float]:
    """What holds the standing axis: the torque the identified model says acts on it while it stands
    (its prediction on the process-``HOLD_PROCESS`` identification file, where the real motor torque stays
    within 0.05 Nm std) over the real controller's error there (deg_e RMS, on the same path).
    Returns (stiffness = torque std / error RMS [Nm/rad], the largest torque deviation from its mean [Nm],
    torque std [Nm], error RMS [rad])."""
    from robident_twin.datasets import cloos_control, cloos_icma2020 as ds

    reg, base = model
    d = ds.load(f"process{HOLD_PROCESS}", root).data
    tau = model_torque_Nm(reg, base, d, real.beta)[:, axis]
    _, e_deg = cloos_control.load_control_error(HOLD_PROCESS, "none", root)
    e = float(np.sqrt(np.mean(np.radians(e_deg[:, axis]) ** 2)))
    return float(tau.std()) / e, float(np.max(np.abs(tau - tau.mean()))), float(tau.std()), e


def _fit(F, y, idx, fc, fv, v_max, dissipative: bool, weight_bounds=(0.0, 1.0)):
    """Constrained least squares; ``idx`` = the columns [visc2, load, stiction weight]: the weight within
    ``weight_bounds`` and, with ``dissipative``, f = fc + fv v + visc2 v^2 >= 0 in steady sliding (Dahl ->
    fc sgn v), load >= 0."""
    G = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]])
    h = np.array([weight_bounds[0], -weight_bounds[1]])
    if dissipative:
        v = dfit.speed_grid_rad_s(v_max)
        G = np.vstack([np.column_stack([v * v, np.zeros((v.size, 2))]), [0.0, 1.0, 0.0], G])
        h = np.concatenate([-(fc + fv * v), [0.0], h])
    return dfit.constrained_lstsq(F, y, G, h, idx)


def calibrate_presliding(cal: tv.Calibration, real: tv.FitStatistics, recA, model, hold_Nm_rad: float,
                         hold_Nm: float | None = None, dissipative: bool = False, axes=PRESLIDING_AXES,
                         grid_rad=PRESLIDING_GRID_RAD) -> tv.Calibration:
    """``cal`` with two-element presliding friction on ``axes`` (module docstring): the stiction element's
    weight w = hold_Nm / fc (the torque a standing axis is held against; None: w fitted on A within
    [0, 1]); per distance x2 of the sliding element on the grid, the axis's other effect columns (and a
    fitted w) by least squares on the real A residual (the stiction element taken as sgn(v) on A: its
    distance is a few urad, below a sample's travel); the best x2; the stiction element's distance
    x1 = w fc / hold_Nm_rad (its presliding stiffness is the hold stiffness)."""
    reg, base = model
    d = recA.data
    Cinv = np.linalg.inv(np.asarray(reg.spec.coupling, dtype=float))
    qm, dqm, ddqm = (x @ Cinv.T for x in (d.q_rad, d.dq_rad_s, d.ddq_rad_s2))
    tau_model = model_torque_Nm(reg, base, d, real.beta)
    r = d.tau_Nm - tau_model
    tw = tv.CloosTwin(cal, model)
    J = np.array([tw.link_side_inertia(x) for x in d.q_rad]) + tw.ia
    fx = cal.effects
    xc, wt = np.zeros((6, 2)), np.zeros((6, 2))
    if fx.presliding is not None:
        xc, wt = np.array(fx.presliding.presliding_rad, dtype=float), np.array(fx.presliding.weight, dtype=float)
    strib, visc2, load = (np.array(a, dtype=float) for a in (fx.stribeck_Nm, fx.visc2_Nms2_rad2, fx.load_coulomb))
    amp, phase = np.array(fx.ripple_Nm, dtype=float), np.array(fx.ripple_phase_rad, dtype=float)
    te_a, te_p = np.array(fx.te.amplitude_rad, dtype=float), np.array(fx.te.phase_rad, dtype=float)
    share = np.array(cal.explained_share, dtype=float)
    grid = np.asarray(grid_rad, dtype=float)
    fits = []
    for j in axes:
        F0, nt, n_r = _columns(cal, j, qm, dqm, ddqm, J, tau_model)
        v, y0 = dqm[:, j], r[:, j]
        fc = tw.fc[j]
        coulomb_twin = fc * np.tanh(v / tw.eps)
        vmax = float(np.max(np.abs(v)))
        idx = F0.shape[1] - 2 + np.arange(3)
        wb = (0.0, 1.0) if hold_Nm is None else (min(1.0, hold_Nm / fc),) * 2
        ss, coefs = [], []
        for x in grid:
            z2 = presliding.dahl_path(v, 1.0 / d.sample_rate_hz, x, periodic=True)
            # twin friction fc (w sgn + (1 - w) z2) in place of fc tanh: y = r - fc (z2 - tanh) = F c + w fc (sgn - z2)
            y = y0 - (fc * z2 - coulomb_twin)
            F = np.column_stack([F0, fc * (np.sign(v) - z2)])
            c = _fit(F, y, idx, fc, tw.fv[j], vmax, dissipative, wb)
            ss.append(float(np.sum((y - F @ c) ** 2)))
            coefs.append(c)
        b = int(np.argmin(ss))
        c = coefs[b]
        w = float(np.clip(c[idx[2]], 0.0, 1.0))
        w = 0.0 if w < 1e-6 else w  # the solver's zero
        x1 = w * fc / float(hold_Nm_rad)
        xc[j], wt[j] = (x1, grid[b]), (w, 1.0 - w)
        tc = c[:nt].reshape(-1, 2, 2)  # (line, flank, [cos, sin]) as twin_vs_real.te_params
        te_a[j], te_p[j] = np.hypot(tc[..., 0], tc[..., 1]), np.arctan2(tc[..., 1], tc[..., 0])
        rc = c[nt:nt + n_r]
        amp[j], phase[j] = np.hypot(rc[0::2], rc[1::2]), np.arctan2(rc[1::2], rc[0::2])
        strib[j], visc2[j], load[j] = 0.0, c[idx[0]], c[idx[1]]
        share[j] = 1.0 - ss[b] / float(np.sum(y0 ** 2))
        ss_strib = float(np.sum(y0 ** 2) * (1.0 - cal.explained_share[j]))
        fits.append(PreslidingFit(j, grid, np.array(ss), np.array([cc[idx[2]] for cc in coefs]), ss_strib,
                                  float(np.sum(y0 ** 2)), float(grid[b]), float(hold_Nm_rad), x1))
    te = dataclasses.replace(fx.te, amplitude_rad=te_a, phase_rad=te_p)
    fx_new = dataclasses.replace(fx, stribeck_Nm=strib, visc2_Nms2_rad2=visc2, load_coulomb=load, ripple_Nm=amp,
                                 ripple_phase_rad=phase, te=te, presliding=presliding.PreslidingParams(xc, wt))
    return dataclasses.replace(cal, effects=fx_new, explained_share=share, fit=dict(cal.fit, presliding_fit=fits))


def calibrate_presliding_on_real(cal: tv.Calibration, real: tv.FitStatistics, recA, model, root=None,
                                 dissipative: bool = False) -> tv.Calibration:
    """:func:`calibrate_presliding` with the stiction weight fitted on A and the hold stiffness of the data
    set (:func:`hold_requirement`): the ``run.py --wrist4`` calibration. On the ICMA 2020 files A asks for
    no stiction element (w = 0): axis 4 gets the sliding Dahl element alone (x2 = 1 mrad)."""
    k, _, _, _ = hold_requirement(real, model, root)
    return calibrate_presliding(cal, real, recA, model, k, None, dissipative=dissipative)
