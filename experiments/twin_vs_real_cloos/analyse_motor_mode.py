"""Does the CLOOS main axes' ~7 Hz mode move the motors as the real data say? (issue 15, item 4;
session 8, motor-mode task). Evidence only, on the real identification data (Trajectory A); the twin
is not changed. Prints (about 1 min on one core):

1. the real drive's dynamic stiffness at 5-10 Hz seen from the plant: the transfer from the residual
   torque to the motor encoder's motion off the Fourier lines (Welch cross-spectrum, 2 s segments),
   as gain against a rigid axis (q = -tau / (J w^2), J = link + drive inertia at the start pose) and
   phase (0 deg = in phase with a rigid axis's acceleration), per 0.5 Hz bin with the coherence;
2. the mode's shape at 6.5-7.5 Hz: encoder and torque of J1, J3, J5 against J2 (ratio, phase,
   coherence); the 5-10 Hz ringing after each reversal of axis 2 against the axis's acceleration at
   that reversal, on A and the process identification files; where the 5-10 Hz bursts sit: envelope (Hilbert) of the band-passed torque and encoder motion in
   the 0.3 s after each axis's reversals against the rest of the period;
3. the same transfer on the committed twin and on variants of axes 1-3 (diagnostics, not adopted):
   the inverter velocity loop softened (30 / 15 / 8 Hz instead of 100 Hz), the springs stiffened
   (x2: the mode with the motor taking part stays near 7 Hz), a drive acceleration feed-forward
   (J ddq_ref per axis, J the rigid-axis inertia at the start pose) or the whole rigid model's
   feed-forward (links, drive inertia and regressor friction); with each, the twin's 5-10 Hz torque on
   A and on the process IDENTIFICATION files (never the validation files), the ratio A / process 2
   of J2's 5-10 Hz torque (real 5.0: A rings, the process paths do not) and how the ringing after axis
   2's reversals grows with the acceleration there (as in section 2).

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_motor_mode.py
"""
from __future__ import annotations

import dataclasses

import numpy as np
from scipy.signal import butter, csd, hilbert, sosfiltfilt, welch

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.cloos_calibration import band_rms, load_calibration

BAND_HZ = (5.0, 10.0)


def fmt(a, p=1):
    return " ".join(f"{x:6.{p}f}" for x in a)


def drive_transfer(q_rad, tau_Nm, inertia_kgm2, fs):
    """Per axis: band gain against a rigid axis, band phase [deg], and per-bin (f, gain, phase, coherence)."""
    out = []
    for j, J in enumerate(inertia_kgm2):
        f, S_tq = csd(tau_Nm[:, j], q_rad[:, j], fs=fs, nperseg=int(2 * fs))
        _, S_tt = welch(tau_Nm[:, j], fs=fs, nperseg=int(2 * fs))
        _, S_qq = welch(q_rad[:, j], fs=fs, nperseg=int(2 * fs))
        m = (f >= BAND_HZ[0]) & (f <= BAND_HZ[1])
        w2 = (2 * np.pi * f[m]) ** 2
        g = -S_tq[m] * J * w2 / S_tt[m]
        band = np.sum(-S_tq[m] * J * w2) / np.sum(S_tt[m])
        coh = np.abs(S_tq[m]) ** 2 / (S_tt[m] * S_qq[m])
        out.append((abs(band), np.degrees(np.angle(band)), list(zip(f[m], np.abs(g), np.degrees(np.angle(g)), coh))))
    return out


def mode_shape(x, fs, ref=1, axes=(0, 2, 4), band_hz=(6.5, 7.5)):
    """Per axis in ``axes``: (ratio, phase [deg], coherence) of x[:, axis] against x[:, ref] in the band."""
    out = []
    for j in axes:
        f, S = csd(x[:, ref], x[:, j], fs=fs, nperseg=int(2 * fs))
        _, P_ref = welch(x[:, ref], fs=fs, nperseg=int(2 * fs))
        _, P_j = welch(x[:, j], fs=fs, nperseg=int(2 * fs))
        m = (f >= band_hz[0]) & (f <= band_hz[1])
        H = S[m].sum() / P_ref[m].sum()
        out.append((abs(H), np.degrees(np.angle(H)), abs(S[m].sum()) ** 2 / (P_ref[m].sum() * P_j[m].sum())))
    return out


def reversal_ringing(data, residual_Nm, axis=1, dq_min_rad_s=0.02, window_s=0.3):
    """Per reversal of ``axis`` (sign change of dq beyond +-dq_min): |ddq| there and the peak 5-10 Hz
    envelope of that axis's residual in the window after it."""
    fs = data.sample_rate_hz
    sos = butter(4, BAND_HZ, "bandpass", fs=fs, output="sos")
    r = residual_Nm[:, axis] - residual_Nm[:, axis].mean()
    env = np.abs(hilbert(sosfiltfilt(sos, r)))
    dq = data.dq_rad_s[:, axis]
    sgn = np.sign(np.where(np.abs(dq) > dq_min_rad_s, dq, 0.0))
    nz = np.flatnonzero(sgn)
    rev = nz[1:][np.diff(sgn[nz]) != 0]
    return np.abs(data.ddq_rad_s2[rev, axis]), np.array([env[i:i + int(window_s * fs)].max() for i in rev])


def print_transfer(label, res, per_bin=False):
    for j, (gain, ph, bins) in enumerate(res):
        line = f"  {label} J{j + 1}: gain/rigid {gain:.2f}, phase {ph:6.1f} deg"
        if per_bin:
            line += "; per bin f:gain/phase/coh " + " ".join(f"{f:.1f}:{g:.2f}/{p:.0f}/{c:.2f}" for f, g, p, c in bins)
        print(line)


def variant(cal, model, inverter_hz, stiffness_factor, ff_kind, J):
    """A twin with axes 1-3 changed, and its feed-forward (None, 'acc': J ddq_ref, 'rigid': the twin's
    rigid model with friction) in motor torques."""
    fx = cal.effects
    main3 = np.arange(6) < 3
    st = np.where(main3, stiffness_factor * np.asarray(fx.stiffness_Nm_rad, float), fx.stiffness_Nm_rad)
    inv = np.where(main3, inverter_hz, np.asarray(fx.inverter_velocity_bandwidth_hz, float))
    tw = tv.CloosTwin(dataclasses.replace(cal, effects=dataclasses.replace(
        fx, inverter_velocity_bandwidth_hz=inv, stiffness_Nm_rad=st)), model)
    Jm = np.where(main3, np.pad(J, (0, 3)), 0.0)
    ff = {None: None, "acc": lambda qm, dqm, ddqm: Jm * ddqm,
          "rigid": lambda qm, dqm, ddqm: np.where(main3, tw.rigid_motor_torque(qm, dqm, ddqm), 0.0)}[ff_kind]
    return tw, ff


VARIANTS = (("committed (100 Hz)", 100.0, 1.0, None), ("inverter 30 Hz", 30.0, 1.0, None),
            ("inverter 15 Hz", 15.0, 1.0, None), ("inverter 8 Hz", 8.0, 1.0, None),
            ("100 Hz + acc. ff", 100.0, 1.0, "acc"), ("8 Hz, k x2", 8.0, 2.0, None),
            ("8 Hz, k x2 + acc. ff", 8.0, 2.0, "acc"), ("8 Hz, k x2 + rigid ff", 8.0, 2.0, "rigid"))


def main() -> int:
    reg, base = model = build_model(symmetric=True)
    real, recs = tv.real_statistics(None, model)
    cal = load_calibration("sim_assets/cloos_qrc350/twin_calibrated.yaml")
    twin = tv.CloosTwin(cal, model)
    A = ds.load("A", rect=False).data  # averaged encoder positions, everything off the Fourier lines kept
    dA = recs["A"].data
    fs = dA.sample_rate_hz
    rA = dA.tau_Nm - model_torque_Nm(reg, base, dA, real.beta)
    eA = A.q_rad - dA.q_rad
    M = twin.pin.crba(twin.pmodel, twin.pdata, dA.q_rad[0])
    J = (np.diag(M) + twin.ia)[:3]
    print(f"rigid-axis inertia J1-J3 at the start pose [kg m^2, motor coordinates]: {fmt(J, 2)}; mode {cal.mode_hz} Hz")

    print("1. Real A: residual torque -> motor encoder at 5-10 Hz")
    print_transfer("real", drive_transfer(eA[:, :3], rA[:, :3], J, fs), per_bin=True)

    print("2. The mode's shape at 6.5-7.5 Hz against J2 (ratio, phase [deg], coherence)")
    for name, x in (("encoder", eA), ("torque", rA)):
        print(f"  {name}: " + "; ".join(f"J{j + 1} {r:.3g} {p:.0f} {c:.2f}" for j, (r, p, c) in zip((0, 2, 4), mode_shape(x, fs))))
    acc, peak = [], []
    for n in ("A", "process1", "process2"):
        d = dA if n == "A" else ds.load(n).data
        a, p = reversal_ringing(d, d.tau_Nm - model_torque_Nm(reg, base, d, real.beta))
        acc.append(a)
        peak.append(p)
        print(f"  {n}: {len(a)} reversals of axis 2, |ddq2| there median {np.median(a):.2f} rad/s^2, J2 5-10 Hz peak "
              f"after them median {np.median(p):.1f} Nm (range {p.min():.1f}-{p.max():.1f}); within the file: correlation "
              f"of log peak with log |ddq2| {np.corrcoef(np.log(a), np.log(p))[0, 1]:.2f}")
    la, lp = np.log(np.concatenate(acc)), np.log(np.concatenate(peak))
    slope = np.polyfit(la, lp, 1)[0]
    print(f"  all {la.size}: correlation of log peak with log |ddq2| {np.corrcoef(la, lp)[0, 1]:.2f}, slope {slope:.2f}")
    print("   5-10 Hz envelope in the 0.3 s after each axis's reversals / elsewhere, J1-J3")
    sos = butter(4, BAND_HZ, "bandpass", fs=fs, output="sos")
    env_t = np.abs(hilbert(sosfiltfilt(sos, rA - rA.mean(0), axis=0), axis=0))[:, :3]
    env_q = np.abs(hilbert(sosfiltfilt(sos, eA - eA.mean(0), axis=0), axis=0))[:, :3]
    for k in range(3):
        rev = np.flatnonzero(np.diff(np.sign(dA.dq_rad_s[:, k])) != 0)
        win = np.zeros(len(rA), bool)
        for r in rev:
            win[r:r + int(0.3 * fs)] = True
        print(f"  after axis {k + 1}'s {len(rev)} reversals ({100 * win.mean():.0f} % of the period): torque "
              f"{fmt(env_t[win].mean(0) / env_t[~win].mean(0), 2)}, encoder {fmt(env_q[win].mean(0) / env_q[~win].mean(0), 2)}")

    print("3. Twin: the same transfer, and its 5-10 Hz torque [Nm] on A and the process identification files")
    proc = {n: ds.load(n).data for n in ("process1", "process2")}
    line = f"  {'real':22s} A {fmt(band_rms(rA, fs)[:3])}"
    for n, d in proc.items():
        er = d.tau_Nm - model_torque_Nm(reg, base, d, real.beta)
        bp = band_rms(er, d.sample_rate_hz)[:3]
        line += f"; {n} {fmt(bp)}"
    print(line + f"; A/process2 J2 {band_rms(rA, fs)[1] / bp[1]:.2f}")
    for label, inverter_hz, k_factor, ff_kind in VARIANTS:
        tw, ff = variant(cal, model, inverter_hz, k_factor, ff_kind, J)
        run = tw.replay(dA, 2, 0, feedforward=ff)
        Q = run.raw[0].mean(axis=0) @ tw.C.T
        rt = run.data.tau_Nm - model_torque_Nm(reg, base, run.data, real.beta)
        bA = band_rms(rt, fs)[:3]
        line = f"  {label:22s} A {fmt(bA)}"
        acc, peak = [np.log(x) for x in reversal_ringing(run.data, rt)]
        for n, d in proc.items():
            tau = tw.replay(d, 1, 7, averaged=False, feedforward=ff).data.tau_Nm
            res = tau - model_torque_Nm(reg, base, d, real.beta)
            bp = band_rms(res, d.sample_rate_hz)[:3]
            line += f"; {n} {fmt(bp)}"
            a, p = reversal_ringing(d, res)
            acc, peak = np.append(acc, np.log(a)), np.append(peak, np.log(p))
        print(line + f"; A/process2 J2 {bA[1] / bp[1]:.2f}; reversal ringing vs log |ddq2|: correlation "
              f"{np.corrcoef(acc, peak)[0, 1]:.2f}, slope {np.polyfit(acc, peak, 1)[0]:.2f}", flush=True)
        print_transfer(label, drive_transfer((Q - run.data.q_rad)[:, :3], rt[:, :3], J, fs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
