"""The Fourier lines of a CLOOS excitation record taken as one period (the ICMA 2020 authors'
``average_rect`` processing): which lines carry it, the positions and derivatives on those lines,
and the series evaluated at any time (the twin's reference at its simulation step)."""
from __future__ import annotations

import numpy as np


def excited_lines(q_rect_rad: np.ndarray, rel_tol: float = 1e-3) -> np.ndarray:
    """Indices of the Fourier lines (over the whole record as one period) that carry the
    ``average_rect`` positions of an excitation file (magnitude above ``rel_tol`` of the largest)."""
    mag = np.abs(np.fft.rfft(q_rect_rad - q_rect_rad.mean(axis=0), axis=0))
    keep = np.any(mag > rel_tol * mag.max(axis=0), axis=1)
    keep[0] = True
    return np.nonzero(keep)[0]


def fourier_rect(q_rad: np.ndarray, lines: np.ndarray, sample_rate_hz: float):
    """Positions keeping only the Fourier ``lines`` of the record (one period), and their
    first and second derivatives (the authors' ``average_rect`` processing)."""
    N = q_rad.shape[0]
    Q = np.fft.rfft(q_rad, axis=0)
    mask = np.zeros(Q.shape[0], dtype=bool)
    mask[lines] = True
    Q[~mask] = 0.0
    w = 2j * np.pi * np.fft.rfftfreq(N, 1.0 / sample_rate_hz)[:, None]
    return tuple(np.fft.irfft(Q * w ** p, n=N, axis=0) for p in (0, 1, 2))


def fourier_eval(q_rad: np.ndarray, lines: np.ndarray, sample_rate_hz: float, t_s: np.ndarray):
    """The Fourier series of the record's ``lines`` (one period = the record) and its first two
    derivatives at arbitrary times ``t_s`` (the reference at the simulation step)."""
    N = q_rad.shape[0]
    Q = np.fft.rfft(q_rad, axis=0)[lines] / N
    w = 2 * np.pi * lines / (N / sample_rate_hz)
    scale = np.where(lines == 0, 1.0, 2.0)[:, None]
    E = np.exp(1j * np.outer(t_s, w))  # (T, L)
    out = []
    for p in (0, 1, 2):
        out.append(np.real(E @ (scale * Q * ((1j * w) ** p)[:, None])))
    return tuple(out)
