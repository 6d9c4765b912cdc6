"""Axis 1's extra friction on all the identification data (issue 15, item 4; session 10). Prints (about
2 min, one core):

1. the extra-friction columns (Stribeck, v|v|, |tau| sgn) fitted to axis 1's real residual (less the
   calibrated transmission error and ripple; moving samples) on A, on each process identification file and
   jointly, plain and dissipative, and the share of every file's target each fit explains
   (validation.cloos_axis1); the target binned over the motor speed per file, and the fits' values there;
2. the Coulomb step as a Dahl (presliding) element: the scan of its distance per file and jointly;
3. J1 on the process identification files and on A (noise off, one replay, torque - real model; band RMS
   0-1 / 1-2 / 2-5 / 5-10 Hz [Nm]): the committed twin, with axis 1's friction refitted jointly (both forms),
   and each with axis 1 rigid (no spring, no link-side friction).

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_axis1.py
"""
from __future__ import annotations

import dataclasses

import numpy as np

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import cloos_axis1 as ax1
from robident_twin.validation import cloos_calibration as cc
from robident_twin.validation import repetition_noise as rn
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.periodogram import band_rms_periodogram

EDGES = np.array([-2, -1, -0.5, -0.2, -0.1, -0.05, -0.02, -0.005, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2])
BANDS_HZ = ((0, 1), (1, 2), (2, 5), (5, 10))


def band_split(e, rate):
    """RMS per band of BANDS_HZ (periodogram) of each column."""
    return band_rms_periodogram(e, rate, BANDS_HZ)


def rigid1(cal):
    fx = cal.effects
    k, s = np.array(fx.stiffness_Nm_rad, dtype=float), np.array(fx.link_friction_share, dtype=float)
    k[0], s[0] = 0.0, 0.0
    return dataclasses.replace(cal, effects=dataclasses.replace(fx, stiffness_Nm_rad=k, link_friction_share=s))


def main() -> int:
    reg, base = model = build_model(symmetric=True)
    real, recs = tv.real_statistics(None, model)
    cal = cc.load_calibration("sim_assets/cloos_qrc350/twin_calibrated.yaml")
    files = {"A": recs["A"].data, **{n: ds.load(n, None).data for n in cc.PROCESS_IDENTIFICATION_FILES}}
    T = ax1.friction_targets(cal, real, model, files)
    tw = tv.CloosTwin(cal, model)
    dis = (tw.fc[0], tw.fv[0], tw.eps)
    fx = cal.effects
    com = np.array([fx.stribeck_Nm[0], fx.visc2_Nms2_rad2[0], fx.load_coulomb[0]])
    print("1. Axis 1's extra friction, Stribeck form (v_s 0.05 rad/s): coefficients Stribeck [Nm], v|v| [Nm s2/rad2], "
          "load; share of each file's target explained")
    print(f"  committed (A alone, dissipative, with TE and ripple): {' '.join(f'{x:.4g}' for x in com)}; explains "
          + " ".join(f"{t.name} {ax1.explained_share(t, com):.3f}" for t in T))
    for names in (["A"], ["process1"], ["process2"], ["process1", "process2"], None):
        for d in (None, dis):
            f = ax1.fit_friction(T, names, d)
            print(f"  fit on {'+'.join(f.files)} ({'dissipative' if d else 'plain'}): "
                  f"{' '.join(f'{x:.4g}' for x in f.coef)}; explains "
                  + " ".join(f"{k} {v:.3f}" for k, v in f.explained.items()))
    fj = ax1.fit_friction(T, None, dis)
    for t in T:  # load or pose: the target's sign-corrected level against |tau| and q1 (moving >= 0.05 rad/s)
        m = np.abs(t.dqm_rad_s) >= 0.05
        y = np.sign(t.dqm_rad_s[m]) * t.y_Nm[m]
        print(f"  {t.name}: corr(sgn(v) target, |tau|) {np.corrcoef(y, np.abs(t.F[m, 2]))[0, 1]:.2f}, "
              f"with q1 {np.corrcoef(y, t.q_rad[m])[0, 1]:.2f} ({m.sum()} samples)")
    print("  binned over dqm1 [rad/s], edges", " ".join(f"{x:g}" for x in EDGES))
    for t in T:
        print(f"  {t.name:9s} samples {' '.join(f'{np.sum(np.digitize(t.dqm_rad_s, EDGES) == i):6d}' for i in range(1, len(EDGES)))}")
        for lab, c in (("real", None), ("A fit", com), ("joint", fj.coef)):
            print(f"  {t.name:9s} {lab:6s} {' '.join(f'{x:6.1f}' for x in ax1.binned_mean_Nm(t, EDGES, c))}")

    print("2. The Coulomb step as a Dahl element (Stribeck dropped; v|v| and load fitted, dissipative)")
    for names in (["A"], ["process1"], ["process2"], None):
        s = ax1.scan_presliding(T, *dis, names=names)
        near = s.grid_rad[s.ss <= 1.01 * s.ss.min()]
        print(f"  on {'+'.join(s.files)}: distance {1e3 * s.grid_rad[s.best]:.3g} mrad (within 1 % of the least "
              f"squares {1e3 * near.min():.2g}-{1e3 * near.max():.2g}), v|v| {s.coef[s.best, 0]:.4g}, load "
              f"{s.coef[s.best, 1]:.4g}; explains " + " ".join(f"{k} {v:.3f}" for k, v in s.explained.items()))

    print("3. J1, noise off, one replay: band RMS [Nm] 0-1 1-2 2-5 5-10 Hz (torque - real model)")
    for n, f in files.items():
        if n == "A":
            f = recs["A"].data
        pred = model_torque_Nm(reg, base, f, real.beta)
        print(f"  {n:9s} real: {' '.join(f'{x:6.1f}' for x in band_split(f.tau_Nm - pred, f.sample_rate_hz)[:, 0])}")
    variants = {"committed": cal, "joint Stribeck form": ax1.with_joint_friction(cal, real, model, files),
                "presliding (joint)": ax1.with_presliding(cal, real, model, files)}
    variants.update({f"{k}, J1 rigid": rigid1(v) for k, v in list(variants.items())})
    for name, c in variants.items():
        tw = tv.CloosTwin(dataclasses.replace(c, effects=rn.without_noise(c.effects)), model)
        for n, f in files.items():
            if n == "A":
                run = tw.replay(f, 2, 0)
                st = tv.fit_statistics("twin", reg, base, run.data, run.sample_variance_Nm2, {})
                tau, pred = run.data.tau_Nm, model_torque_Nm(reg, base, run.data, st.beta)
            else:
                tau = tw.replay(f, 1, 0, averaged=False).data.tau_Nm
                pred = model_torque_Nm(reg, base, f, real.beta)
            print(f"  {n:9s} {name}: {' '.join(f'{x:6.1f}' for x in band_split(tau - pred, f.sample_rate_hz)[:, 0])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
