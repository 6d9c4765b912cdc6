"""The CLOOS QRC 350 twin against the real ICMA 2020 measurements (issue 15, Build item 4).

Computes from the real files the per-joint residual RMS of the Trajectory A WLS fit, the
repetition variance profile, the WLS parameter standard deviations, the validation error on
Trajectory C and the two process validation files, and the residual autocorrelation at 10 and
100 ms; calibrates the closed-loop CLOOS twin on the Trajectory A identification data
(robident_twin/twin_vs_real.py), replays Trajectory A (and C) ``--repetitions`` times and the
process files once, processes the twin's data as the real data were processed, and prints
both side by side with the issue's acceptance bands.

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/run.py [--root DIR] [--repetitions 50]
        [--write-yaml sim_assets/cloos_qrc350/twin_calibrated.yaml] [--out DIR] [--no-dissipative] [--no-wrist4]
        [--no-per-axis-modes] [--no-file-clock] [--axis1-friction joint|presliding] [--axis1-share] [--wrist-loop] [--wrist6 [AXES]] [--link-stribeck] [--per-axis-damping decay|fit]
        [--inplane-wrist] [--inplane-springs] [--j4-hold] [--j4-mass]

The committed twin (session 10, README "Results of the adopted twin (session 10)") is this chain's default,
the switches in ``ADOPTED``: ``--dissipative`` fits the extra friction so that the total friction dissipates;
``--wrist4`` makes axis 4's Coulomb step presliding (Dahl) friction fitted on A, right after the friction fit
(README "Axis 4 with presliding friction (session 9)"); ``--per-axis-modes`` sets the springs of axes 1 and 3
to their own residual lines (README "The main axes' own modes per axis, J1 and J3"); since session 10
``--file-clock`` replays the process validation files on their own clock (below; no calibrated value changes).
``--no-<switch>`` turns one off (``--no-dissipative --no-wrist4 --no-per-axis-modes --no-file-clock``: the
session-8 twin and replay). ``--axis1-friction presliding --axis1-share`` (axis 1's extra friction, its Coulomb
step a Dahl element, fitted on A and the process identification files jointly; axis 1's link-side share solved
with the other axes' held; README "Axis 1's friction on all the identification data") is measured, not adopted
(README "Results of the adopted twin (session 10)"). Measured and not adopted (README): ``--wrist-loop`` calibrates the
wrist's (axes 4, 5) inverter velocity loop on the real tracking error right after the friction fit;
``--wrist6`` constrains axis 6's extra friction alone, ``--wrist6 5,6`` axes 5 and 6 (with ``--dissipative``
every axis is constrained anyway); ``--link-stribeck`` puts the main axes' extra friction on the link side with
their share, before the share is calibrated; ``--per-axis-damping decay|fit`` the damping of axes 1 and 3;
``--inplane-wrist`` axis 5's loop and the main axes' in-plane mode on axis 5, ``--inplane-springs`` the springs
of axes 2 and 3 at the coupled in-plane mode's real line (cloos_inplane; session 10).
``--file-clock`` (session 10, not a calibration: it changes no calibrated value) replays the two process
validation files on their own clock, read from their desired path (``process_replay.file_clock_ticks``: some
sample intervals span one extra 2 ms acquisition period); the twin that replays A, C and the process files is
built with it after the whole chain (the identification files the chain replays have no such intervals).
``--j4-hold`` axis 4's velocity PI in the inverter with its integrator holding at standstill (README session 10);
``--j4-mass`` a body on a spring-damper about axis 4 driven by the arm's motion, fitted on A (README session 10).

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

import numpy as np

from robident_twin.validation import cloos_calibration as cc, cloos_peraxis as cpa, cloos_wrist4 as w4, cloos_wrist6 as w6
from robident_twin.validation import cloos_axis1 as ax1
from robident_twin.validation import cloos_inplane as ci
from robident_twin.validation import cloos_hold, cloos_j4mass as cj4
from robident_twin.validation import twin_vs_real as tv
from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model
from robident_twin.errors import ConfigError
from robident_twin.report.sections import twin_vs_real_results, twin_vs_real_text


#: The switches of the committed twin (``sim_assets/cloos_qrc350/twin_calibrated.yaml``), on by default.
ADOPTED = ("dissipative", "wrist4", "per_axis_modes", "file_clock")


def calibration_chain(real, recs, model, root=None, dissipative: bool = False, wrist_loop: bool = False,
                      wrist6: tuple = (), wrist4: bool = False, link_stribeck: bool = False,
                      per_axis_modes: bool = False, per_axis_damping: str | None = None,
                      axis1_friction: str | None = None, axis1_share: bool = False, inplane_wrist: bool = False,
                      inplane_springs: bool = False, j4_hold: bool = False,
                      j4_mass: bool = False):
    """The whole calibration: the effects on A (``dissipative``: the constrained friction fit; ``wrist6``:
    on these axes alone, 0-based), with ``wrist4`` axis 4's presliding (Dahl) friction refitted on A right after
    it, with ``wrist_loop`` the wrist's inverter loop calibrated on the real tracking error next, with
    ``link_stribeck`` the main axes' extra friction on the link side, with ``per_axis_modes`` the springs of
    axes 1 and 3 at their own lines (cloos_peraxis; ``per_axis_damping="decay"``: and their damping from the
    decay after their own reversals on A), then the link-side friction share (``per_axis_damping="fit"``: then
    axes 1 and 3's damping fitted per axis on A and the process identification files), the main axes' mode
    damping and the pass through the loop. ``axis1_friction`` ("joint" | "presliding", cloos_axis1): axis 1's
    extra friction refitted on A and the process identification files jointly (the Stribeck form, or the
    Coulomb step as a Dahl element), right after the friction fit and ``wrist4``; ``axis1_share``: axis 1's
    link-side share refined on A with the other axes' shares held, right after the link-side share;
    ``inplane_wrist``: after the main mode's damping, axis 5's loop and the in-plane mode's share on it
    (cloos_inplane), before the pass through the loop; ``inplane_springs`` scales the springs of axes 2 and 3 so that their coupled
    in-plane mode sits at the real line, right before the link-side share (cloos_inplane).
    ``j4_hold`` (after ``wrist4``, before the wrist loop): axis 4's velocity
    PI in the inverter, its integrator holding while the axis stands in position (validation.cloos_hold). ``j4_mass``
    (after ``j4_hold``, before the wrist loop): a body on a spring about axis 4 fitted on A (validation.cloos_j4mass)."""
    if wrist6 and not dissipative:  # with --dissipative every axis, axis 6 included, is constrained
        dissipative = tuple(wrist6)
    cal = tv.calibrate(real, recs["A"], model, dissipative=dissipative)
    if wrist4:  # before the wrist loop, which is then calibrated with the physical friction
        cal = w4.calibrate_presliding_on_real(cal, real, recs["A"], model, root, dissipative=dissipative)
        for f in cal.fit.get("presliding_fit", ()):
            print(f"axis {f.axis + 1} presliding friction on A: sliding element {1e3 * f.best_rad:.3g} mrad, stiction "
                  f"weight {f.weight[list(f.grid_rad).index(f.best_rad)]:.3f} (element {1e6 * f.stiction_rad:.3g} urad), "
                  f"residual share fitted {1 - f.ss.min() / f.ss_total:.3f} (Stribeck form {1 - f.ss_stribeck / f.ss_total:.3f})")
    if axis1_friction is not None:  # after the friction fit (and wrist4), before the loop, springs and share
        cal = ax1.calibrate_axis1_friction(cal, real, model, recs["A"], root, axis1_friction, dissipative=bool(dissipative))
        print(ax1.summary_line(cal))
    if j4_hold:  # the standing axis 4 as the real drive holds it; before the wrist loop, which may retune it
        cal = cloos_hold.with_hold(cal, cloos_hold.hold_window_on_real(cal.effects.encoder_resolution_rad, root))
        print(f"axis 4 held at standstill: inverter velocity PI {cloos_hold.HOLD_INVERTER_BANDWIDTH_HZ:g} Hz, integrator "
              f"holds within {1e6 * cal.effects.hold_window_rad[3]:.2f} urad of a standing reference (process 2 deg_e)")
    if j4_mass:  # the body on axis 4, fitted on A's J4 residual against the mount's motion on the twin's kinematics
        cal, fit = cj4.calibrate_on_real(cal, lambda c: tv.CloosTwin(c, model), recs["A"], real)
        p = fit.params
        print(f"axis 4 body on a spring (A's J4 {cj4.RING_BAND_HZ[0]:g}-{cj4.RING_BAND_HZ[1]:g} Hz residual): line "
              f"{p.line_hz:g} Hz, damping {p.damping_ratio:g}, inertia {p.inertia_kgm2:.4g} kg m^2, mass moments "
              f"{p.mass_moment_x_kgm:.3g} {p.mass_moment_y_kgm:.3g} kg m, share fitted {fit.share:.3f}")
    if wrist_loop:
        cal = cc.calibrate_wrist_loop_on_real(cal, model, root)
        print("wrist loop calibrated on process", cc.WRIST_LOOP_PROCESS, "deg_e: inverter velocity bandwidth [Hz]",
              " ".join(f"J{j + 1} {cal.effects.inverter_velocity_bandwidth_hz[j]:g}" for j in cc.WRIST_LOOP_AXES))
    if link_stribeck:  # the main axes' extra friction on the link side too, before their share is set
        cal = cc.with_link_stribeck(cal)
    if per_axis_damping not in (None, "decay", "fit"):
        raise ValueError(f"calibration_chain: per_axis_damping {per_axis_damping!r}, expected None, 'decay' or 'fit'")
    if per_axis_modes or per_axis_damping:
        ev = cpa.real_residual_evidence(real, recs["A"], model)
        cal = cpa.with_per_axis_modes(cal, ev, damping=per_axis_damping == "decay")
        print(cpa.summary_line(cal, ev))
    if inplane_springs:  # after the per-axis lines, before the link-side share (set on this mode's ringing)
        cal = ci.calibrate_inplane_springs(cal, model, recs["A"], real)
        print(ci.springs_summary_line(cal))
    cal = cc.calibrate_link_friction(cal, model, recs["A"], real)
    if axis1_share:  # axis 1's share with axes 2 and 3 at theirs (cloos_axis1), before the damping fits
        cal = ax1.refine_link_share(cal, model, recs["A"], real)
        print(ax1.share_line(cal))
    ident = {"A": recs["A"], **{n: ds.load(n, root) for n in cc.PROCESS_IDENTIFICATION_FILES}}
    if per_axis_damping == "fit":
        fits = cpa.fit_axis_damping(cal, model, ident, real)
        cal = cpa.with_axis_damping_fit(cal, fits)
        print("axes' own damping on A + process identification files (5-10 Hz RMS misfit per file):", "; ".join(
            f"J{j + 1}: " + ", ".join(f"{z:.2f}: {' '.join(f'{m:.2f}' for m in row)}" for z, row in
                                      zip(f.damping_ratios, f.misfit))
            + f" -> {f.damping_ratios[f.best]:.2f} {'adopted' if f.adopted else 'NOT adopted'}" for j, f in fits.items()))
    mm = cc.fit_main_mode_damping(cal, model, ident, real)
    cal = cc.with_main_mode_fit(cal, mm)
    print("main axes' mode damping on A + process identification files (5-10 Hz RMS misfit per file",
          mm.files, "):", "; ".join(f"{z:.2f}: {' '.join(f'{m:.2f}' for m in row)}" for z, row in
                                     zip(mm.damping_ratios, mm.misfit)),
          f"-> best {mm.damping_ratios[mm.best]:.2f}, {'adopted' if mm.adopted else 'NOT adopted (trades A for the process files)'}")
    if inplane_wrist:  # after the main mode's damping (the mode's amplitude), before the pass through the loop
        cal = ci.calibrate_inplane_wrist(cal, model, recs["A"], real, root)
        print(ci.summary_line(cal))
    cal = cc.correct_through_loop(cal, model, recs["A"], real)
    print("link-side friction share (calibrated on A's 5-10 Hz residual, J6 5-12 Hz):",
          " ".join(f"{x:.2f}" for x in cal.effects.link_friction_share))
    return cal


def _repetitions(text: str) -> int:
    """--repetitions: at least 2 (the twin's WLS weights are the per-sample variance over the repetitions)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= 2 (the per-sample variance over the "
                                         "repetitions weights the twin's WLS fit, as the real data's)")
    return n


def _wrist6_axes(text: str) -> tuple:
    try:
        return w6.parse_axes(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=None, help="dataset folder (default: $ROBIDENT_CLOOS_DATA or shared)")
    ap.add_argument("--repetitions", type=_repetitions, default=50, help="replays of A and C (>= 2; default 50)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write-yaml", default=None, help="write the calibrated magnitudes to this YAML file")
    ap.add_argument("--out", default="outputs/twin_vs_real_cloos", help="folder of twin_vs_real.json and report.html")
    ap.add_argument("--dissipative", action=argparse.BooleanOptionalAction, default=True,
                    help="fit the extra friction so the total friction dissipates (adopted; README)")
    ap.add_argument("--wrist-loop", action="store_true",
                    help="calibrate the wrist's inverter velocity loop on the real tracking error (not adopted; README)")
    ap.add_argument("--wrist6", nargs="?", const=w6.WRIST6_AXES, default=(), type=_wrist6_axes, metavar="AXES",
                    help="fit the extra friction of axis 6 (or of AXES, e.g. 5,6) so that its total friction "
                         "dissipates, the other axes unconstrained (not adopted; README, session 9)")
    ap.add_argument("--wrist4", action=argparse.BooleanOptionalAction, default=True,
                    help="axis 4 with presliding (Dahl) friction calibrated on A (adopted; README session 9)")
    ap.add_argument("--link-stribeck", action="store_true",
                    help="the main axes' extra (Stribeck) friction on the link side too (not adopted; README session 9)")
    ap.add_argument("--per-axis-modes", action=argparse.BooleanOptionalAction, default=True,
                    help="springs of axes 1 and 3 at their own residual lines (adopted; README session 9)")
    ap.add_argument("--per-axis-damping", choices=("decay", "fit"), default=None,
                    help="with --per-axis-modes: their damping from the decay after their own reversals on A, or "
                         "fitted per axis on A and the process identification files")
    ap.add_argument("--axis1-friction", choices=ax1.AXIS1_FRICTION_MODES, default=None,
                    help="axis 1's extra friction fitted on A and the process identification files jointly: the "
                         "Stribeck form (joint) or its Coulomb step as a Dahl element (presliding); not adopted, "
                         "README session 10")
    ap.add_argument("--axis1-share", action="store_true",
                    help="axis 1's link-side friction share refined on A's 5-10 Hz with the other axes' shares held "
                         "(not adopted; README session 10)")
    ap.add_argument("--inplane-springs", action="store_true",
                    help="springs of axes 2 and 3 scaled so that their coupled in-plane mode sits at the real line "
                         "after axis 2's reversals (not adopted; README session 10)")
    ap.add_argument("--inplane-wrist", action="store_true",
                    help="axis 5 on the inverter loop calibrated on A's 7 Hz drive transfer, driven by the main axes' "
                         "in-plane mode (g cos(q4) dd(d2), g on A's J5/J2 ratio; not adopted; README session 10)")
    ap.add_argument("--file-clock", action=argparse.BooleanOptionalAction, default=True,
                    help="replay the process validation files on their own clock read from the desired path "
                         "(adopted; README session 10)")
    ap.add_argument("--j4-hold", action="store_true",
                    help="axis 4's velocity PI in the inverter, its integrator holding on a standing reference within "
                         "the real deg_e window (not adopted; README session 10)")
    ap.add_argument("--j4-mass", action="store_true",
                    help="a body on a spring about axis 4 (torch cable package), fitted on A (README session 10)")
    a = ap.parse_args(argv)
    if a.write_yaml:  # its folder made now, not after minutes of calibration
        Path(a.write_yaml).parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model = build_model(symmetric=True)
    real, recs = tv.real_statistics(a.root, model)
    cal = calibration_chain(real, recs, model, a.root, dissipative=a.dissipative, wrist_loop=a.wrist_loop,
                            wrist6=a.wrist6, wrist4=a.wrist4, link_stribeck=a.link_stribeck,
                            per_axis_modes=a.per_axis_modes, per_axis_damping=a.per_axis_damping,
                            axis1_friction=a.axis1_friction, axis1_share=a.axis1_share,
                            inplane_wrist=a.inplane_wrist, inplane_springs=a.inplane_springs,
                            j4_hold=a.j4_hold, j4_mass=a.j4_mass)
    if a.write_yaml:  # before the replays, so that the calibration can be inspected while they run
        cc.write_calibration_yaml(cal, a.write_yaml)
        print(f"calibrated magnitudes written to {a.write_yaml}")
    twin = tv.CloosTwin(cal, model, file_clock=a.file_clock)
    stats, runs = tv.twin_statistics(twin, recs, a.repetitions, a.seed)
    cmp = tv.compare(real, stats, n_rep_twin=a.repetitions)
    print(f"CLOOS QRC 350: twin ({a.repetitions} repetitions of Trajectory A and C) against the real files")
    print(twin_vs_real_text(real, stats, cmp))
    print("tracking RMS of the twin's loop on A [mrad]:", " ".join(f"{1e3 * x:.2f}" for x in runs["A"].tracking_rms_rad))
    if "process2_validation" in runs:  # J4 stands still there; the real J4 holds within 0.06 mdeg (deg_e)
        p2 = runs["process2_validation"]
        print("tracking RMS of the twin's loop on process 2 [mdeg]:", " ".join(f"{x:.2f}" for x in 1e3 * np.degrees(
            p2.tracking_rms_rad)), f"; J4 (standing still) peak-to-peak {1e3 * np.degrees(np.ptp(p2.tracking_error_rad[:, 3])):.2f}")
    print("share of the real residual's energy fitted by the calibrated transmission error + ripple + extra friction:",
          " ".join(f"{x:.2f}" for x in cal.explained_share))
    te = cal.effects.te
    print("transmission error lines [cycles/rad]:", " | ".join(" ".join(f"{k:.2f}" for k in row) for row in te.cycles_per_rad))
    print("  in-loop amplitude [urad] (+/- flank):", " | ".join(
        " ".join(f"{1e6 * a[0]:.2f}/{1e6 * a[1]:.2f}" for a in row) for row in te.amplitude_rad))
    from robident_twin.report.html import TWIN_VS_REAL, write_twin_vs_real_report

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
