"""The main axes' own modes per axis, J1 and J3 (issue 15, item 4; session 9, opt-in).

:func:`robident_twin.validation.twin_vs_real.calibrate` tunes every main-axis spring to one
frequency, the strongest 3-15 Hz line of the real Trajectory A residual summed over the joints
(6.9 Hz, J2's line, which dominates the sum). J1's ringing is its own (it follows axis 1's
reversals and is incoherent with J2), and J3's link rings at a line of its own beside J2's mode.
This module reads, per axis, from the real identification residual:

- the axis's own line: :func:`twin_vs_real.strongest_line_hz` on that axis's column alone, and
  (a check) :func:`reversal_line_hz`, the strongest line of the windows that follow the axis's own
  reversals;
- the apparent damping ratio of its ringing, :func:`reversal_decay_damping`: the log-envelope's
  slope in the band around the line after each isolated reversal of the axis.

:func:`with_per_axis_modes` sets the spring of each axis in ``axes`` to its own line (the stiffness
scales with the frequency squared at the link inertia the calibration used) and, if asked, its
damping ratio to the median of the decay estimates. Applied in the calibration chain right after
:func:`twin_vs_real.calibrate` (and the wrist loop), before the link-side friction share, which is
calibrated on the spring it finds. Identification data only (Trajectory A).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from robident_twin.datasets.cloos_model import model_torque_Nm
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.cloos_calibration import reversal_indices

#: The main axes given their own mode (0-based): J1 and J3; J2 keeps the summed residual's line.
PER_AXIS_MODE_AXES = (0, 2)


def reversal_line_hz(residual: np.ndarray, dq: np.ndarray, sample_rate_hz: float, window_s: float = 1.0,
                     lo_hz: float = 3.0, hi_hz: float = 15.0, pad_s: float = 10.0) -> float:
    """The strongest line in [lo_hz, hi_hz] of the power spectra (zero-padded to ``pad_s``) of the
    ``window_s`` windows of one residual column after each reversal of ``dq``, summed (the record is
    periodic: a window past its end wraps)."""
    r = np.asarray(residual, dtype=float)
    n, N = round(window_s * sample_rate_hz), round(pad_s * sample_rate_hz)
    idx = reversal_indices(dq)
    if idx.size == 0:
        raise ValueError("reversal_line_hz: the velocity has no reversal")
    P = np.zeros(N // 2 + 1)
    for i in idx:
        seg = np.take(r, np.arange(i, i + n), mode="wrap")
        P += np.abs(np.fft.rfft(seg - seg.mean(), N)) ** 2
    f = np.fft.rfftfreq(N, 1.0 / sample_rate_hz)
    band = (f >= lo_hz) & (f <= hi_hz)
    return float(f[band][np.argmax(P[band])])


def reversal_decay_damping(residual: np.ndarray, dq: np.ndarray, sample_rate_hz: float, f_hz: float,
                           half_band_hz: float = 3.0, window_s: float = 0.6, peak_s: float = 0.2) -> np.ndarray:
    """Apparent damping ratios of one residual column's ringing at ``f_hz``, one per isolated reversal
    of ``dq`` (the next reversal at least ``peak_s + window_s`` later, inside the record): band-pass
    f_hz +- half_band_hz (4th-order zero-phase Butterworth), Hilbert envelope, its peak within
    ``peak_s`` after the reversal, and zeta = -slope / (2 pi f_hz) of log(envelope) over ``window_s``
    from that peak (a free decay e^(-zeta w t); on free decays it reads 0.002-0.005 high for zeta
    0.02-0.1, the band-pass's own transient); other ringing overlapping the window biases it."""
    from scipy.signal import butter, hilbert, sosfiltfilt

    r = np.asarray(residual, dtype=float)
    sos = butter(4, (f_hz - half_band_hz, f_hz + half_band_hz), "bandpass", fs=sample_rate_hz, output="sos")
    env = np.abs(hilbert(sosfiltfilt(sos, r - r.mean())))
    npk, nw = round(peak_s * sample_rate_hz), round(window_s * sample_rate_hz)
    idx = reversal_indices(dq)
    out = []
    for k, i in enumerate(idx):
        nxt = idx[k + 1] if k + 1 < len(idx) else len(r)
        if nxt - i < npk + nw or i + npk + nw > len(r):
            continue
        p = i + int(np.argmax(env[i:i + npk]))
        t = np.arange(nw) / sample_rate_hz
        slope = np.polyfit(t, np.log(np.maximum(env[p:p + nw], 1e-300)), 1)[0]
        out.append(-slope / (2 * np.pi * f_hz))
    return np.array(out)


@dataclasses.dataclass(frozen=True)
class PerAxisModes:
    """Per axis in ``axes``: its own line (whole column), the line after its own reversals (check),
    the apparent damping ratios after its isolated reversals and their median."""

    axes: tuple
    line_hz: np.ndarray
    reversal_line_hz: np.ndarray
    decay_damping: tuple  # one array per axis
    damping_median: np.ndarray


def per_axis_mode_evidence(residual: np.ndarray, dqm: np.ndarray, sample_rate_hz: float,
                           axes=PER_AXIS_MODE_AXES) -> PerAxisModes:
    """:class:`PerAxisModes` from a residual (samples x joints) and the motor velocities."""
    line = np.array([tv.strongest_line_hz(residual[:, [j]], sample_rate_hz) for j in axes])
    rline = np.array([reversal_line_hz(residual[:, j], dqm[:, j], sample_rate_hz) for j in axes])
    dec = tuple(reversal_decay_damping(residual[:, j], dqm[:, j], sample_rate_hz, f) for j, f in zip(axes, line))
    med = np.array([np.median(z) if z.size else np.nan for z in dec])
    return PerAxisModes(tuple(axes), line, rline, dec, med)


def real_residual_evidence(real: tv.FitStatistics, recA, model, axes=PER_AXIS_MODE_AXES) -> PerAxisModes:
    """:func:`per_axis_mode_evidence` on the real Trajectory A residual (the real WLS fit)."""
    reg, base = model
    d = recA.data
    r = d.tau_Nm - model_torque_Nm(reg, base, d, real.beta)
    dqm = d.dq_rad_s @ np.linalg.inv(np.asarray(reg.spec.coupling)).T
    return per_axis_mode_evidence(r, dqm, d.sample_rate_hz, axes)


def with_per_axis_modes(cal: tv.Calibration, ev: PerAxisModes, damping: bool = False) -> tv.Calibration:
    """The calibration with each spring of ``ev.axes`` at that axis's own line: stiffness x (f_own /
    cal.mode_hz)^2 (the same link inertia as :func:`twin_vs_real.calibrate`), and with ``damping`` its
    damping ratio the median decay estimate; the evidence is kept in ``cal.fit["per_axis_modes"]``."""
    fx = cal.effects
    k = np.array(fx.stiffness_Nm_rad, dtype=float)
    z = np.array(np.broadcast_to(fx.damping_ratio, 6), dtype=float)
    for i, j in enumerate(ev.axes):
        if k[j] <= 0:
            raise ValueError(f"with_per_axis_modes: axis {j + 1} has no spring to retune")
        k[j] *= (ev.line_hz[i] / cal.mode_hz) ** 2
        if damping:
            if not np.isfinite(ev.damping_median[i]) or ev.damping_median[i] <= 0:
                raise ValueError(f"with_per_axis_modes: axis {j + 1} has no positive decay estimate "
                                 f"({ev.damping_median[i]})")
            z[j] = ev.damping_median[i]
    zz = z if damping else fx.damping_ratio
    fit = dict(cal.fit, per_axis_modes=ev, per_axis_damping=bool(damping))
    return dataclasses.replace(cal, effects=dataclasses.replace(fx, stiffness_Nm_rad=k, damping_ratio=zz), fit=fit)


def summary_line(cal: tv.Calibration, ev: PerAxisModes) -> str:
    """One line for run.py: the lines, the decay estimates and the springs set."""
    fx = cal.effects
    per = "; ".join(f"J{j + 1} {f:.2f} Hz (after its own reversals {g:.2f}), decay damping "
                    f"{' '.join(f'{x:.3f}' for x in z)} (median {m:.3f})"
                    for j, f, g, z, m in zip(ev.axes, ev.line_hz, ev.reversal_line_hz, ev.decay_damping, ev.damping_median))
    return (f"per-axis modes (summed line {cal.mode_hz:.2f} Hz): {per} -> stiffness J1-J3 "
            f"{' '.join(f'{k:.0f}' for k in fx.stiffness_Nm_rad[:3])} Nm/rad, damping "
            f"{' '.join(f'{z:.3f}' for z in np.broadcast_to(fx.damping_ratio, 6)[:3])}")


#: Damping ratios tried per axis by :func:`fit_axis_damping` (0.1: the committed estimate).
AXIS_DAMPING_GRID = (0.1, 0.3, 0.6)


def fit_axis_damping(cal: tv.Calibration, model, recs: dict, real: tv.FitStatistics, axes=PER_AXIS_MODE_AXES,
                     damping_ratios=AXIS_DAMPING_GRID, n_repetitions: int = 2, seed: int = 200) -> dict:
    """Each axis's own damping on the identification data (A and the process identification files,
    ``recs`` by name): the replays of :func:`cloos_calibration.fit_main_mode_damping`
    (:func:`cloos_calibration.damping_band_scan`), but the damping changes on ``axes`` only (J2 keeps
    its own) and the least-squares choice with its adoption rule (:func:`cloos_calibration.choose_main_mode_damping`:
    A's misfit must not grow) is made per axis on that axis's column. The axes are damped together in each replay (their coupling is taken as
    small). Returns axis -> MainModeFit."""
    from robident_twin.validation import cloos_calibration as cc

    files, real_b, bands = cc.damping_band_scan(cal, model, recs, real, axes, damping_ratios, n_repetitions, seed)
    return {j: cc.choose_main_mode_damping(damping_ratios, files, real_b[:, [j]], bands[:, 0][..., [j]],
                                           bands[:, 1][..., [j]]) for j in axes}


def with_axis_damping_fit(cal: tv.Calibration, fits: dict) -> tv.Calibration:
    """The calibration with each adopted axis damping of :func:`fit_axis_damping` set (and its link-side
    share from A at that damping); every fit is kept in ``cal.fit["axis_damping_fit"]``."""
    fx = cal.effects
    z = np.array(np.broadcast_to(fx.damping_ratio, 6), dtype=float)
    share = np.array(fx.link_friction_share, dtype=float)
    for j, fit in fits.items():
        if fit.adopted:
            z[j] = fit.damping_ratios[fit.best]
            share[j] = fit.share[fit.best][0]
    return dataclasses.replace(cal, effects=dataclasses.replace(fx, damping_ratio=z, link_friction_share=share),
                               fit=dict(cal.fit, axis_damping_fit=fits))


def per_axis_modes_dict(cal: tv.Calibration) -> dict:
    """The YAML record of :func:`with_per_axis_modes` (and of :func:`with_axis_damping_fit`), for
    ``cloos_calibration.calibration_dict``."""
    ev = cal.fit["per_axis_modes"]
    r = lambda a, n=3: np.round(np.asarray(a, dtype=float), n).tolist()
    out = {"axes": [j + 1 for j in ev.axes], "line_hz": r(ev.line_hz), "reversal_line_hz": r(ev.reversal_line_hz),
           "decay_damping": [r(z) for z in ev.decay_damping], "decay_damping_median": r(ev.damping_median),
           "damping": ("decay median" if cal.fit.get("per_axis_damping") else
                       "fitted on A and the process identification files" if "axis_damping_fit" in cal.fit else
                       "unchanged"),
           "source": ("session 9, run.py --per-axis-modes (cloos_peraxis): each listed axis's spring at the strongest "
                      "3-15 Hz line of that axis's own real Trajectory A residual (stiffness x (line / mode_hz)^2, the "
                      "same link inertia); reversal_line_hz: the line of the 1 s windows after the axis's own "
                      "reversals; decay_damping: the apparent damping from the envelope decay after each isolated "
                      "reversal of the axis")}
    if "axis_damping_fit" in cal.fit:
        out["axis_damping_fit"] = {f"J{j + 1}": {"damping_ratios": r(f.damping_ratios), "misfit_per_file": r(f.misfit),
                                                 "files": list(f.files), "best": r(f.damping_ratios[f.best]),
                                                 "adopted": bool(f.adopted)}
                                   for j, f in cal.fit["axis_damping_fit"].items()}
    return out
