"""What the real CLOOS residual is made of (issue 15): Trajectory A, 50 repetitions averaged,
residual = measured motor torque - the identified model (WLS, the authors' 35 parameters).

Prints per joint: the repeatable part against the random part left in the average, the energy
per frequency band and at the excitation's lines, the strongest spectral peaks, what the 5-10 Hz
envelope follows, the frequency of J1's 30-120 Hz component against |dq1|, the spatial
(order-tracking) spectrum over monotonic segments, and the share one transmission-error line
fits with one or two flanks.

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_residual.py [--root DIR]
"""
from __future__ import annotations

import argparse

import numpy as np
from scipy.signal import butter, hilbert, sosfiltfilt, stft

from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import twin_vs_real as tv

BANDS_HZ = (0, 1, 2, 5, 10, 20, 30, 50, 100, 150, 250.1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=None)
    a = ap.parse_args(argv)
    model = build_model(symmetric=True)
    reg, base = model
    real, recs = tv.real_statistics(a.root, model)
    d, var = recs["A"].data, recs["A"].tau_sample_variance_Nm2
    fs, N = d.sample_rate_hz, len(d.tau_Nm)
    tm = model_torque_Nm(reg, base, d, real.beta)
    r = d.tau_Nm - tm
    q, dq, ddq = d.q_rad, d.dq_rad_s, d.ddq_rad_s2
    row = lambda x, p=2: " ".join(f"{v:7.{p}f}" for v in x)
    print("joints                              " + " ".join(f"{'J' + str(j):>7}" for j in range(1, 7)))
    print("residual RMS [Nm]                   " + row(np.sqrt(np.mean(r ** 2, 0))))
    print("random part left in the average     " + row(np.sqrt(var.mean(0) / 50)))
    f = np.fft.rfftfreq(N, 1 / fs)
    P = np.abs(np.fft.rfft(r - r.mean(0), axis=0)) ** 2
    lines = tv.excited_lines(q)
    print(f"share at the excitation's {lines.size} lines (<= {f[lines.max()]:.2f} Hz) " + row(P[lines].sum(0) / P.sum(0)))
    for lo, hi in zip(BANDS_HZ[:-1], BANDS_HZ[1:]):
        m = (f >= lo) & (f < hi)
        print(f"share {lo:5.0f}-{hi:5.0f} Hz                " + row(P[m].sum(0) / P.sum(0)))
    for j in range(6):
        i = np.argsort(P[:, j])[::-1][:6]
        print(f"J{j + 1} strongest lines [Hz]: " + " ".join(f"{x:.1f}" for x in f[i]))
    sos = butter(4, [5, 10], "bandpass", fs=fs, output="sos")
    m = sosfiltfilt(sos, r, axis=0)
    env = np.abs(hilbert(m, axis=0))
    jerk = np.gradient(ddq, 1 / fs, axis=0)
    print("5-10 Hz envelope correlation with: |dq| |ddq| |jerk| |tau model| (per joint)")
    for j in range(6):
        c = [np.corrcoef(env[:, j], x)[0, 1] for x in (np.abs(dq[:, j]), np.abs(ddq[:, j]), np.abs(jerk[:, j]),
                                                       np.abs(tm[:, j]))]
        print(f"  J{j + 1} " + row(c))
    print("5-10 Hz band correlation between joints:\n" + np.array2string(np.corrcoef(m.T), precision=2))
    # what rings: the 5-10 Hz envelope after each reversal of axis 2 (a friction step), and the
    # J3/J2 and J5/J2 band amplitudes against the inertial coupling of the link-side mass matrix
    tw0 = tv.CloosTwin(tv.Calibration(real.beta, _zero_effects(), np.zeros(6)), model)
    Cc = np.asarray(reg.spec.coupling)
    print("after each reversal of axis 2: 5-10 Hz envelope J2 (mean over 0.6 s), |tau model J2|, "
          "band J3/J2 and J5/J2 (least squares) against M32/M22, M52/M22 (motor coordinates)")
    for i0 in np.nonzero(np.diff(np.sign(dq[:, 1])))[0]:
        w = slice(i0, min(N, i0 + 300))
        Mq = tw0.pin.crba(tw0.pmodel, tw0.pdata, q[i0])
        Mq = Cc.T @ (np.triu(Mq) + np.triu(Mq, 1).T) @ Cc
        g = [float(m[w, j] @ m[w, 1] / (m[w, 1] @ m[w, 1])) for j in (2, 4)]
        print(f"  t {i0 / fs:5.2f} s: env {env[w, 1].mean():6.1f} Nm, |tau| {abs(tm[i0, 1]):5.0f} Nm, "
              f"J3/J2 {g[0]:5.2f} (M {Mq[2, 1] / Mq[1, 1]:5.2f}), J5/J2 {g[1]:6.3f} (M {Mq[4, 1] / Mq[1, 1]:6.3f})")
    fq, tt, Z = stft(r[:, 0], fs=fs, nperseg=256, noverlap=192)
    band = (fq > 30) & (fq < 120)
    fpk = fq[band][np.argmax(np.abs(Z[band]), axis=0)]
    v = np.interp(tt, np.arange(N) / fs, np.abs(dq[:, 0]))
    fast = v > 0.5
    print(f"J1 30-120 Hz peak frequency vs |dq1|: correlation {np.corrcoef(fpk, v)[0, 1]:.2f}, "
          f"median ratio {np.median(fpk[fast] / v[fast]):.1f} Hz per rad/s (|dq1| > 0.5)")
    C = np.asarray(reg.spec.coupling)
    Ci = np.linalg.inv(C)
    qm, dqm, ddqm = q @ Ci.T, dq @ Ci.T, ddq @ Ci.T
    ks = np.arange(5, 200, 0.25)
    print("order tracking (motor position, monotonic segments with |dq| > 0.4): strongest cycles/rad")
    for j in range(6):
        Pk = np.zeros(ks.size)
        s = np.sign(dqm[:, j])
        ok = np.abs(dqm[:, j]) > 0.4
        i = 0
        while i < N:
            if not ok[i]:
                i += 1
                continue
            k = i
            while k < N and ok[k] and s[k] == s[i]:
                k += 1
            if k - i > 100:
                y = r[i:k, j] - r[i:k, j].mean()
                Pk += np.abs(np.exp(-2j * np.pi * np.outer(ks, qm[i:k, j])) @ y) ** 2 / (k - i)
            i = k
        print(f"  J{j + 1}: " + " ".join(f"{x:.2f}" for x in ks[np.argsort(Pk)[::-1][:4]]))
    tw = tv.CloosTwin(tv.Calibration(real.beta, _zero_effects(), np.zeros(6)), model)
    J = np.array([tw.link_side_inertia(x) for x in q]) + tw.ia
    print("share of the residual one transmission-error line at 46.8 cycles/rad fits: one phase | per flank")
    for j in (0, 1):
        y = r[:, j] - r[:, j].mean()
        from hal.sim.effects import transmission_error_columns

        G1 = transmission_error_columns(46.8, qm[:, j], dqm[:, j], ddqm[:, j], J[:, j])
        G2 = tv._te_basis(46.8, qm[:, j], dqm[:, j], ddqm[:, j], J[:, j])
        sh = [1 - np.sum((y - G @ np.linalg.lstsq(G, y, rcond=None)[0]) ** 2) / np.sum(y ** 2) for G in (G1, G2)]
        print(f"  J{j + 1}: {sh[0]:.3f} | {sh[1]:.3f}")
    return 0


def _zero_effects():
    z, e = np.zeros(6), np.zeros((6, 0))
    return tv.TwinEffects(e, e, e, z, 0.05, z, z)


if __name__ == "__main__":
    raise SystemExit(main())
