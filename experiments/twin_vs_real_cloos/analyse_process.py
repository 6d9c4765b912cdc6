"""Why the CLOOS twin's validation error on the process files is larger than the real one (issue 15,
item 4; session 8). Prints, for the two process validation files (about 2 min on one core):

1. what the files are: sample rate, length, and whether the torque lies on the drive's
   quantisation grid (raw) or not (filtered);
2. what the real controller did with the desired positions (process 2, where the measured joint
   positions of the same path are in Experimental_Validation): the delay between desired and
   measured positions, the tracking error after it, the controller's own error (deg_e) against the
   twin's tracking error;
3. where the validation error sits in frequency, real and twin, per band;
4. the twin's ratio twin/real under variants: the session-7 record (one file sample late, point
   samples), this session's record, other set-point interpolations, the noise off, and (diagnostics
   only, not adopted) the main axes' elasticity changed;
5. the same ringing on the process IDENTIFICATION files (not used for validation);
6. the main axes' mode on the motor encoders, real (A, process 2) and twin, and the twin's 5-10 Hz
   torque with a softer inverter loop or rigid main axes (session 8, main-mode task).

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_process.py
"""
from __future__ import annotations

import dataclasses

import numpy as np

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model, design_matrix, model_torque_Nm
from robident_twin.validation import process_replay as pr, repetition_noise as rn, twin_vs_real as tv
from robident_twin.validation.cloos_calibration import band_rms, load_calibration

BANDS_HZ = ((0, 1), (1, 2), (2, 5), (5, 10), (10, 20), (20, 50), (50, 250))
SETS = tv.VALIDATION_SETS[1:]


def rms(x):
    return np.sqrt(np.mean(np.asarray(x) ** 2, axis=0))


def fmt(a, p=2):
    return " ".join(f"{x:7.{p}f}" for x in a)


def band_split(e, rate):
    """RMS of e per band of BANDS_HZ (periodogram, bands above Nyquist dropped)."""
    f = np.fft.rfftfreq(len(e), 1.0 / rate)
    P = np.abs(np.fft.rfft(e - e.mean(axis=0), axis=0)) ** 2
    P[1:] *= 2
    tot = P.sum(axis=0)
    out = {}
    for lo, hi in BANDS_HZ:
        if lo < rate / 2:
            m = (f >= lo) & (f < hi)
            out[(lo, hi)] = np.sqrt(P[m].sum(axis=0) / tot) * rms(e - e.mean(axis=0))
    return out


def grid_k(tau, step, k_max=2000):
    """Smallest k such that every torque is a multiple of step / k (None: on no such grid)."""
    for k in range(1, k_max + 1):
        x = tau * k / step
        if np.allclose(x, np.round(x), atol=1e-3):
            return k
    return None


def main() -> int:
    import scipy.io

    reg, base = model = build_model(symmetric=True)
    real, recs = tv.real_statistics(None, model)
    cal = load_calibration("sim_assets/cloos_qrc350/twin_calibrated.yaml")
    twin = tv.CloosTwin(cal, model)
    runA = twin.replay(recs["A"].data, 10, 0)
    beta_twin = tv.fit_statistics("twin", reg, base, runA.data, runA.sample_variance_Nm2, {}).beta
    root = ds.default_root()

    print("1. The files")
    raw = recs["process2_validation"].data.tau_Nm
    step = np.diff(np.unique(raw[:, 0])).min()
    for n in SETS:
        d = recs[n].data
        print(f"  {n}: {d.sample_rate_hz:.0f} Hz, {d.n_samples} samples; J1 torque on the grid {step:.4f} Nm / k, "
              f"k = {grid_k(d.tau_Nm[:, 0], step)} (None: no grid up to k = 2000, i.e. filtered)")

    print("2. What the real controller did (process 2: desired file vs measured joint file)")
    meas = scipy.io.loadmat(root / "Experimental_Validation/Joint_Data_Process_2/Process2_withoutModel.mat", squeeze_me=True)
    des = scipy.io.loadmat(root / "Process/Validation_Data_Process2.mat", squeeze_me=True)
    t = np.asarray(des["time_vec_save"], float)
    lags = np.arange(0, 0.0161, 0.001)
    err = [rms((np.column_stack([np.interp(t - L, t, des["deg_q"][:, j]) for j in range(6)]) - meas["deg_q"])[50:-50])
           for L in lags]
    best = int(np.argmin(np.sum(np.array(err)[:, [0, 1, 2]], axis=1)))
    print(f"  measured = desired delayed by {1e3 * lags[best]:.0f} ms: RMS [mdeg] {fmt(1e3 * err[best], 1)} (no delay: {fmt(1e3 * err[0], 1)})")
    for p in (1, 2):
        e = scipy.io.loadmat(root / f"Experimental_Validation/Controll_Error/Process_{p}/Without_Model.mat", squeeze_me=True)["deg_e"]
        run = twin.replay(recs[f"process{p}_validation"].data, 1, 2, averaged=False)
        print(f"  process {p}: controller error RMS without model (deg_e) [mdeg] {fmt(1e3 * rms(e), 1)}; "
              f"twin's tracking RMS [mdeg] {fmt(1e3 * np.degrees(run.tracking_rms_rad), 1)}")

    print("3. Validation error per band [Nm], real | twin")
    runs = {n: twin.replay(recs[n].data, 1, 2 + i, averaged=False) for i, n in enumerate(SETS)}
    for n in SETS:
        d = recs[n].data
        W = design_matrix(reg, base, d)
        er = d.tau_Nm - (W @ real.beta).reshape(d.tau_Nm.shape)
        et = runs[n].data.tau_Nm - (W @ beta_twin).reshape(d.tau_Nm.shape)
        print(f"  {n}: total real {fmt(rms(er))} | twin {fmt(rms(et))} | ratio {fmt(rms(et) / rms(er))}")
        br, bt = band_split(er, d.sample_rate_hz), band_split(et, d.sample_rate_hz)
        for b in br:
            print(f"    {b[0]:3d}-{b[1]:3d} Hz  real {fmt(br[b])} | twin {fmt(bt[b])}")

    print("4. Ratio twin/real per joint under variants (one replay each, seed 2/3)")
    af, rt = pr.acquisition_factor, pr.reference_times
    fx = cal.effects
    rigid1 = np.array(fx.stiffness_Nm_rad, float)
    rigid1[0] = 0.0
    variants = [
        ("1 sample late, point samples (session 7 record)", fx, "old"),
        ("this record (file clock, 500 Hz + decimation)", fx, None),
        ("  noise off", rn.without_noise(fx), None),
        ("  C2 cubic-spline set points (500 Hz)", fx, "spline"),
        ("  diag: J1 rigid", dataclasses.replace(fx, stiffness_Nm_rad=rigid1), None),
        ("  diag: damping ratio 0.3 (0.1)", dataclasses.replace(fx, damping_ratio=0.3), None),
        ("  diag: no link-side friction", dataclasses.replace(fx, link_friction_share=np.zeros(6)), None),
    ]
    for label, fxv, how in variants:
        tw = tv.CloosTwin(dataclasses.replace(cal, effects=fxv), model)
        if how == "old":
            pr.acquisition_factor, pr.reference_times = (lambda r: 1), (lambda N, s, dt: np.arange(N * s) * dt)
        line = f"  {label:50s}"
        try:
            for i, n in enumerate(SETS):
                d = recs[n].data
                if how == "spline":
                    from scipy.interpolate import CubicSpline

                    k = pr.acquisition_factor(d.sample_rate_hz)
                    tt, t5 = np.arange(d.n_samples) / d.sample_rate_hz, np.arange(d.n_samples * k) / (d.sample_rate_hz * k)
                    sp = CubicSpline(tt, d.q_rad, axis=0)
                    d5 = dataclasses.replace(d, q_rad=sp(t5), dq_rad_s=sp(t5, 1), ddq_rad_s2=sp(t5, 2),
                                             tau_Nm=np.zeros((t5.size, 6)), sample_rate_hz=d.sample_rate_hz * k)
                    tau = pr.decimate(tw.replay(d5, 1, 2 + i, averaged=False).data.tau_Nm, k)
                else:
                    tau = tw.replay(d, 1, 2 + i, averaged=False).data.tau_Nm
                W = design_matrix(reg, base, d)
                er = rms(d.tau_Nm - (W @ real.beta).reshape(d.tau_Nm.shape))
                line += f"  {n[:8]} {fmt(rms(tau - (W @ beta_twin).reshape(tau.shape)) / er)}"
        finally:
            pr.acquisition_factor, pr.reference_times = af, rt
        print(line, flush=True)

    print("5. The 5-10 Hz RMS of the error on the process IDENTIFICATION files [Nm], real | twin")
    for n in ("process1", "process2"):
        d = ds.load(n).data
        W = design_matrix(reg, base, d)
        er = d.tau_Nm - (W @ real.beta).reshape(d.tau_Nm.shape)
        et = twin.replay(d, 1, 7, averaged=False).data.tau_Nm - (W @ beta_twin).reshape(d.tau_Nm.shape)
        print(f"  {n}: real {fmt(band_rms(er, d.sample_rate_hz))} | twin {fmt(band_rms(et, d.sample_rate_hz))}")

    print("6. The main axes' mode on the motor encoders (5-10 Hz), J1-J3 (session 8, main-mode task)")
    A = ds.load("A", rect=False).data  # averaged encoder positions with everything off the Fourier lines
    dA = recs["A"].data
    fs = dA.sample_rate_hz
    rA = dA.tau_Nm - model_torque_Nm(reg, base, dA, real.beta)
    enc, tq = band_rms(A.q_rad - dA.q_rad, fs)[:3], band_rms(rA, fs)[:3]
    M = twin.pin.crba(twin.pmodel, twin.pdata, dA.q_rad[0])
    rigid = 1.0 / ((np.diag(np.triu(M) + np.triu(M, 1).T) + twin.ia)[:3] * (2 * np.pi * cal.mode_hz) ** 2)
    print(f"  real A: encoder [urad] {fmt(1e6 * enc, 1)}, residual torque [Nm] {fmt(tq, 1)}, urad per Nm {fmt(1e6 * enc / tq, 1)}"
          f" (a rigid axis moved by that torque at the mode: {fmt(1e6 * rigid, 1)})")
    meas = scipy.io.loadmat(root / "Experimental_Validation/Joint_Data_Process_2/Process2_withoutModel.mat", squeeze_me=True)
    qd = np.column_stack([np.interp(t - lags[best], t, des["deg_q"][:, j]) for j in range(6)])
    print(f"  real process 2, measured - desired {1e3 * lags[best]:.0f} ms late [urad]: "
          f"{fmt(1e6 * np.radians(band_rms(np.asarray(meas['deg_q'], float) - qd, 500.0))[:3], 1)}")
    inv = np.array(fx.inverter_velocity_bandwidth_hz, float)
    st0 = np.array(fx.stiffness_Nm_rad, float)
    st0[:3] = 0.0
    for label, fxv in [("twin (committed)", fx), ("  inverter loop 30 Hz on axes 1-3", dataclasses.replace(fx, inverter_velocity_bandwidth_hz=np.where(np.arange(6) < 3, 30.0, inv))),
                       ("  inverter loop 15 Hz on axes 1-3", dataclasses.replace(fx, inverter_velocity_bandwidth_hz=np.where(np.arange(6) < 3, 15.0, inv))),
                       ("  axes 1-3 rigid", dataclasses.replace(fx, stiffness_Nm_rad=st0, link_friction_share=np.where(np.arange(6) < 3, 0.0, fx.link_friction_share)))]:
        tw = tv.CloosTwin(dataclasses.replace(cal, effects=fxv), model)
        run = tw.replay(dA, 2, 0)
        Q = run.raw[0].mean(axis=0) @ tw.C.T
        rt = run.data.tau_Nm - model_torque_Nm(reg, base, run.data, real.beta)
        line = f"  {label:36s} A: encoder [urad] {fmt(1e6 * band_rms(Q - run.data.q_rad, fs)[:3], 1)}, torque [Nm] {fmt(band_rms(rt, fs)[:3], 1)}"
        for n in ("process1", "process2"):
            d = ds.load(n).data
            tau = tw.replay(d, 1, 7, averaged=False).data.tau_Nm
            line += f"; {n} [Nm] {fmt(band_rms(tau - model_torque_Nm(reg, base, d, real.beta), d.sample_rate_hz)[:3], 1)}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
