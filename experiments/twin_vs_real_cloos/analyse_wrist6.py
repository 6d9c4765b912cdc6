"""Axis 6 of the CLOOS twin (issue 15 item 4, session 9): where the twin's slow J6 content comes from.

Real J6 residual of the Trajectory A fit: RMS per 1 Hz bin (2-13 Hz) over the whole record, over the
0.4 s after each reversal of motor axis 6 and elsewhere, and the line after axis 6's reversals by two
estimators (:func:`cloos_wrist6.burst_line_hz`: the excess over the record's Welch spectrum, and the
plain sum of the windows' periodograms).

Twin: the committed calibration with one effect of axis 6 changed at a time, noise off, 2 repetitions
of A, fitted with the committed twin's own variance profile (10 noisy repetitions; with the real
weights the 100 ms ACF comes out +0.12 instead of the 50-repetition run's -0.12), C and the process
validation files once: the J6 spectrum, the burst line, the J6 residual / C ratios and ACF, and
J4-J6 on the process files.

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_wrist6.py [--root DIR]

(about 4 min on a free core).
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import cloos_calibration as cc, cloos_wrist6 as w6, repetition_noise as rn
from robident_twin.validation import twin_vs_real as tv

PROCESS = ("process1_validation", "process2_validation")


def bin_rms(r: np.ndarray, fs: float, mask=None) -> np.ndarray:
    """RMS of ``r`` in each 1 Hz bin from 2 to 13 Hz (brick-wall FFT band), over ``mask`` if given."""
    r = r - r.mean()
    f, R = np.fft.rfftfreq(len(r), 1 / fs), np.fft.rfft(r)
    out = []
    for lo in range(2, 14):
        x = np.fft.irfft(np.where((f >= lo) & (f < lo + 1), R, 0), len(r))
        out.append(np.sqrt(np.mean((x if mask is None else x[mask]) ** 2)))
    return np.array(out)


def plain_burst_line_hz(r, v, fs, w_s=w6.BURST_WINDOW_S, band=w6.BURST_BAND_HZ, nfft=w6.BURST_NFFT) -> float:
    """The sum of the Hann-windowed periodograms after the reversals, without the record's spectrum removed."""
    w = int(round(w_s * fs))
    P = sum(np.abs(np.fft.rfft((r[i:i + w] - r[i:i + w].mean()) * np.hanning(w), nfft)) ** 2
            for i in np.flatnonzero(np.diff(np.sign(v)) != 0) if i + w <= len(r))
    f = np.fft.rfftfreq(nfft, 1 / fs)
    b = (f >= band[0]) & (f <= band[1])
    return float(f[b][np.argmax(P[b])])


def _row(x, p=2):
    return " ".join(f"{v:5.{p}f}" for v in x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=None)
    a = ap.parse_args(argv)
    model = build_model(symmetric=True)
    reg, base = model
    real, recs = tv.real_statistics(a.root, model)
    Cinv = np.linalg.inv(np.asarray(reg.spec.coupling, dtype=float))
    resid = lambda d, beta: d.tau_Nm - model_torque_Nm(reg, base, d, beta)
    dA, dC = recs["A"].data, recs["C"].data
    fs = dA.sample_rate_hz
    v6 = (dA.dq_rad_s @ Cinv.T)[:, 5]
    after = np.zeros(len(v6), bool)
    for i in np.flatnonzero(np.diff(np.sign(v6)) != 0):
        after[i:i + int(w6.BURST_WINDOW_S * fs)] = True
    rA = resid(dA, real.beta)[:, 5]
    print(f"REAL J6 (A), RMS per 1 Hz bin 2..13 Hz [Nm]; axis 6 reverses {np.sum(np.diff(np.sign(v6)) != 0)} "
          f"times, the 0.4 s after them are {after.mean():.0%} of the record")
    for label, m in (("whole", None), ("after axis-6 reversals", after), ("elsewhere", ~after)):
        print(f"  {label:26s} {_row(bin_rms(rA, fs, m))}")
    for name, d in (("A", dA), ("C", dC)):
        r, v = resid(d, real.beta)[:, 5], (d.dq_rad_s @ Cinv.T)[:, 5]
        print(f"  line after axis-6 reversals ({name}): excess {w6.burst_line_hz(r, v, fs):.2f} Hz, "
              f"plain {plain_burst_line_hz(r, v, fs):.2f} Hz")
    print(f"  ACF 10 / 100 ms: {real.acf[0.01][5]:.2f} / {real.acf[0.1][5]:.2f}", flush=True)

    cal = cc.load_calibration(Path(__file__).resolve().parents[2] / "sim_assets/cloos_qrc350/twin_calibrated.yaml")
    fx0 = cal.effects
    weights = tv.CloosTwin(cal, model).replay(dA, 10, 0).data.tau_var_sample_Nm2
    d6 = tv.calibrate(real, recs["A"], model, dissipative=w6.WRIST6_AXES).effects
    at6 = lambda name, x: {name: np.r_[np.asarray(getattr(fx0, name), dtype=float)[:5], x]}
    zeta = lambda z: {"damping_ratio": np.r_[np.broadcast_to(fx0.damping_ratio, (6,))[:5], z]}
    te6 = dataclasses.replace(fx0.te, amplitude_rad=np.where(np.arange(6)[:, None, None] == 5, 0.0, fx0.te.amplitude_rad))
    variants = (
        ("committed", {}, {}),
        ("link-side share 0", at6("link_friction_share", 0.0), {}),
        ("extra friction off", {**at6("stribeck_Nm", 0.0), **at6("visc2_Nms2_rad2", 0.0), **at6("load_coulomb", 0.0)}, {}),
        ("extra friction dissipative", {**at6("stribeck_Nm", d6.stribeck_Nm[5]), **at6("visc2_Nms2_rad2", d6.visc2_Nms2_rad2[5]),
                                        **at6("load_coulomb", d6.load_coulomb[5])}, {}),
        ("transmission error off", {"te": te6}, {}),
        ("sign smoothing 0.001 rad/s", {}, {"coulomb_eps_rad_s": 0.001}),
        ("sign smoothing 0.02 rad/s", {}, {"coulomb_eps_rad_s": 0.02}),
        ("inverter loop 30 Hz", at6("inverter_velocity_bandwidth_hz", 30.0), {}),
        ("share 0, damping 0.02", {**at6("link_friction_share", 0.0), **zeta(0.02)}, {}),
        ("share 0.5, damping 0.05", {**at6("link_friction_share", 0.5), **zeta(0.05)}, {}),
        ("stiffness x1.3", at6("stiffness_Nm_rad", 1.3 * fx0.stiffness_Nm_rad[5]), {}),
    )
    print("\nTWIN J6, one change of axis 6 at a time (sign smoothing: every axis), noise off, 2 repetitions, "
          "the committed twin's weights")
    print(f"  {'':27s} RMS per 1 Hz bin 2..13 Hz [Nm]                                   | line | J6 res   C  "
          f"ACF10 ACF100 | J4-J6 process 1, process 2")
    for label, change, kw in variants:
        twin = tv.CloosTwin(dataclasses.replace(cal, effects=rn.without_noise(dataclasses.replace(fx0, **change))),
                            model, **kw)
        d = dataclasses.replace(twin.replay(dA, 2, 0).data, tau_var_sample_Nm2=weights)
        vals = {"C": twin.replay(dC, 1, 1).data}
        vals.update({n: twin.replay(recs[n].data, 1, 2 + i, averaged=False).data for i, n in enumerate(PROCESS)})
        st = tv.fit_statistics("twin", reg, base, d, weights, vals)
        r = resid(d, st.beta)[:, 5]
        ratio = lambda n: st.validation_rms_Nm[n] / real.validation_rms_Nm[n]
        print(f"  {label:27s} {_row(bin_rms(r, fs))} | {w6.burst_line_hz(r, v6, fs):4.1f} | "
              f"{st.residual_rms_Nm[5] / real.residual_rms_Nm[5]:4.2f} {ratio('C')[5]:4.2f} {st.acf[0.01][5]:5.2f} "
              f"{st.acf[0.1][5]:5.2f} | {_row(ratio(PROCESS[0])[3:])}, {_row(ratio(PROCESS[1])[3:])}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
