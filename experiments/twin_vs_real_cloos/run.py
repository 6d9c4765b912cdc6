"""The CLOOS QRC 350 twin against the real ICMA 2020 measurements (issue 15, Build item 4).

Computes from the real files the per-joint residual RMS of the Trajectory A WLS fit, the
repetition variance profile, the WLS parameter standard deviations, the validation error on
Trajectory C and the two process validation files, and the residual autocorrelation at 10 and
100 ms; calibrates the closed-loop CLOOS twin on the Trajectory A identification data
(robident_twin/twin_vs_real.py), replays Trajectory A (and C) ``--repetitions`` times and the
process files once, processes the twin's data as the real data were processed, and prints
both side by side with the issue's acceptance bands.

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/run.py [--root DIR] [--repetitions 50]
        [--write-yaml sim_assets/cloos_qrc350/twin_calibrated.yaml] [--out DIR]

Writes ``twin_vs_real.json`` (both sides, ratios, targets met) and ``report.html`` (the table per joint
with the target bands, met/missed marked) into ``--out`` (default ``outputs/twin_vs_real_cloos``);
``robident-twin task=report report.run_dir=DIR`` rebuilds the page from the JSON.

About 4 min with 50 repetitions on one core (the twin steps at 1 kHz in Python).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from robident_twin.validation import cloos_calibration as cc, twin_vs_real as tv
from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=None, help="dataset folder (default: $ROBIDENT_CLOOS_DATA or shared)")
    ap.add_argument("--repetitions", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write-yaml", default=None, help="write the calibrated magnitudes to this YAML file")
    ap.add_argument("--out", default="outputs/twin_vs_real_cloos", help="folder of twin_vs_real.json and report.html")
    ap.add_argument("--dissipative", action="store_true",
                    help="fit the extra friction so the total friction dissipates (not adopted; README)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    model = build_model(symmetric=True)
    real, recs = tv.real_statistics(a.root, model)
    cal = cc.calibrate_link_friction(tv.calibrate(real, recs["A"], model, dissipative=a.dissipative), model, recs["A"], real)
    ident = {"A": recs["A"], **{n: ds.load(n, a.root) for n in cc.PROCESS_IDENTIFICATION_FILES}}
    mm = cc.fit_main_mode_damping(cal, model, ident, real)
    cal = cc.with_main_mode_fit(cal, mm)
    print("main axes' mode damping on A + process identification files (5-10 Hz RMS misfit per file",
          mm.files, "):", "; ".join(f"{z:.2f}: {' '.join(f'{m:.2f}' for m in row)}" for z, row in
                                     zip(mm.damping_ratios, mm.misfit)),
          f"-> best {mm.damping_ratios[mm.best]:.2f}, {'adopted' if mm.adopted else 'NOT adopted (trades A for the process files)'}")
    cal = cc.correct_through_loop(cal, model, recs["A"], real)
    print("link-side friction share (calibrated on A's 5-10 Hz residual, J6 5-12 Hz):",
          " ".join(f"{x:.2f}" for x in cal.effects.link_friction_share))
    twin = tv.CloosTwin(cal, model)
    stats, runs = tv.twin_statistics(twin, recs, a.repetitions, a.seed)
    cmp = tv.compare(real, stats, n_rep_twin=a.repetitions)
    print(f"CLOOS QRC 350: twin ({a.repetitions} repetitions of Trajectory A and C) against the real files")
    print(tv.format_table(real, stats, cmp))
    print("tracking RMS of the twin's loop on A [mrad]:", " ".join(f"{1e3 * x:.2f}" for x in runs["A"].tracking_rms_rad))
    print("share of the real residual's energy fitted by the calibrated transmission error + ripple + extra friction:",
          " ".join(f"{x:.2f}" for x in cal.explained_share))
    te = cal.effects.te
    print("transmission error lines [cycles/rad]:", " | ".join(" ".join(f"{k:.2f}" for k in row) for row in te.cycles_per_rad))
    print("  in-loop amplitude [urad] (+/- flank):", " | ".join(
        " ".join(f"{1e6 * a[0]:.2f}/{1e6 * a[1]:.2f}" for a in row) for row in te.amplitude_rad))
    if a.write_yaml:
        cc.write_calibration_yaml(cal, a.write_yaml)
        print(f"calibrated magnitudes written to {a.write_yaml}")
    from robident_twin.report.html import TWIN_VS_REAL, write_twin_vs_real_report
    from robident_twin.report.sections import twin_vs_real_results

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res = twin_vs_real_results(real, stats, cmp, tv.TARGETS, repetitions=a.repetitions, seed=a.seed,
                               wall_s=round(time.perf_counter() - t0, 1))
    (out / TWIN_VS_REAL).write_text(json.dumps(res, indent=1))
    print(f"results: {out / TWIN_VS_REAL}; report: {write_twin_vs_real_report(out)}")
    print(f"wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
