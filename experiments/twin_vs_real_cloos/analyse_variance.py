"""Where the real CLOOS repetition variance is skewed, and which noise model transfers (issue 15).

The twin's repetition-variance median ratio missed its band on J1/J5 (1.27 / 1.32) with the old
noise model (white Gaussian current noise a + per-repetition viscous and torque-constant drifts
b dq^2, c tau^2): it matched the mean but the real profile is more skewed. This script looks at
the real per-sample variance over the 50 repetitions of Trajectory A and C:

1. where its peaks are: the profile divided by its 25-sample running mean (its fast part): the
   scatter against a sample variance of Gaussian draws (implied excess kurtosis), its spectrum,
   its correlation between joints, with the variance of the measured q / dq / ddq at the same
   samples, with the squared torque rate (a timing jitter's signature, lags -2..2 samples), and
   on J1 the window-wise (0.5 s) kurtosis against the speed;
2. candidate profile terms added to 1, dq^2, tau^2 (NNLS on A): the torque rate tau_dot^2 (a
   time offset per repetition), a Coulomb step tanh(dq/0.01)^2, a reversal bump exp(-(dq/0.05)^2),
   the squared 5-10 Hz envelope of the torque (the ringing after reversals); each judged on A
   and by its transfer to C (the fitted profile's mean and median over C's);
3. the noise model, fitted on A only, drawn 50 times per sample on A and C (5 seeds): the old
   model against the new one (validation.repetition_noise: the same profile as white per-sample
   noise, heavy-tailed with the spread of A's local scatter): median ratio model/real on A and C.

    python experiments/twin_vs_real_cloos/analyse_variance.py [--root DIR]     (about 15 s)
"""
from __future__ import annotations

import argparse

import numpy as np
from scipy.io import loadmat
from scipy.ndimage import uniform_filter1d
from scipy.optimize import nnls
from scipy.signal import butter, hilbert, sosfiltfilt, welch

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.validation import repetition_noise as rn

K = ds.N_REPETITIONS


def fast_part(v):
    return v / uniform_filter1d(v, rn.LOCAL_WINDOW, axis=0, mode="wrap") - 1.0


def columns(d, j, extra=()):
    Cinv = np.linalg.inv(ds.coupling_matrix())
    dqm, tau = (d.dq_rad_s @ Cinv.T)[:, j], d.tau_Nm[:, j]
    lib = {"tdot2": np.gradient(tau, 1.0 / d.sample_rate_hz) ** 2, "coulomb": np.tanh(dqm / 0.01) ** 2,
           "reversal": np.exp(-(dqm / 0.05) ** 2)}
    if "ringing" in extra:
        sos = butter(4, (5.0, 10.0), "bandpass", fs=d.sample_rate_hz, output="sos")
        lib["ringing"] = np.abs(hilbert(sosfiltfilt(sos, tau - tau.mean()))) ** 2
    return np.column_stack([np.ones_like(tau), dqm ** 2, tau ** 2] + [lib[e] for e in extra])


def nnls_fit(F, v):
    sc = np.sqrt(np.mean(F ** 2, axis=0))
    return nnls(F / sc, v)[0] / sc


def draws(d, j, c, model, spread, rng):
    """Per-sample variance over K draws of the fitted noise model (c = a^2, b^2, c^2 of the profile)."""
    F = columns(d, j)
    if model == "old":  # white Gaussian a + per-repetition drifts (one value per repetition)
        dev = (np.sqrt(c[0]) * rng.standard_normal((K, len(F)))
               + np.sqrt(c[1] * F[:, 1]) * rng.standard_normal((K, 1)) + np.sqrt(c[2] * F[:, 2]) * rng.standard_normal((K, 1)))
    else:  # new: the whole profile white per sample, heavy-tailed
        dev = np.sqrt(F @ c) * rn.unit_noise(rng, (K, len(F)), spread)
    return dev.var(axis=0, ddof=1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=None)
    a = ap.parse_args(argv)
    recs = {n: ds.load(n, a.root) for n in ("A", "C")}
    V = {n: recs[n].tau_sample_variance_Nm2 for n in recs}
    f6 = lambda x, p=2: " ".join(f"{v:6.{p}f}" for v in x)
    print("1. the real variance profile (J1..J6)")
    Cinv = np.linalg.inv(ds.coupling_matrix())
    for n in ("A", "C"):
        v, d = V[n], recs[n].data
        fp = fast_part(v)
        print(f"  {n}: mean/median                        {f6(v.mean(0) / np.median(v, 0))}")
        print(f"     local-scatter excess kurtosis       {f6(rn.local_scatter_kurtosis(v), 1)} (Gaussian 0)")
        f, P = welch(fp, d.sample_rate_hz, nperseg=512, axis=0)
        hi = P[f >= 20].sum(0) / P.sum(0)
        print(f"     fast part: share above 20 Hz        {f6(hi)}")
        cc = np.corrcoef(fp.T)
        print(f"     largest |corr| with another joint   {np.max(np.abs(cc - np.eye(6))):.2f}")
        m = loadmat(ds.data_root(a.root) / ds.FILES[n][0], squeeze_me=True, struct_as_record=False)
        for k in ("q_meas", "dq_meas", "ddq_meas"):
            x = fast_part(np.asarray(m[k].variance, dtype=float))
            print(f"     corr with the {k:9s} variance's   {f6([np.corrcoef(fp[:, j], x[:, j])[0, 1] for j in range(6)])}")
        td = fast_part(np.gradient(d.tau_Nm, 1.0 / d.sample_rate_hz, axis=0) ** 2)
        best = [max(abs(np.corrcoef(fp[2:-2, j], np.roll(td[:, j], L)[2:-2])[0, 1]) for L in range(-2, 3))
                for j in range(6)]
        print(f"     max |corr| with tau_dot^2's, lag -2..2 {f6(best)}")
        W = int(0.5 * d.sample_rate_hz)
        r = v / uniform_filter1d(v, rn.LOCAL_WINDOW, axis=0, mode="wrap")
        kw = [K * (r[i:i + W, 0].var() - 2 / (K - 1)) for i in range(0, len(v) - W + 1, W)]
        sp = [np.abs((d.dq_rad_s @ Cinv.T)[i:i + W, 0]).mean() for i in range(0, len(v) - W + 1, W)]
        print(f"     J1: 0.5 s windows, corr(kurtosis, |dq1|) {np.corrcoef(kw, sp)[0, 1]:.2f}")
    print("\n2. profile terms added to 1, dq^2, tau^2 (NNLS on A): model median / real median on A | on C, "
          "model mean / real mean on C")
    for extra in ((), ("tdot2",), ("coulomb",), ("reversal",), ("ringing",)):
        rows = np.zeros((3, 6))
        for j in range(6):
            c = nnls_fit(columns(recs["A"].data, j, extra), V["A"][:, j])
            mA, mC = columns(recs["A"].data, j, extra) @ c, columns(recs["C"].data, j, extra) @ c
            rows[:, j] = (np.median(mA) / np.median(V["A"][:, j]), np.median(mC) / np.median(V["C"][:, j]),
                          mC.mean() / V["C"][:, j].mean())
        print(f"  {'+'.join(('base',) + extra):16s} A {f6(rows[0])} | C {f6(rows[1])} | C mean {f6(rows[2])}")
    print("\n3. noise model fitted on A, 50 draws per sample (5 seeds): median of the draws / real median")
    spread = rn.tail_spread_from_variance(V["A"])
    print(f"  tail spread s from A's local scatter {f6(spread, 3)}")
    for model in ("old", "new"):
        res = np.zeros((4, 6, 5))
        for j in range(6):
            c = nnls_fit(columns(recs["A"].data, j), V["A"][:, j])
            for t in range(5):
                rng = np.random.default_rng(t)
                dA, dC = (draws(recs[n].data, j, c, model, spread[j], rng) for n in ("A", "C"))
                res[:, j, t] = (np.median(dA) / np.median(V["A"][:, j]), np.median(dC) / np.median(V["C"][:, j]),
                                rn.local_scatter_kurtosis(dA[:, None])[0], rn.local_scatter_kurtosis(dC[:, None])[0])
        m, s = res.mean(2), res.std(2)
        print(f"  {model}: A " + " ".join(f"{x:.2f}+-{y:.2f}" for x, y in zip(m[0], s[0])))
        print("       C " + " ".join(f"{x:.2f}+-{y:.2f}" for x, y in zip(m[1], s[1])))
        print(f"       local-scatter kurtosis of the draws on A {f6(m[2], 1)}, on C {f6(m[3], 1)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
