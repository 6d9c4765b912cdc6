"""Axis 6 of the CLOOS twin (issue 15 item 4, session 9; opt-in ``run.py --wrist6``, not adopted).

* ``--wrist6``: axis 6's extra friction (Stribeck, quadratic viscous, load-dependent Coulomb) is
  fitted under the dissipation constraint of :mod:`robident_twin.validation.friction_fit`
  (``twin_vs_real.calibrate(dissipative=WRIST6_AXES)``); the other axes keep the plain least squares.
  Axis 6's plain fit has a Stribeck term of -1.74 Nm under a Coulomb level of 0.83 Nm: its total
  friction is negative below 0.036 rad/s and feeds energy into the drive. ``--wrist6 5,6`` does
  the same on axes 5 and 6 (axis 5: -2.03 Nm under 1.45 Nm, negative below 0.016 rad/s); axis 4,
  whose met bands rest partly on its non-physical hunting, is left alone.
* :func:`burst_line_hz`, the frequency at which a residual rings after an axis's reversals (used by
  ``experiments/twin_vs_real_cloos/analyse_wrist6.py``): on J6 it cannot be measured to the few
  tenths of a hertz a stiffness correction needs (README "Axis 6 ... (session 9)"), so the committed
  stiffness rule is kept.
"""
from __future__ import annotations

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.cloos_calibration import reversal_indices

#: The axes whose extra friction ``--wrist6`` constrains (0-based: axis 6).
WRIST6_AXES = tuple(tv.WRIST_ELASTIC_AXES)


def parse_axes(text: str) -> tuple:
    """``run.py --wrist6`` AXES ("6", "5,6"; 1-based, wrist axes 4-6) -> 0-based axes; "" -> ()."""
    if not text:
        return ()
    try:
        axes = tuple(sorted({int(x) - 1 for x in str(text).split(",")}))
    except ValueError:
        raise ConfigError(f"run.py --wrist6: {text!r} is not a comma-separated list of axis numbers") from None
    if not set(axes) <= {3, 4, 5}:
        raise ConfigError(f"run.py --wrist6: axes {text!r}; expected wrist axes among 4, 5, 6")
    return axes


#: Window after each reversal, band and FFT length of :func:`burst_line_hz`.
BURST_WINDOW_S = 0.4
BURST_BAND_HZ = (5.0, 12.0)
BURST_NFFT = 4096


def burst_line_hz(residual_Nm: np.ndarray, dqm_rad_s: np.ndarray, sample_rate_hz: float,
                  window_s: float = BURST_WINDOW_S, band_hz=BURST_BAND_HZ, nfft: int = BURST_NFFT) -> float:
    """The frequency at which one joint's residual rings right after the reversals of one motor axis:
    the argmax in ``band_hz`` of the mean Hann-windowed periodogram of the ``window_s`` segments that
    start at each sign change of ``dqm_rad_s``, minus the mean periodogram of all such segments of the
    record (Welch, hop a quarter window), so that a line present all along (the main axes' mode on J6)
    cancels and what the reversals add remains (zero-padded to ``nfft``)."""
    r = np.asarray(residual_Nm, dtype=float)
    v = np.asarray(dqm_rad_s, dtype=float)
    if r.ndim != 1 or r.shape != v.shape:
        raise ValueError(f"burst_line_hz: residual {r.shape} and velocity {v.shape} must be equal 1-D arrays")
    w = int(round(window_s * sample_rate_hz))
    if not 8 <= w <= min(nfft, len(r)):
        raise ValueError(f"burst_line_hz: window of {w} samples not within 8 and min(nfft={nfft}, {len(r)} samples)")
    starts = [i for i in reversal_indices(v) if i + w <= len(r)]
    if not starts:
        raise ValueError("burst_line_hz: no reversal of the axis with a full window after it")
    hann = np.hanning(w)
    per = lambda idx: np.mean([np.abs(np.fft.rfft((r[i:i + w] - r[i:i + w].mean()) * hann, nfft)) ** 2
                               for i in idx], axis=0)
    excess = per(starts) - per(range(0, len(r) - w + 1, max(1, w // 4)))
    f = np.fft.rfftfreq(nfft, 1.0 / sample_rate_hz)
    band = (f >= band_hz[0]) & (f <= band_hz[1])
    return float(f[band][np.argmax(excess[band])])
