"""Frequency scans of the CLOOS twin's calibration (robident_twin.validation.twin_vs_real): the
Lomb-Scargle periodogram of the ripple search and the flank-wise least-squares power of the
transmission-error search, both over a grid of frequencies in blocks; and the per-band RMS of a record
(:func:`band_rms_periodogram`) that the experiment scripts print."""
from __future__ import annotations

import numpy as np

#: largest phase error [rad] the shared within-block phase steps of a uniform grid may add
_PHASE_TOL_RAD = 1e-9


def lomb_scargle_power(x: np.ndarray, y: np.ndarray, w_rad: np.ndarray, block: int = 256) -> np.ndarray:
    """The Lomb-Scargle periodogram of ``scipy.signal.lombscargle(x, y, w_rad)`` (its default
    "power" units, fixed mean) as the least-squares fit of ``a cos(w x) + b sin(w x)`` per
    frequency, in blocks of frequencies, with ``exp(i w x)`` as one complex array. On a uniform
    grid every block's phases are its first frequency's times the same within-block steps
    ``exp(i (w_k - w_0) x)``, computed once: one complex product per sample and frequency instead
    of a cosine and a sine (about 4x less CPU than the cosine and sine per block, which was 5x
    less than scipy's four per sample and its full (samples x frequencies) arrays)."""
    x, y, w_rad = (np.asarray(v, float) for v in (x, y, w_rad))
    n = x.size
    out = np.empty(w_rad.size)
    offsets = w_rad[:block] - w_rad[0] if w_rad.size else w_rad
    steps = None
    xmax = float(np.max(np.abs(x))) if n else 0.0
    if all(np.max(np.abs((w_rad[i0:i0 + block] - w_rad[i0]) - offsets[:min(block, w_rad.size - i0)]), initial=0.0)
           * xmax <= _PHASE_TOL_RAD for i0 in range(0, w_rad.size, block)):
        steps = np.exp(1j * np.outer(x, offsets))
    for i0 in range(0, w_rad.size, block):
        wb = w_rad[i0:i0 + block]
        e = (np.exp(1j * np.outer(x, wb)) if steps is None
             else np.exp(1j * wb[0] * x)[:, None] * steps[:, :wb.size])
        z = y @ e / n  # mean y cos + i mean y sin
        yc, ys = z.real, z.imag
        e2 = np.einsum("ij,ij->j", e, e) / n  # mean exp(2 i w x) = (mean cos^2 - mean sin^2) + 2 i mean cos sin
        cc, cs = 0.5 * (1.0 + e2.real), 0.5 * e2.imag
        ss = 1.0 - cc
        out[i0:i0 + block] = 0.5 * n * (ss * yc * yc - 2 * cs * yc * ys + cc * ys * ys) / (cc * ss - cs * cs)
    return out


def flank_fit_power(G: np.ndarray, up: np.ndarray, y: np.ndarray, ridge: float = 1e-12) -> np.ndarray:
    """Per candidate (first axis of ``G``: candidates x samples x 2 columns), the sum of squares the
    least-squares fit of ``y`` on the four columns ``[G * up, G * ~up]`` explains, ``b' (A + ridge
    I)^-1 b`` with ``A``, ``b`` the normal equations. The two flanks' columns never share a sample,
    so ``A`` is two 2 x 2 blocks, solved in closed form (no (candidates x samples x 4) array)."""
    g1, g2 = G[..., 0], G[..., 1]
    m = np.column_stack([up, ~up]).astype(float)  # samples x flank
    a11, a22, a12 = (g1 * g1) @ m + ridge, (g2 * g2) @ m + ridge, (g1 * g2) @ m
    ym = y[:, None] * m
    b1, b2 = g1 @ ym, g2 @ ym
    return np.sum((a22 * b1 * b1 - 2 * a12 * b1 * b2 + a11 * b2 * b2) / (a11 * a22 - a12 * a12), axis=1)


def band_rms_periodogram(x: np.ndarray, sample_rate_hz: float, bands_hz) -> np.ndarray:
    """RMS of each column of ``x`` (samples x channels, mean removed) in each band [lo, hi) Hz of ``bands_hz``,
    from its one-sided periodogram (Parseval: the bands covering 0 to Nyquist sum to the variance).
    Returns bands x channels."""
    x = np.asarray(x, dtype=float)
    f = np.fft.rfftfreq(len(x), 1.0 / sample_rate_hz)
    P = np.abs(np.fft.rfft(x - x.mean(axis=0), axis=0)) ** 2 / len(x) ** 2
    P[1:] *= 2
    if len(x) % 2 == 0:
        P[-1] /= 2  # the Nyquist line is not doubled
    return np.array([np.sqrt(P[(f >= lo) & (f < hi)].sum(axis=0)) for lo, hi in bands_hz])
