"""Axis 4 of the CLOOS twin against the real data (issue 15, item 4; session 9, wrist4 task).

Prints (a few seconds; about 1 min per --twin YAML):

1. the real J4 residual of the Trajectory A fit (identification data): its energy per band, where
   in the path it sits (axis 4 standing / slow / fast, the 0.2 s after axis 4's reversals), and how
   much of it a regression on the other axes' accelerations (their inertial coupling) explains;
2. what holds the real J4 still (process 2, where J4's desired path is constant; deg_e is
   time-aligned): its deg_e in encoder counts, the torque it holds against, and the dynamic
   stiffness a position loop would need for that (torque / position) against the twin loop's own;
3. with ``--twin Y.yaml [Y2.yaml ...]``: the process-2 replay of each calibration (J4 standing:
   tracking RMS, peak-to-peak, torque error), the process-1 tracking RMS and J4's torque std on the
   process-2 identification file.

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_wrist4.py [--twin Y.yaml ...]
"""
from __future__ import annotations

import argparse

import numpy as np

from robident_twin.datasets import cloos_control
from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.cloos_calibration import band_rms, load_calibration

BANDS_HZ = ((0.05, 2.5), (2.5, 6.0), (6.0, 11.0), (11.0, 20.0), (20.0, 90.0))


def fmt(a, p=2):
    return " ".join(f"{x:7.{p}f}" for x in np.atleast_1d(a))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--twin", nargs="*", default=[], help="calibration YAMLs to replay on the process files")
    a = ap.parse_args(argv)
    model = build_model(symmetric=True)
    reg, base = model
    real, recs = tv.real_statistics(None, model)
    Cinv = np.linalg.inv(np.asarray(reg.spec.coupling, dtype=float))
    d = recs["A"].data
    r = d.tau_Nm - model_torque_Nm(reg, base, d, real.beta)
    r4 = r[:, 3] - r[:, 3].mean()
    dqm, ddqm = d.dq_rad_s @ Cinv.T, d.ddq_rad_s2 @ Cinv.T
    rate = d.sample_rate_hz
    print("1. Real J4 residual on A (RMS {:.3f} Nm, {} samples at {:g} Hz)".format(np.sqrt(np.mean(r4 ** 2)), len(r4), rate))
    b = np.array([band_rms(r[:, 3:4], rate, bh)[0] for bh in BANDS_HZ])
    print("   band RMS [Nm] " + ", ".join(f"{lo:g}-{hi:g} Hz {x:.3f}" for (lo, hi), x in zip(BANDS_HZ, b))
          + f"; energy shares {fmt(b ** 2 / np.sum(r4 ** 2) * len(r4))}")
    v4 = np.abs(dqm[:, 3])
    rev = np.flatnonzero(np.diff(np.sign(dqm[:, 3])) != 0)
    near = np.zeros(len(r4), dtype=bool)
    for i in rev:
        near[i:i + int(0.2 * rate)] = True
    for label, m in (("|dqm4| < 0.02 rad/s", v4 < 0.02), ("0.02-0.1", (v4 >= 0.02) & (v4 < 0.1)),
                     ("0.1-0.5", (v4 >= 0.1) & (v4 < 0.5)), (">= 0.5", v4 >= 0.5),
                     (f"0.2 s after axis 4's {rev.size} reversals", near)):
        print(f"   {label:34s} time share {m.mean():.3f}, residual RMS {np.sqrt(np.mean(r4[m] ** 2)) if m.any() else 0:.3f} Nm")
    # inertial coupling: the other axes' accelerations (and their product with the wrist pose)
    F = np.column_stack([ddqm[:, k] for k in (0, 1, 2, 4, 5)] + [np.ones(len(r4))])
    c, *_ = np.linalg.lstsq(F, r4, rcond=None)
    print(f"   regression on ddqm of axes 1, 2, 3, 5, 6: explains {1 - np.var(r4 - F @ c) / np.var(r4):.3f}"
          f" (coefficients [kg m^2] {fmt(c[:5], 3)})")
    for lo, hi in ((2.5, 6.0), (6.0, 11.0)):
        rb = band_rms(r, rate, (lo, hi))
        print(f"   {lo:g}-{hi:g} Hz band RMS of every joint's residual [Nm] {fmt(rb, 3)}")

    print("2. What holds the real J4 still (process 2: J4's desired path constant)")
    d2 = recs["process2_validation"].data
    _, e2 = cloos_control.load_control_error(2, "none")
    e4 = np.radians(e2[:, 3])
    res = 1e-5  # the twin's encoder resolution [rad]
    print(f"   desired J4 range {1e3 * np.degrees(np.ptp(d2.q_rad[:, 3])):.3f} mdeg; deg_e J4 RMS "
          f"{1e3 * np.degrees(np.sqrt(np.mean(e4 ** 2))):.3f} mdeg, peak-to-peak {1e3 * np.degrees(np.ptp(e4)):.3f} mdeg"
          f" = {np.ptp(e4) / res:.2f} counts of 1e-5 rad; distinct values {np.unique(np.round(e2[:, 3], 9)).size}")
    tau_model2 = model_torque_Nm(reg, base, d2, real.beta)
    t4 = d2.tau_Nm[:, 3]
    print(f"   real J4 torque: mean {t4.mean():.3f} Nm, std {t4.std():.3f} Nm, ptp {np.ptp(t4):.3f} Nm; model "
          f"prediction std {tau_model2[:, 3].std():.3f} Nm; error RMS {np.sqrt(np.mean((t4 - tau_model2[:, 3]) ** 2)):.3f} Nm")
    ddqm2 = d2.ddq_rad_s2 @ Cinv.T
    F2 = np.column_stack([ddqm2[:, k] for k in (0, 1, 2, 4, 5)] + [np.ones(len(t4))])
    c2, *_ = np.linalg.lstsq(F2, t4, rcond=None)
    print(f"   real J4 torque on the other axes' ddqm: explains {1 - np.var(t4 - F2 @ c2) / np.var(t4):.3f}")
    twin = tv.CloosTwin(load_calibration("sim_assets/cloos_qrc350/twin_calibrated.yaml"), model)
    J4 = twin.link_side_inertia(d2.q_rad[0])[3] + twin.ia[3]
    k_needed = t4.std() / max(np.sqrt(np.mean(e4 ** 2)), res / np.sqrt(12))
    for bw in (8.0, 30.0, 40.0, 100.0):
        w = 2 * np.pi * bw
        # the cascaded loop's static-ish stiffness at 2 Hz: Kp Kv with Kv = J w (position 5 Hz)
        k_loop = J4 * w * 2 * np.pi * 5.0
        print(f"   velocity loop {bw:g} Hz (J4 {J4:.3f} kg m^2): position stiffness Kv Kp {k_loop:.0f} Nm/rad; "
              f"needed to hold the torque std within deg_e RMS (or a fraction of a count) >= {k_needed:.0f} Nm/rad")
    for path in a.twin:
        cal = load_calibration(path)
        tw = tv.CloosTwin(cal, model)
        run = tw.replay(d2, 1, 0, averaged=False)
        e = run.tracking_error_rad[:, 3]
        err = run.data.tau_Nm[:, 3] - tau_model2[:, 3]
        p1 = tw.replay(recs["process1_validation"].data, 1, 0, averaged=False)
        id2 = ds.load(f"process{2}").data  # the identification file: J4 stands, the real motor torque std 0.053 Nm
        t_id = tw.replay(id2, 1, 0, averaged=False).data.tau_Nm[:, 3]
        print(f"3. {path}: process 2 J4 tracking RMS {1e3 * np.degrees(np.sqrt(np.mean(e ** 2))):.2f} mdeg, ptp "
              f"{1e3 * np.degrees(np.ptp(e)):.2f}; torque error RMS {np.sqrt(np.mean(err ** 2)):.3f} Nm (real "
              f"{np.sqrt(np.mean((t4 - tau_model2[:, 3]) ** 2)):.3f}); process 1 tracking RMS [mdeg] "
              f"{fmt(1e3 * np.degrees(p1.tracking_rms_rad), 1)}; J4 torque std on the process-2 identification file "
              f"{t_id.std():.3f} Nm (real {id2.tau_Nm[:, 3].std():.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
