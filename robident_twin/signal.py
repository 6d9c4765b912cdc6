"""Signal processing of periodic recordings (Swevers 1997, Xu 2020).

- Period averaging: the mean over M recorded periods, and the per-sample
  variance of that mean from the spread between periods (the noise variance
  estimate of ICMA 2020 eq. 7 divided by M).
- Frequency-domain differentiation: the DFT of the averaged position keeps
  only the DC term and the excited harmonics, which are multiplied by j*w and
  -w^2 for velocity and acceleration; the inverse DFT gives noise-free
  derivatives consistent with a band-limited position.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import RecordingError


@dataclass(frozen=True)
class IdentificationData:
    """Processed data for estimation (samples x joints, SI units).

    ``tau_var_Nm2`` is the per-joint variance of the averaged torque (noise
    variance divided by the number of periods), ``tau_var_sample_Nm2`` the same
    per sample; both are None when the data were not averaged over periods.
    """

    q_rad: np.ndarray
    dq_rad_s: np.ndarray
    ddq_rad_s2: np.ndarray
    tau_Nm: np.ndarray
    sample_rate_hz: float
    measurement: str
    n_periods: int
    tau_var_Nm2: np.ndarray | None = None
    tau_var_sample_Nm2: np.ndarray | None = None

    @property
    def n_samples(self) -> int:
        return self.q_rad.shape[0]

    @property
    def n_joints(self) -> int:
        return self.q_rad.shape[1]


def average_periods(x: np.ndarray, period_samples: int, n_periods: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Mean over periods and the per-sample variance of that mean (None for one period)."""
    if x.shape[0] != period_samples * n_periods:
        raise RecordingError(f"cannot average {x.shape[0]} samples as {n_periods} periods of {period_samples}")
    xs = x.reshape(n_periods, period_samples, *x.shape[1:])
    mean = xs.mean(axis=0)
    if n_periods < 2:
        return mean, None
    return mean, xs.var(axis=0, ddof=1) / n_periods


def fourier_differentiate(q: np.ndarray, sample_rate_hz: float, n_harmonics: int):
    """Band-limit one period of q (samples x joints) to the DC term and harmonics
    1..n_harmonics of the period, and differentiate it in the frequency domain.

    Returns (q_filtered, dq, ddq)."""
    N = q.shape[0]
    if n_harmonics < 1 or n_harmonics >= N // 2:
        raise RecordingError(f"frequency-domain differentiation: n_harmonics must be in [1, {N // 2 - 1}], "
                             f"got {n_harmonics}")
    Q = np.fft.rfft(q, axis=0)
    Q[n_harmonics + 1:] = 0.0
    w = 2 * np.pi * np.fft.rfftfreq(N, d=1.0 / sample_rate_hz)[:, None]
    qf = np.fft.irfft(Q, n=N, axis=0)
    dq = np.fft.irfft(1j * w * Q, n=N, axis=0)
    ddq = np.fft.irfft(-(w**2) * Q, n=N, axis=0)
    return qf, dq, ddq


def process_periodic(recording, measurement: str, n_harmonics: int, decimate: int = 1) -> IdentificationData:
    """Average a periodic recording over its periods, differentiate the position in the
    frequency domain keeping ``n_harmonics`` harmonics, and pick the torque channel.

    ``decimate`` keeps every k-th sample after processing (the derivatives are exact
    band-limited values, so no anti-alias filter is needed for them; the averaged
    torque is decimated as is)."""
    if recording.period_samples is None or recording.n_periods is None:
        raise RecordingError(f"{recording.metadata.get('source', 'recording')}: not a periodic recording "
                             "(period_samples / n_periods missing); use the non-periodic path")
    P, M = recording.period_samples, recording.n_periods
    tau = recording.torque(measurement)
    q_mean, _ = average_periods(recording.q_rad, P, M)
    tau_mean, tau_var = average_periods(tau, P, M)
    qf, dq, ddq = fourier_differentiate(q_mean, recording.sample_rate_hz, n_harmonics)
    s = slice(None, None, max(1, int(decimate)))
    var_joint = None if tau_var is None else tau_var.mean(axis=0)
    return IdentificationData(
        q_rad=qf[s], dq_rad_s=dq[s], ddq_rad_s2=ddq[s], tau_Nm=tau_mean[s],
        sample_rate_hz=recording.sample_rate_hz / max(1, int(decimate)), measurement=measurement,
        n_periods=M, tau_var_Nm2=var_joint, tau_var_sample_Nm2=None if tau_var is None else tau_var[s])
