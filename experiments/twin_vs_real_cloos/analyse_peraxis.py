"""The main axes' own modes, J1 and J3 (issue 15, item 4; session 9). Prints (a few minutes, one core):

1. per axis 1-3 from the real Trajectory A residual (identification data): the strongest 3-15 Hz line of
   the axis's own column and of the windows after its own reversals, the 5-10 Hz envelope after each
   axis's reversals (cloos_calibration.reversal_locked_envelope), and the apparent damping ratio from
   the envelope decay after each isolated reversal of the axis (cloos_peraxis);
2. J1's 5-10 Hz and 0-5 Hz content on the process IDENTIFICATION files, real and twin, with one effect
   of the committed twin's axis 1 off at a time (diagnostic replays, noise off; torque minus the real
   model's prediction), and the per-axis-mode twin (springs of J1 and J3 at their own lines; with J1's
   fitted damping).

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_peraxis.py
"""
from __future__ import annotations

import dataclasses

import numpy as np

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import cloos_calibration as cc
from robident_twin.validation import cloos_peraxis as cpa
from robident_twin.validation import repetition_noise as rn
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.periodogram import band_rms_periodogram

BANDS_HZ = ((0, 1), (1, 2), (2, 5), (5, 10))


def band_split(e, rate):
    """RMS per band of BANDS_HZ (periodogram) of each column."""
    return band_rms_periodogram(e, rate, BANDS_HZ)


def variants(cal):
    fx = cal.effects

    def on_axis1(**kw):
        out = {}
        for k, v in kw.items():
            a = np.array(getattr(fx, k), dtype=float)
            a[0] = v
            out[k] = a
        return dataclasses.replace(cal, effects=dataclasses.replace(fx, **out))

    te0 = dataclasses.replace(fx.te, amplitude_rad=np.where(np.arange(6)[:, None, None] == 0, 0.0, fx.te.amplitude_rad))
    return {
        "committed": cal,
        "J1 link-side share 0": on_axis1(link_friction_share=0.0),
        "J1 link-side share 1": on_axis1(link_friction_share=1.0),
        "J1 load-dependent Coulomb 0": on_axis1(load_coulomb=0.0),
        "J1 extra friction 0 (Stribeck, quadratic, load)": on_axis1(stribeck_Nm=0.0, visc2_Nms2_rad2=0.0, load_coulomb=0.0),
        "J1 transmission error 0": dataclasses.replace(cal, effects=dataclasses.replace(fx, te=te0)),
        "J1 rigid": on_axis1(stiffness_Nm_rad=0.0, link_friction_share=0.0),
        "J1 inverter loop 30 Hz": on_axis1(inverter_velocity_bandwidth_hz=30.0),
    }


def main() -> int:
    reg, base = model = build_model(symmetric=True)
    real, recs = tv.real_statistics(None, model)
    print("1. Per-axis evidence, real Trajectory A residual (identification data)")
    ev = cpa.real_residual_evidence(real, recs["A"], model, axes=(0, 1, 2))
    d = recs["A"].data
    r = d.tau_Nm - model_torque_Nm(reg, base, d, real.beta)
    dqm = d.dq_rad_s @ np.linalg.inv(np.asarray(reg.spec.coupling)).T
    env = cc.reversal_locked_envelope(r, dqm, d.sample_rate_hz, band_hz=cc.RINGING_BAND_HZ, window_s=0.6)
    for i, j in enumerate(ev.axes):
        print(f"  J{j + 1}: line {ev.line_hz[i]:.2f} Hz, after its own reversals {ev.reversal_line_hz[i]:.2f} Hz; "
              f"5-10 Hz envelope after axis 1/2/3 reversals {' '.join(f'{x:.2f}' for x in env[j, :3])}; "
              f"decay damping {' '.join(f'{z:.3f}' for z in ev.decay_damping[i])} (median {ev.damping_median[i]:.3f})")
    print(f"  summed line (the committed springs): {tv.strongest_line_hz(r, d.sample_rate_hz):.2f} Hz")

    print("2. J1 on the process identification files: band RMS [Nm] 0-1 1-2 2-5 5-10 Hz (torque - real model)")
    cal = cc.load_calibration("sim_assets/cloos_qrc350/twin_calibrated.yaml")
    runs = dict(variants(cal))
    pam = cpa.with_per_axis_modes(cal, cpa.real_residual_evidence(real, recs["A"], model))
    runs["per-axis modes J1/J3 (cloos_peraxis)"] = pam
    # and J1's damping and link-side share as run.py --per-axis-modes --per-axis-damping fit sets them
    # (README, session 9: 0.6 adopted on J1, share 0.68 from A's 5-10 Hz RMS; J3 not adopted)
    z = np.array(np.broadcast_to(pam.effects.damping_ratio, 6), dtype=float)
    z[0] = 0.6
    share = np.array(pam.effects.link_friction_share, dtype=float)
    share[0] = 0.68
    runs["per-axis modes, J1 damping 0.6, share 0.68 (--per-axis-damping fit)"] = dataclasses.replace(
        pam, effects=dataclasses.replace(pam.effects, damping_ratio=z, link_friction_share=share))
    files = {n: ds.load(n, None).data for n in cc.PROCESS_IDENTIFICATION_FILES}
    for n, f in files.items():
        pred = model_torque_Nm(reg, base, f, real.beta)
        b = band_split(f.tau_Nm - pred, f.sample_rate_hz)
        print(f"  {n}, real: J1 {' '.join(f'{x:6.1f}' for x in b[:, 0])} | J3 {' '.join(f'{x:6.1f}' for x in b[:, 2])}")
    for name, c in runs.items():
        tw = tv.CloosTwin(dataclasses.replace(c, effects=rn.without_noise(c.effects)), model)
        for n, f in files.items():
            tau = tw.replay(f, 1, 0, averaged=False).data.tau_Nm
            b = band_split(tau - model_torque_Nm(reg, base, f, real.beta), f.sample_rate_hz)
            print(f"  {n}, {name}: J1 {' '.join(f'{x:6.1f}' for x in b[:, 0])} | J3 "
                  f"{' '.join(f'{x:6.1f}' for x in b[:, 2])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
