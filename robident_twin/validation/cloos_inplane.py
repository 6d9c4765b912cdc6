"""The main axes' in-plane mode (issue 15, item 4; session 10): two opt-in switches of
``experiments/twin_vs_real_cloos/run.py``, README "The in-plane mode: axes 2 and 3 together, and J5 (session 10)".

Evidence (real Trajectory A residual, identification data): the ~7 Hz ringing that starts at axis 2's
reversals is one in-plane mode of the arm. The real J2 residual puts 66 % of its 3-12 Hz power at 6.5-7.5 Hz
(line after axis 2's reversals 6.80 Hz); the committed twin's is broad with its peak at 5-5.5 Hz: its springs
are set per axis as if each rang alone, and the link-side coupling M23 puts the lowest mode of the chain of
axes 2 and 3 at 5.4-6.5 Hz along A. Band-passed at 6.5-7.5 Hz, J5's torque is 0.034 x J2's (in phase,
correlation 0.91) and its encoder moves 3.8 x J2's; the twin's link-side inertial coupling gives 0.0007. In
the 0.6 s after each of axis 2's reversals the real ratio follows cos(q4) (correlation 0.83, slope 0.033): the
wrist's pitch axis is parallel to the arm's plane only at q4 = 0. The real J5 drive is stiff at 7 Hz: its
encoder moves 0.20 of what the residual torque would move a free rigid axis (at 0 deg); the twin's sampled
8 Hz wrist loop moves 0.60 (at -28 deg), near its own resonance.

Model (stated physics):

* ``--inplane-springs`` (:func:`calibrate_inplane_springs`): the springs of axes 2 and 3 scaled together
  (their ratio kept) so that their coupled mode (motors held, link-side mass matrix) sits at the real line,
  median over the poses of axis 2's reversals on A;
* ``--inplane-wrist`` (:func:`calibrate_inplane_wrist`), two pieces: the wrist's pitch in the mode -- the twin
  carries the mode as axis 2's spring deflection d2 = q2_link - theta2_motor; the arm's in-plane bending turns
  the wrist's pitch link in space by kappa d2 beyond the joint coordinates, projected on axis 5 by cos(q4), so
  axis 5's drive must give it g cos(q4) dd(d2) (g = I5 kappa, kg m^2): the twin applies -g cos(q4) dd(d2) on
  motor axis 5 (joint 5 = motor 5 through the differential gear) with the previous step's dd(d2); the reaction
  on the arm is not added (the springs come from the measured mode frequency, which holds the real wrist's
  share of the mode inertia) -- and axis 5's drive at the mode: the inverter's velocity loop on the motor
  velocity (as on axes 1-3 and 6) at the bandwidth where the twin's J5 encoder/torque transfer at 5-10 Hz on A
  equals the real one (:func:`rigid_share`), in place of the sampled 8 Hz loop (an estimate).

All calibrated on Trajectory A only: the loop first (g = 0), then g by two replays (g = 0 and a trial g) so
that the twin's J5/J2 ratio after axis 2's reversals, over cos q4 (:func:`burst_shape`), is the real one; a
third replay checks it at g.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from robident_twin.datasets.cloos_model import model_torque_Nm
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.cloos_calibration import twin_run_residual, with_inverter_bandwidth

#: The axis whose spring deflection carries the in-plane mode in the twin (axis 2, 0-based).
MODE_AXIS = 1
#: Axes that see the mode through g dd(d2): the wrist's pitch (axis 5, 0-based).
INPLANE_AXES = (4,)
#: Band of the mode-shape ratio: the real ringing's line (6.9 Hz) +- 0.6 Hz.
SHAPE_BAND_HZ = (6.5, 7.5)
#: Band and window of the ratio after each of axis 2's reversals (where the real bursts start).
BURST_BAND_HZ = (5.5, 9.0)
BURST_WINDOW_S = 0.6
#: Trial g [kg m^2] of the two-point calibration (about the wrist's 0.25 kg m^2 pitch inertia x 4).
TRIAL_KGM2 = 1.0
#: Band of the drive's encoder/torque transfer (the mode's band, cloos_calibration.RINGING_BAND_HZ).
TRANSFER_BAND_HZ = (5.0, 10.0)
#: Inverter velocity-loop bandwidths [Hz] scanned for axis 5 (:func:`calibrate_wrist5_loop`).
LOOP_GRID_HZ = (10.0, 15.0, 20.0, 25.0, 30.0, 40.0)


def mode_shape_ratio(x: np.ndarray, sample_rate_hz: float, ref: int = MODE_AXIS, band_hz=SHAPE_BAND_HZ) -> np.ndarray:
    """Least-squares ratio of each column of ``x`` (samples x joints) to column ``ref``, both band-passed
    (4th-order zero-phase Butterworth): the in-phase share of the mode in each joint relative to ``ref``."""
    from scipy.signal import butter, sosfiltfilt

    x = np.asarray(x, dtype=float)
    sos = butter(4, band_hz, "bandpass", fs=sample_rate_hz, output="sos")
    b = sosfiltfilt(sos, x - x.mean(axis=0), axis=0)
    return b.T @ b[:, ref] / (b[:, ref] @ b[:, ref])


def burst_shape(x: np.ndarray, dq_ref_rad_s: np.ndarray, cos_q4: np.ndarray, sample_rate_hz: float,
                axis: int = INPLANE_AXES[0], ref: int = MODE_AXIS, band_hz=BURST_BAND_HZ,
                window_s: float = BURST_WINDOW_S) -> tuple[np.ndarray, np.ndarray, float]:
    """The mode's share in ``axis`` after each reversal of ``ref`` (velocity ``dq_ref_rad_s``): per window of
    ``window_s`` the least-squares ratio of x[:, axis] to x[:, ref] (both band-passed), the window's mean
    ``cos_q4``, and the slope of the ratio over cos q4 through 0 (least squares): the mode's shape at the
    wrist with the projection cos(q4) taken out."""
    from scipy.signal import butter, sosfiltfilt

    from robident_twin.validation.cloos_calibration import reversal_indices

    x = np.asarray(x, dtype=float)
    sos = butter(4, band_hz, "bandpass", fs=sample_rate_hz, output="sos")
    b = sosfiltfilt(sos, x - x.mean(axis=0), axis=0)
    w = int(round(window_s * sample_rate_hz))
    ratio, cos = [], []
    for i in reversal_indices(dq_ref_rad_s):
        if i + w <= len(x):
            u, v = b[i:i + w, ref], b[i:i + w, axis]
            ratio.append(u @ v / (u @ u))
            cos.append(float(np.mean(cos_q4[i:i + w])))
    ratio, cos = np.asarray(ratio), np.asarray(cos)
    if ratio.size == 0:
        raise ValueError("burst_shape: no reversal of the reference axis with a full window after it")
    return ratio, cos, float(ratio @ cos / (cos @ cos))


def rigid_share(q_rad: np.ndarray, tau_Nm: np.ndarray, inertia_kgm2: float, sample_rate_hz: float,
                band_hz=TRANSFER_BAND_HZ) -> tuple[float, float]:
    """How far a drive lets its axis move under a torque in ``band_hz``: the encoder motion q (off the
    excitation's lines) per residual torque, as a share of a free rigid axis's q = -tau / (J w^2)
    (1 = no loop stiffness there, 0 = held), and its phase [deg] (0: in phase with the rigid axis).
    Welch cross-spectra, 2 s segments, summed over the band."""
    from scipy.signal import csd, welch

    n = int(2 * sample_rate_hz)
    f, S_tq = csd(tau_Nm, q_rad, fs=sample_rate_hz, nperseg=n)
    _, S_tt = welch(tau_Nm, fs=sample_rate_hz, nperseg=n)
    m = (f >= band_hz[0]) & (f <= band_hz[1])
    h = np.sum(-S_tq[m] * inertia_kgm2 * (2 * np.pi * f[m]) ** 2) / np.sum(S_tt[m])
    return float(abs(h)), float(np.degrees(np.angle(h)))


def bandwidth_for_share(bandwidths_hz, shares, share_real: float) -> float:
    """The bandwidth where the share (falling with the bandwidth) crosses ``share_real``, linear in
    log(share) between the two scanned points around it; the scan's end if it never crosses."""
    bw, sh = np.asarray(bandwidths_hz, dtype=float), np.log(np.asarray(shares, dtype=float))
    t = np.log(share_real)
    for i in range(len(bw) - 1):
        if (sh[i] - t) * (sh[i + 1] - t) <= 0 and sh[i] != sh[i + 1]:
            return float(bw[i] + (bw[i + 1] - bw[i]) * (sh[i] - t) / (sh[i] - sh[i + 1]))
    return float(bw[0] if t > sh[0] else bw[-1])


def gain_for_ratio(g_trial: float, ratio0: float, ratio1: float, ratio_real: float) -> float:
    """The g whose ratio is ``ratio_real`` on the line through (0, ratio0) and (g_trial, ratio1)."""
    slope = (ratio1 - ratio0) / g_trial
    if not np.isfinite(slope) or abs(slope) < 1e-12:
        raise ValueError(f"gain_for_ratio: the ratio does not move with g (slope {slope})")
    return float((ratio_real - ratio0) / slope)


def with_inplane(cal: tv.Calibration, g_kgm2, axes=INPLANE_AXES) -> tv.Calibration:
    """The calibration with g on ``axes`` (scalar or one per axis)."""
    g = np.zeros(6)
    g[list(axes)] = g_kgm2
    return dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, inplane_kgm2=g))


def _twin_slope(cal, model, recA, n_repetitions, seed):
    r, _run = twin_run_residual(cal, model, recA, n_repetitions, seed)
    d = recA.data
    return burst_shape(r, d.dq_rad_s[:, MODE_AXIS], np.cos(d.q_rad[:, 3]), d.sample_rate_hz)[2]


def with_wrist5_loop(cal: tv.Calibration, bandwidth_hz: float, axes=INPLANE_AXES) -> tv.Calibration:
    """Axis 5 (``axes``) on the inverter's velocity loop at ``bandwidth_hz``."""
    return with_inverter_bandwidth(cal, axes, bandwidth_hz)


def calibrate_wrist5_loop(cal: tv.Calibration, model, recA, real: tv.FitStatistics, root=None,
                          axis: int = INPLANE_AXES[0], grid_hz=LOOP_GRID_HZ, n_repetitions: int = 2,
                          seed: int = 200) -> tv.Calibration:
    """Axis 5's inverter loop bandwidth at which the twin's J5 encoder/torque transfer at 5-10 Hz on A
    (:func:`rigid_share`, the real model's residual, noise off) equals the real one. The real encoder is
    the averaged record with everything off the excitation's Fourier lines kept (``rect=False``)."""
    from robident_twin.datasets import cloos_icma2020 as ds
    from robident_twin.validation import repetition_noise as rn

    reg, base = model
    d = recA.data
    fs = d.sample_rate_hz
    tw = tv.CloosTwin(cal, model)
    J = tw.link_side_inertia(d.q_rad[0])[axis] + tw.ia[axis]
    r_real = d.tau_Nm - model_torque_Nm(reg, base, d, real.beta)
    q_raw = ds.load("A", root, rect=False).data.q_rad
    real_share = rigid_share((q_raw - d.q_rad)[:, axis], r_real[:, axis], J, fs)
    shares = []
    for bw in grid_hz:
        c = with_wrist5_loop(cal, bw, (axis,))
        r, run = twin_run_residual(dataclasses.replace(c, effects=rn.without_noise(c.effects)), model, recA,
                                   n_repetitions, seed, beta=real.beta)
        q_enc = run.raw[0].mean(axis=0) @ tw.C.T
        shares.append(rigid_share((q_enc - run.data.q_rad)[:, axis], r[:, axis], J, fs))
    bw = bandwidth_for_share(grid_hz, [s[0] for s in shares], real_share[0])
    out = with_wrist5_loop(cal, round(bw, 1), (axis,))
    fit = dict(out.fit, wrist5_loop={"grid_hz": tuple(grid_hz), "share": [s[0] for s in shares],
                                     "phase_deg": [s[1] for s in shares], "share_real": real_share[0],
                                     "phase_real_deg": real_share[1], "bandwidth_hz": round(bw, 1)})
    return dataclasses.replace(out, fit=fit)


def calibrate_inplane(cal: tv.Calibration, model, recA, real: tv.FitStatistics, n_repetitions: int = 2,
                      seed: int = 200, g_trial_kgm2: float = TRIAL_KGM2) -> tv.Calibration:
    """Set g so that the twin's Trajectory A residual has the real one's mode shape at the wrist
    (:func:`burst_shape`: J5/J2 after axis 2's reversals, slope over cos q4); two replays (g = 0 and
    ``g_trial_kgm2``; the slope is linear in g), a third checks it at g. Apply after the link-side share
    and the main mode's damping (the mode's amplitude), before the pass through the loop."""
    reg, base = model
    d = recA.data
    r_real = d.tau_Nm - model_torque_Nm(reg, base, d, real.beta)
    ratio, cos, target = burst_shape(r_real, d.dq_rad_s[:, MODE_AXIS], np.cos(d.q_rad[:, 3]), d.sample_rate_hz)
    k0 = _twin_slope(with_inplane(cal, 0.0), model, recA, n_repetitions, seed)
    k1 = _twin_slope(with_inplane(cal, g_trial_kgm2), model, recA, n_repetitions, seed)
    g = gain_for_ratio(g_trial_kgm2, k0, k1, target)
    out = with_inplane(cal, g)
    fit = dict(cal.fit, inplane={"slope_real": target, "ratio_real": ratio, "cos_q4": cos, "slope_g0": k0,
                                 "slope_trial": k1, "g_trial_kgm2": g_trial_kgm2,
                                 "slope_at_g": _twin_slope(out, model, recA, n_repetitions, seed)})
    return dataclasses.replace(out, fit=fit)


def calibrate_inplane_wrist(cal: tv.Calibration, model, recA, real: tv.FitStatistics, root=None) -> tv.Calibration:
    """The switch ``--inplane-wrist``: axis 5's loop (:func:`calibrate_wrist5_loop`), then g
    (:func:`calibrate_inplane`). In run.py's chain after the main mode's damping, before the pass through
    the loop."""
    return calibrate_inplane(calibrate_wrist5_loop(cal, model, recA, real, root), model, recA, real)


def summary_line(cal: tv.Calibration) -> str:
    f, w = cal.fit.get("inplane", {}), cal.fit.get("wrist5_loop", {})
    j = INPLANE_AXES[0]
    out = "in-plane mode on the wrist (calibrated on A):"
    if w:
        out += (f" axis 5 inverter loop {w['bandwidth_hz']:.1f} Hz (J5 rigid share at 5-10 Hz, real {w['share_real']:.3f} "
                f"at {w['phase_real_deg']:.0f} deg; scan " + " ".join(f"{b:g}: {s:.3f}" for b, s in zip(w["grid_hz"], w["share"])) + ");")
    if f:
        out += (f" g = {cal.effects.inplane_kgm2[j]:.3f} kg m^2 (J5/J2 after axis 2's reversals over cos q4: real "
                f"{f['slope_real']:.4f}, twin g = 0 {f['slope_g0']:.4f}, trial {f['slope_trial']:.4f}, at g {f['slope_at_g']:.4f})")
    return out


def inplane_dict(cal: tv.Calibration) -> dict:
    """The YAML entries (cloos_calibration.calibration_dict): ``inplane_wrist`` (g, axis 5's loop) and
    ``inplane_springs`` (the scale of the springs of axes 2 and 3), each when calibrated."""
    out = {}
    if "inplane_springs" in cal.fit:
        s = cal.fit["inplane_springs"]
        out["inplane_springs"] = {
            "axes": [j + 1 for j in SPRING_AXES], "scale": round(float(s["scale"]), 5),
            "line_real_hz": round(float(s["line_real_hz"]), 3),
            "coupled_mode_hz_before": np.round(np.asarray(s["coupled_mode_hz"], dtype=float), 3).tolist(),
            "source": ("springs of axes 2 and 3 scaled together so that the median over the poses of axis 2's "
                       "reversals on Trajectory A of their coupled in-plane mode (motors held, link-side mass "
                       "matrix) is the real J2 residual's line after those reversals (validation.cloos_inplane)")}
    if cal.effects.inplane_kgm2 is not None:
        out["inplane_wrist"] = _wrist_dict(cal)
    return out


def _wrist_dict(cal: tv.Calibration) -> dict:
    f = cal.fit.get("inplane", {})
    r = lambda a: np.round(np.asarray(a, dtype=float), 5).tolist()
    w = cal.fit.get("wrist5_loop")
    return {"g_kgm2": r(cal.effects.inplane_kgm2), "mode_axis": MODE_AXIS + 1,
            **({"wrist5_loop": {"bandwidth_hz": w["bandwidth_hz"], "grid_hz": list(w["grid_hz"]), "share": r(w["share"]),
                                "share_real": round(float(w["share_real"]), 5)}} if w else {}),
            **({"slope_real": round(float(f["slope_real"]), 5), "ratio_real_after_reversals": r(f["ratio_real"]),
                "cos_q4": r(f["cos_q4"]), "slope_g0": round(float(f["slope_g0"]), 5),
                "slope_trial": round(float(f["slope_trial"]), 5), "g_trial_kgm2": f["g_trial_kgm2"],
                "slope_at_g": round(float(f["slope_at_g"]), 5)} if f else {}),
            "source": ("torque -g cos(q4) dd(d2) on the wrist's pitch axis, d2 = axis 2's spring deflection (the in-plane "
                       "mode); g set so that the twin's Trajectory A residual has the real one's J5/J2 least-squares "
                       f"ratio ({BURST_BAND_HZ[0]}-{BURST_BAND_HZ[1]} Hz, {BURST_WINDOW_S} s after each of axis 2's "
                       "reversals) over cos q4 (two replays, validation.cloos_inplane); wrist5_loop: axis 5's "
                       "inverter loop bandwidth where the twin's J5 encoder/torque transfer at 5-10 Hz on A equals "
                       "the real one")}


# ----------------------------------------------------------------------------- the in-plane springs
#: The main axes whose springs form the in-plane chain (axes 2 and 3, 0-based).
SPRING_AXES = (1, 2)


def coupled_mode_hz(twin: tv.CloosTwin, q_rad, stiffness_Nm_rad, axes=SPRING_AXES) -> float:
    """The lowest mode [Hz] of the springs of ``axes`` in series along the arm, motors held: the generalised
    eigenvalue of diag(k) against the link-side mass-matrix block of those axes (motor coordinates, the drive
    inertias behind the springs left out) at the pose ``q_rad``."""
    from robident_twin.model.dynamics import symmetric_from_upper

    ix = list(axes)
    M = symmetric_from_upper(twin.pin.crba(twin.pmodel, twin.pdata, np.asarray(q_rad, dtype=float)))
    return lowest_mode_hz(np.asarray(stiffness_Nm_rad, dtype=float)[ix], (twin.C.T @ M @ twin.C)[np.ix_(ix, ix)])


def lowest_mode_hz(stiffness_Nm_rad, mass_kgm2) -> float:
    """The lowest natural frequency [Hz] of springs diag(k) (to ground) on the inertia matrix M."""
    import scipy.linalg

    w2 = scipy.linalg.eigh(np.diag(np.asarray(stiffness_Nm_rad, dtype=float)), np.asarray(mass_kgm2, dtype=float),
                           eigvals_only=True)
    return float(np.sqrt(w2[0]) / (2 * np.pi))


def calibrate_inplane_springs(cal: tv.Calibration, model, recA, real: tv.FitStatistics,
                              axes=SPRING_AXES) -> tv.Calibration:
    """Scale the springs of axes 2 and 3 together (their ratio kept) so that their coupled in-plane mode
    (:func:`coupled_mode_hz`), its median over the poses of axis 2's reversals on Trajectory A, sits at the
    line the real J2 residual rings at after those reversals (cloos_peraxis.reversal_line_hz). The springs
    are set per axis as if each rang alone (twin_vs_real.calibrate, cloos_peraxis); the link-side coupling
    M23 puts the chain's lowest mode below both. In run.py's chain after the per-axis modes, before the
    link-side share (which is then set on this mode's ringing)."""
    from robident_twin.validation.cloos_calibration import reversal_indices
    from robident_twin.validation.cloos_peraxis import reversal_line_hz

    reg, base = model
    d = recA.data
    r = d.tau_Nm - model_torque_Nm(reg, base, d, real.beta)
    f_real = reversal_line_hz(r[:, MODE_AXIS], d.dq_rad_s[:, MODE_AXIS], d.sample_rate_hz)
    tw = tv.CloosTwin(cal, model)
    k = np.array(cal.effects.stiffness_Nm_rad, dtype=float)
    poses = d.q_rad[reversal_indices(d.dq_rad_s[:, MODE_AXIS])]
    f_twin = np.array([coupled_mode_hz(tw, q, k, axes) for q in poses])
    scale = (f_real / np.median(f_twin)) ** 2
    k[list(axes)] *= scale
    fit = dict(cal.fit, inplane_springs={"line_real_hz": f_real, "coupled_mode_hz": f_twin, "scale": scale})
    return dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, stiffness_Nm_rad=k), fit=fit)


def springs_summary_line(cal: tv.Calibration) -> str:
    f = cal.fit["inplane_springs"]
    return (f"in-plane springs (axes 2, 3): coupled mode at axis 2's reversals on A " +
            " ".join(f"{x:.2f}" for x in f["coupled_mode_hz"]) + f" Hz (median {np.median(f['coupled_mode_hz']):.2f}), "
            f"real line after them {f['line_real_hz']:.2f} Hz: stiffness x {f['scale']:.3f} -> "
            + " ".join(f"{x:.0f}" for x in cal.effects.stiffness_Nm_rad[list(SPRING_AXES)]) + " Nm/rad")
