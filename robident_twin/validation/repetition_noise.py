"""The CLOOS twin's repetition noise: white, state-dependent, heavy-tailed (issue 15, item 4).

What the real ICMA 2020 files show (Trajectory A and C, the per-sample torque variance over the
50 repetitions; ``experiments/twin_vs_real_cloos/analyse_variance.py``):

* the variance profile is not smooth: divided by its own 25-sample running mean it scatters far
  more than a sample variance of 50 Gaussian draws (chi2_49 / 49). Its fast part is white (flat
  spectrum 20-250 Hz), independent between joints (cross-correlation <= 0.17) and unrelated to
  the variance of the measured position, velocity or acceleration at the same samples (|corr| <=
  0.21), so it is in the torque (current) measurement, sample by sample. Repetition-to-repetition
  drifts (one torque-constant or friction value per repetition) would give a smooth profile
  instead, so the state-dependent part of the variance is per-sample noise, not drift;
* its scatter is that of heavy-tailed deviations: the implied excess kurtosis is 10.7 / 3.9 /
  9.0 / 1.7 / 14.1 / 0.1 on A (J1-J6). On J1 it grows with the speed (window-wise correlation
  with |dq1| 0.97 on A, 0.96 on C);
* the peaks are not where a timing jitter would put them: the fast part is uncorrelated with the
  squared torque rate (|corr| <= 0.08 on A, 0.15 on C at lags of -2..2 samples), and a tau_dot^2 term, a Coulomb
  step or a reversal term do not change the fitted profile on C.

Model: per sample and axis, ``noise = w * sqrt(a^2 + b^2 dqm^2 + c^2 tau^2)`` with ``w`` a
unit-variance Gaussian scale mixture ``z exp(s g - s^2)`` (z, g standard normal; excess kurtosis
3 (exp(4 s^2) - 1)). ``a, b, c`` by NNLS of the real variance profile on 1, dqm^2, tau^2 (the
profile's mean and shape); ``s`` from the profile's local scatter, not from its median (the
median is then a prediction, checked on A and, with the A fit, on C).
"""
from __future__ import annotations

import dataclasses

import numpy as np

#: Running-mean window [samples] of the local scatter of a variance profile (50 ms at 500 Hz).
LOCAL_WINDOW = 25


def unit_noise(rng: np.random.Generator, shape, tail_spread) -> np.ndarray:
    """Unit-variance noise, Gaussian where ``tail_spread`` is 0, else the scale mixture
    ``z exp(s g - s^2)``. With every spread 0 only ``z`` is drawn (the Gaussian stream as before)."""
    s = np.broadcast_to(np.asarray(tail_spread, dtype=float), shape[-1:])
    z = rng.standard_normal(shape)
    if not np.any(s > 0):
        return z
    return z * np.exp(s * rng.standard_normal(shape) - s * s)


def excess_kurtosis(tail_spread) -> np.ndarray:
    """Excess kurtosis of :func:`unit_noise` with this spread."""
    s = np.asarray(tail_spread, dtype=float)
    return 3.0 * (np.exp(4.0 * s * s) - 1.0)


def noise_std_Nm(fx, dqm_rad_s, tau_Nm) -> np.ndarray:
    """Per-sample standard deviation of the torque measurement noise (``fx``: the twin's effects)."""
    return np.sqrt(fx.current_noise_Nm ** 2 + (fx.speed_noise_Nms_rad * dqm_rad_s) ** 2
                   + (fx.load_noise * tau_Nm) ** 2)


def local_scatter_kurtosis(var_Nm2: np.ndarray, n_repetitions: int = 50, window: int = LOCAL_WINDOW) -> np.ndarray:
    """Excess kurtosis of the per-sample deviations implied by a variance profile's local scatter:
    Var(v / running mean) = 2 / (n - 1) + kappa / n for a sample variance of n draws."""
    from scipy.ndimage import uniform_filter1d

    v = np.asarray(var_Nm2, dtype=float)
    r = v / uniform_filter1d(v, window, axis=0, mode="wrap")
    return n_repetitions * (r.var(axis=0) - 2.0 / (n_repetitions - 1))


def tail_spread_from_variance(var_Nm2: np.ndarray, n_repetitions: int = 50) -> np.ndarray:
    """The spread ``s`` whose excess kurtosis is the profile's local-scatter kurtosis (0 if <= 0)."""
    k = np.maximum(local_scatter_kurtosis(var_Nm2, n_repetitions), 0.0)
    return np.sqrt(np.log1p(k / 3.0) / 4.0)


def fit_noise_profile(var_Nm2: np.ndarray, dqm_rad_s: np.ndarray, tau_Nm: np.ndarray):
    """NNLS per axis of the per-sample variance on 1, dqm^2, tau^2: (a [Nm], b [Nm s/rad], c [-])."""
    from scipy.optimize import nnls

    n = var_Nm2.shape[1]
    out = np.zeros((3, n))
    for j in range(n):
        F = np.column_stack([np.ones(len(var_Nm2)), dqm_rad_s[:, j] ** 2, tau_Nm[:, j] ** 2])
        sc = np.sqrt(np.mean(F ** 2, axis=0))
        c, _ = nnls(F / sc, var_Nm2[:, j])
        out[:, j] = np.sqrt(c / sc)
    return out[0], out[1], out[2]


def without_noise(fx):
    """The effects with every repetition noise and drift off (the loop's own variance only)."""
    z = np.zeros(6)
    return dataclasses.replace(fx, current_noise_Nm=z, torque_constant_drift=z, viscous_drift=z,
                               speed_noise_Nms_rad=z, load_noise=z, noise_tail_spread=z)
