"""How the CLOOS twin replays a process validation file (issue 15, item 4) so that its record is
taken on the file's clock and processed the way the real file was.

The two process validation files of the ICMA 2020 data hold the desired joint positions,
velocities and accelerations and ONE measured torque run (no repetitions): process 1 at 100 Hz
(10 ms, 60 s), process 2 at 500 Hz (2 ms, 6 s). What the files show (session 8,
``experiments/twin_vs_real_cloos/analyse_process.py``):

* Every raw torque in the data set is on the drive's quantisation grid (1.1025 Nm on J1/J2, the
  process 2 validation file and the measured-joint files of ``Experimental_Validation``), and every
  averaged file on that grid / (number of averaged values); the process 1 validation torque (100 Hz) is
  on no grid at all (no step raw/k for k <= 2000): it was low-pass filtered before the record was
  thinned from the controller's 2 ms acquisition to 10 ms (the time stamps are 0.002 + 0.01 i s,
  the 2 ms clock). The filter itself is not in the data; :func:`decimate` uses a zero-phase
  low-pass at 0.8 x the output Nyquist frequency (an assumption, stated as such).
* The record of sample i must be the torque at the file's time t_i: :func:`reference_times` puts
  the reference on the twin's step clock so that the replay's recorded sample i (taken after the
  step that ends at t_i) is the torque at t_i.
* (session 10) The validation files' samples are not on the uniform clock their time vector states:
  the desired path advances by one extra 2 ms acquisition period between some consecutive samples
  (process 1: 103 of its 10 ms intervals span 12 ms, process 2: 10 of its 2 ms intervals 4 ms; every
  joint gives the same interval, correlation 1.000; the identification files and A/C have none).
  :func:`file_clock_ticks` reads each sample's acquisition tick from the path itself (the distance
  travelled over the mean velocity, least squares over the joints, rounded to whole ticks);
  ``CloosTwin(file_clock=True)`` replays the path on that clock and records the torque at those ticks.
  ``CloosTwin`` leaves it off by default (the nominal clock); the experiment (run.py) turns it on since session 10.
"""
from __future__ import annotations

import numpy as np

from robident_twin.errors import ConfigError

#: The real controller's data acquisition rate (every raw file of the data set has 2 ms samples).
ACQUISITION_RATE_HZ = 500.0
#: Cut-off of the decimation low-pass relative to the output Nyquist frequency (assumed, see above).
DECIMATION_CUTOFF = 0.8
#: Half length of the decimation FIR in output samples.
DECIMATION_HALF_TAPS = 10


def acquisition_factor(file_rate_hz: float, acquisition_rate_hz: float = ACQUISITION_RATE_HZ) -> int:
    """How many acquisition samples make one sample of a file at ``file_rate_hz`` (1: raw rate)."""
    f = acquisition_rate_hz / float(file_rate_hz)
    k = round(f)
    if k < 1 or abs(f - k) > 1e-6:
        raise ConfigError(f"process replay: file sample rate {file_rate_hz} Hz is not the acquisition rate "
                          f"{acquisition_rate_hz} Hz divided by an integer")
    return k


def reference_times(n_samples: int, substeps: int, dt_s: float) -> np.ndarray:
    """Reference time of each twin step such that the sample recorded after step
    ``k = (i + 1) substeps - 1`` (the replay's record) is the state at the sample's time ``i substeps dt``.
    Step k reads the reference at its start and records the state at its end, one ``dt`` later; so
    step k reads ``(k - substeps) dt``. Times before 0 hold the first sample."""
    return (np.arange(n_samples * substeps) - substeps) * float(dt_s)


def lowpass_taps(factor: int, cutoff: float = DECIMATION_CUTOFF, half_taps: int = DECIMATION_HALF_TAPS) -> np.ndarray:
    """Symmetric (zero-phase) windowed-sinc low-pass for decimation by ``factor``: cut-off
    ``cutoff`` x the output Nyquist frequency, Hamming window, unit gain at 0 Hz."""
    n = np.arange(-half_taps * factor, half_taps * factor + 1)
    fc = cutoff / (2.0 * factor)  # cycles per input sample
    h = 2 * fc * np.sinc(2 * fc * n) * np.hamming(n.size)
    return h / h.sum()


def decimate(x: np.ndarray, factor: int, at: np.ndarray | None = None) -> np.ndarray:
    """Samples 0, factor, 2 factor, ... of ``x`` (samples x channels) after the zero-phase low-pass
    :func:`lowpass_taps` (ends padded by reflection); factor 1 returns ``x`` unchanged. ``at``: the
    samples to keep instead (acquisition ticks of a file's own clock, :func:`file_clock_ticks`)."""
    x = np.asarray(x, dtype=float)
    if factor == 1:
        return x if at is None else x[np.asarray(at)]
    h = lowpass_taps(factor)
    m = h.size // 2
    if x.shape[0] <= m:
        raise ConfigError(f"process replay: {x.shape[0]} samples are too few to decimate by {factor}")
    xp = np.concatenate([x[m:0:-1], x, x[-2:-m - 2:-1]], axis=0)
    y = np.column_stack([np.convolve(xp[:, j], h, mode="valid") for j in range(x.shape[1])])
    return y[::factor] if at is None else y[np.asarray(at)]


#: Below this joint-space speed [rad/s] a sample interval's duration is not read from the path.
CLOCK_MIN_SPEED_RAD_S = 0.05


def file_clock_ticks(q_rad: np.ndarray, dq_rad_s: np.ndarray, file_rate_hz: float,
                     acquisition_rate_hz: float = ACQUISITION_RATE_HZ,
                     min_speed_rad_s: float = CLOCK_MIN_SPEED_RAD_S) -> np.ndarray:
    """The acquisition tick of each sample of a desired path (0 for the first): each interval's
    duration is the distance travelled over the interval's mean velocity (trapezoid, least squares
    over the joints), in whole acquisition periods (at least one); where the path moves slower than
    ``min_speed_rad_s`` (norm over the joints) the interval has the nominal duration."""
    q, dq = np.asarray(q_rad, dtype=float), np.asarray(dq_rad_s, dtype=float)
    if q.ndim != 2 or q.shape != dq.shape or q.shape[0] < 2:
        raise ConfigError(f"process replay: the desired path needs q and dq of the same shape (samples x joints, "
                          f"at least 2 samples), got {q.shape} and {dq.shape}")
    k = acquisition_factor(file_rate_hz, acquisition_rate_hz)
    v = 0.5 * (dq[1:] + dq[:-1])
    den = np.sum(v * v, axis=1)
    moving = den > min_speed_rad_s ** 2
    step_s = np.where(moving, np.sum(np.diff(q, axis=0) * v, axis=1) / np.where(moving, den, 1.0), k / acquisition_rate_hz)
    n = np.maximum(np.round(step_s * acquisition_rate_hz), 1).astype(int)
    return np.concatenate([[0], np.cumsum(n)])
