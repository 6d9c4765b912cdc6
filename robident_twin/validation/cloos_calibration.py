"""The CLOOS twin's calibration through its own closed loop, and its YAML round trip (issue 15).

:func:`robident_twin.validation.twin_vs_real.calibrate` fits the effects to the real residual as
if the measured torque were the disturbance itself. The twin's drive loop passes a load
disturbance to the measured torque with a gain and phase of its own, and adds loop variance to
the calibrated current noise. :func:`correct_through_loop` replays the real excitation a few
times, fits the same transmission-error columns to the twin's residual, divides the loop's
complex gain out of each line and flank (output-error calibration, one pass), then measures the
loop's own repetition variance (a replay with the current noise and drifts off: encoder
quantisation through the velocity loop), subtracts it from the real variance profile and splits
the rest into current noise and drifts as :func:`calibrate` does. :func:`load_calibration` reads the
committed ``sim_assets/cloos_qrc350/twin_calibrated.yaml`` back into a :class:`Calibration`.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from hal.sim.effects import TransmissionErrorParams
from robident_twin.datasets.cloos_model import design_matrix
from robident_twin.errors import ConfigError
from robident_twin.validation import twin_vs_real as tv


def correct_through_loop(cal: tv.Calibration, model, recA, real: tv.FitStatistics, n_repetitions: int = 4,
                         seed: int = 100) -> tv.Calibration:
    """One closed-loop pass (see the module docstring); returns the corrected calibration with the
    open-loop values kept in ``fit``."""
    reg, base = model
    fx = cal.effects
    twin = tv.CloosTwin(cal, model)
    run = twin.replay(recA.data, n_repetitions, seed)
    d = run.data
    st = tv.fit_statistics("twin", reg, base, d, run.sample_variance_Nm2, {})
    r = d.tau_Nm - (design_matrix(reg, base, d) @ st.beta).reshape(d.tau_Nm.shape)
    Cinv = np.linalg.inv(twin.C)
    qm, dqm, ddqm = (x @ Cinv.T for x in (d.q_rad, d.dq_rad_s, d.ddq_rad_s2))
    J = np.array([twin.link_side_inertia(x) for x in d.q_rad]) + twin.ia
    te = fx.te
    z_in = te.amplitude_rad * np.exp(1j * te.phase_rad)  # (axis, line, flank)
    z_new = z_in.copy()
    for j in range(6):
        T = np.hstack([tv._te_basis(k, qm[:, j], dqm[:, j], ddqm[:, j], J[:, j]) for k in te.cycles_per_rad[j]])
        c, *_ = np.linalg.lstsq(T, r[:, j] - r[:, j].mean(), rcond=None)
        c = c.reshape(-1, 2, 2)
        z_out = c[..., 0] + 1j * c[..., 1]
        ok = np.abs(z_out) > 1e-3 * np.abs(z_in[j]) + 1e-15
        z_new[j] = np.where(ok, z_in[j] * z_in[j] / np.where(ok, z_out, 1.0), z_in[j])
    te_new = dataclasses.replace(te, amplitude_rad=np.abs(z_new), phase_rad=np.angle(z_new))
    # the loop's own repetition variance (encoder quantisation through the velocity loop): a run
    # with the current noise and the repetition drifts off; the rest of the real variance profile
    # is split again into current noise, viscous and torque-constant drift (NNLS as in calibrate)
    from scipy.optimize import nnls

    z = np.zeros(6)
    quiet = dataclasses.replace(cal, effects=dataclasses.replace(fx, te=te_new, current_noise_Nm=z,
                                                                 torque_constant_drift=z, viscous_drift=z))
    loop_var = tv.CloosTwin(quiet, model).replay(recA.data, n_repetitions, seed + 1).sample_variance_Nm2
    var = np.clip(recA.tau_sample_variance_Nm2 - loop_var, 0.0, None)
    dA = recA.data
    dqm_r, C = dA.dq_rad_s @ Cinv.T, np.asarray(twin.C)
    noise, vdrift, kdrift = np.zeros(6), np.zeros(6), np.zeros(6)
    for j in range(6):
        F = np.column_stack([np.ones(len(var)), dqm_r[:, j] ** 2, dA.tau_Nm[:, j] ** 2])
        sc = np.sqrt(np.mean(F ** 2, axis=0))
        c, _ = nnls(F / sc, var[:, j])
        a_, b_, c_ = c / sc
        noise[j], vdrift[j], kdrift[j] = np.sqrt(a_), np.sqrt(b_) / abs(twin.fv[j]), np.sqrt(c_)
    fit = {"te_amplitude_rad": te.amplitude_rad, "te_phase_rad": te.phase_rad, "current_noise_Nm": fx.current_noise_Nm,
           "torque_constant_drift": fx.torque_constant_drift, "viscous_drift": fx.viscous_drift}
    fx_new = dataclasses.replace(fx, te=te_new, current_noise_Nm=noise, torque_constant_drift=kdrift,
                                 viscous_drift=vdrift)
    return dataclasses.replace(cal, effects=fx_new, fit=fit)


def load_calibration(path) -> tv.Calibration:
    """The committed calibration (``write_calibration_yaml``'s file) as a :class:`Calibration`."""
    import yaml
    from pathlib import Path

    path = Path(path)
    try:
        c = yaml.safe_load(path.read_text())["calibrated_from_real_data"]
        a = lambda *keys: np.asarray(_get(c, keys), dtype=float)
        te = None
        if "transmission_error" in c:
            te = TransmissionErrorParams(a("transmission_error", "cycles_per_rad"),
                                         a("transmission_error", "amplitude_rad"), a("transmission_error", "phase_rad"),
                                         float(c["transmission_error"]["blend_velocity_rad_s"]))
        fr, loop = c["friction_not_in_regressor"], c["closed_loop (estimate, not calibrated)"]
        fx = tv.TwinEffects(
            ripple_cyc_rad=a("ripple", "cycles_per_rad"), ripple_Nm=a("ripple", "amplitude_Nm"),
            ripple_phase_rad=a("ripple", "phase_rad"), stribeck_Nm=a("friction_not_in_regressor", "stribeck_Nm"),
            stribeck_vel_rad_s=float(fr["stribeck_velocity_rad_s"]),
            visc2_Nms2_rad2=a("friction_not_in_regressor", "quadratic_viscous_Nms2_rad2"),
            load_coulomb=a("friction_not_in_regressor", "load_dependent_coulomb"),
            position_bandwidth_hz=float(loop["position_bandwidth_hz"]),
            velocity_bandwidth_hz=float(loop["velocity_bandwidth_hz"]),
            velocity_filter_s=float(loop["velocity_filter_s"]), actuation_delay_steps=int(loop["actuation_delay_steps"]),
            encoder_resolution_rad=float(loop["encoder_resolution_rad"]), torque_filter_s=float(loop["torque_filter_s"]),
            current_noise_Nm=a("noise", "current_noise_Nm"), torque_constant_drift=a("noise", "torque_constant_drift"),
            viscous_drift=a("noise", "viscous_drift"), stiffness_Nm_rad=a("elasticity", "stiffness_Nm_rad"),
            damping_ratio=float(c["elasticity"]["damping_ratio"]), te=te)
        return tv.Calibration(a("beta"), fx, a("explained_share_of_real_residual"), float(c["elasticity"]["mode_hz"]))
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a CLOOS twin calibration ({type(exc).__name__}: {exc}); regenerate it with "
                          f"experiments/twin_vs_real_cloos/run.py --write-yaml") from exc


def _get(c, keys):
    for k in keys:
        c = c[k]
    return c
