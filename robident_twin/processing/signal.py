"""Signal processing of periodic and non-periodic recordings (Swevers 1997, Xu 2020,
Jubien 2014).

- Period averaging: the mean over M recorded periods, and the per-sample
  variance of that mean from the spread between periods (the noise variance
  estimate of ICMA 2020 eq. 7 divided by M).
- Frequency-domain differentiation: the DFT of the averaged position keeps
  only the DC term and the excited harmonics, which are multiplied by j*w and
  -w^2 for velocity and acceleration; the inverse DFT gives noise-free
  derivatives consistent with a band-limited position.
- Time-domain path (non-periodic data): zero-phase Butterworth low-pass of q,
  central differences, decimation; parallel decimation of the torques and every
  regressor column (Jubien 2014) and the Durbin-Watson statistic of residuals.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robident_twin.errors import RecordingError


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
    payload_attached: np.ndarray | None = None  # per sample, when runs with and without a payload are stacked

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


def average_periods_masked(x: np.ndarray, valid: np.ndarray, period_samples: int, n_periods: int,
                           source: str = "recording") -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`average_periods` over the periods where each sample is valid (a recording with
    gaps, e.g. lost packets). A sample valid in no period is filled by periodic linear
    interpolation between its valid neighbours; the variance of the mean of a sample valid
    in fewer than two periods is the joint's mean over the others."""
    if x.shape[0] != period_samples * n_periods or valid.shape != (x.shape[0],):
        raise RecordingError(f"{source}: cannot average {x.shape[0]} samples (valid mask {valid.shape}) as "
                             f"{n_periods} periods of {period_samples}")
    P = period_samples
    xs = x.reshape(n_periods, P, -1)
    w = valid.reshape(n_periods, P, 1).astype(float)
    cnt = w.sum(axis=0)  # (P, 1)
    if not np.any(cnt > 0):
        raise RecordingError(f"{source}: no valid sample to average")
    mean = (xs * w).sum(axis=0) / np.maximum(cnt, 1)
    empty = cnt[:, 0] == 0
    if empty.any():
        k = np.arange(P)
        good = k[~empty]
        for j in range(mean.shape[1]):
            mean[empty, j] = np.interp(k[empty], good, mean[good, j], period=P)
    var = None
    if n_periods >= 2:
        ok = cnt[:, 0] >= 2
        if not ok.any():
            raise RecordingError(f"{source}: no sample is valid in two periods; cannot estimate the noise")
        with np.errstate(invalid="ignore", divide="ignore"):
            var = (w * (xs - mean) ** 2).sum(axis=0) / (cnt - 1) / cnt
        var[~ok] = var[ok].mean(axis=0)
    return mean.reshape(P, *x.shape[1:]), var if var is None else var.reshape(P, *x.shape[1:])


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


def _refuse_time_jumps(recording, rel_tol: float = 0.5) -> None:
    """RecordingError naming the first sample after a time jump: a step of t_s longer than
    (1 + rel_tol) sample periods means samples are missing, and averaging sample k of every
    period would then mix different phases of the trajectory (jitter below that passes)."""
    t = np.asarray(recording.t_s, dtype=float).reshape(-1)
    if t.size < 2:
        return
    h = 1.0 / float(recording.sample_rate_hz)
    jump = np.diff(t) > (1.0 + rel_tol) * h
    if jump.any():
        k = int(np.argmax(jump))
        raise RecordingError(
            f"{recording.metadata.get('source', 'recording')}: field t_s jumps by {t[k + 1] - t[k]:.6g} s at sample "
            f"{k + 1} (t = {t[k]:.6g} s) where the sample period is {h:.6g} s: samples are missing (a gap), so the "
            "periods cannot be averaged; mark the lost samples in the recording's valid mask (filled on the "
            "uniform time grid) or split the recording at the gap")


def process_periodic(recording, measurement: str, n_harmonics: int, decimate: int = 1) -> IdentificationData:
    """Average a periodic recording over its periods, differentiate the position in the
    frequency domain keeping ``n_harmonics`` harmonics, and pick the torque channel.
    A recording with a ``valid`` mask (gaps) is averaged per sample over the periods
    where the sample is valid (:func:`average_periods_masked`).

    ``decimate`` keeps every k-th sample after processing (the derivatives are exact
    band-limited values, so no anti-alias filter is needed for them; the averaged
    torque is decimated as is)."""
    if recording.period_samples is None or recording.n_periods is None:
        raise RecordingError(f"{recording.metadata.get('source', 'recording')}: not a periodic recording "
                             "(period_samples / n_periods missing); use the non-periodic path")
    P, M = recording.period_samples, recording.n_periods
    _refuse_time_jumps(recording)
    tau = recording.torque(measurement)
    valid = getattr(recording, "valid", None)
    if valid is None or bool(np.all(valid)):
        q_mean, _ = average_periods(recording.q_rad, P, M)
        tau_mean, tau_var = average_periods(tau, P, M)
    else:  # gaps (lost samples): average each sample over the periods where it was received
        src = recording.metadata.get("source", "recording")
        q_mean, _ = average_periods_masked(recording.q_rad, valid, P, M, src)
        tau_mean, tau_var = average_periods_masked(tau, valid, P, M, src)
    qf, dq, ddq = fourier_differentiate(q_mean, recording.sample_rate_hz, n_harmonics)
    s = slice(None, None, max(1, int(decimate)))
    var_joint = None if tau_var is None else tau_var.mean(axis=0)
    return IdentificationData(
        q_rad=qf[s], dq_rad_s=dq[s], ddq_rad_s2=ddq[s], tau_Nm=tau_mean[s],
        sample_rate_hz=recording.sample_rate_hz / max(1, int(decimate)), measurement=measurement,
        n_periods=M, tau_var_Nm2=var_joint, tau_var_sample_Nm2=None if tau_var is None else tau_var[s])


# --------------------------------------------------------------------------- time-domain path
# Zero-phase Butterworth filtering, central differences and parallel decimation
# (Gautier 1997; Jubien, Gautier, Janot 2014) for recordings that are not
# periodic (process trajectories, random point-to-point motions).


def check_uniform_time(t_s: np.ndarray, source: str = "recording", rel_tol: float = 1e-3) -> float:
    """Sample period (s) of a uniformly sampled time vector; a RecordingError naming the
    first bad sample for NaN, non-increasing time or a gap (a step differing from the
    median step by more than ``rel_tol``)."""
    t = np.asarray(t_s, dtype=float).reshape(-1)
    if t.size < 3:
        raise RecordingError(f"{source}: field t_s: expected at least 3 samples, got {t.size}")
    bad = ~np.isfinite(t)
    if bad.any():
        raise RecordingError(f"{source}: field t_s is not finite at sample {int(np.argmax(bad))}")
    dt = np.diff(t)
    if np.any(dt <= 0):
        raise RecordingError(f"{source}: field t_s is not strictly increasing at sample {int(np.argmax(dt <= 0)) + 1}")
    h = float(np.median(dt))
    off = np.abs(dt - h) > rel_tol * h
    if off.any():
        k = int(np.argmax(off))
        raise RecordingError(f"{source}: field t_s is not uniformly sampled: step {dt[k]:.6g} s at sample "
                             f"{k + 1} (t = {t[k]:.6g} s) instead of {h:.6g} s (a gap or jitter); "
                             "resample or split the recording at the gap")
    return h


def check_finite(x: np.ndarray, name: str, source: str = "recording") -> None:
    """RecordingError naming the channel, sample and joint of the first non-finite value."""
    bad = ~np.isfinite(np.asarray(x, dtype=float))
    if bad.any():
        idx = np.argwhere(bad)[0]
        joint = f", joint {int(idx[1]) + 1}" if bad.ndim == 2 else ""
        raise RecordingError(f"{source}: field {name} has a non-finite value at sample {int(idx[0])}{joint} "
                             "(a gap in the recording?)")


def butter_filtfilt(x: np.ndarray, sample_rate_hz: float, cutoff_hz: float, order: int = 4,
                    btype: str = "lowpass") -> np.ndarray:
    """Zero-phase Butterworth filter along axis 0 (scipy.signal.butter + sosfiltfilt).

    ``order`` is the order of the designed filter (the forward-backward pass doubles
    the attenuation and has zero phase); ``cutoff_hz`` is a scalar, or a pair
    (low, high) for ``btype="bandpass"``."""
    import scipy.signal

    nyq = 0.5 * float(sample_rate_hz)
    fc = np.atleast_1d(np.asarray(cutoff_hz, dtype=float))
    if np.any(fc <= 0) or np.any(fc >= nyq):
        raise RecordingError(f"Butterworth filter: cut-off {cutoff_hz} Hz must be in (0, {nyq:g}) Hz "
                             f"(Nyquist of {sample_rate_hz:g} Hz)")
    if int(order) < 1:
        raise RecordingError(f"Butterworth filter: order must be >= 1, got {order}")
    sos = scipy.signal.butter(int(order), fc if fc.size > 1 else fc[0], btype=btype, fs=float(sample_rate_hz),
                              output="sos")
    x = np.asarray(x, dtype=float)
    padlen = min(3 * (2 * len(sos) + 1), x.shape[0] - 1)
    return scipy.signal.sosfiltfilt(sos, x, axis=0, padlen=padlen)


def central_differences(x: np.ndarray, sample_rate_hz: float) -> np.ndarray:
    """Derivative along axis 0 by central differences (one-sided, second order, at the ends)."""
    return np.gradient(np.asarray(x, dtype=float), 1.0 / float(sample_rate_hz), axis=0, edge_order=2)


def decimation_cutoff_hz(sample_rate_hz: float, factor: int) -> float:
    """Default cut-off of the decimation low-pass: 0.8 times the new Nyquist frequency."""
    return 0.8 * 0.5 * float(sample_rate_hz) / int(factor)


def parallel_decimate(W: np.ndarray, tau_Nm: np.ndarray, factor: int, sample_rate_hz: float,
                      cutoff_hz: float | None = None, order: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Jubien 2014 parallel decimation: low-pass the torques and every column of the
    stacked regressor with the same zero-phase filter, then keep every ``factor``-th sample.

    ``W`` is the sample-major stacked regressor (N*n x p), ``tau_Nm`` is N x n.
    Returns (W_decimated, tau_decimated) in the same layouts."""
    tau_Nm = np.asarray(tau_Nm, dtype=float)
    N, n = tau_Nm.shape
    if W.shape[0] != N * n:
        raise RecordingError(f"parallel decimation: regressor has {W.shape[0]} rows, expected {N * n} "
                             f"({N} samples x {n} joints)")
    k = int(factor)
    if k < 1:
        raise RecordingError(f"parallel decimation: factor must be >= 1, got {factor}")
    if k == 1:
        return W, tau_Nm
    fc = decimation_cutoff_hz(sample_rate_hz, k) if cutoff_hz is None else float(cutoff_hz)
    if fc > 0.5 * sample_rate_hz / k:
        raise RecordingError(f"parallel decimation: cut-off {fc:g} Hz exceeds the Nyquist frequency "
                             f"{0.5 * sample_rate_hz / k:g} Hz after decimation by {k}")
    W3 = W.reshape(N, n, -1)
    Wf = butter_filtfilt(W3, sample_rate_hz, fc, order)[::k]
    tf = butter_filtfilt(tau_Nm, sample_rate_hz, fc, order)[::k]
    return Wf.reshape(-1, W.shape[1]), tf


def durbin_watson(residuals: np.ndarray) -> np.ndarray:
    """Durbin-Watson statistic sum((r_i - r_{i-1})^2) / sum(r_i^2) along axis 0 (time),
    per column (joint) of a samples x joints array. About 2 for white residuals, near 0
    for strongly positively correlated residuals (Jubien 2014 asks for 1..3)."""
    r = np.asarray(residuals, dtype=float)
    if r.ndim == 1:
        r = r[:, None]
    den = np.sum(r**2, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, np.sum(np.diff(r, axis=0) ** 2, axis=0) / den, np.nan)


def process_nonperiodic(recording, measurement: str, cutoff_hz: float, order: int = 4,
                        decimate: int = 1, decimate_cutoff_hz: float | None = None,
                        decimate_order: int = 8) -> IdentificationData:
    """Time-domain path for non-periodic recordings.

    1. check uniform sampling (gaps and NaN are clear errors);
    2. zero-phase Butterworth low-pass of q (``order``, ``cutoff_hz``);
    3. velocity and acceleration by central differences of the filtered q;
    4. decimation by ``decimate``: the torque is low-passed by the decimation filter
       (cut-off ``decimate_cutoff_hz``, default 0.8 x new Nyquist) before keeping every
       k-th sample; q, dq, ddq are band-limited by step 2 (if ``cutoff_hz`` is above the
       decimation cut-off they are low-passed too).

    Returns the same :class:`IdentificationData` as :func:`process_periodic`
    (``n_periods`` = 1, no variance estimates). For exact Jubien parallel decimation of
    the regressor columns use :func:`parallel_decimate` on (W, tau) of the undecimated data."""
    src = getattr(recording, "metadata", {}).get("source", "recording")
    missing = [f for f in ("t_s", "q_rad", "sample_rate_hz", "torque") if getattr(recording, f, None) is None]
    if missing:
        raise RecordingError(f"{src}: missing field(s) {missing}; a recording needs t_s, q_rad, "
                             "sample_rate_hz and the torque channels")
    fs_nominal = float(recording.sample_rate_hz)
    h = check_uniform_time(recording.t_s, src)
    if abs(1.0 / h - fs_nominal) > 1e-3 * fs_nominal:
        raise RecordingError(f"{src}: field sample_rate_hz = {fs_nominal:g} Hz but t_s has a step of "
                             f"{h:.6g} s ({1.0 / h:.6g} Hz)")
    q = np.asarray(recording.q_rad, dtype=float)
    tau = np.asarray(recording.torque(measurement), dtype=float)
    check_finite(q, "q_rad", src)
    check_finite(tau, "tau", src)
    qf = butter_filtfilt(q, fs_nominal, cutoff_hz, order)
    dq = central_differences(qf, fs_nominal)
    ddq = central_differences(dq, fs_nominal)
    k = max(1, int(decimate))
    if k > 1:
        fc = decimation_cutoff_hz(fs_nominal, k) if decimate_cutoff_hz is None else float(decimate_cutoff_hz)
        tau = butter_filtfilt(tau, fs_nominal, fc, decimate_order)
        if cutoff_hz > fc:
            qf, dq, ddq = (butter_filtfilt(x, fs_nominal, fc, decimate_order) for x in (qf, dq, ddq))
    s = slice(None, None, k)
    return IdentificationData(q_rad=qf[s], dq_rad_s=dq[s], ddq_rad_s2=ddq[s], tau_Nm=tau[s],
                              sample_rate_hz=fs_nominal / k, measurement=measurement, n_periods=1)


def default_cutoff_hz(sample_rate_hz: float) -> float:
    """Cut-off of the position filter of the non-periodic path when none is configured:
    0.1 x the sample rate, at most 20 Hz (process motions stay well below 10 Hz)."""
    return min(20.0, 0.1 * float(sample_rate_hz))


def process_time_domain(recording, measurement: str, cutoff_hz: float | None = None, order: int = 4,
                        derivatives: str = "auto") -> IdentificationData:
    """The non-periodic path up to (not including) decimation, for any recording:

    - a recording of repeated runs (``period_samples``, ``n_periods`` >= 2: a process motion
      repeated, as ICMA 2020's 50 repetitions) is first averaged over the repetitions, with the
      per-sample variance of the mean (eq. 7 / N_r) as the WLS weights;
    - a recording that carries its own averaged derivatives and per-sample variance (metadata
      ``dq_rad_s``, ``ddq_rad_s2``, ``tau_sample_variance_Nm2`` and ``n_repetitions``: the CLOOS
      files, :mod:`hal.files.mat_io`) uses them with ``derivatives="auto"`` or ``"recorded"``;
    - otherwise q is low-passed by a zero-phase Butterworth filter (``cutoff_hz``, null:
      :func:`default_cutoff_hz`; ``order``) and differentiated by central differences.

    Decimate the result with :func:`parallel_decimate` on (regressor, torque)."""
    if derivatives not in ("auto", "filtered", "recorded"):
        raise RecordingError(f"processing.derivatives: expected auto, filtered or recorded, got {derivatives!r}")
    md = getattr(recording, "metadata", {}) or {}
    src = md.get("source", "recording")
    fs = float(recording.sample_rate_hz)
    P, M = recording.period_samples, recording.n_periods
    tau = np.asarray(recording.torque(measurement), dtype=float)
    q = np.asarray(recording.q_rad, dtype=float)
    var = None
    n_avg = 1
    if P is not None and M is not None and M >= 2:
        _refuse_time_jumps(recording)
        valid = getattr(recording, "valid", None)
        if valid is None or bool(np.all(valid)):
            q, _ = average_periods(q, P, M)
            tau, var = average_periods(tau, P, M)
        else:
            q, _ = average_periods_masked(q, valid, P, M, src)
            tau, var = average_periods_masked(tau, valid, P, M, src)
        n_avg = M
        t = np.arange(P) / fs
    else:
        t = np.asarray(recording.t_s, dtype=float)
        check_uniform_time(t, src)
        sv = md.get("tau_sample_variance_Nm2")
        if sv is not None and measurement == "motor_torque" and np.shape(sv) == tau.shape:
            n_avg = int(md.get("n_repetitions", 1) or 1)
            var = np.asarray(sv, dtype=float) / n_avg
    check_finite(q, "q_rad", src)
    check_finite(tau, "tau", src)
    has_own = all(np.shape(md.get(k)) == q.shape for k in ("dq_rad_s", "ddq_rad_s2")) and n_avg == int(
        md.get("n_repetitions", n_avg) or n_avg) and not (P is not None and M is not None and M >= 2)
    if derivatives == "recorded" and not has_own:
        raise RecordingError(f"{src}: processing.derivatives=recorded but the recording has no dq_rad_s/ddq_rad_s2 "
                             "of its own; use derivatives=filtered")
    if has_own and derivatives != "filtered":
        qf, dq, ddq = q, np.asarray(md["dq_rad_s"], float), np.asarray(md["ddq_rad_s2"], float)
    else:
        fc = default_cutoff_hz(fs) if cutoff_hz is None else float(cutoff_hz)
        qf = butter_filtfilt(q, fs, fc, order)
        dq = central_differences(qf, fs)
        ddq = central_differences(dq, fs)
    if var is not None and np.any(var <= 0):  # a sample identical in every repetition: the joint's mean
        var = np.where(var > 0, var, np.mean(np.where(var > 0, var, np.nan), axis=0))
    return IdentificationData(q_rad=qf, dq_rad_s=dq, ddq_rad_s2=ddq, tau_Nm=tau, sample_rate_hz=fs,
                              measurement=measurement, n_periods=n_avg,
                              tau_var_Nm2=None if var is None else var.mean(axis=0), tau_var_sample_Nm2=var)


def decimate_data(data: IdentificationData, W: np.ndarray, factor: int, cutoff_hz: float | None = None):
    """Jubien 2014 parallel decimation of (regressor, torque) of undecimated time-domain data;
    the states and the per-sample variances are subsampled. Returns (data, W) decimated."""
    k = max(1, int(factor))
    Wd, tau = parallel_decimate(W, data.tau_Nm, k, data.sample_rate_hz, cutoff_hz)
    s = slice(None, None, k)
    var = None if data.tau_var_sample_Nm2 is None else data.tau_var_sample_Nm2[s]
    return IdentificationData(q_rad=data.q_rad[s], dq_rad_s=data.dq_rad_s[s], ddq_rad_s2=data.ddq_rad_s2[s],
                              tau_Nm=tau, sample_rate_hz=data.sample_rate_hz / k, measurement=data.measurement,
                              n_periods=data.n_periods, tau_var_Nm2=data.tau_var_Nm2, tau_var_sample_Nm2=var), Wd
