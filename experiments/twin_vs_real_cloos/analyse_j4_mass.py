"""J4's own 7-9 Hz ring against a secondary mass on axis 4 (issue 15, item 4; session 10, J4-mode task).

Prints (about 40 s):

1. real A: the mount's motion a body on link 4 sees (pinocchio, the twin's kinematics): the reference motion plus the
   main axes' link-side ringing, estimated from their own 4-12 Hz residual (the spring torque) through the link-side
   mass matrix of axes 1-3 (the wrist held); the least-squares fit of the body's response (inertia, mass moments,
   line, damping) to J4's 6-11 Hz residual; with the rotation alone, with the ringing left out;
2. the same body, not refitted, on C and the process identification files (process files: not periodic); each file
   fitted on its own; the chance level of A's fit (the residual shifted circularly against the excitation);
3. J4's 0.05-2.5 Hz residual on A: its share and what it follows; the ringing estimate checked on the twin (one
   replay of A, its link-side accelerations known), and the body's fit on that twin, which has no body (a null);
4. with ``--twin`` (4 min): 2-repetition replays of the committed twin and ``--j4-hold``, each with and without the
   body (J4 per 1 Hz bin, ACF, C / process ratios, J4 standing on process 2).

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_j4_mass.py [--twin]
"""
from __future__ import annotations

import numpy as np
from scipy import signal

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import cloos_calibration as cc, cloos_j4mass as jm, twin_vs_real as tv


def residual(reg, base, d, beta):
    return d.tau_Nm - model_torque_Nm(reg, base, d, beta)


def twin_rows(model, real, recs, cal0, params, hold_window):
    """2 repetitions of A with the real weights (so that 2 stand for 50), C twice, the process files once: J4's RMS
    per 1 Hz bin 2-13 Hz, its 10 / 100 ms ACF, its C / process ratios, J4 standing on process 2."""
    from analyse_wrist_acf import acf, bins_Nm

    import dataclasses
    from robident_twin.validation import cloos_hold

    reg, base = model
    d = recs["A"].data
    rate = d.sample_rate_hz
    var = recs["A"].tau_sample_variance_Nm2 / 50.0
    hold = lambda c: cloos_hold.with_hold(c, hold_window)
    variants = {"committed": cal0, "+ j4 mass": jm.with_j4_mass(cal0, params), "--j4-hold": hold(cal0),
                "--j4-hold + j4 mass": jm.with_j4_mass(hold(cal0), params)}
    rr = residual(reg, base, d, real.beta)
    line = lambda lab, r_, extra="": print(
        f"  {lab:22s} {' '.join(f'{x:.2f}' for x in bins_Nm(r_, rate)[1:13, 3])} | {acf(r_, round(0.01 * rate))[3]:.2f} "
        f"{acf(r_, round(0.1 * rate))[3]:.2f} {extra}")
    print("== twin: J4 RMS per 1 Hz bin 2-13 Hz [Nm] | ACF 10 / 100 ms | ratios C p1 p2 | standing p2 [mdeg]")
    line("real", rr)
    for name, cal in variants.items():
        twin = tv.CloosTwin(cal, model)
        run = twin.replay(d, 2, 0)
        dd = dataclasses.replace(run.data, tau_var_sample_Nm2=var, tau_var_Nm2=var.mean(axis=0))
        vals = {"C": twin.replay(recs["C"].data, 2, 1).data}
        for i, n in enumerate(tv.VALIDATION_SETS[1:]):
            p = twin.replay(recs[n].data, 1, 2 + i, averaged=False)
            vals[n] = p.data
        st = tv.fit_statistics("twin", reg, base, dd, run.sample_variance_Nm2, vals)
        ratio = [st.validation_rms_Nm[n][3] / real.validation_rms_Nm[n][3] for n in ("C",) + tv.VALIDATION_SETS[1:]]
        line(name, residual(reg, base, dd, st.beta), f"| {' '.join(f'{x:.2f}' for x in ratio)} | "
             f"{1e3 * np.degrees(np.sqrt(np.mean(p.tracking_error_rad[:, 3] ** 2))):.2f}", )


def check_estimate(model, recs, cal):
    """The ringing estimate on the twin, whose link motion is known: one replay of A logging the link-side joint
    accelerations (through a body of negligible inertia), against :func:`jm.ringing_acceleration` of its residual."""
    import dataclasses

    reg, base = model
    d = recs["A"].data
    rate = d.sample_rate_hz
    log, orig = [], jm.SecondaryMass.advance
    jm.SecondaryMass.advance = lambda self, ddq: log.append(np.array(ddq)) or orig(self, ddq)
    try:
        tw = tv.CloosTwin(jm.with_j4_mass(cal, jm.SecondaryMassParams(1e-9, 0.0, 0.0, 9.0, 0.05)), model)
        run = tw.replay(d, 1, 0)
    finally:
        jm.SecondaryMass.advance = orig
    n, sub = len(d.q_rad), round(1.0 / (rate * tw.dt))
    sos = signal.butter(4, (4.0, 12.0), btype="band", fs=rate, output="sos")
    true = signal.sosfiltfilt(sos, np.array(log)[-n * sub:].reshape(n, sub, 6).mean(axis=1), axis=0) * [1, 1, 1, 0, 0, 0]
    var = recs["A"].tau_sample_variance_Nm2 / 50.0
    dd = dataclasses.replace(run.data, tau_var_sample_Nm2=var, tau_var_Nm2=var.mean(axis=0))
    st = tv.fit_statistics("twin", reg, base, dd, var, {})
    rt = residual(reg, base, dd, st.beta)
    est = jm.ringing_acceleration(tw.pin, tw.pmodel, dd.q_rad, rt, rate)
    f = jm.fit_on_real(tw, dd, rt)  # a null: the same fit on a twin that has no body
    print(f"== the body's fit on the committed twin's A (it has no body): share {f.share:.3f}, line {f.params.line_hz:g} Hz, "
          f"damping {f.params.damping_ratio:g}, m c {f.params.mass_moment_x_kgm:.3g} {f.params.mass_moment_y_kgm:.3g} kg m")
    print("== the ringing estimate on the twin (true link ringing known): axes 1-3 RMS true / estimated [rad/s^2], correlation")
    print("  " + "; ".join(f"J{j + 1} {np.sqrt(np.mean(true[:, j] ** 2)):.3f} / {np.sqrt(np.mean(est[:, j] ** 2)):.3f}, "
                           f"{np.corrcoef(true[:, j], est[:, j])[0, 1]:.2f}" for j in range(3)))
    ct = jm.mount_columns(tw.pin, tw.pmodel, dd.q_rad, dd.dq_rad_s, dd.ddq_rad_s2 + true)
    ce = jm.mount_columns(tw.pin, tw.pmodel, dd.q_rad, dd.dq_rad_s, dd.ddq_rad_s2 + est)
    print("  mount columns alpha_z, A_y, -A_x (4-12 Hz): RMS true / estimated, correlation: " + "; ".join(
        f"{np.sqrt(np.mean(signal.sosfiltfilt(sos, ct[:, k]) ** 2)):.3f} / {np.sqrt(np.mean(signal.sosfiltfilt(sos, ce[:, k]) ** 2)):.3f}, "
        f"{np.corrcoef(signal.sosfiltfilt(sos, ct[:, k]), signal.sosfiltfilt(sos, ce[:, k]))[0, 1]:.2f}" for k in range(3)))


def main() -> int:
    import sys
    model = build_model(symmetric=True)
    reg, base = model
    real, recs = tv.real_statistics(None, model)
    cal = cc.load_calibration("sim_assets/cloos_qrc350/twin_calibrated.yaml")
    twin = tv.CloosTwin(cal, model)
    pin, pm = twin.pin, twin.pmodel
    sign = float(twin.C[3, 3])  # motor-4 torque per joint-4 torque
    files = {"A": recs["A"].data, "C": recs["C"].data,
             **{n: ds.load(n).data for n in cc.PROCESS_IDENTIFICATION_FILES}}
    cols, res = {}, {}
    for name, d in files.items():
        rate = d.sample_rate_hz
        r = residual(reg, base, d, real.beta)
        ddq_ring = jm.ringing_acceleration(pin, pm, d.q_rad, r, rate)  # axes 1-3 link side under their spring torque
        cols[name] = {"reference": jm.mount_columns(pin, pm, d.q_rad, d.dq_rad_s, d.ddq_rad_s2),
                      "with ringing": jm.mount_columns(pin, pm, d.q_rad, d.dq_rad_s, d.ddq_rad_s2 + ddq_ring)}
        res[name] = r[:, 3]
        print(f"{name}: J4 residual RMS {np.sqrt(np.mean(r[:, 3] ** 2)):.3f} Nm, 6-11 Hz "
              f"{cc.band_rms(r[:, 3:4], rate, jm.RING_BAND_HZ)[0]:.3f}; mount's ringing |alpha_z| RMS "
              f"{np.sqrt(np.mean((cols[name]['with ringing'][:, 0] - cols[name]['reference'][:, 0]) ** 2)):.3g} rad/s^2, "
              f"|A| {np.sqrt(np.mean(np.sum((cols[name]['with ringing'][:, 1:] - cols[name]['reference'][:, 1:]) ** 2, axis=1))):.3g} m/s^2")
    rate = files["A"].sample_rate_hz
    print("== fit on A (share of J4's 6-11 Hz residual energy)")
    fits = {}
    for lab, X in (("with ringing", cols["A"]["with ringing"]), ("reference only", cols["A"]["reference"]),
                   ("with ringing, rotation only", cols["A"]["with ringing"] * [1, 0, 0])):
        try:
            f = jm.fit_secondary_mass(res["A"], X, rate, sign)
        except Exception as e:  # noqa: BLE001 - report the variant that cannot be fitted
            print(f"  {lab:30s} no fit ({e})")
            continue
        fits[lab] = f
        p = f.params
        i = f.lines_hz.index(p.line_hz)
        print(f"  {lab:30s} share {f.share:.3f}: line {p.line_hz:.1f} Hz, damping {p.damping_ratio:.2f}, I {p.inertia_kgm2:.4g} "
              f"kg m^2, m c {p.mass_moment_x_kgm:.3g} {p.mass_moment_y_kgm:.3g} kg m; share over the damping grid at "
              f"that line {' '.join(f'{x:.2f}' for x in f.share_grid[i])}")
    f = fits["with ringing"]
    print("  share per line (best damping):", " ".join(f"{l:.1f}:{s:.2f}" for l, s in zip(f.lines_hz, f.share_grid.max(axis=1))
                                                    if abs(l * 2 - round(l * 2)) < 1e-9))
    print("== not refitted (body fitted on A with the ringing)")
    for name in files:
        d = files[name]
        rate_n = d.sample_rate_hz
        sos = signal.butter(4, jm.RING_BAND_HZ, btype="band", fs=rate_n, output="sos")
        rb = signal.sosfiltfilt(sos, res[name])
        pred = sign * signal.sosfiltfilt(sos, jm.predicted_torque_Nm(f.params, cols[name]["with ringing"], rate_n,
                                                                      periodic=name in ("A", "C")))
        sh = 1 - np.sum((rb - pred) ** 2) / np.sum(rb ** 2)
        g = float(pred @ rb / (pred @ pred))
        print(f"  {name}: share {sh:.3f}, correlation {np.corrcoef(rb, pred)[0, 1]:.2f}, best gain {g:.2f}, "
              f"RMS predicted {np.sqrt(np.mean(pred ** 2)):.3f} real {np.sqrt(np.mean(rb ** 2)):.3f} Nm")
    print("== each file fitted on its own (is the line the same?)")
    for name in files:
        try:
            g = jm.fit_secondary_mass(res[name], cols[name]["with ringing"], files[name].sample_rate_hz, sign)
        except Exception as e:  # noqa: BLE001
            print(f"  {name}: no fit ({e})")
            continue
        q = g.params
        print(f"  {name}: share {g.share:.3f}, line {q.line_hz:.1f} Hz, damping {q.damping_ratio:.2f}, I {q.inertia_kgm2:.3g}, m c "
              f"{q.mass_moment_x_kgm:.3g} {q.mass_moment_y_kgm:.3g}; best share per line 6-11 Hz: "
              + " ".join(f"{s_:.2f}" for l, s_ in zip(g.lines_hz, g.share_grid.max(axis=1)) if abs(l - round(l)) < 1e-9))
    null = []
    for shift in np.linspace(0.1, 0.9, 9):  # chance level: the residual shifted circularly against the excitation
        try:
            null.append(jm.fit_secondary_mass(np.roll(res["A"], int(shift * len(res["A"]))), cols["A"]["with ringing"],
                                              rate, sign).share)
        except Exception:  # noqa: BLE001 - no positive inertia anywhere: share 0
            null.append(0.0)
    print(f"  chance level on A (9 circular shifts of the residual): share median {np.median(null):.3f}, max {max(null):.3f}")
    print("== J4 0.05-2.5 Hz on A")
    d = files["A"]
    lo = signal.sosfiltfilt(signal.butter(4, (0.05, 2.5), btype="band", fs=rate, output="sos"), res["A"])
    print(f"  RMS {np.sqrt(np.mean(lo ** 2)):.3f} Nm (share {np.sum(lo ** 2) / np.sum((res['A'] - res['A'].mean()) ** 2):.2f})")
    dq4 = d.dq_rad_s[:, 3]
    for lab, x in (("sign dq4", np.tanh(dq4 / 0.01)), ("dq4", dq4), ("ddq4", d.ddq_rad_s2[:, 3]), ("q4", d.q_rad[:, 3]),
                   ("|dq4| < 0.02", (np.abs(dq4) < 0.02).astype(float)), ("dq1", d.dq_rad_s[:, 0]), ("q5", d.q_rad[:, 4]),
                   ("sin q4", np.sin(d.q_rad[:, 3])), ("cos q4", np.cos(d.q_rad[:, 3])),
                   ("mount A_y", cols["A"]["reference"][:, 1]), ("mount A_x", cols["A"]["reference"][:, 2])):
        print(f"  correlation with {lab:14s} {np.corrcoef(lo, x - x.mean())[0, 1]:5.2f}")
    X = np.column_stack([cols["A"]["reference"][:, 1:], np.ones(len(lo))])
    c, *_ = np.linalg.lstsq(X, res["A"], rcond=None)
    fit_lo = signal.sosfiltfilt(signal.butter(4, (0.05, 2.5), btype="band", fs=rate, output="sos"), X @ c)
    print(f"  the mount's slow A_y, -A_x (a mass moment about axis 4 the model lacks) fitted to the whole J4 residual: m c "
          f"{sign * c[0]:.3f} {sign * c[1]:.3f} kg m, share of the 0.05-2.5 Hz part {1 - np.sum((lo - fit_lo) ** 2) / np.sum(lo ** 2):.2f}")
    check_estimate(model, recs, cal)
    if "--twin" in sys.argv:
        from robident_twin.validation import cloos_hold

        window = cloos_hold.hold_window_on_real(cal.effects.encoder_resolution_rad)
        twin_rows(model, real, recs, cal, jm.fit_on_real(twin, files["A"], residual(reg, base, files["A"], real.beta)).params,
                  window)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
