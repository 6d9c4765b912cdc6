"""The wrist's residual spectra, J4 and J6, real and twin (issue 15, item 4; session 10, wrist-ACF task).

Prints (about 2 min on a free core):

1. real, Trajectory A and C (residual of the A fit): whether the 6-11 Hz contents of J4 and J6 are one mode
   (band-passed correlation, coherence and phase with each other, with J2's 7 Hz mode and with J5); what their
   6-11 Hz envelopes follow (the axes' |motor acceleration|, the other axes' envelopes); where J4's 11-90 Hz
   content sits (by axis 4's speed; the best single line locked to a wrist motor's angle);
2. twin, 2 repetitions of A fitted with the REAL per-sample weights (so that 2 repetitions stand for 50), C and
   the two process validation files once: J4/J6 RMS per 1 Hz bin and their 10 / 100 ms ACF, J4's C and process
   ratios, J4 standing on process 2 and the share of its standing steps the integrator hold held; one change at a
   time: the committed twin, axis 4's velocity PI in the inverter (30 Hz), that with the integrator hold
   (``run.py --j4-hold``), the hold on the committed sampled loop, the first two with Dahl off on axis 4, and the
   inverter loop with the main axes 1-3 rigid (is J4's 6-7 Hz then the main axes' mode through the coupling?).

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_wrist_acf.py [--yaml Y] [--real-only]
"""
from __future__ import annotations

import argparse
import dataclasses

import numpy as np
from scipy import signal

from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import cloos_hold, twin_vs_real as tv
from robident_twin.validation.cloos_calibration import load_calibration

BAND_HZ = (6.0, 11.0)
PAIRS = ((3, 5), (1, 3), (1, 5), (4, 3), (4, 5))


def residual(reg, base, d, beta):
    return d.tau_Nm - model_torque_Nm(reg, base, d, beta)


def bins_Nm(x, rate, hi_hz=40):
    """RMS per 1 Hz bin from 1 Hz (Parseval on the record's DFT)."""
    X = np.fft.rfft(x - x.mean(axis=0), axis=0)
    f = np.fft.rfftfreq(len(x), 1.0 / rate)
    return np.array([np.sqrt(2 * np.sum(np.abs(X[(f >= lo) & (f < lo + 1)]) ** 2, axis=0)) / len(x)
                     for lo in range(1, hi_hz)])


def acf(x, lag):
    x = x - x.mean(axis=0)
    return (x[lag:] * x[:-lag]).sum(axis=0) / (x * x).sum(axis=0)


def real_evidence(reg, base, real, recs, Cinv):
    for name in ("A", "C"):
        d = recs[name].data
        rate = d.sample_rate_hz
        r = residual(reg, base, d, real.beta)
        rb = signal.sosfiltfilt(signal.butter(4, BAND_HZ, btype="band", fs=rate, output="sos"), r, axis=0)
        env = signal.sosfiltfilt(signal.butter(2, 1.0, fs=rate, output="sos"), np.abs(signal.hilbert(rb, axis=0)), axis=0)
        dqm, ddqm = d.dq_rad_s @ Cinv.T, d.ddq_rad_s2 @ Cinv.T
        print(f"== real {name}, {BAND_HZ[0]:g}-{BAND_HZ[1]:g} Hz")
        for a, b in PAIRS:
            f, coh = signal.coherence(r[:, a], r[:, b], fs=rate, nperseg=256)
            _, P = signal.csd(r[:, a], r[:, b], fs=rate, nperseg=256)
            m = (f >= BAND_HZ[0]) & (f <= BAND_HZ[1])
            i = np.argmax(coh[m])
            print(f"  J{a + 1}-J{b + 1}: band correlation {np.corrcoef(rb[:, a], rb[:, b])[0, 1]:5.2f}, coherence mean "
                  f"{coh[m].mean():.2f} max {coh[m][i]:.2f} (phase there {np.degrees(np.angle(P[m][i])):4.0f} deg)")
        for j in (3, 5):
            c_acc = [np.corrcoef(env[:, j], np.abs(ddqm[:, k]))[0, 1] for k in range(6)]
            c_env = [np.corrcoef(env[:, j], env[:, k])[0, 1] for k in range(6)]
            print(f"  J{j + 1} envelope against |ddqm| of axes 1-6: {' '.join(f'{c:5.2f}' for c in c_acc)}; "
                  f"against the envelopes of J1-J6: {' '.join(f'{c:5.2f}' for c in c_env)}")
        h = signal.sosfiltfilt(signal.butter(4, (11.0, 90.0), btype="band", fs=rate, output="sos"), r[:, 3])
        qm = d.q_rad @ Cinv.T
        best = []
        for k in (3, 4, 5):
            share = []
            for cyc in np.arange(5.0, 150.0, 0.25):
                X = np.column_stack([np.sin(2 * np.pi * cyc * qm[:, k]), np.cos(2 * np.pi * cyc * qm[:, k])])
                c, *_ = np.linalg.lstsq(X, h, rcond=None)
                share.append((1 - np.sum((h - X @ c) ** 2) / np.sum(h ** 2), cyc))
            best.append((k + 1, *max(share)[::-1]))
        v4 = np.abs(dqm[:, 3])
        parts = [(lab, m) for lab, m in (("|dqm4| < 0.02 rad/s", v4 < 0.02), ("0.02-0.2", (v4 >= 0.02) & (v4 < 0.2)),
                                          (">= 0.2", v4 >= 0.2))]
        print(f"  J4 11-90 Hz: RMS {np.sqrt(np.mean(h ** 2)):.3f} Nm; " + "; ".join(
            f"{lab} ({m.mean():.2f} of the time): RMS {np.sqrt(np.mean(h[m] ** 2)):.2f}, "
            f"{np.sum(h[m] ** 2) / np.sum(h ** 2):.2f} of its energy" for lab, m in parts))
        print("  best single line locked to a wrist motor's angle (axis, cycles/rad, share of J4's 11-90 Hz): "
              + ", ".join(f"{a} {c:g} {s:.3f}" for a, c, s in best))


class _CountingHold(cloos_hold.IntegratorHold):
    last = None

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        _CountingHold.last = self


def twin_table(model, real, recs, cal0):
    reg, base = model
    d = recs["A"].data
    rate = d.sample_rate_hz
    var = recs["A"].tau_sample_variance_Nm2 / 50.0
    window = cloos_hold.hold_window_on_real(cal0.effects.encoder_resolution_rad)
    k_wrist = np.where(np.arange(6) < 3, 0.0, np.asarray(cal0.effects.stiffness_Nm_rad, dtype=float))
    rigid_main = lambda c: dataclasses.replace(c, effects=dataclasses.replace(c.effects, stiffness_Nm_rad=k_wrist))
    no_dahl = lambda c: dataclasses.replace(c, effects=dataclasses.replace(c.effects, presliding=None))
    variants = {"committed": cal0, "J4 inverter 30 Hz": cloos_hold.with_hold(cal0, np.zeros(6)),
                "--j4-hold (inverter 30 Hz + hold)": cloos_hold.with_hold(cal0, window),
                "hold on the sampled loop": dataclasses.replace(cal0, effects=dataclasses.replace(
                    cal0.effects, hold_window_rad=window)),
                "committed, Dahl off": no_dahl(cal0),
                "J4 inverter 30 Hz, Dahl off": no_dahl(cloos_hold.with_hold(cal0, np.zeros(6))),
                "J4 inverter 30 Hz, axes 1-3 rigid": rigid_main(cloos_hold.with_hold(cal0, np.zeros(6)))}
    rr = residual(reg, base, d, real.beta)
    b_real = bins_Nm(rr, rate)
    print(f"\n== twin (2 repetitions of A with the real weights; hold window {1e6 * window[3]:.2f} urad)")
    print("   RMS per 1 Hz bin 1-15 Hz [Nm], bands 1-6 / 6-11 / 11-40 Hz, ACF 10 / 100 ms")
    line = lambda lab, b, r_, j: print(
        f"  {lab:36s} J{j + 1} {' '.join(f'{x:.2f}' for x in b[:14, j])} | {np.sqrt(np.sum(b[:5, j] ** 2)):.2f} "
        f"{np.sqrt(np.sum(b[5:10, j] ** 2)):.2f} {np.sqrt(np.sum(b[10:, j] ** 2)):.2f} | {acf(r_, round(0.01 * rate))[j]:.2f} "
        f"{acf(r_, round(0.1 * rate))[j]:.2f}")
    for j in (3, 5):
        line("real", b_real, rr, j)
    orig = cloos_hold.IntegratorHold
    tv.cloos_hold.IntegratorHold = _CountingHold
    try:
        for name, cal in variants.items():
            twin = tv.CloosTwin(cal, model)
            run = twin.replay(d, 2, 0)
            dd = dataclasses.replace(run.data, tau_var_sample_Nm2=var, tau_var_Nm2=var.mean(axis=0))
            vals = {"C": twin.replay(recs["C"].data, 2, 1).data}
            _CountingHold.last = None
            for i, n in enumerate(tv.VALIDATION_SETS[1:]):
                p = twin.replay(recs[n].data, 1, 2 + i, averaged=False)
                vals[n] = p.data
            e4 = p.tracking_error_rad[:, 3]  # the last: process 2, J4 standing
            held = _CountingHold.last
            st = tv.fit_statistics("twin", reg, base, dd, run.sample_variance_Nm2, vals)
            rt = residual(reg, base, dd, st.beta)
            b = bins_Nm(rt, rate)
            for j in (3, 5):
                line(name, b, rt, j)
            ratio = {n: st.validation_rms_Nm[n][3] / real.validation_rms_Nm[n][3] for n in vals}
            print(f"  {'':36s} J4 ratios C {ratio['C']:.2f} process 1 {ratio['process1_validation']:.2f} process 2 "
                  f"{ratio['process2_validation']:.2f}; J4 standing on process 2 {1e3 * np.degrees(np.sqrt(np.mean(e4 ** 2))):.2f} "
                  f"mdeg RMS" + ("" if held is None else f", held {held.held_steps[3]} of {held.standing_steps[3]} standing steps"))
    finally:
        tv.cloos_hold.IntegratorHold = orig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--yaml", default="sim_assets/cloos_qrc350/twin_calibrated.yaml", help="the twin's calibration")
    ap.add_argument("--real-only", action="store_true")
    a = ap.parse_args(argv)
    model = build_model(symmetric=True)
    reg, base = model
    real, recs = tv.real_statistics(None, model)
    Cinv = np.linalg.inv(np.asarray(reg.spec.coupling, dtype=float))
    real_evidence(reg, base, real, recs, Cinv)
    if not a.real_only:
        twin_table(model, real, recs, load_calibration(a.yaml))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
