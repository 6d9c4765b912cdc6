"""Axis 1's extra friction on all the identification data (issue 15, item 4; session 10, opt-in).

:func:`robident_twin.validation.twin_vs_real.calibrate` fits each axis's extra friction (Stribeck
``s(v) exp(-|v| / v_s)``, quadratic viscous ``v |v|``, load-dependent Coulomb ``|tau| s(v)``) on the real
Trajectory A residual alone. A is fast: axis 1 passes the low speeds only at its reversals, at
|ddq| ~ 2 rad/s^2, so A's Stribeck dip (-77 Nm under Fc 76.8 Nm) also stands for whatever the friction
does at a reversal. The process identification files (:data:`cloos_calibration.PROCESS_IDENTIFICATION_FILES`)
move axis 1 for seconds at 0.02-0.05 rad/s. This module puts the same friction columns on every
identification file:

- :func:`friction_targets`: per file, axis ``axis``'s real residual (measured torque - identified model)
  minus the twin's calibrated transmission error and ripple (A's fit, kept), and the friction columns,
  moving samples only (|dqm| >= ``v_min_rad_s``; standing, the friction is whatever holds the axis);
- :func:`fit_friction`: the columns per file or jointly (each file weighted by 1 / its sample count, one
  free offset per file for the model's static error), optionally constrained to dissipate
  (:mod:`robident_twin.validation.friction_fit`, on the speeds of every file in the fit);
- :func:`with_joint_friction`: the calibration with axis ``axis``'s extra friction from the joint fit
  (run.py ``--axis1-friction joint``; applied right after the friction fit and ``--wrist4``, before the
  wrist loop, the springs and the link-side share, which are then calibrated with it);
- :func:`with_presliding`: axis 1's Coulomb step as one Dahl element (:mod:`validation.presliding`), its distance
  and the v|v| and load terms fitted on every identification file jointly (``--axis1-friction presliding``);
- :func:`refine_link_share`: axis 1's link-side friction share solved on A's 5-10 Hz residual RMS with the other
  axes' shares held (``--axis1-share``, right after :func:`cloos_calibration.calibrate_link_friction`).

Identification data only (A and the process identification files, never the validation files).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import model_torque_Nm
from robident_twin.validation import cloos_calibration as cc
from robident_twin.validation import friction_fit as dfit
from robident_twin.validation import presliding
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.cloos_calibration import PROCESS_IDENTIFICATION_FILES

#: The axis whose extra friction is refitted (0-based): axis 1.
AXIS = 0
#: Below this motor speed [rad/s] a sample is taken as standing and left out of the friction fit.
V_MIN_RAD_S = 0.005
#: Names of the friction columns, in :func:`friction_columns`' order.
COLUMNS = ("stribeck", "visc2", "load")


def friction_columns(dqm_rad_s, tau_model_Nm, stribeck_vel_rad_s: float, eps_rad_s: float) -> np.ndarray:
    """The extra-friction columns of one axis, those of the calibration's least squares
    (:func:`twin_vs_real._features` without ripple lines): Stribeck s(v) exp(-|v| / v_s), v |v|, |tau| s(v),
    s = tanh(v / eps)."""
    v = np.asarray(dqm_rad_s, dtype=float)
    return tv._features(v, v, np.asarray(tau_model_Nm, dtype=float), (), stribeck_vel_rad_s, eps_rad_s)


def _joint_system(columns, targets_Nm) -> tuple[np.ndarray, np.ndarray]:
    """The joint least-squares system of several files: each file's rows (its ``columns`` block and one
    offset column of its own) and target weighted by 1 / sqrt(its sample count), stacked."""
    n_f = len(columns)
    rows, ys = [], []
    for i, (F, y) in enumerate(zip(columns, targets_Nm)):
        w = 1.0 / np.sqrt(len(y))
        off = np.zeros((len(y), n_f))
        off[:, i] = 1.0
        rows.append(w * np.hstack([F, off]))
        ys.append(w * y)
    return np.vstack(rows), np.concatenate(ys)


def lines_torque_Nm(cal: tv.Calibration, axis: int, qm, dqm, ddqm, J) -> np.ndarray:
    """The calibrated transmission error (the open-loop fit, ``fit["te_amplitude_rad"]`` where the loop
    pass changed it) and ripple of one axis along a path (motor coordinates; J the axis's inertia)."""
    fx = cal.effects
    amp = np.asarray(cal.fit.get("te_amplitude_rad", fx.te.amplitude_rad))[axis]
    ph = np.asarray(cal.fit.get("te_phase_rad", fx.te.phase_rad))[axis]
    out = np.zeros(len(qm))
    for m, k in enumerate(fx.te.cycles_per_rad[axis]):
        c = np.column_stack([amp[m] * np.cos(ph[m]), amp[m] * np.sin(ph[m])]).ravel()  # flank-wise [cos, sin]
        out += tv._te_basis(k, qm, dqm, ddqm, J) @ c
    return out + np.sum(fx.ripple_Nm[axis] * np.sin(2 * np.pi * fx.ripple_cyc_rad[axis] * np.asarray(qm)[:, None]
                                                    + fx.ripple_phase_rad[axis]), axis=1)


@dataclasses.dataclass(frozen=True)
class FrictionTarget:
    """One file's moving samples of one axis: motor speed, the real residual less the calibrated lines
    (what the extra friction has to explain), the friction columns, the joint position."""

    name: str
    dqm_rad_s: np.ndarray
    y_Nm: np.ndarray
    F: np.ndarray  # (n, 3) COLUMNS
    q_rad: np.ndarray
    moving: np.ndarray  # (N,) bool: the samples kept, of the whole record
    dqm_all_rad_s: np.ndarray  # (N,) the whole record's motor speed (the presliding state runs along it)
    dt_s: float
    periodic: bool  # the record is one period (Trajectory A) or a single run (process files)


def friction_targets(cal: tv.Calibration, real: tv.FitStatistics, model, files: dict, axis: int = AXIS,
                     v_min_rad_s: float = V_MIN_RAD_S, periodic=("A",)) -> list[FrictionTarget]:
    """Per identification file (name -> IdentificationData), axis ``axis``'s friction target (module
    docstring); the columns with the calibration's Stribeck velocity and sign smoothing. The files named
    in ``periodic`` are one period of a periodic motion (Trajectory A's average), the others single runs."""
    reg, base = model
    tw = tv.CloosTwin(cal, model)
    fx = cal.effects
    out = []
    for name, d in files.items():
        tau_model = model_torque_Nm(reg, base, d, real.beta)
        qm, dqm, ddqm = (x @ tw.Cinv.T for x in (d.q_rad, d.dq_rad_s, d.ddq_rad_s2))
        J = np.array([tw.link_side_inertia(x)[axis] for x in d.q_rad]) + tw.ia[axis]
        y = d.tau_Nm[:, axis] - tau_model[:, axis] - lines_torque_Nm(cal, axis, qm[:, axis], dqm[:, axis],
                                                                      ddqm[:, axis], J)
        mv = np.abs(dqm[:, axis]) >= v_min_rad_s
        F = friction_columns(dqm[:, axis], tau_model[:, axis], fx.stribeck_vel_rad_s, fx.sign_eps_rad_s)
        out.append(FrictionTarget(name, dqm[mv, axis], y[mv], F[mv], d.q_rad[mv, axis], mv, dqm[:, axis],
                                  1.0 / d.sample_rate_hz, name in periodic))
    return out


@dataclasses.dataclass(frozen=True)
class FrictionFit:
    """Extra-friction coefficients (COLUMNS order) fitted on ``files``, the per-file offsets, and per file
    of the targets it was evaluated on the share of the target's energy (about its mean) it explains."""

    files: tuple
    coef: np.ndarray  # (3,)
    offset_Nm: np.ndarray  # (len(files),)
    explained: dict  # name -> share of sum (y - mean)^2 removed by the friction (offset refitted per file)


def explained_share(t: FrictionTarget, coef) -> float:
    """Share of the target's variance the friction ``coef`` explains (its own best offset)."""
    y = t.y_Nm - t.y_Nm.mean()
    e = y - (t.F @ coef - np.mean(t.F @ coef))
    return float(1.0 - np.sum(e ** 2) / np.sum(y ** 2))


def fit_friction(targets, names=None, dissipative_fc_fv=None, stribeck_vel_rad_s: float = 0.05,
                 eps_rad_s: float = 0.001) -> FrictionFit:
    """The columns on the targets named (all by default) jointly, each file weighted by 1 / its sample
    count, one offset per file. ``dissipative_fc_fv`` = (fc, fv, eps of the twin's sign): the fit is
    constrained so that the total friction dissipates on the speeds up to the fastest of these files
    (:func:`friction_fit.dissipation_rows`); None: plain least squares."""
    use = [t for t in targets if names is None or t.name in names]
    F, y = _joint_system([t.F for t in use], [t.y_Nm for t in use])
    if dissipative_fc_fv is None:
        c, *_ = np.linalg.lstsq(F, y, rcond=None)
    else:
        fc, fv, eps = dissipative_fc_fv
        vmax = max(float(np.max(np.abs(t.dqm_rad_s))) for t in use)
        G, h = dfit.dissipation_rows(dfit.speed_grid_rad_s(vmax), fc, fv, stribeck_vel_rad_s, eps)
        c = dfit.constrained_lstsq(F, y, G, h, np.arange(3))
    coef = c[:3]
    return FrictionFit(tuple(t.name for t in use), coef, c[3:], {t.name: explained_share(t, coef) for t in targets})


def binned_mean_Nm(t: FrictionTarget, edges_rad_s, coef=None) -> np.ndarray:
    """Mean of the target (or, with ``coef``, of the fitted friction) per bin of the motor speed
    (NaN where a bin has fewer than 10 samples)."""
    x = t.y_Nm if coef is None else t.F @ coef
    idx = np.digitize(t.dqm_rad_s, edges_rad_s)
    return np.array([x[idx == i].mean() if np.sum(idx == i) >= 10 else np.nan for i in range(1, len(edges_rad_s))])


def with_axis_friction(cal: tv.Calibration, coef, axis: int = AXIS, source: str = "") -> tv.Calibration:
    """``cal`` with axis ``axis``'s extra friction (Stribeck, quadratic viscous, load-dependent Coulomb)
    set to ``coef``; the A-only values kept in ``fit["axis1_friction_A"]``."""
    fx = cal.effects
    strib, visc2, load = (np.array(a, dtype=float) for a in (fx.stribeck_Nm, fx.visc2_Nms2_rad2, fx.load_coulomb))
    old = np.array([strib[axis], visc2[axis], load[axis]])
    strib[axis], visc2[axis], load[axis] = (float(x) for x in coef)
    fit = dict(cal.fit, axis1_friction_A=old, axis1_friction=np.asarray(coef, dtype=float),
               axis1_friction_source=source)
    return dataclasses.replace(cal, effects=dataclasses.replace(fx, stribeck_Nm=strib, visc2_Nms2_rad2=visc2,
                                                                 load_coulomb=load), fit=fit)


def with_joint_friction(cal: tv.Calibration, real: tv.FitStatistics, model, files: dict, axis: int = AXIS,
                        dissipative: bool = True) -> tv.Calibration:
    """``cal`` with axis ``axis``'s extra friction fitted jointly on every identification file in ``files``
    (A and the process identification files), dissipative like the committed fit."""
    tw = tv.CloosTwin(cal, model)
    targets = friction_targets(cal, real, model, files, axis)
    fit = fit_friction(targets, None, (tw.fc[axis], tw.fv[axis], tw.eps) if dissipative else None,
                       cal.effects.stribeck_vel_rad_s, cal.effects.sign_eps_rad_s)
    return with_axis_friction(cal, fit.coef, axis, "jointly on " + ", ".join(fit.files))


# ----------------------------------------------------------------------------- presliding (Dahl) form
#: Presliding distances [rad, motor coordinates on the joint side] of axis 1's Dahl element scanned.
PRESLIDING_GRID_RAD = tuple(np.geomspace(1e-4, 0.03, 26))


@dataclasses.dataclass(frozen=True)
class PreslidingScan:
    """The Dahl form on the files in ``files`` jointly: per presliding distance of the grid, the weighted
    residual sum of squares and the coefficients [visc2, load] (the Stribeck term dropped, the Coulomb
    step fc tanh(v / eps) replaced by fc z, :mod:`robident_twin.validation.presliding`); the best distance,
    and per file of the targets the share of its energy explained at the best distance."""

    files: tuple
    grid_rad: np.ndarray
    ss: np.ndarray
    coef: np.ndarray  # (grid, 2)
    best: int
    explained: dict


def dahl_target(t: FrictionTarget, x_c_rad: float, fc_Nm: float, eps_rad_s: float) -> np.ndarray:
    """The target with the twin's Coulomb step replaced by the Dahl element: y - fc (z - tanh(v / eps))."""
    z = presliding.dahl_path(t.dqm_all_rad_s, t.dt_s, x_c_rad, periodic=t.periodic)[t.moving]
    return t.y_Nm - fc_Nm * (z - np.tanh(t.dqm_rad_s / eps_rad_s))


def scan_presliding(targets, fc_Nm: float, fv_Nms_rad: float, eps_rad_s: float, names=None,
                    grid_rad=PRESLIDING_GRID_RAD, dissipative: bool = True) -> PreslidingScan:
    """The Dahl form's scan (see :class:`PreslidingScan`) on the targets named (all by default), each file
    weighted by 1 / its sample count, one offset per file; ``dissipative``: fc + fv v + visc2 v^2 >= 0 in
    steady sliding and load >= 0 (the Dahl element itself is passive)."""
    use = [t for t in targets if names is None or t.name in names]
    grid = np.asarray(grid_rad, dtype=float)
    vmax = max(float(np.max(np.abs(t.dqm_rad_s))) for t in use)
    v = dfit.speed_grid_rad_s(vmax)
    G = np.vstack([np.column_stack([v * v, np.zeros_like(v)]), [0.0, 1.0]])
    h = np.append(-(fc_Nm + fv_Nms_rad * v), 0.0)
    ss, coefs = [], []
    for x in grid:
        F, y = _joint_system([t.F[:, 1:] for t in use], [dahl_target(t, x, fc_Nm, eps_rad_s) for t in use])
        c = dfit.constrained_lstsq(F, y, G, h, np.arange(2)) if dissipative else np.linalg.lstsq(F, y, rcond=None)[0]
        ss.append(float(np.sum((y - F @ c) ** 2)))
        coefs.append(c[:2])
    b = int(np.argmin(ss))
    expl = {}
    for t in targets:
        y0 = t.y_Nm - t.y_Nm.mean()
        f = t.F[:, 1:] @ coefs[b]
        e = dahl_target(t, grid[b], fc_Nm, eps_rad_s) - f
        expl[t.name] = float(1.0 - np.sum((e - e.mean()) ** 2) / np.sum(y0 ** 2))
    return PreslidingScan(tuple(t.name for t in use), grid, np.array(ss), np.array(coefs), b, expl)


def with_presliding(cal: tv.Calibration, real: tv.FitStatistics, model, files: dict, axis: int = AXIS,
                    dissipative: bool = True) -> tv.Calibration:
    """``cal`` with axis ``axis``'s Coulomb step as one Dahl element (``TwinEffects.presliding``, its
    distance from :func:`scan_presliding` on every identification file in ``files`` jointly), its Stribeck
    term 0 and its quadratic viscous and load-dependent Coulomb terms from the same fit; the other axes'
    elements (axis 4's, ``--wrist4``) kept. The scan is kept in ``fit["axis1_presliding"]``."""
    tw = tv.CloosTwin(cal, model)
    targets = friction_targets(cal, real, model, files, axis)
    scan = scan_presliding(targets, tw.fc[axis], tw.fv[axis], tw.eps, dissipative=dissipative)
    fx = cal.effects
    xc, wt = np.zeros((6, 2)), np.zeros((6, 2))
    if fx.presliding is not None:
        xc, wt = np.array(fx.presliding.presliding_rad, dtype=float), np.array(fx.presliding.weight, dtype=float)
    xc[axis], wt[axis] = (0.0, scan.grid_rad[scan.best]), (0.0, 1.0)
    visc2, load = scan.coef[scan.best]
    out = with_axis_friction(cal, (0.0, visc2, load), axis, "presliding, jointly on " + ", ".join(scan.files))
    fx = dataclasses.replace(out.effects, presliding=presliding.PreslidingParams(xc, wt))
    return dataclasses.replace(out, effects=fx, fit=dict(out.fit, axis1_presliding=scan))


#: run.py ``--axis1-friction`` choices: the static columns refitted jointly, or the Dahl form jointly.
AXIS1_FRICTION_MODES = ("joint", "presliding")


def identification_files(recA, root=None) -> dict:
    """Trajectory A's averaged record and the process identification files (name -> IdentificationData)."""
    return {"A": recA.data, **{n: ds.load(n, root).data for n in PROCESS_IDENTIFICATION_FILES}}


def calibrate_axis1_friction(cal: tv.Calibration, real: tv.FitStatistics, model, recA, root, mode: str,
                             dissipative: bool = True) -> tv.Calibration:
    """The chain's step for ``run.py --axis1-friction MODE`` (:data:`AXIS1_FRICTION_MODES`) on A
    (``recA``) and the process identification files of the data set at ``root``."""
    if mode not in AXIS1_FRICTION_MODES:
        raise ValueError(f"calibrate_axis1_friction: mode {mode!r}, expected one of {AXIS1_FRICTION_MODES}")
    files = identification_files(recA, root)
    if mode == "joint":
        return with_joint_friction(cal, real, model, files, dissipative=dissipative)
    return with_presliding(cal, real, model, files, dissipative=dissipative)


def summary_line(cal: tv.Calibration, axis: int = AXIS) -> str:
    """One line for run.py: axis 1's extra friction before (A alone) and after, and the Dahl scan."""
    old, new = cal.fit.get("axis1_friction_A"), cal.fit.get("axis1_friction")
    s = (f"axis {axis + 1} extra friction ({cal.fit.get('axis1_friction_source', '')}): Stribeck, v|v|, load "
         f"{' '.join(f'{x:.4g}' for x in old)} (A alone) -> {' '.join(f'{x:.4g}' for x in new)}")
    scan = cal.fit.get("axis1_presliding")
    if scan is not None:
        s += (f"; Dahl element {1e3 * scan.grid_rad[scan.best]:.3g} mrad, share of each file's target explained "
              + " ".join(f"{k} {v:.3f}" for k, v in scan.explained.items()))
    return s


# ----------------------------------------------------------------------------- axis 1's link-side share
@dataclasses.dataclass(frozen=True)
class ShareRefinement:
    """The twin's band RMS (cloos_calibration.ringing_band_rms) of axis ``axis`` on A at each share tried, the
    other axes' shares held; the real band RMS; the share that meets it."""

    axis: int
    shares: tuple
    band_Nm: tuple
    real_Nm: float
    share: float


def refine_link_share(cal: tv.Calibration, model, recA, real: tv.FitStatistics, axis: int = AXIS,
                      rel_tol: float = 0.02, max_replays: int = 6, n_repetitions: int = 2,
                      seed: int = 200) -> tv.Calibration:
    """Axis ``axis``'s link-side friction share set so that the twin's 5-10 Hz residual RMS on A equals the
    real one with the OTHER elastic axes at their calibrated shares.

    :func:`cloos_calibration.calibrate_link_friction` replays A with every elastic axis at share 0 and at 1
    and interpolates each axis as if its band grew with its own share squared alone; axis 1's 5-10 Hz also
    carries axes 2 and 3's ringing (which that scan switches off at share 0), so the interpolated share
    overshoots (README, session 10). Here the band is a function of axis ``axis``'s share alone, solved by
    regula falsi (Illinois) on [0, 1] from the calibrated share, to ``rel_tol`` of the real band or
    ``max_replays`` replays (2 repetitions of A each, as the calibration). Identification data only (A)."""
    d = recA.data
    r_real = d.tau_Nm - model_torque_Nm(*model, d, real.beta)
    target = float(cc.ringing_band_rms(r_real, d.sample_rate_hz)[axis])
    tried: dict = {}

    def band(s):
        if s not in tried:
            sh = np.array(cal.effects.link_friction_share, dtype=float)
            sh[axis] = s
            c = dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, link_friction_share=sh))
            tried[s] = float(cc.ringing_band_rms(cc._twin_residual(c, model, recA, n_repetitions, seed),
                                                 d.sample_rate_hz)[axis])
        return tried[s] - target

    s0 = float(cal.effects.link_friction_share[axis])
    lo, hi = 0.0, s0
    f_lo, f_hi = band(lo), band(hi)
    if f_hi < 0:
        lo, f_lo, hi, f_hi = hi, f_hi, 1.0, band(1.0)
    share = min(tried, key=lambda s: abs(tried[s] - target))
    if f_lo < 0 < f_hi:
        side = 0
        while len(tried) < max_replays and abs(tried[share] - target) > rel_tol * target:
            s = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
            f = band(s)
            if f > 0:
                hi, f_hi = s, f
                if side == -1:
                    f_lo /= 2
                side = -1
            else:
                lo, f_lo = s, f
                if side == 1:
                    f_hi /= 2
                side = 1
            share = min(tried, key=lambda x: abs(tried[x] - target))
    elif f_lo >= 0:
        share = 0.0
    else:
        share = 1.0
    order = sorted(tried)
    ref = ShareRefinement(axis, tuple(order), tuple(tried[s] for s in order), target, float(share))
    sh = np.array(cal.effects.link_friction_share, dtype=float)
    sh[axis] = share
    return dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, link_friction_share=sh),
                               fit=dict(cal.fit, axis1_share_refinement=ref))


def share_line(cal: tv.Calibration) -> str:
    """One line for run.py: the share refinement's replays."""
    ref = cal.fit["axis1_share_refinement"]
    return (f"axis {ref.axis + 1} link-side share on A with the other axes' shares held (5-10 Hz RMS, real "
            f"{ref.real_Nm:.2f} Nm): " + ", ".join(f"{s:.3f}: {b:.2f}" for s, b in zip(ref.shares, ref.band_Nm))
            + f" -> {ref.share:.3f}")
