"""Why J1 and J5 miss on the process-1 validation file only (issue 15, item 4; session 10).
Prints (about 3 min on one core):

1. the validation error per band (0-1/1-2/2-5/5-10/10-20/20-40/40-50 Hz), real and twin (committed YAML,
   one replay, noise on and off), J1..J6, on process 1 (100 Hz) and process 2 (500 Hz raw);
2. the measurement chain: the real torque's error spectrum near the 100 Hz file's Nyquist frequency against
   what the twin's undecimated 500 Hz record and the raw process-2 file hold there, and the gain of the real
   torque against the model torque (W beta, no filter) per band on both files;
3. the reference: the twin's error per band with the file's linear interpolation against a quintic Hermite
   interpolant of the file's q, dq, ddq (noise off and on);
4. the file's clock: how long each sample interval of the desired path really lasted (distance over mean
   velocity, every joint), and the twin replayed on that clock (``CloosTwin(file_clock=True)``).

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_process1.py
"""
from __future__ import annotations

import dataclasses

import numpy as np

from robident_twin.datasets.cloos_model import build_model, design_matrix
from robident_twin.validation import process_replay as pr
from robident_twin.validation import repetition_noise as rn
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.cloos_calibration import load_calibration

BANDS_HZ = ((0, 1), (1, 2), (2, 5), (5, 10), (10, 20), (20, 40), (40, 50), (50, 100), (100, 250))
SETS = tv.VALIDATION_SETS[1:]


def rms(x):
    return np.sqrt(np.mean(np.asarray(x) ** 2, axis=0))


def fmt(a, p=2):
    return " ".join(f"{x:7.{p}f}" for x in np.atleast_1d(a))


def band_split(e, rate):
    """RMS of e per band (periodogram; bands above the Nyquist frequency dropped)."""
    e = np.asarray(e, float) - np.mean(e, axis=0)
    f = np.fft.rfftfreq(len(e), 1.0 / rate)
    P = np.abs(np.fft.rfft(e, axis=0)) ** 2
    P[1:] *= 2
    scale = np.sum(e ** 2, axis=0) / P.sum(axis=0)
    return {b: np.sqrt(P[(f >= b[0]) & (f < b[1])].sum(axis=0) * scale / len(e)) for b in BANDS_HZ if b[0] < rate / 2}


def hermite_reference(d, factor):
    """The file's desired path on the acquisition clock by quintic Hermite interpolation of q, dq, ddq."""
    from scipy.interpolate import BPoly

    t = np.arange(d.n_samples) / d.sample_rate_hz
    t5 = np.arange(d.n_samples * factor) / (d.sample_rate_hz * factor)
    t5 = np.minimum(t5, t[-1])
    cols = []
    for j in range(6):
        bp = BPoly.from_derivatives(t, np.column_stack([d.q_rad[:, j], d.dq_rad_s[:, j], d.ddq_rad_s2[:, j]]))
        cols.append([bp(t5), bp(t5, 1), bp(t5, 2)])
    q, dq, ddq = (np.column_stack([c[k] for c in cols]) for k in range(3))
    return dataclasses.replace(d, q_rad=q, dq_rad_s=dq, ddq_rad_s2=ddq, tau_Nm=np.zeros_like(q),
                               sample_rate_hz=d.sample_rate_hz * factor)


def replay_raw(tw, d, seed, reference="linear"):
    """One process replay; returns (decimated torque at the file's rate, the 500 Hz record)."""
    k = pr.acquisition_factor(d.sample_rate_hz)
    if reference == "hermite" and k > 1:
        raw = tw.replay(hermite_reference(d, k), 1, seed, averaged=False).data.tau_Nm
        return pr.decimate(raw, k), raw
    keep = {}
    dec = pr.decimate

    def grab(x, f, at=None):
        keep["raw"] = np.asarray(x, float).copy()
        return dec(x, f, at=at)

    pr.decimate = grab
    try:
        tau = tw.replay(d, 1, seed, averaged=False).data.tau_Nm
    finally:
        pr.decimate = dec
    return tau, keep.get("raw", tau)


def gain_per_band(y, x, rate, bands=((0, 2), (2, 5), (5, 10), (10, 20), (20, 30), (30, 40), (40, 50))):
    """|S_xy| / S_xx and the coherence of y against x per band (Welch, 4 s segments)."""
    from scipy.signal import csd, welch

    nper = int(min(len(x) // 2, 4 * rate))
    f, Sxx = welch(x, fs=rate, nperseg=nper, axis=0)
    _, Syy = welch(y, fs=rate, nperseg=nper, axis=0)
    _, Sxy = csd(x, y, fs=rate, nperseg=nper, axis=0)
    out = []
    for lo, hi in bands:
        m = (f >= lo) & (f < hi)
        if lo >= rate / 2 or not m.any():
            continue
        sxy, sxx, syy = Sxy[m].sum(axis=0), Sxx[m].sum(axis=0), Syy[m].sum(axis=0)
        out.append(((lo, hi), np.abs(sxy) / sxx, np.abs(sxy) ** 2 / (sxx * syy)))
    return out


def main() -> int:
    reg, base = model = build_model(symmetric=True)
    real, recs = tv.real_statistics(None, model)
    cal = load_calibration("sim_assets/cloos_qrc350/twin_calibrated.yaml")
    twin = tv.CloosTwin(cal, model)
    quiet = tv.CloosTwin(dataclasses.replace(cal, effects=rn.without_noise(cal.effects)), model)
    clock, clock_quiet = (tv.CloosTwin(c, model, file_clock=True) for c in (cal, quiet.cal))
    runA = twin.replay(recs["A"].data, 4, 0)
    beta_twin = tv.fit_statistics("twin", reg, base, runA.data, runA.sample_variance_Nm2, {}).beta
    print("J1..J6 in every row; error = torque - W beta (real: the real A fit; twin: the twin's own A fit, 4 reps)")
    for i, n in enumerate(SETS):
        d = recs[n].data
        rate = d.sample_rate_hz
        W = design_matrix(reg, base, d)
        er = d.tau_Nm - (W @ real.beta).reshape(d.tau_Nm.shape)
        model_tau = (W @ real.beta).reshape(d.tau_Nm.shape)
        runs = {}
        for label, tw, ref in (("twin", twin, "linear"), ("twin noise off", quiet, "linear"),
                               ("twin hermite", twin, "hermite"), ("twin hermite noise off", quiet, "hermite"),
                               ("twin file clock", clock, "linear"), ("twin file clock noise off", clock_quiet, "linear")):
            if ref == "hermite" and rate >= pr.ACQUISITION_RATE_HZ:
                continue
            tau, raw = replay_raw(tw, d, 2 + i, ref)
            runs[label] = (tau - (W @ beta_twin).reshape(tau.shape), raw)
        print(f"\n== {n} ({rate:.0f} Hz, {d.n_samples} samples); J1 speed: median |dq1| {np.median(np.abs(d.dq_rad_s[:, 0])):.2f},"
              f" 95 % {np.quantile(np.abs(d.dq_rad_s[:, 0]), 0.95):.2f} rad/s")
        ticks = pr.file_clock_ticks(d.q_rad, d.dq_rad_s, rate)
        n_i = np.diff(ticks)
        v = 0.5 * (d.dq_rad_s[1:] + d.dq_rad_s[:-1])
        den = np.sum(v * v, axis=1)
        ok = den > pr.CLOCK_MIN_SPEED_RAD_S ** 2
        est = np.sum(np.diff(d.q_rad, axis=0) * v, axis=1)[ok] / den[ok] * 1e3
        per = np.where(np.abs(v) > 0.05, np.diff(d.q_rad, axis=0) / np.where(np.abs(v) > 0.05, v, 1.0), np.nan)
        m = np.isfinite(per[:, 1]) & np.isfinite(per[:, 2])
        print(f"  4. file clock: {ok.sum()} intervals read from the path (speed > {pr.CLOCK_MIN_SPEED_RAD_S} rad/s); duration [ms] "
              f"quantiles 1/50/99 % {fmt(np.quantile(est, [0.01, 0.5, 0.99]), 3)}; intervals of {1e3 * (n_i.min()) / pr.ACQUISITION_RATE_HZ:.0f}"
              f"/{1e3 * np.median(n_i) / pr.ACQUISITION_RATE_HZ:.0f}/{1e3 * n_i.max() / pr.ACQUISITION_RATE_HZ:.0f} ms (min/median/max): "
              f"{np.sum(n_i > np.median(n_i))} longer than nominal, {np.sum(n_i < np.median(n_i))} shorter; the path lasts "
              f"{ticks[-1] / pr.ACQUISITION_RATE_HZ:.3f} s (nominal {(d.n_samples - 1) / rate:.3f}); J2/J3 per-joint durations correlate "
              f"{np.corrcoef(per[m, 1], per[m, 2])[0, 1]:.4f}")
        print(f"  1. total RMS [Nm] real {fmt(rms(er))}")
        for label, (et, _) in runs.items():
            print(f"     {label:24s} {fmt(rms(et))}  ratio {fmt(rms(et) / rms(er))}")
        br = band_split(er, rate)
        bts = {label: band_split(et, rate) for label, (et, _) in runs.items()}
        for b in br:
            print(f"   {b[0]:3d}-{b[1]:3d} Hz real {fmt(br[b])}")
            for label in runs:
                print(f"           {label:24s} {fmt(bts[label][b])}")
        # the twin's undecimated record (500 Hz) against its own model torque, per band
        W5 = None
        if rate < pr.ACQUISITION_RATE_HZ:
            k = pr.acquisition_factor(rate)
            t = np.arange(d.n_samples) / rate
            t5 = np.minimum(np.arange(d.n_samples * k) / (rate * k), t[-1])
            d5 = dataclasses.replace(d, q_rad=np.column_stack([np.interp(t5, t, d.q_rad[:, j]) for j in range(6)]),
                                     dq_rad_s=np.column_stack([np.interp(t5, t, d.dq_rad_s[:, j]) for j in range(6)]),
                                     ddq_rad_s2=np.column_stack([np.interp(t5, t, d.ddq_rad_s2[:, j]) for j in range(6)]),
                                     tau_Nm=np.zeros((t5.size, 6)), sample_rate_hz=rate * k)
            W5 = design_matrix(reg, base, d5)
            raw = runs["twin"][1]
            e5 = raw - (W5 @ beta_twin).reshape(raw.shape)
            b5 = band_split(e5, rate * k)
            print("  2a. the twin's undecimated 500 Hz record, error per band [Nm]")
            for b in b5:
                print(f"   {b[0]:3d}-{b[1]:3d} Hz {fmt(b5[b])}")
            avg = e5[: (len(e5) // k) * k].reshape(-1, k, 6).mean(axis=1)
            ba = band_split(avg, rate)
            print("  2b. the same record thinned by a 5-sample mean (instead of the 40 Hz FIR), error per band [Nm]")
            for b in ba:
                print(f"   {b[0]:3d}-{b[1]:3d} Hz {fmt(ba[b])}")
        else:
            k = 5
            dec = pr.decimate(er, k)
            avg = er[: (len(er) // k) * k].reshape(-1, k, 6).mean(axis=1)
            print("  2a. the raw real error decimated to 100 Hz: 40 Hz FIR | 5-sample mean, per band [Nm]")
            bd, ba = band_split(dec, rate / k), band_split(avg, rate / k)
            for b in bd:
                print(f"   {b[0]:3d}-{b[1]:3d} Hz {fmt(bd[b])} | {fmt(ba[b])}")
        print("  2c. gain |S_xy|/S_xx of the measured torque against the model torque W beta_real (coherence), real | twin")
        gr = gain_per_band(d.tau_Nm, model_tau, rate)
        gt = gain_per_band(runs["twin noise off"][0] + (W @ beta_twin).reshape(d.tau_Nm.shape), model_tau, rate)
        for (b, g, c), (_, g2, c2) in zip(gr, gt):
            print(f"   {b[0]:3d}-{b[1]:3d} Hz gain {fmt(g)} ({fmt(c)}) | {fmt(g2)} ({fmt(c2)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
