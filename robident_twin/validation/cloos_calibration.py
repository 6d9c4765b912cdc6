"""The CLOOS twin's calibration through its own closed loop, and its YAML round trip (issue 15).

:func:`robident_twin.validation.twin_vs_real.calibrate` fits the effects to the real residual as
if the measured torque were the disturbance itself. The twin's drive loop passes a load
disturbance to the measured torque with a gain and phase of its own, and adds loop variance to
the calibrated current noise. :func:`correct_through_loop` replays the real excitation a few
times with the repetition noise off, fits the same transmission-error columns to the twin's
residual, divides the loop's complex gain out of each line and flank (output-error calibration,
one pass), then measures the loop's own repetition variance (encoder quantisation through the
velocity loop), subtracts it from the real variance profile and splits the rest into the noise's
constant, speed and torque parts as :func:`calibrate` does. :func:`load_calibration` reads the
committed ``sim_assets/cloos_qrc350/twin_calibrated.yaml`` back into a :class:`Calibration`.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from hal.sim.effects import TransmissionErrorParams
from robident_twin.datasets import cloos_control, cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import model_torque_Nm
from robident_twin.errors import ConfigError
from robident_twin.validation import cloos_j4mass, presliding, repetition_noise as rn, twin_vs_real as tv


def correct_through_loop(cal: tv.Calibration, model, recA, real: tv.FitStatistics, n_repetitions: int = 4,
                         seed: int = 100) -> tv.Calibration:
    """One closed-loop pass (see the module docstring); returns the corrected calibration with the
    open-loop values kept in ``fit``."""
    reg, base = model
    fx = cal.effects
    # the lines' loop gain is measured without the random repetition noise (its average over a few
    # repetitions would enter the fitted lines, and the division by a small gain amplifies it),
    # the fit weighted by the real variance profile as the real fit
    twin = tv.CloosTwin(dataclasses.replace(cal, effects=rn.without_noise(fx)), model)
    run = twin.replay(recA.data, n_repetitions, seed)
    d = dataclasses.replace(run.data, tau_var_sample_Nm2=recA.data.tau_var_sample_Nm2)
    st = tv.fit_statistics("twin", reg, base, d, recA.tau_sample_variance_Nm2, {})
    r = d.tau_Nm - model_torque_Nm(reg, base, d, st.beta)
    Cinv = np.linalg.inv(twin.C)
    qm, dqm, ddqm = (x @ Cinv.T for x in (d.q_rad, d.dq_rad_s, d.ddq_rad_s2))
    J = np.array([twin.link_side_inertia(x) for x in d.q_rad]) + twin.ia
    te = fx.te
    z_in = te.amplitude_rad * np.exp(1j * te.phase_rad)  # (axis, line, flank)
    z_new = z_in.copy()
    for j in range(6):
        T = np.hstack([tv._te_basis(k, qm[:, j], dqm[:, j], ddqm[:, j], J[:, j]) for k in te.cycles_per_rad[j]])
        c, *_ = np.linalg.lstsq(T, r[:, j] - r[:, j].mean(), rcond=None)
        c = c.reshape(-1, 2, 2)
        z_out = c[..., 0] + 1j * c[..., 1]
        ok = np.abs(z_out) > 1e-3 * np.abs(z_in[j]) + 1e-15
        z_new[j] = np.where(ok, z_in[j] * z_in[j] / np.where(ok, z_out, 1.0), z_in[j])
    te_new = dataclasses.replace(te, amplitude_rad=np.abs(z_new), phase_rad=np.angle(z_new))
    # the loop's own repetition variance (encoder quantisation through the velocity loop): a run
    # with the repetition noise off; the rest of the real variance profile is split again into
    # the white noise's constant, speed and torque parts (NNLS as in calibrate; the tail is kept)
    quiet = dataclasses.replace(cal, effects=rn.without_noise(dataclasses.replace(fx, te=te_new)))
    loop_var = tv.CloosTwin(quiet, model).replay(recA.data, n_repetitions, seed + 1).sample_variance_Nm2
    var = np.clip(recA.tau_sample_variance_Nm2 - loop_var, 0.0, None)
    dA = recA.data
    noise, speed, load = rn.fit_noise_profile(var, dA.dq_rad_s @ Cinv.T, dA.tau_Nm)
    fit = dict(cal.fit, te_amplitude_rad=te.amplitude_rad, te_phase_rad=te.phase_rad,
               current_noise_Nm=fx.current_noise_Nm, speed_noise_Nms_rad=fx.speed_noise_Nms_rad,
               load_noise=fx.load_noise, noise_tail_spread=fx.noise_tail_spread)
    fx_new = dataclasses.replace(fx, te=te_new, current_noise_Nm=noise, speed_noise_Nms_rad=speed, load_noise=load)
    return dataclasses.replace(cal, effects=fx_new, fit=fit)


#: Band of the real residual's structural ringing (J2/J3/J5 near 7 Hz) the link-side share of the
#: gear friction is calibrated on.
RINGING_BAND_HZ = (5.0, 10.0)
#: The same for the wrist's own mode (J6 near 8 Hz, tv.WRIST_ELASTIC_AXES).
WRIST_RINGING_BAND_HZ = (5.0, 12.0)


def band_rms(residual_Nm: np.ndarray, sample_rate_hz: float, band_hz=RINGING_BAND_HZ) -> np.ndarray:
    """Per-joint RMS of a residual in a frequency band (4th-order zero-phase Butterworth band-pass)."""
    from scipy.signal import butter, sosfiltfilt

    sos = butter(4, band_hz, "bandpass", fs=sample_rate_hz, output="sos")
    r = np.asarray(residual_Nm, dtype=float)
    return np.sqrt(np.mean(sosfiltfilt(sos, r - r.mean(axis=0), axis=0) ** 2, axis=0))


def ringing_band_rms(residual_Nm: np.ndarray, sample_rate_hz: float) -> np.ndarray:
    """Per-joint RMS in the ringing band of each axis: RINGING_BAND_HZ, WRIST_RINGING_BAND_HZ on the
    wrist's elastic axes."""
    b = band_rms(residual_Nm, sample_rate_hz)
    w = list(tv.WRIST_ELASTIC_AXES)
    b[w] = band_rms(residual_Nm, sample_rate_hz, WRIST_RINGING_BAND_HZ)[w]
    return b


def reversal_indices(dq) -> np.ndarray:
    """Sample indices i where a velocity (one axis) changes sign between i and i + 1."""
    return np.flatnonzero(np.diff(np.sign(np.asarray(dq, dtype=float))) != 0)


def reversal_locked_envelope(residual_Nm: np.ndarray, dqm_rad_s: np.ndarray, sample_rate_hz: float,
                             band_hz=WRIST_RINGING_BAND_HZ, window_s: float = 0.4) -> np.ndarray:
    """Where a residual's ringing starts: entry [j, k] is the mean band-passed envelope (Hilbert) of
    joint j's residual over ``window_s`` after the reversals of motor axis k, divided by its mean over
    the record (1 = not locked to those reversals; > 1 = bursts start there)."""
    from scipy.signal import butter, hilbert, sosfiltfilt

    r = np.asarray(residual_Nm, dtype=float)
    sos = butter(4, band_hz, "bandpass", fs=sample_rate_hz, output="sos")
    env = np.abs(hilbert(sosfiltfilt(sos, r - r.mean(axis=0), axis=0), axis=0))
    w, n = int(round(window_s * sample_rate_hz)), len(r)
    out = np.ones((r.shape[1], dqm_rad_s.shape[1]))
    for k in range(dqm_rad_s.shape[1]):
        idx = reversal_indices(dqm_rad_s[:, k])
        idx = idx[idx + w < n]
        if idx.size:
            out[:, k] = np.mean([env[i:i + w].mean(axis=0) for i in idx], axis=0) / env.mean(axis=0)
    return out


def twin_run_residual(cal: tv.Calibration, model, recA, n_repetitions: int, seed: int, beta=None):
    """The twin's replay of A and its residual against its own WLS fit on that replay (``beta``: against
    these parameters instead, e.g. the real model's)."""
    reg, base = model
    run = tv.CloosTwin(cal, model).replay(recA.data, n_repetitions, seed)
    if beta is None:
        beta = tv.fit_statistics("twin", reg, base, run.data, run.sample_variance_Nm2, {}).beta
    return run.data.tau_Nm - model_torque_Nm(reg, base, run.data, beta), run


def _twin_residual(cal: tv.Calibration, model, recA, n_repetitions: int, seed: int) -> np.ndarray:
    return twin_run_residual(cal, model, recA, n_repetitions, seed)[0]


def calibrate_link_friction(cal: tv.Calibration, model, recA, real: tv.FitStatistics, n_repetitions: int = 2,
                            seed: int = 200) -> tv.Calibration:
    """The share of each elastic axis's gear friction that acts on the link side of its spring.

    The real residual rings near 7 Hz after the reversals of axis 2 (band-passed 5-10 Hz it is
    54-77 % of the J2, J3, J5 residual), J6 near 8 Hz after axis 6's reversals (band 5-12 Hz,
    :func:`ringing_band_rms`): a friction step on the link side of the elasticity
    swings the link against the spring while the drive holds the motor; a step on the motor side
    is taken by the drive's current and does not ring. Per elastic axis, the twin replays
    Trajectory A with the share 0 and 1 and the share is set so that its residual's band RMS
    equals the real one, assuming the ringing energy grows with the share squared:
    s = sqrt((real^2 - b0^2) / (b1^2 - b0^2)), clipped to [0, 1]. Identification data only."""
    reg, base = model
    d = recA.data
    r_real = d.tau_Nm - model_torque_Nm(reg, base, d, real.beta)
    target = ringing_band_rms(r_real, d.sample_rate_hz)
    el = np.asarray(cal.effects.stiffness_Nm_rad) > 0
    b = []
    for s in (0.0, 1.0):
        fx = dataclasses.replace(cal.effects, link_friction_share=np.where(el, s, 0.0))
        b.append(ringing_band_rms(_twin_residual(dataclasses.replace(cal, effects=fx), model, recA, n_repetitions,
                                                 seed), d.sample_rate_hz))
    b0, b1 = b
    share = np.sqrt(np.clip((target ** 2 - b0 ** 2) / np.maximum(b1 ** 2 - b0 ** 2, 1e-12), 0.0, 1.0))
    share = np.where(el & (b1 > b0), share, 0.0)
    fit = dict(cal.fit, ringing_band_rms_real_Nm=target, ringing_band_rms_share0_Nm=b0,
               ringing_band_rms_share1_Nm=b1)
    return dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, link_friction_share=share), fit=fit)


#: Damping ratios of the main axes' mode (tv.ELASTIC_AXES) tried by :func:`fit_main_mode_damping`;
#: the first is the committed estimate.
MAIN_MODE_DAMPING_GRID = (0.1, 0.3, 0.6)
#: Identification data besides Trajectory A whose 5-10 Hz content carries the mode's response to the
#: paths' acceleration ramps (not the process VALIDATION files).
PROCESS_IDENTIFICATION_FILES = ("process1", "process2")


@dataclasses.dataclass(frozen=True)
class MainModeFit:
    """Band RMS (RINGING_BAND_HZ) of the main axes' residual, real and twin, per damping ratio of
    their mode and identification file; the link-side share per damping from A alone (as
    :func:`calibrate_link_friction`), the band it predicts on every file, and the least-squares
    misfit sum_j log(twin / real)^2 over the main axes per file."""

    damping_ratios: np.ndarray  # (k,)
    files: tuple  # ("A", process identification files...)
    real_Nm: np.ndarray  # (files, axes)
    share0_Nm: np.ndarray  # (k, files, axes): link-side share 0
    share1_Nm: np.ndarray  # (k, files, axes): share 1
    share: np.ndarray  # (k, axes)
    predicted_Nm: np.ndarray  # (k, files, axes)
    misfit: np.ndarray  # (k, files)
    best: int  # least total misfit
    adopted: bool  # best is no compromise: A's misfit not above the first damping's


def choose_main_mode_damping(damping_ratios, files, real_Nm, share0_Nm, share1_Nm, tol: float = 1e-9) -> MainModeFit:
    """The least-squares step of :func:`fit_main_mode_damping` on the measured band RMS (file 0 = A).

    Per damping the share is set on A (s = sqrt((real^2 - b0^2) / (b1^2 - b0^2)) clipped to [0, 1],
    ringing energy growing with the share squared), the band it predicts on every file is
    sqrt(b0^2 + s^2 (b1^2 - b0^2)), and the damping with the least summed misfit over the files and
    axes wins. It is adopted only if it does not trade A for the process files: A's misfit at it is
    not above A's misfit at the first (committed) damping."""
    z = np.asarray(damping_ratios, dtype=float)
    real, b0, b1 = (np.asarray(x, dtype=float) for x in (real_Nm, share0_Nm, share1_Nm))
    d = np.maximum(b1[:, 0] ** 2 - b0[:, 0] ** 2, 1e-12)
    share = np.where(b1[:, 0] > b0[:, 0], np.sqrt(np.clip((real[0] ** 2 - b0[:, 0] ** 2) / d, 0.0, 1.0)), 0.0)
    pred = np.sqrt(np.maximum(b0 ** 2 + share[:, None, :] ** 2 * (b1 ** 2 - b0 ** 2), 1e-24))
    misfit = np.sum(np.log(pred / real[None]) ** 2, axis=2)
    best = int(np.argmin(misfit.sum(axis=1)))
    return MainModeFit(z, tuple(files), real, b0, b1, share, pred, misfit, best,
                       bool(misfit[best, 0] <= misfit[0, 0] + tol))


def damping_band_scan(cal: tv.Calibration, model, recs: dict, real: tv.FitStatistics, axes,
                      damping_ratios=MAIN_MODE_DAMPING_GRID, n_repetitions: int = 2, seed: int = 200):
    """The replays the damping fits stand on (:func:`fit_main_mode_damping`, ``cloos_peraxis.fit_axis_damping``):
    per damping ratio of ``axes`` and link-side share 0 and 1 of their gear friction (on the elastic ones), the
    twin replays A (``n_repetitions``) and each other file of ``recs`` (by name) once; its residual is taken
    against its own WLS fit on that A replay, the real one against the real fit. Returns the files (A first),
    the real 5-10 Hz RMS (files x 6) and the twin's (damping x share x files x 6). Never the validation files."""
    reg, base = model
    files = ("A",) + tuple(n for n in recs if n != "A")
    data = [recs[n].data for n in files]
    real_b = np.array([band_rms(d.tau_Nm - model_torque_Nm(reg, base, d, real.beta),
                                d.sample_rate_hz) for d in data])
    el = np.asarray(cal.effects.stiffness_Nm_rad) > 0
    sel = np.zeros(6, dtype=bool)
    sel[list(axes)] = True
    bands = np.zeros((len(damping_ratios), 2, len(files), 6))
    for i, z in enumerate(damping_ratios):
        for k, s in enumerate((0.0, 1.0)):
            fx = cal.effects
            fx = dataclasses.replace(fx, damping_ratio=np.where(sel, z, np.broadcast_to(fx.damping_ratio, 6)),
                                     link_friction_share=np.where(sel & el, s, fx.link_friction_share))
            twin = tv.CloosTwin(dataclasses.replace(cal, effects=fx), model)
            run = twin.replay(data[0], n_repetitions, seed)
            beta = tv.fit_statistics("twin", reg, base, run.data, run.sample_variance_Nm2, {}).beta
            for f, d in enumerate(data):
                tau = run.data.tau_Nm if f == 0 else twin.replay(d, 1, seed + f, averaged=False).data.tau_Nm
                bands[i, k, f] = band_rms(tau - model_torque_Nm(reg, base, d, beta), d.sample_rate_hz)
    return files, real_b, bands


def fit_main_mode_damping(cal: tv.Calibration, model, recs: dict, real: tv.FitStatistics,
                          damping_ratios=MAIN_MODE_DAMPING_GRID, n_repetitions: int = 2, seed: int = 200) -> MainModeFit:
    """The main axes' mode damping on the identification data: Trajectory A (friction steps at the
    reversals) and the process identification files (acceleration ramps), ``recs`` by name.

    The damping of axes 1-3 together (:func:`damping_band_scan`); the 5-10 Hz RMS of twin and real goes
    to :func:`choose_main_mode_damping`."""
    files, real_b, bands = damping_band_scan(cal, model, recs, real, tv.ELASTIC_AXES, damping_ratios, n_repetitions, seed)
    ax = list(tv.ELASTIC_AXES)
    return choose_main_mode_damping(damping_ratios, files, real_b[:, ax], bands[:, 0][..., ax], bands[:, 1][..., ax])


def with_main_mode_fit(cal: tv.Calibration, fit: MainModeFit) -> tv.Calibration:
    """The calibration with the fit recorded (``cal.fit``) and, if adopted, the main axes' damping
    and link-side shares set to the fit's best damping."""
    fx = cal.effects
    out = dataclasses.replace(cal, fit=dict(cal.fit, main_mode_fit=fit))
    if not fit.adopted or fit.best == 0:
        return out
    ax = list(tv.ELASTIC_AXES)
    z = np.array(np.broadcast_to(fx.damping_ratio, 6), dtype=float)
    z[ax] = fit.damping_ratios[fit.best]
    share = np.array(fx.link_friction_share, dtype=float)
    share[ax] = fit.share[fit.best]
    return dataclasses.replace(out, effects=dataclasses.replace(fx, damping_ratio=z, link_friction_share=share))


def _main_mode_fit_dict(fit: MainModeFit) -> dict:
    r = lambda a, n=3: np.round(np.asarray(a, dtype=float), n).tolist()
    return {
        "source": "calibrated on Trajectory A and the process identification files (fit_main_mode_damping)",
        "method": ("per damping ratio of axes 1-3: the twin replays A and the process identification files "
                   "with the link-side share 0 and 1; the share is set on A's 5-10 Hz residual RMS, the "
                   "damping with the least sum of log(twin / real)^2 of the 5-10 Hz RMS over the files and "
                   "axes 1-3 wins, adopted only if A's misfit is not above the committed damping's"),
        "files": list(fit.files), "damping_ratios": r(fit.damping_ratios), "real_Nm": r(fit.real_Nm),
        "share0_Nm": r(fit.share0_Nm), "share1_Nm": r(fit.share1_Nm), "share_from_A": r(fit.share),
        "predicted_Nm": r(fit.predicted_Nm), "misfit": r(fit.misfit, 4),
        "best_damping_ratio": float(fit.damping_ratios[fit.best]), "adopted": fit.adopted}


#: The wrist axes whose inverter velocity loop is calibrated on the real tracking error (axes 4, 5).
WRIST_LOOP_AXES = (3, 4)
#: Candidate bandwidths [Hz] of their inverter velocity PI (implicit, as on axes 1-3 and 6).
WRIST_LOOP_BANDWIDTHS_HZ = (15.0, 20.0, 30.0, 40.0, 50.0, 70.0, 100.0, 200.0, 300.0)
#: The real tracking error the wrist loop is calibrated on: the controller's own error without
#: feed-forward (deg_e) of process 1 (ICMA 2020 Table VII; a 48.5 s run of its own, no torque of it is
#: a validation figure), replayed on its process path.
WRIST_LOOP_PROCESS = 1


def pick_bandwidth(bandwidths_hz, twin_rms, real_rms: float, plateau: float = 0.05) -> float:
    """The bandwidth whose tracking RMS is nearest the real one (|log ratio|); where the error hardly
    depends on the bandwidth (within ``plateau``, relative, of the best), the lowest such one: a
    stiffer loop than the data ask for is not chosen."""
    b = np.asarray(bandwidths_hz, dtype=float)
    d = np.abs(np.log(np.asarray(twin_rms, dtype=float) / real_rms))
    ok = np.flatnonzero(d <= d.min() + np.log1p(plateau))
    return float(b[ok[np.argmin(b[ok])]])


def with_inverter_bandwidth(cal: tv.Calibration, axes, bandwidth_hz: float) -> tv.Calibration:
    """``cal`` with ``axes``' velocity PI closed in the inverter at ``bandwidth_hz`` (the others unchanged)."""
    inv = np.array(cal.effects.inverter_velocity_bandwidth_hz, dtype=float)
    inv[list(axes)] = bandwidth_hz
    return dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, inverter_velocity_bandwidth_hz=inv))


def wrist_tracking_scan(cal: tv.Calibration, model, path, bandwidths_hz=WRIST_LOOP_BANDWIDTHS_HZ,
                        axes=WRIST_LOOP_AXES) -> np.ndarray:
    """Tracking RMS [rad] (bandwidth, axis) of the twin replaying a process path (desired q, dq, ddq)
    with the inverter velocity loop at each bandwidth on ``axes`` (the loop is deterministic: the
    repetition noise enters only the measured torque)."""
    out = []
    for bw in bandwidths_hz:
        out.append(tv.CloosTwin(with_inverter_bandwidth(cal, axes, bw), model).replay(path, 1, 0, averaged=False)
                   .tracking_rms_rad)
    return np.array(out)


def calibrate_wrist_loop(cal: tv.Calibration, model, path, real_rms_rad, bandwidths_hz=WRIST_LOOP_BANDWIDTHS_HZ,
                         axes=WRIST_LOOP_AXES) -> tv.Calibration:
    """The inverter velocity-loop bandwidth of each wrist axis in ``axes`` from the real tracking error
    (``real_rms_rad`` per joint, on ``path``): a scan (:func:`wrist_tracking_scan`), per axis
    :func:`pick_bandwidth`; the scan is kept in ``fit``."""
    scan = wrist_tracking_scan(cal, model, path, bandwidths_hz, axes)
    inv = np.array(cal.effects.inverter_velocity_bandwidth_hz, dtype=float)
    for j in axes:
        inv[j] = pick_bandwidth(bandwidths_hz, scan[:, j], float(real_rms_rad[j]))
    fit = dict(cal.fit, wrist_loop_bandwidths_hz=np.asarray(bandwidths_hz, dtype=float), wrist_loop_rms_rad=scan,
               wrist_loop_real_rms_rad=np.asarray(real_rms_rad, dtype=float))
    return dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, inverter_velocity_bandwidth_hz=inv), fit=fit)


def calibrate_wrist_loop_on_real(cal: tv.Calibration, model, root=None) -> tv.Calibration:
    """:func:`calibrate_wrist_loop` on the data set's own tracking error: the process-``WRIST_LOOP_PROCESS``
    validation path and the RMS per joint of that run's deg_e without feed-forward (dataset ``root``)."""
    path = ds.load(f"process{WRIST_LOOP_PROCESS}_validation", root).data
    _, e_deg = cloos_control.load_control_error(WRIST_LOOP_PROCESS, "none", root)
    return calibrate_wrist_loop(cal, model, path, np.sqrt(np.mean(np.radians(e_deg) ** 2, axis=0)))


def calibration_dict(cal: tv.Calibration) -> dict:
    """The calibrated magnitudes as plain YAML-able values (with their source)."""
    fx = cal.effects
    r = lambda a, n=4: np.round(np.asarray(a, dtype=float), n).tolist()
    out = {
        "source": ("calibrated from the real ICMA 2020 CLOOS QRC 350 data (Volkmann et al., "
                   "doi 10.1109/ICMA49215.2020.9233709), Trajectory A identification file, by "
                   "robident_twin.validation.twin_vs_real.calibrate; regenerate with "
                   "experiments/twin_vs_real_cloos/run.py --write-yaml"),
        "beta_model": "35 base parameters of the authors' model (build_model(symmetric=True)), WLS on Trajectory A",
        "beta": r(cal.beta, 6),
        "ripple": {"cycles_per_rad": r(fx.ripple_cyc_rad, 2), "amplitude_Nm": r(fx.ripple_Nm),
                   "phase_rad": r(fx.ripple_phase_rad)},
        "friction_not_in_regressor": {"stribeck_Nm": r(fx.stribeck_Nm), "stribeck_velocity_rad_s": fx.stribeck_vel_rad_s,
                                      "quadratic_viscous_Nms2_rad2": r(fx.visc2_Nms2_rad2),
                                      "load_dependent_coulomb": r(fx.load_coulomb, 5)},
        **({"friction_constraint": "dissipative: with the regressor's Coulomb and viscous terms, f(v) v >= 0 for "
                                   "every load torque on the speeds of Trajectory A (validation.friction_fit)"
                                   + _constrained_axes(cal.fit["dissipative_friction"])}
           if cal.fit.get("dissipative_friction") else {}),
        "elasticity": {"axes": [j + 1 for j in tv.ELASTIC_AXES + tv.WRIST_ELASTIC_AXES], "mode_hz": round(cal.mode_hz, 3),
                       "wrist_mode_hz": round(cal.wrist_mode_hz, 3),
                       "stiffness_Nm_rad": r(fx.stiffness_Nm_rad, 0), "damping_ratio": _damping_yaml(fx.damping_ratio),
                       "source": ("stiffness (2 pi f)^2 x the link-side inertia at the start pose: axes 1-3 at mode_hz, "
                                  "the strongest 3-15 Hz line of the real Trajectory A residual (summed over the "
                                  "joints), axis 6 at wrist_mode_hz, that of J6's residual (a spring in motor "
                                  "coordinates, before the differential gear); damping_ratio is an estimate, not "
                                  "calibrated (0.03 made the process-1 replay diverge; the real residual's envelope "
                                  "decays at an apparent 0.02-0.07 on J2, 0.01-0.08 on J6)")},
        "link_side_friction": {
            "share": r(fx.link_friction_share, 3),
            "method": ("share of each elastic axis's regressor friction (Coulomb + viscous) acting on the link "
                       "side of its spring: the twin replays Trajectory A with share 0 and 1 and the share makes "
                       "its residual's 5-10 Hz RMS (axis 6: 5-12 Hz) equal to the real one (calibrate_link_friction)"),
            "ringing_band_rms_real_Nm": r(cal.fit.get("ringing_band_rms_real_Nm", np.zeros(6)), 3),
            "ringing_band_rms_share0_Nm": r(cal.fit.get("ringing_band_rms_share0_Nm", np.zeros(6)), 3),
            "ringing_band_rms_share1_Nm": r(cal.fit.get("ringing_band_rms_share1_Nm", np.zeros(6)), 3),
            **({"main_axes_extra_friction": True} if fx.main_link_extra_friction else {}),
            **({"axis1_refinement": _share_refinement_dict(cal.fit["axis1_share_refinement"])}
               if "axis1_share_refinement" in cal.fit else {})},
        "noise": {"current_noise_Nm": r(fx.current_noise_Nm), "speed_noise_Nms_rad": r(fx.speed_noise_Nms_rad),
                  "load_noise": r(fx.load_noise, 5), "tail_spread": r(fx.noise_tail_spread),
                  "torque_constant_drift": r(fx.torque_constant_drift, 5), "viscous_drift": r(fx.viscous_drift),
                  "current_noise_fit_Nm": r(cal.fit.get("current_noise_Nm", fx.current_noise_Nm)),
                  "speed_noise_fit_Nms_rad": r(cal.fit.get("speed_noise_Nms_rad", fx.speed_noise_Nms_rad)),
                  "load_noise_fit": r(cal.fit.get("load_noise", fx.load_noise), 5),
                  "tail_spread_fit": r(cal.fit.get("noise_tail_spread", fx.noise_tail_spread)),
                  "source": ("calibrated on the ICMA 2020 Trajectory A repetitions (the per-sample torque variance "
                             "over the 50 repetitions of the real file)"),
                  "method": ("white torque-measurement noise per sample and axis, std sqrt(a^2 + b^2 dqm^2 + c^2 tau^2) "
                             "(current_noise_Nm, speed_noise_Nms_rad, load_noise), heavy-tailed: unit noise "
                             "z exp(s g - s^2) with s = tail_spread (robident_twin.validation.repetition_noise). "
                             "fit: NNLS of the real variance profile on 1, dqm^2, tau^2, and s from the profile's "
                             "local scatter (excess kurtosis 3 (exp(4 s^2) - 1)); values: a, b, c again after the "
                             "twin's own loop variance (a replay with the noise off) is subtracted. No drift between "
                             "repetitions (torque_constant_drift, viscous_drift 0): a drift gives a smooth variance "
                             "profile, the real one scatters sample by sample")},
        "closed_loop (estimate, not calibrated)": {
            "position_bandwidth_hz": fx.position_bandwidth_hz, "velocity_bandwidth_hz": fx.velocity_bandwidth_hz,
            "velocity_filter_s": fx.velocity_filter_s, "actuation_delay_steps": fx.actuation_delay_steps,
            "encoder_resolution_rad": fx.encoder_resolution_rad, "torque_filter_s": fx.torque_filter_s,
            "inverter_velocity_bandwidth_hz": r(fx.inverter_velocity_bandwidth_hz, 1)},
        "explained_share_of_real_residual": r(cal.explained_share, 3),
    }
    if "main_mode_fit" in cal.fit:
        out["main_mode_damping_fit"] = _main_mode_fit_dict(cal.fit["main_mode_fit"])
    if "per_axis_modes" in cal.fit:  # run.py --per-axis-modes (session 9, opt-in)
        from robident_twin.validation import cloos_peraxis

        out["per_axis_modes"] = cloos_peraxis.per_axis_modes_dict(cal)
    if fx.inplane_kgm2 is not None or "inplane_springs" in cal.fit:  # run.py --inplane-wrist/-springs (session 10)
        from robident_twin.validation import cloos_inplane

        out.update(cloos_inplane.inplane_dict(cal))
    if "wrist_loop_rms_rad" in cal.fit:  # only a calibration that went through calibrate_wrist_loop
        out["wrist_loop"] = {
            "axes": [j + 1 for j in WRIST_LOOP_AXES],
            "inverter_velocity_bandwidth_hz": r(fx.inverter_velocity_bandwidth_hz[list(WRIST_LOOP_AXES)], 1),
            "source": (f"calibrated on the real tracking error: the controller's own position error without "
                       f"feed-forward (deg_e, Experimental_Validation/Controll_Error/Process_{WRIST_LOOP_PROCESS}/"
                       f"Without_Model.mat, ICMA 2020 Table VII), the twin replaying that process's desired path "
                       f"with the inverter velocity PI at each scanned bandwidth; per axis the tracking RMS "
                       f"nearest the real one, the lowest bandwidth where it no longer changes "
                       f"(cloos_calibration.calibrate_wrist_loop; replaces the sampled 8 Hz PLC loop, an estimate)"),
            "scan_bandwidth_hz": r(cal.fit["wrist_loop_bandwidths_hz"], 1),
            "scan_tracking_rms_mdeg": r(np.degrees(cal.fit["wrist_loop_rms_rad"][:, list(WRIST_LOOP_AXES)]) * 1e3, 2),
            "real_tracking_rms_mdeg": r(np.degrees(np.asarray(cal.fit["wrist_loop_real_rms_rad"])) * 1e3, 2)}
    if fx.presliding is not None:  # only a calibration that went through cloos_wrist4.calibrate_presliding
        out["presliding_friction"] = {
            "presliding_rad": r(fx.presliding.presliding_rad, 10), "weight": r(fx.presliding.weight, 4),
            "source": ("Dahl elements in place of the Coulomb step of the axes with a weight (validation.presliding): "
                       "the sliding element's distance and the other effect columns by least squares on the real "
                       "Trajectory A residual, the stiction element's weight fitted there, its distance from the "
                       "standing axis's hold on process 2 (deg_e and the identification file; cloos_wrist4)")}
    if "axis1_friction_source" in cal.fit:  # run.py --axis1-friction (cloos_axis1)
        out["axis1_friction"] = {
            "source": (f"axis 1's extra friction (and, if presliding, its Dahl element) fitted "
                       f"{cal.fit['axis1_friction_source']} (validation.cloos_axis1; identification data only)"),
            "stribeck_visc2_load_on_A_alone": r(cal.fit["axis1_friction_A"], 6)}
    if fx.hold_window_rad is not None:  # run.py --j4-hold (session 10, opt-in; validation.cloos_hold)
        out["integrator_hold"] = {"window_rad": r(fx.hold_window_rad, 9), "source": (
            "the velocity PI's integrator holds while the axis's reference stands and the encoder is within this window "
            "of it: the real standing J4's largest |deg_e| (process 2, no feed-forward), at least one encoder step")}
    if fx.j4_mass is not None:  # run.py --j4-mass (session 10, opt-in; validation.cloos_j4mass)
        out["axis4_body"] = {**{k: float(v) for k, v in dataclasses.asdict(fx.j4_mass).items()}, "source": (
            "a body on a spring-damper about axis 4 driven by the mount's motion: line, damping, inertia (bounded at a "
            "quarter of axis 4's) and mass moments by least squares on the real A J4 6-11 Hz residual")}
    if fx.te is not None:
        te = fx.te
        out["transmission_error"] = {
            "method": ("flank-wise (direction of motion) gear transmission error e(theta) per motor axis "
                       "(hal.sim.effects.TransmissionErrorParams), its inertial reaction J (e'' dq^2 + 2 e' ddq) "
                       "fitted by least squares to the real Trajectory A residual at the tooth frequencies of a "
                       "scan over 20-150 cycles/rad (fit_*); amplitude/phase are those values after one "
                       "closed-loop pass of the twin (the loop's complex gain at each line divided out)"),
            "cycles_per_rad": r(te.cycles_per_rad, 2), "amplitude_rad": r(te.amplitude_rad, 10),
            "phase_rad": r(te.phase_rad), "blend_velocity_rad_s": te.blend_velocity_rad_s,
            "fit_amplitude_rad": r(cal.fit.get("te_amplitude_rad", te.amplitude_rad), 10),
            "fit_phase_rad": r(cal.fit.get("te_phase_rad", te.phase_rad))}
    return out


def with_link_stribeck(cal: tv.Calibration) -> tv.Calibration:
    """The main axes' (tv.ELASTIC_AXES) calibrated extra friction (Stribeck, quadratic viscous,
    load-dependent Coulomb) acting with the same link-side share as their regressor friction, as on
    the wrist's elastic axis (opt-in, ``run.py --link-stribeck``; README "Reversal friction on the link
    side (session 9)"). The link-side friction law becomes Fc tanh(v / eps) + Stribeck s(v) exp(-|v| / v_s)
    ~ Fc (1 - exp(-|v| / v_s)) with the fit's Stribeck ~ -Fc: a reversal steps it within ~2 v_s / |ddq|
    (A's 2.35 rad/s^2: 0.04 s, a quarter of the 7 Hz mode's period; the process paths' 0.6 rad/s^2: 0.15 s,
    one period), where the regressor's sharp sign (eps 0.005 rad/s) steps it at every reversal alike.
    Apply before :func:`calibrate_link_friction`, which then sets the share with this law."""
    return dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, main_link_extra_friction=True))


def _share_refinement_dict(ref) -> dict:
    """run.py --axis1-share (cloos_axis1.refine_link_share): the replays that set that axis's share."""
    return {"axis": ref.axis + 1, "shares_tried": [round(float(x), 4) for x in ref.shares],
            "band_rms_Nm": [round(float(x), 3) for x in ref.band_Nm], "band_rms_real_Nm": round(float(ref.real_Nm), 3),
            "share": round(float(ref.share), 4),
            "method": ("this axis's share solved on Trajectory A's 5-10 Hz residual RMS with the other axes' shares "
                       "held (2-repetition replays, regula falsi; the all-axes share 0/1 scan above attributes axes 2 "
                       "and 3's ringing to axis 1's band; cloos_axis1.refine_link_share)")}


def write_calibration_yaml(cal: tv.Calibration, path) -> None:
    import yaml

    with open(path, "w") as fh:
        fh.write("# CLOOS QRC 350 twin: magnitudes calibrated on the real data (generated; do not edit by hand)\n")
        yaml.safe_dump({"calibrated_from_real_data": calibration_dict(cal)}, fh, sort_keys=False, width=110)


def load_calibration(path) -> tv.Calibration:
    """The committed calibration (``write_calibration_yaml``'s file) as a :class:`Calibration`."""
    import yaml
    from pathlib import Path

    path = Path(path)
    try:
        c = yaml.safe_load(path.read_text())["calibrated_from_real_data"]
        a = lambda *keys: np.asarray(_get(c, keys), dtype=float)
        te = None
        if "transmission_error" in c:
            te = TransmissionErrorParams(a("transmission_error", "cycles_per_rad"),
                                         a("transmission_error", "amplitude_rad"), a("transmission_error", "phase_rad"),
                                         float(c["transmission_error"]["blend_velocity_rad_s"]))
        fr, loop = c["friction_not_in_regressor"], c["closed_loop (estimate, not calibrated)"]
        fx = tv.TwinEffects(
            ripple_cyc_rad=a("ripple", "cycles_per_rad"), ripple_Nm=a("ripple", "amplitude_Nm"),
            ripple_phase_rad=a("ripple", "phase_rad"), stribeck_Nm=a("friction_not_in_regressor", "stribeck_Nm"),
            stribeck_vel_rad_s=float(fr["stribeck_velocity_rad_s"]),
            visc2_Nms2_rad2=a("friction_not_in_regressor", "quadratic_viscous_Nms2_rad2"),
            load_coulomb=a("friction_not_in_regressor", "load_dependent_coulomb"),
            position_bandwidth_hz=float(loop["position_bandwidth_hz"]),
            velocity_bandwidth_hz=float(loop["velocity_bandwidth_hz"]),
            velocity_filter_s=float(loop["velocity_filter_s"]), actuation_delay_steps=int(loop["actuation_delay_steps"]),
            encoder_resolution_rad=float(loop["encoder_resolution_rad"]), torque_filter_s=float(loop["torque_filter_s"]),
            current_noise_Nm=a("noise", "current_noise_Nm"), torque_constant_drift=a("noise", "torque_constant_drift"),
            viscous_drift=a("noise", "viscous_drift"), speed_noise_Nms_rad=a("noise", "speed_noise_Nms_rad"),
            load_noise=a("noise", "load_noise"), noise_tail_spread=a("noise", "tail_spread"), stiffness_Nm_rad=a("elasticity", "stiffness_Nm_rad"),
            damping_ratio=_damping_value(c["elasticity"]["damping_ratio"]), te=te,
            link_friction_share=a("link_side_friction", "share"),
            main_link_extra_friction=bool(c["link_side_friction"].get("main_axes_extra_friction", False)),
            inplane_kgm2=a("inplane_wrist", "g_kgm2") if "inplane_wrist" in c else None,
            inverter_velocity_bandwidth_hz=a("closed_loop (estimate, not calibrated)", "inverter_velocity_bandwidth_hz"),
            presliding=(presliding.PreslidingParams(a("presliding_friction", "presliding_rad"), a("presliding_friction", "weight"))
                        if "presliding_friction" in c else None),
            hold_window_rad=a("integrator_hold", "window_rad") if "integrator_hold" in c else None,
            j4_mass=(cloos_j4mass.SecondaryMassParams(**{k: float(v) for k, v in c["axis4_body"].items() if k != "source"})
                     if "axis4_body" in c else None))
        return tv.Calibration(a("beta"), fx, a("explained_share_of_real_residual"), float(c["elasticity"]["mode_hz"]),
                              float(c["elasticity"].get("wrist_mode_hz", "nan")))
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a CLOOS twin calibration ({type(exc).__name__}: {exc}); regenerate it with "
                          f"experiments/twin_vs_real_cloos/run.py --write-yaml") from exc


def _constrained_axes(dissipative) -> str:
    """'' when every axis's friction is constrained, else the axes (1-based) that are."""
    return "" if dissipative is True else "; axes " + " ".join(str(j + 1) for j in dissipative) + " only"


def _damping_yaml(z):
    """One number when every axis has the same damping ratio (the YAML as before), else per axis."""
    z = np.asarray(z, dtype=float)
    return float(z.flat[0]) if np.all(z == z.flat[0]) else np.round(z, 4).tolist()


def _damping_value(v):
    return float(v) if np.ndim(v) == 0 else np.asarray(v, dtype=float).reshape(6)


def _get(c, keys):
    for k in keys:
        c = c[k]
    return c
