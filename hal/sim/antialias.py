"""The torque channels' anti-aliasing filter (:func:`hal.sim.effects.apply_sensor_effects`): a
digital Butterworth low-pass in second-order sections, started settled at the first sample.

The same filter as ``scipy.signal.butter(order, fc, fs=rate, output="sos")``, ``sosfilt_zi`` and
``sosfilt``, computed here because importing ``scipy.signal`` costs about 0.5 s (its array-API
wrappers parse every docstring), paid in each process of a default run:

- the design follows scipy's steps operation for operation: the analog prototype's poles
  ``-exp(i pi m / 2N)``, the pre-warped cut-off ``4 tan(pi Wn / 2)`` (Wn = fc / (fs / 2)), the
  bilinear transform at fs = 2 with its gain ``k / prod(4 - p)``, one section per conjugate pole pair
  (``b = (1, 2, 1)``, ``a = (1, -2 Re p, |p|^2)``; an odd order's real pole in a first-order section
  ``(1, 1, 0) / (1, -p, 0)``), ordered as ``zpk2sos``'s nearest pairing orders them (the poles nearest
  the unit circle last), the gain on the first section;
- the settled start state is ``lfilter_zi`` per section scaled by the gains before it
  (``sosfilt_zi``);
- the filter itself is scipy's kernel compiled (:func:`hal.sim.native.sosfilt`), else scipy's.

``tests/test_antialias.py`` checks the three against scipy.signal, bit for bit.
"""
from __future__ import annotations

import numpy as np

from . import native


def butter_lowpass_sos(order: int, cutoff_hz: float, rate_hz: float) -> np.ndarray:
    """``scipy.signal.butter(order, cutoff_hz, fs=rate_hz, output="sos")`` (sections x 6)."""
    N = int(order)
    if N < 1 or N != order:
        raise ValueError(f"Butterworth order must be a positive integer, got {order!r}")
    wn = float(cutoff_hz) / (float(rate_hz) / 2)
    if not 0 < wn < 1:
        raise ValueError(f"Butterworth cut-off must be in (0, {float(rate_hz) / 2}) Hz (Nyquist), got {cutoff_hz!r}")
    m = np.arange(-N + 1, N, 2, dtype=np.float64)
    p = -np.exp(1j * np.pi * m / (2 * N))  # buttap
    fs = 2.0
    warped = 2 * fs * np.tan(np.pi * np.asarray(wn, dtype=np.float64) / fs)
    wo = float(warped)
    p = wo * p  # lp2lp_zpk (no zeros: relative degree N)
    k = 1.0 * wo**N
    fs2 = 2.0 * fs  # bilinear_zpk
    pz = (fs2 + p) / (fs2 - p)
    zz = -np.ones(N)
    k = k * np.real(np.prod(np.asarray([], dtype=np.float64)) / np.prod(fs2 - p))
    if N % 2:  # zpk2sos, nearest pairing: an odd count gets a pole and a zero at the origin
        pz, zz = np.concatenate((pz, [0.0])), np.concatenate((zz, [0.0]))
    sos = _nearest_pairing(np.sort(zz), _conjugates_then_reals(pz), (N + 1) // 2)
    sos[0, :3] *= k
    return sos


def _conjugates_then_reals(p: np.ndarray) -> np.ndarray:
    """``concatenate(_cplxreal(p))`` for exact conjugate pairs: one member per pair (imag > 0), by
    real part, then the real values, ascending."""
    p = p[np.lexsort((np.abs(p.imag), p.real))]
    real = np.abs(p.imag) <= 100 * np.finfo(float).eps * np.abs(p)
    return np.concatenate((p[~real & (p.imag > 0)], p[real].real))


def _poly(roots) -> np.ndarray:
    """The monic polynomial of ``roots`` as scipy's ``_polyutils.poly`` builds it: one convolution
    with ``(1, -r)`` per root, real when the roots are closed under conjugation."""
    roots = np.asarray(roots)
    if roots.shape[0] == 0:
        return np.asarray(1.0)
    a = np.ones((1,), dtype=roots.dtype)
    one = np.ones_like(roots[0])
    for r in roots:
        a = np.convolve(a, np.stack((one, -r)), mode="full")
    if np.iscomplexobj(a):
        c = np.asarray(roots, dtype=np.complex128)
        if np.all(np.sort(c.imag) == np.sort(np.conj(c).imag)):
            a = np.real(a).copy()
    return a


def _nearest(z: np.ndarray, to, real_only: bool) -> int:
    order = np.argsort(np.abs(z - to))
    return int(order[0] if not real_only else order[np.nonzero(np.isreal(z[order]))[0][0]])


def _nearest_pairing(z: np.ndarray, p: np.ndarray, n_sections: int) -> np.ndarray:
    """``zpk2sos``'s nearest pairing for real zeros: from the last section back, the pole nearest
    the unit circle with its conjugate (or the next real pole) and the zeros nearest to it."""
    sos = np.zeros((n_sections, 6))
    for si in range(n_sections - 1, -1, -1):
        i = int(np.argmin(np.abs(1 - np.abs(p))))
        p1 = p[i]
        p = np.delete(p, i)
        if np.isreal(p1) and np.isreal(p).sum() == 0:
            j = _nearest(z, p1, True)
            zs, ps = [z[j], 0], [p1, 0]
            z = np.delete(z, j)
        else:
            if np.isreal(p1):
                reals = np.flatnonzero(np.isreal(p))
                j = int(reals[np.argmin(np.abs(1 - np.abs(p[reals])))])
                p2 = p[j]
                p = np.delete(p, j)
            else:
                p2 = p1.conj()
            j = _nearest(z, p1, False)
            zs = [z[j]]
            z = np.delete(z, j)
            if len(z) > 0:
                j = _nearest(z, p1, True)
                zs.append(z[j])
                z = np.delete(z, j)
            ps = [p1, p2]
        b, a = _poly(np.asarray(zs)), _poly(np.asarray(ps))
        sos[si, 3 - b.size:3] = b
        sos[si, 6 - a.size:6] = np.real(a)
    return sos


def sosfilt_zi(sos: np.ndarray) -> np.ndarray:
    """``scipy.signal.sosfilt_zi(sos)`` (sections x 2): the state of a settled unit step."""
    zi = np.empty((sos.shape[0], 2))
    scale = 1.0
    for s, row in enumerate(np.asarray(sos, dtype=np.float64)):
        b, a = row[:3], row[3:]
        if a[0] != 1.0:
            b, a = b / a[0], a / a[0]
        companion_t = np.array([[-a[1], 1.0], [-a[2], 0.0]])  # scipy.linalg.companion(a).T
        i_minus_a = np.eye(2) - companion_t
        zi[s] = scale * np.linalg.solve(i_minus_a, b[1:] - a[1:] * b[0])  # lfilter_zi
        scale *= np.sum(b) / np.sum(a)
    return zi


def lowpass_settled(x: np.ndarray, order: int, cutoff_hz: float, rate_hz: float) -> np.ndarray:
    """``x`` (samples x channels) through the Butterworth low-pass, its state settled at the first
    sample: ``sosfilt(sos, x, axis=0, zi=sosfilt_zi(sos)[:, :, None] * x[0])[0]``."""
    x = np.asarray(x, dtype=np.float64)
    sos = butter_lowpass_sos(order, cutoff_hz, rate_hz)
    zi = sosfilt_zi(sos)[:, :, None] * x[0][None, None, :]  # sections x 2 x channels
    rows = np.array(x.T, dtype=np.float64, order="C")  # channels x samples: scipy's layout for axis 0
    state = np.ascontiguousarray(np.moveaxis(zi, 2, 0))  # channels x sections x 2
    if native.sosfilt(sos, rows, state):
        return rows.T
    from scipy.signal import sosfilt  # no compiled library: scipy's kernel

    return sosfilt(sos, x, axis=0, zi=zi)[0]
