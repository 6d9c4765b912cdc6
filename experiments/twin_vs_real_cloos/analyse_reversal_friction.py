"""Why the CLOOS twin rings the process paths as hard as Trajectory A, and what a link-side friction law
that rises over the Stribeck velocity changes (issue 15, item 4; session 9, in-plane task; README
"Reversal friction on the link side (session 9)"). Identification data only (Trajectory A and the
process IDENTIFICATION files); the twin's variants are diagnostics. Prints (about 5 min on one core):

1. the reference: axis 2's peak |ddq| and |jerk| on each file (process files: positions low-passed at 4 Hz;
   A: its Fourier lines, the twin's reference), and the
   5-10 Hz encoder motion the process identification files' measured positions carry (the real mode's
   own motion: the twin replays these files' measured q as its reference);
2. the real 5-10 Hz residual envelope in the 0.3 s after axis 2's acceleration pulses against the
   0.3 s before them (does the real robot ring after its ramps?);
3. the twin: 5-10 Hz RMS of the residual (torque minus the real model on the twin's own reference) on A
   (2 repetitions) and on the process identification files replayed once, with the file's measured q as
   the reference and with it low-passed at 4 Hz (the real mode's motion removed); variants: axes 1-3 rigid
   (no spring, no link-side friction), committed, no link-side friction on axes 1-3, and the main axes'
   extra friction on the link side (share 1);
4. one reversal of axis 2 alone (a parabola through zero speed, the other axes still, noise off, all of
   axis 2's friction on the link side): J2's 5-10 Hz RMS after it at 2.35 and 0.6 rad/s^2 (A's and the
   process paths' median |ddq2| at a reversal) with the sharp law and with the link Stribeck law at a
   scanned velocity scale v_s, and the slope of log ringing over log |ddq| (real, 52 reversals: 0.54).

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_reversal_friction.py
"""
from __future__ import annotations

import dataclasses

import numpy as np
from scipy.signal import butter, hilbert, sosfiltfilt

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import cloos_calibration as cc
from robident_twin.validation import twin_vs_real as tv

AXES = [0, 1, 2, 4]  # J1 J2 J3 J5
LOWPASS_HZ = 4.0


def fmt(a, p=1):
    return " ".join(f"{x:6.{p}f}" for x in a)


def lowpassed(d):
    """The record with its positions low-passed (zero phase) and differentiated again."""
    fs = d.sample_rate_hz
    q = sosfiltfilt(butter(4, LOWPASS_HZ, "lowpass", fs=fs, output="sos"), d.q_rad, axis=0)
    dq = np.gradient(q, 1 / fs, axis=0)
    return dataclasses.replace(d, q_rad=q, dq_rad_s=dq, ddq_rad_s2=np.gradient(dq, 1 / fs, axis=0))


def pulses(a, lo=0.1, hi=0.4):
    """(start, end) of each acceleration pulse of |a|: from below lo x max through hi x max back below lo x max."""
    A, out, i = np.abs(a), [], 0
    while i < len(A):
        if A[i] < lo * A.max():
            k = i
            while k < len(A) and A[k] < hi * A.max():
                k += 1
            e = k
            while e < len(A) and A[e] > lo * A.max():
                e += 1
            if k < len(A):
                out.append((i, e))
            i = e + 1
        else:
            i += 1
    return out


def main() -> int:
    reg, base = model = build_model(symmetric=True)
    real, recs = tv.real_statistics(None, model)
    res = lambda d, tau: tau - model_torque_Nm(reg, base, d, real.beta)
    files = {"A": recs["A"].data, **{n: ds.load(n).data for n in cc.PROCESS_IDENTIFICATION_FILES}}
    print("1./2. Reference and real ringing (axis 2's pulses; 5-10 Hz envelope J1 J2 J3 J5 [Nm] after | before)")
    for n, d in files.items():
        fs = d.sample_rate_hz
        # A's reference is its Fourier lines (rect, up to 0.5 Hz); its encoder's 5-10 Hz motion is off them
        lp = d if n == "A" else lowpassed(d)
        jerk = np.gradient(lp.ddq_rad_s2[:, 1], 1 / fs)
        enc = cc.band_rms((ds.load("A", rect=False).data.q_rad if n == "A" else d.q_rad) - lp.q_rad, fs)[:3] * 1e6
        r = res(d, d.tau_Nm)
        env = np.abs(hilbert(sosfiltfilt(butter(4, cc.RINGING_BAND_HZ, "bandpass", fs=fs, output="sos"),
                                         r - r.mean(0), axis=0), axis=0))
        w = int(0.3 * fs)
        pp = [(s, e) for s, e in pulses(lp.ddq_rad_s2[:, 1]) if s > w and e + w < len(r)]
        after = np.mean([env[e:e + w, AXES].mean(0) for s, e in pp], axis=0)
        before = np.mean([env[s - w:s, AXES].mean(0) for s, e in pp], axis=0)
        print(f"  {n}: |ddq2| max {np.abs(lp.ddq_rad_s2[:, 1]).max():.2f} rad/s^2, |jerk2| max {np.abs(jerk).max():.1f} "
              f"rad/s^3; encoder 5-10 Hz J1-J3 {fmt(enc)} urad; {len(pp)} pulses: after {fmt(after, 2)} | before "
              f"{fmt(before, 2)}; real 5-10 Hz RMS {fmt(cc.band_rms(r, fs)[AXES])}", flush=True)
    cal = cc.load_calibration("sim_assets/cloos_qrc350/twin_calibrated.yaml")
    fx = cal.effects
    main3 = np.isin(np.arange(6), tv.ELASTIC_AXES)
    variants = {"rigid axes 1-3": dataclasses.replace(fx, stiffness_Nm_rad=np.where(main3, 0.0, fx.stiffness_Nm_rad),
                                                      link_friction_share=np.where(main3, 0.0, fx.link_friction_share)),
                "committed": fx,
                "no link-side friction 1-3": dataclasses.replace(fx, link_friction_share=np.where(main3, 0.0, fx.link_friction_share)),
                "link Stribeck, share 1": dataclasses.replace(fx, main_link_extra_friction=True,
                                                              link_friction_share=np.where(main3, 1.0, fx.link_friction_share))}
    print("3. Twin 5-10 Hz residual RMS J1 J2 J3 J5 [Nm]: A | process1 measured-q ref, 4 Hz ref | process2 the same")
    for label, f in variants.items():
        tw = tv.CloosTwin(dataclasses.replace(cal, effects=f), model)
        run = tw.replay(files["A"], 2, 0)
        line = f"  {label:26s} A {fmt(cc.band_rms(res(run.data, run.data.tau_Nm), 500.0)[AXES])}"
        for n in cc.PROCESS_IDENTIFICATION_FILES:
            for ref in (files[n], lowpassed(files[n])):
                tau = tw.replay(ref, 1, 7, averaged=False).data.tau_Nm
                line += f" | {fmt(cc.band_rms(res(ref, tau), ref.sample_rate_hz)[AXES])}"
        print(line, flush=True)
    print("4. One reversal of axis 2: J2 5-10 Hz RMS [Nm] at 2.35 | 0.6 rad/s^2, slope of log ringing over log |ddq|")
    from robident_twin.processing.signal import IdentificationData
    from robident_twin.validation.repetition_noise import without_noise

    quiet = without_noise(dataclasses.replace(fx, link_friction_share=np.where(main3, np.array([0.3, 1, 1, 0, 0, 0]),
                                                                                 fx.link_friction_share)))
    for label, vs, flag in (("sharp (committed law)", fx.stribeck_vel_rad_s, False),
                            *((f"link Stribeck v_s {v:g}", v, True) for v in (0.005, 0.01, 0.02, 0.05))):
        c = dataclasses.replace(cal, effects=dataclasses.replace(quiet, stribeck_vel_rad_s=vs, main_link_extra_friction=flag))
        ring = []
        for acc in (2.35, 0.6):
            t = np.arange(800) / 500.0
            q = np.tile([0.0, -0.3, 0.4, 0.0, 0.5, 0.0], (t.size, 1))
            dq, ddq = np.zeros_like(q), np.zeros_like(q)
            q[:, 1] += 0.5 * acc * (t - 0.6) ** 2
            dq[:, 1], ddq[:, 1] = acc * (t - 0.6), acc
            ref = IdentificationData(q_rad=q, dq_rad_s=dq, ddq_rad_s2=ddq, tau_Nm=np.zeros_like(q), sample_rate_hz=500.0,
                                     measurement="motor_torque", n_periods=1)
            tau = tv.CloosTwin(c, model).replay(ref, 1, 0, averaged=False).data.tau_Nm
            ring.append(cc.band_rms(tau[250:], 500.0)[1])
        print(f"  {label:24s} {ring[0]:6.1f} | {ring[1]:6.1f}, slope {np.log(ring[0] / ring[1]) / np.log(2.35 / 0.6):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
