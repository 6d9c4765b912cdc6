"""The CLOOS wrist's own structural mode (issue 15, session 8): where the real J4-J6 8-9 Hz ringing
starts, how it decays, and what an elastic axis 6 does in the twin.

Real files (Trajectory A and C, residual = measured - the authors' 35-parameter WLS model):

* per joint J4-J6 the mean 5-12 Hz envelope over 0.4 s after the reversals of each motor axis,
  divided by its mean (``cloos_calibration.reversal_locked_envelope``), with the share of circular
  shifts of the residual (300) that reach the own axis's figure (a permutation p-value);
* the strongest lines between 3 and 15 Hz of J4 and J6 (the calibration's rule for the mode);
* the apparent damping ratio of J6's bursts: slope of the log envelope 0.05-0.5 s after its
  largest value in the 0.25 s after each axis-6 reversal (other ringing overlaps: an estimate).

Twin (committed calibration, noise off, one repetition of A and C, the real weights): residual RMS
ratio, validation on C, ACF at 10 / 100 ms and the J6 spectrum in 1 Hz bins, for the committed wrist
(axis 6 elastic, inverter velocity loop, gear friction on the link side) and three variants.

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_wrist_mode.py [--root DIR]

(about 1 min).
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
from scipy.signal import butter, hilbert, sosfiltfilt

from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import cloos_calibration as cc, repetition_noise as rn, twin_vs_real as tv



def _row(x, p=2):
    return " ".join(f"{v:6.{p}f}" for v in x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=None)
    a = ap.parse_args(argv)
    model = build_model(symmetric=True)
    reg, base = model
    real, recs = tv.real_statistics(a.root, model)
    Cinv = np.linalg.inv(np.asarray(reg.spec.coupling, dtype=float))
    resid = lambda d, beta: d.tau_Nm - model_torque_Nm(reg, base, d, beta)
    print("REAL: 5-12 Hz envelope after the reversals of motor axis 1..6 / its mean (rows J4, J5, J6)")
    rng = np.random.default_rng(1)
    for name in ("A", "C"):
        d = recs[name].data
        r, dqm, fs = resid(d, real.beta), d.dq_rad_s @ Cinv.T, d.sample_rate_hz
        L = cc.reversal_locked_envelope(r, dqm, fs)
        shifts = rng.integers(0, len(r), 300)
        reach = np.mean([np.diag(cc.reversal_locked_envelope(np.roll(r, s, axis=0), dqm, fs)) >= np.diag(L)
                         for s in shifts], axis=0)
        print(f" {name}: " + " | ".join(f"J{j + 1} {_row(L[j])}" for j in (3, 4, 5)))
        print(f"    own axis (J1..J6) {_row(np.diag(L))}; circular shifts reaching it {_row(reach, 3)}")
        f = np.fft.rfftfreq(len(r), 1 / fs)
        P = np.abs(np.fft.rfft(r - r.mean(0), axis=0)) ** 2
        b = (f >= 3) & (f <= 15)
        print("    strongest 3-15 Hz lines [Hz]: " + "; ".join(
            f"J{j + 1} " + " ".join(f"{x:.1f}" for x in f[b][np.argsort(P[b, j])[::-1][:4]]) for j in (3, 5)))
        env = np.abs(hilbert(sosfiltfilt(butter(4, cc.WRIST_RINGING_BAND_HZ, "bandpass", fs=fs, output="sos"),
                                         r - r.mean(0), axis=0), axis=0))
        zs = []
        for i in np.flatnonzero(np.diff(np.sign(dqm[:, 5])) != 0):
            if i + int(0.8 * fs) < len(r):
                ip = i + int(np.argmax(env[i:i + int(0.25 * fs), 5]))
                tt = np.arange(int(0.05 * fs), int(0.5 * fs))
                zs.append(-np.polyfit(tt / fs, np.log(env[ip + tt, 5]), 1)[0] / (2 * np.pi * 8.0))
        print(f"    J6 apparent damping ratio after each axis-6 reversal: {_row(zs, 3)}")
    cal = cc.load_calibration(Path(__file__).resolve().parents[2] / "sim_assets/cloos_qrc350/twin_calibrated.yaml")
    dA, dC = recs["A"].data, recs["C"].data
    rA = resid(dA, real.beta)
    spec = lambda r: [np.sqrt(2 * np.sum(np.abs(np.fft.rfft(r - r.mean()) / len(r))[
        (np.fft.rfftfreq(len(r), 1 / 500.0) >= lo) & (np.fft.rfftfreq(len(r), 1 / 500.0) < lo + 1)] ** 2))
        for lo in range(2, 14)]
    fx0 = cal.effects
    print(f"\nTWIN (noise off, 1 repetition): wrist mode {cal.wrist_mode_hz:.2f} Hz, axis-6 stiffness "
          f"{fx0.stiffness_Nm_rad[5]:.1f} Nm/rad, link-side share {fx0.link_friction_share[5]:.2f}")
    print(f"  {'':30s} J6 RMS per 1 Hz bin, 2..13 Hz")
    print(f"  {'real':30s} {_row(spec(rA[:, 5]))}")
    variants = (("committed (axis 6 elastic)", {}),
                ("axis 6 rigid", {"stiffness_Nm_rad": np.r_[fx0.stiffness_Nm_rad[:5], 0.0]}),
                ("axis 6 share 0", {"link_friction_share": np.r_[fx0.link_friction_share[:5], 0.0]}),
                ("rigid, sampled 8 Hz loop (s7)", {"stiffness_Nm_rad": np.r_[fx0.stiffness_Nm_rad[:5], 0.0],
                                                   "inverter_velocity_bandwidth_hz": np.r_[fx0.inverter_velocity_bandwidth_hz[:5], 0.0]}))
    for label, change in variants:
        fx = rn.without_noise(dataclasses.replace(fx0, **change))
        twin = tv.CloosTwin(dataclasses.replace(cal, effects=fx), model)
        run = twin.replay(dA, 1, 0)
        d = dataclasses.replace(run.data, tau_var_sample_Nm2=dA.tau_var_sample_Nm2)
        st = tv.fit_statistics("twin", reg, base, d, dA.tau_var_sample_Nm2, {"C": twin.replay(dC, 1, 1).data})
        print(f"  {label:30s} {_row(spec(resid(d, st.beta)[:, 5]))}")
        print(f"  {'':30s} J4-J6 residual {_row(st.residual_rms_Nm[3:] / real.residual_rms_Nm[3:])}, C "
              f"{_row(st.validation_rms_Nm['C'][3:] / real.validation_rms_Nm['C'][3:])}, ACF 10 ms |diff| "
              f"{_row(np.abs(st.acf[0.01] - real.acf[0.01])[3:])}, ACF 100 ms {_row(st.acf[0.1][3:])} "
              f"(real {_row(real.acf[0.1][3:])})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
