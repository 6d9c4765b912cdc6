"""The CLOOS twin's wrist loop against the real controller's tracking error (issue 15, item 4;
session 8). Prints (about 2 min on one core; with --bands 5 min more):

1. the real tracking error: the controller's own position error without feed-forward (deg_e,
   ICMA 2020 Table VII runs) of process 1 and 2, its size, spectrum, and a regression on the
   desired velocity (a lag), acceleration and friction sign; J4 stands still in process 2;
2. the calibration of the wrist's inverter velocity loop (axes 4, 5) on process 1's deg_e
   (cloos_calibration.calibrate_wrist_loop): the scan and the picked bandwidths;
3. the check on process 2 (time-aligned deg_e: the desired file of that run is the process-2
   validation file's desired path): tracking RMS, spectrum and regression, committed loop
   (the sampled 8 Hz PLC loop) against the calibrated one, and (diagnostic) without the Stribeck term of axes 4/5;
4. with --bands: the twin-vs-real bands (10 repetitions, seed 0, the whole calibration chain
   rerun) with the committed and the calibrated wrist loop.

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_wrist_loop.py [--bands]
"""
from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from robident_twin.datasets import cloos_control
from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model
from robident_twin.validation import cloos_calibration as cc
from robident_twin.report.sections import twin_vs_real_text
from robident_twin.validation import twin_vs_real as tv

BANDS_HZ = ((0, 2), (2, 6), (6, 12), (12, 250))


def fmt(a, p=1):
    return " ".join(f"{x:7.{p}f}" for x in np.atleast_1d(a))


def describe(e_rad: np.ndarray, dqm: np.ndarray, ddqm: np.ndarray, rate: float, axes=(3, 4, 5)) -> list[str]:
    """Per axis: RMS, band RMS and the regression of the error on dq (lag), ddq and tanh(dq / 0.01)."""
    f = np.fft.rfftfreq(len(e_rad), 1.0 / rate)
    out = []
    for j in axes:
        e = e_rad[:, j]
        P = np.abs(np.fft.rfft(e - e.mean())) ** 2
        band = [np.sqrt(2 * P[(f >= lo) & (f < hi)].sum()) / len(e) for lo, hi in BANDS_HZ]
        F = np.column_stack([dqm[:, j], ddqm[:, j], np.tanh(dqm[:, j] / 0.01), np.ones(len(e))])
        c, *_ = np.linalg.lstsq(F, e, rcond=None)
        expl = 1.0 - np.var(e - F @ c) / max(np.var(e), 1e-30)
        out.append(f"    J{j + 1}: RMS {1e3 * np.degrees(np.sqrt(np.mean(e ** 2))):6.1f} mdeg; per band "
                   f"{'/'.join(f'{lo}-{hi}' for lo, hi in BANDS_HZ)} Hz {fmt(1e3 * np.degrees(band))}; "
                   f"lag {1e3 * c[0]:6.2f} ms, ddq {1e6 * c[1]:7.1f} ms^2, friction sign "
                   f"{1e3 * np.degrees(c[2]):6.2f} mdeg, explained {expl:.2f}")
    return out


def with_wrist_loop(cal: tv.Calibration, bw) -> tv.Calibration:
    inv = np.array(cal.effects.inverter_velocity_bandwidth_hz, dtype=float)
    inv[list(cc.WRIST_LOOP_AXES)] = bw
    return dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, inverter_velocity_bandwidth_hz=inv))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bands", action="store_true", help="also the 10-repetition bands, committed and calibrated loop")
    a = ap.parse_args(argv)
    model = build_model(symmetric=True)
    recs = {n: ds.load(n) for n in ("process1_validation", "process2_validation")}
    committed = cc.load_calibration("sim_assets/cloos_qrc350/twin_calibrated.yaml")
    Cinv = np.linalg.inv(np.asarray(model[0].spec.coupling, dtype=float))
    # the real deg_e is on the recorded coordinates, the twin's motor coordinates (Cinv maps the
    # importer's MDH joint coordinates back to them)

    print("1. The real tracking error (deg_e without feed-forward, Table VII runs)")
    real_rms = {}
    for p in (1, 2):
        t, e_deg = cloos_control.load_control_error(p, "none")
        e = np.radians(e_deg)
        real_rms[p] = np.sqrt(np.mean(e ** 2, axis=0))
        print(f"  process {p}: {len(t)} samples at {1 / np.median(np.diff(t)):.0f} Hz ({t[-1] - t[0]:.1f} s); "
              f"RMS [mdeg] {fmt(1e3 * np.degrees(real_rms[p]))}")
    d2 = recs["process2_validation"].data
    dqm2, ddqm2 = d2.dq_rad_s @ Cinv.T, d2.ddq_rad_s2 @ Cinv.T
    _, e2 = cloos_control.load_control_error(2, "none")
    print("  process 2 against its desired path (the process-2 validation file's desired q, dq, ddq):")
    print("\n".join(describe(np.radians(e2), dqm2, ddqm2, d2.sample_rate_hz)))

    print("2. Calibration of the wrist's inverter velocity loop on process 1's deg_e RMS")
    cal = cc.calibrate_wrist_loop(committed, model, recs["process1_validation"].data, real_rms[1])
    bws, scan = cal.fit["wrist_loop_bandwidths_hz"], cal.fit["wrist_loop_rms_rad"]
    for j in cc.WRIST_LOOP_AXES:
        print(f"  J{j + 1} real {1e3 * np.degrees(real_rms[1][j]):.1f} mdeg; twin at "
              + ", ".join(f"{b:g} Hz {1e3 * np.degrees(s):.1f}" for b, s in zip(bws, scan[:, j]))
              + f"; picked {cal.effects.inverter_velocity_bandwidth_hz[j]:g} Hz")
    sampled = tv.CloosTwin(committed, model).replay(recs["process1_validation"].data, 1, 0, averaged=False)
    print(f"  committed (sampled 8 Hz PLC loop): RMS [mdeg] {fmt(1e3 * np.degrees(sampled.tracking_rms_rad))}")
    bw = cal.effects.inverter_velocity_bandwidth_hz[list(cc.WRIST_LOOP_AXES)]

    print("3. Check on process 2 (time-aligned; J4 stands still)")
    # diagnostic: the calibrated Stribeck term of axes 4/5 (J4 -6.55 Nm, deeper than its Coulomb level
    # 4.13 Nm) makes the motor's net friction negative at low speed
    no_strib = np.array(cal.effects.stribeck_Nm, dtype=float)
    no_strib[list(cc.WRIST_LOOP_AXES)] = 0.0
    nos = dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, stribeck_Nm=no_strib))
    nos8 = dataclasses.replace(committed, effects=dataclasses.replace(committed.effects, stribeck_Nm=no_strib))
    for label, c in (("committed (sampled 8 Hz)", committed), (f"calibrated ({fmt(bw, 0).strip()} Hz)", cal),
                     ("  diag: calibrated, no Stribeck term on axes 4/5", nos),
                     ("  diag: sampled 8 Hz, no Stribeck term on axes 4/5", nos8)):
        run = tv.CloosTwin(c, model).replay(d2, 1, 0, averaged=False)
        print(f"  {label}: RMS [mdeg] {fmt(1e3 * np.degrees(run.tracking_rms_rad))} (real {fmt(1e3 * np.degrees(real_rms[2]))})")
        print("\n".join(describe(run.tracking_error_rad, dqm2, ddqm2, d2.sample_rate_hz)))

    if a.bands:
        print("4. Bands, 10 repetitions, seed 0 (whole calibration chain rerun per loop)")
        real, recsA = tv.real_statistics(None, model)
        for label, bwv in (("committed", committed.effects.inverter_velocity_bandwidth_hz[list(cc.WRIST_LOOP_AXES)]),
                           ("calibrated", bw)):
            c0 = with_wrist_loop(tv.calibrate(real, recsA["A"], model), bwv)
            c0 = cc.correct_through_loop(cc.calibrate_link_friction(c0, model, recsA["A"], real), model, recsA["A"], real)
            stats, _ = tv.twin_statistics(tv.CloosTwin(c0, model), recsA, 10, 0)
            print(f"  {label} wrist loop {fmt(bwv, 0)} Hz:")
            print(twin_vs_real_text(real, stats, tv.compare(real, stats, n_rep_twin=10)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
