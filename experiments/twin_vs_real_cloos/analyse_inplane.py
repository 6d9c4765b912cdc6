"""The main axes' in-plane mode and J5 (issue 15, item 4; session 10). Prints (about 4 min, one core):

1. the real Trajectory A residual (identification data): J5's energy per band; its 5-10 Hz envelope after each
   axis's reversals; the J5/J2 ratio after each of axis 2's reversals against cos q4 (cloos_inplane.burst_shape);
   the J5 drive's encoder/torque transfer at 5-10 Hz (cloos_inplane.rigid_share);
2. the committed twin on A (2 repetitions, noise off, residual against the real model): the same figures, and
   the spectra of J2 and J5 (share of 3-12 Hz power per 0.5 Hz) against the real ones, with the coupled
   in-plane mode of the springs of axes 2 and 3 at axis 2's reversal poses (cloos_inplane.coupled_mode_hz);
3. J5 on the process IDENTIFICATION files per band, real and twin, one effect of the committed twin off at a
   time (noise off; torque minus the real model's prediction).

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_inplane.py
"""
from __future__ import annotations

import dataclasses

import numpy as np

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import cloos_calibration as cc
from robident_twin.validation import cloos_inplane as ci
from robident_twin.validation import repetition_noise as rn
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.periodogram import band_rms_periodogram

BANDS_HZ = ((0, 1), (1, 2), (2, 5), (5, 10), (10, 20), (20, 50))


def band_split(e, rate):
    """RMS per band of BANDS_HZ (periodogram) of each column."""
    return band_rms_periodogram(e, rate, BANDS_HZ)


def spectrum_shares(x, rate, lo=3.0, hi=12.0):
    f = np.fft.rfftfreq(len(x), 1.0 / rate)
    P = np.abs(np.fft.rfft(x - x.mean())) ** 2
    bins = np.arange(lo, hi, 0.5)
    return np.array([P[(f >= b) & (f < b + 0.5)].sum() for b in bins]) / P[(f >= lo) & (f <= hi)].sum()


def fmt(a, p=2):
    return " ".join(f"{x:.{p}f}" for x in a)


def wrist_figures(label, r, q_enc, d, J5):
    fs = d.sample_rate_hz
    ratio, cos, slope = ci.burst_shape(r, d.dq_rad_s[:, 1], np.cos(d.q_rad[:, 3]), fs)
    env = cc.reversal_locked_envelope(r, d.dq_rad_s, fs, band_hz=cc.RINGING_BAND_HZ, window_s=0.6)
    share = ci.rigid_share(q_enc[:, 4] - d.q_rad[:, 4], r[:, 4], J5, fs)
    print(f"  {label}: J5 band RMS {fmt(band_split(r, fs)[:, 4], 3)} Nm; 5-10 Hz envelope after axis 1-6 reversals "
          f"{fmt(env[4])}")
    print(f"    J5/J2 after axis 2's reversals {fmt(ratio, 4)} at cos q4 {fmt(cos)}: slope {slope:.4f} "
          f"(corr {np.corrcoef(ratio, cos)[0, 1]:.2f}); J5 drive at 5-10 Hz: {share[0]:.3f} of a rigid axis at "
          f"{share[1]:.0f} deg; 100 ms ACF J5 {tv.autocorrelation(r, 50)[4]:.2f}")


def main() -> int:
    reg, base = model = build_model(symmetric=True)
    real, recs = tv.real_statistics(None, model)
    d = recs["A"].data
    fs = d.sample_rate_hz
    r = d.tau_Nm - model_torque_Nm(reg, base, d, real.beta)
    cal = cc.load_calibration("sim_assets/cloos_qrc350/twin_calibrated.yaml")
    tw = tv.CloosTwin(cal, model)
    J5 = tw.link_side_inertia(d.q_rad[0])[4] + tw.ia[4]
    print(f"bands [Hz]: {BANDS_HZ}; J5 inertia at the start pose {J5:.3f} kg m^2")
    print("1. Real Trajectory A (residual of the real fit; encoder: the averaged record off the Fourier lines)")
    wrist_figures("real", r, ds.load("A", rect=False).data.q_rad, d, J5)
    print("2. Committed twin on A (2 repetitions, noise off, residual against the real model)")
    quiet = dataclasses.replace(cal, effects=rn.without_noise(cal.effects))
    for label, c in (("committed", quiet), ("axis 5 loop as calibrated (21.6 Hz)", ci.with_wrist5_loop(quiet, 21.6))):
        run = tv.CloosTwin(c, model).replay(d, 2, 200)
        rt = run.data.tau_Nm - model_torque_Nm(reg, base, run.data, real.beta)
        wrist_figures(label, rt, run.raw[0].mean(axis=0) @ tw.C.T, run.data, J5)
        if label == "committed":
            print("  share of 3-12 Hz power per 0.5 Hz from 3 Hz, real | twin:")
            for j in (1, 2, 4):
                print(f"    J{j + 1}: {fmt(spectrum_shares(r[:, j], fs))} | {fmt(spectrum_shares(rt[:, j], fs))}")
    poses = d.q_rad[cc.reversal_indices(d.dq_rad_s[:, 1])]
    k = np.asarray(cal.effects.stiffness_Nm_rad)
    print(f"  coupled in-plane mode of the springs of axes 2, 3 at axis 2's reversal poses: "
          f"{fmt([ci.coupled_mode_hz(tw, q, k) for q in poses])} Hz; each alone at the start pose "
          f"{fmt(np.sqrt(k[1:3] / tw.link_side_inertia(d.q_rad[0])[1:3]) / (2 * np.pi))} Hz")

    print("3. J5 on the process identification files: band RMS [Nm] (torque - real model), twin noise off")
    fx = cal.effects

    def on(axes, **kw):
        out = {}
        for key, v in kw.items():
            a = np.array(getattr(fx, key), dtype=float)
            a[list(axes)] = v
            out[key] = a
        return dataclasses.replace(cal, effects=dataclasses.replace(fx, **out))

    te0 = dataclasses.replace(fx.te, amplitude_rad=np.where(np.arange(6)[:, None, None] == 4, 0.0, fx.te.amplitude_rad))
    variants = {"committed": cal, "axis 5 extra friction 0": on([4], stribeck_Nm=0, visc2_Nms2_rad2=0, load_coulomb=0),
                "axis 5 ripple 0": on([4], ripple_Nm=0), "axis 5 transmission error 0": dataclasses.replace(
                    cal, effects=dataclasses.replace(fx, te=te0)),
                "axis 6 rigid (diff. gear)": on([5], stiffness_Nm_rad=0, link_friction_share=0),
                "axes 1-3 rigid": on([0, 1, 2], stiffness_Nm_rad=0, link_friction_share=0),
                "axis 5 inverter loop 21.6 Hz": ci.with_wrist5_loop(cal, 21.6)}
    files = {n: ds.load(n, None).data for n in cc.PROCESS_IDENTIFICATION_FILES}
    for n, f in files.items():
        e = f.tau_Nm - model_torque_Nm(reg, base, f, real.beta)
        print(f"  {n}, real: {fmt(band_split(e, f.sample_rate_hz)[:, 4], 3)}")
    for name, c in variants.items():
        tw_v = tv.CloosTwin(dataclasses.replace(c, effects=rn.without_noise(c.effects)), model)
        for n, f in files.items():
            run = tw_v.replay(f, 1, 0, averaged=False)
            e = run.data.tau_Nm - model_torque_Nm(reg, base, f, real.beta)
            print(f"  {n}, {name}: {fmt(band_split(e, f.sample_rate_hz)[:, 4], 3)}; J5 tracking "
                  f"{1e3 * np.degrees(run.tracking_rms_rad[4]):.1f} mdeg")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
