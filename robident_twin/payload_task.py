"""``task=payload``: a payload's ten inertial parameters on a known robot (Jubien 2014, the payload
as a body of its own), from one short excitation with the payload mounted.

    robident-twin task=payload robot=lwr4p payload.run_dir=outputs/.../<identify run>
    robident-twin task=payload robot=iiwa14 payload.mass_kg=3 payload.com_m=[0.01,0.02,0.08] \\
        payload.inertia_com_kgm2='{xx: 0.012, yy: 0.014, zz: 0.008}'

1. the robot's model, never the twin's truth: ``payload.run_dir`` (a finished identify run without
   the payload: its base parameters, with their covariance when the run wrote it),
   ``payload.robot_file`` (an exported identified twin), ``payload.robot_model=nominal`` (the
   CAD-like nominal, ``export.nominal``), or neither (identified now, task=identify settings,
   without the payload);
2. the payload design (:mod:`robident_twin.design.payload`: min cond of the payload-only
   regressor, short), played with the payload of the ``payload`` config mounted (twin) or read
   from ``backend.path`` (backend=file);
3. the period-averaged data; the robot's torque subtracted; the payload's ten parameters by the
   configured estimator, their covariance including the robot model's
   (:mod:`robident_twin.estimation.payload`); on a twin each against the truth.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.estimation.payload import RobotTorqueModel, identify_payload


class _BaseColumns:
    """stack() of an identification model's base regressor (rows sample-major)."""

    def __init__(self, model):
        self.model = model

    def stack(self, q, dq, ddq):
        return self.model.base.columns(self.model.regressor.stack(q, dq, ddq))


def _free(spec):
    return spec.with_payload(False) if spec.payload_attached else spec


def robot_model(run, spec, out: Path) -> RobotTorqueModel:
    """The known robot's torque model (module docstring, step 1); ``run``: the RunConfig."""
    import dataclasses

    from robident_twin.estimation.postprocess import nominal_model
    from robident_twin.model.build import model_options
    from robident_twin.model.regressor import Regressor

    payload = run.payload
    if payload.run_dir:
        from robident_twin.report.identified_twin import load_run

        model, beta, cov, _ = load_run(payload.run_dir)
        if model.spec.name != spec.name:
            raise ConfigError(f"payload.run_dir: {payload.run_dir} identified robot {model.spec.name}, the configured "
                              f"robot is {spec.name}")
        if model.spec.payload_attached or model.regressor.options.payload:
            raise ConfigError(f"payload.run_dir: {payload.run_dir} was identified with the payload mounted; the "
                              "robot's model for task=payload must come from a run without it")
        kind = "diagonal (summary.json standard deviations)"
        full = Path(payload.run_dir) / "estimate_covariance.npy"
        if full.is_file():
            c = np.load(full)
            if c.shape == cov.shape and np.all(np.isfinite(c)):
                cov, kind = c, "full (estimate_covariance.npy)"
        return RobotTorqueModel(f"identify run {payload.run_dir}", _BaseColumns(model), beta, cov, kind)
    options = model_options(run.model, run.robot)
    if options.payload:
        raise ConfigError("model.payload: task=payload identifies the payload alone (the robot known); "
                          "model.payload=true is the two-experiment route of task=identify")
    if payload.robot_file or payload.robot_model == "nominal":
        if payload.robot_file:
            from robident_twin.model.robot import load_robot

            path = Path(payload.robot_file)
            if not path.is_file():
                raise ConfigError(f"payload.robot_file: {path} does not exist (an exported identified twin, "
                                  "`robident-twin task=export`)")
            known, source = load_robot(path), f"identified twin {path}"
        else:
            known = nominal_model(_free(spec), run.export.nominal)
            source = f"CAD-like nominal {dict(vars(run.export.nominal))}"
        if known.n_joints != spec.n_joints:
            raise ConfigError(f"payload.robot_file: {known.n_joints} joints, robot {spec.name} has {spec.n_joints}")
        reg = Regressor(_free(known), options)
        return RobotTorqueModel(source, reg, reg.true_parameters(), None, "none (a model file: taken as exact)")
    from robident_twin.pipeline import identify

    free = dataclasses.replace(run, robot=dataclasses.replace(run.robot, payload_attached=False))
    result = identify(free, out_dir=out / "robot_identification", progress=False)
    return RobotTorqueModel("identified now (task=identify settings, without the payload)",
                            _BaseColumns(result.model), result.estimate.beta, result.estimate.cov,
                            "full (this run's estimate)")


def _physical(phi: np.ndarray) -> dict[str, Any]:
    """Mass, COM and inertia about the COM of ten Khalil parameters about the mounting frame."""
    m = float(phi[9])
    c = phi[6:9] / m
    J = np.array([[phi[0], phi[1], phi[2]], [phi[1], phi[3], phi[4]], [phi[2], phi[4], phi[5]]])
    Ic = J - m * (np.dot(c, c) * np.eye(3) - np.outer(c, c))
    return {"mass_kg": m, "com_m": c.tolist(), "inertia_com_kgm2": Ic.tolist()}


def payload_summary(est, names, units, truth: np.ndarray | None) -> dict[str, Any]:
    """The ten parameters with std (and, on a twin, against the truth) and the acceptance figures."""
    params = []
    for i, name in enumerate(names):
        p = {"name": name, "unit": units[i], "estimate": float(est.beta[i]), "std": float(est.std[i])}
        if truth is not None:
            t = float(truth[i])
            p.update(true=t, z=float((est.beta[i] - t) / est.std[i]),
                     error_percent=float(100 * (est.beta[i] - t) / abs(t)) if t != 0 else None)
        params.append(p)
    out: dict[str, Any] = {"parameters": params, "estimated": _physical(est.beta)}
    if truth is not None:
        b = est.beta
        z = np.abs((b - truth) / est.std)
        out["true"] = _physical(truth)
        out["ground_truth"] = {
            "mass_error_percent": float(100 * abs(b[9] - truth[9]) / truth[9]),
            # first moments m c (the payload's MX, MY, MZ): error of the vector, relative to its length
            "first_moment_error_percent": float(100 * np.linalg.norm(b[6:9] - truth[6:9]) / np.linalg.norm(truth[6:9])),
            "inertia_max_abs_z": float(np.max(z[:6])),
            "max_abs_z": float(np.max(z)),
            "within_3std": [names[i] for i in range(10) if z[i] <= 3],
        }
    return out


def run_payload(run, out: Path) -> dict:
    """The payload identification of a RunConfig (a mapping is validated here once, as the CLI edge
    does); returns the summary."""
    from hal.factory import make_robot
    from hal.files.npz_recording import save_recording
    from robident_twin.config import validate
    from robident_twin.design.dryrun import dryrun_checks_for_backend
    from robident_twin.design.payload import payload_design
    from robident_twin.design.stored import reference
    from robident_twin.model.build import resolve_robot, twin_spec
    from robident_twin.model.payload import PayloadRegressor, payload_truth, with_payload_config
    from robident_twin.processing.plausibility import check_recording
    from robident_twin.processing.signal import process_periodic

    run = validate(run)
    spec = with_payload_config(resolve_robot(run.robot), run.payload, attached=True)
    known = robot_model(run, spec, out)
    measurement = getattr(getattr(known.regressor, "model", None), "regressor", known.regressor).options.measurement
    traj, design_path = payload_design(spec, run.robot, run.payload, measurement, run.export.nominal)
    acq = run.acquisition
    periods, transient = int(acq.periods), int(acq.transient_periods)
    sim_spec = twin_spec(spec, run.friction)
    robot = make_robot(sim_spec, run.backend, run.noise, seed=int(run.seed),
                       twin_cfg=run.twin, checks=dryrun_checks_for_backend(sim_spec, run.backend))
    try:
        rec = robot.run(reference(traj, robot.info.control_rate_hz), periods=periods, transient_periods=transient)
    finally:
        robot.close()
    check_recording(rec, spec, "payload recording")
    if acq.save_recordings:
        save_recording(rec, out / "recording_payload.npz")
    proc = run.processing
    data = process_periodic(rec, measurement, int(proc.n_harmonics or traj.n_harmonics),
                            decimate=int(proc.decimate or 1))
    preg = PayloadRegressor(spec, measurement)
    W_p = preg.stack(data.q_rad, data.dq_rad_s, data.ddq_rad_s2)
    estimator = run.estimator
    est = identify_payload(W_p, data.tau_Nm, known, preg.names, data.q_rad, data.dq_rad_s, data.ddq_rad_s2,
                           estimator.name, getattr(estimator, "weights", None) or "period", data.tau_var_Nm2,
                           data.tau_var_sample_Nm2)
    truth = payload_truth(spec) if robot.info.is_simulation else None  # read only by the comparison
    twin = rec.metadata.get("twin") or {"name": "ideal", "effects": []} if robot.info.is_simulation else \
        {"name": "none (measured data)", "effects": []}
    summary = {
        "task": "payload", "robot": spec.name, "backend": robot.info.backend, "twin": twin,
        "measurement": measurement, "estimator": est.method,
        "robot_model": known.source, "robot_model_covariance": known.covariance_kind,
        "mount": {"xyz_m": spec.flange_xyz_m.tolist(), "rpy_rad": spec.flange_rpy_rad.tolist()},
        "design": {"file": str(design_path), "cond": traj.metadata.get("cond"), "harmonics": traj.n_harmonics,
                   "base_freq_hz": traj.base_freq_hz, "period_s": traj.period_s},
        "n_samples": int(data.n_samples), "n_periods": int(data.n_periods), "cond": est.cond,
        "chi2_per_dof": est.chi2_per_dof, "residual_rms_Nm": est.residual_rms_Nm.tolist(),
        "std_noise": est.extra.get("std_noise"), "std_robot_model": est.extra.get("std_robot_model"),
    }
    summary.update(payload_summary(est, preg.names, preg.units, truth))
    return summary


def format_payload_table(summary: Mapping[str, Any]) -> str:
    lines = [f"payload on {summary['robot']} ({summary['backend']}, robot model: {summary['robot_model']})",
             f"{'param':>6} {'unit':>7} {'estimate':>12} {'std':>10}" +
             (f" {'true':>12} {'z':>7}" if "ground_truth" in summary else "")]
    for p in summary["parameters"]:
        row = f"{p['name']:>6} {p['unit']:>7} {p['estimate']:12.6g} {p['std']:10.3g}"
        if "true" in p:
            row += f" {p['true']:12.6g} {p['z']:7.2f}"
        lines.append(row)
    g = summary.get("ground_truth")
    if g:
        lines.append(f"mass error {g['mass_error_percent']:.3f} %, first moments {g['first_moment_error_percent']:.3f} %, "
                     f"inertia max |z| {g['inertia_max_abs_z']:.2f}, all ten max |z| {g['max_abs_z']:.2f}")
    return "\n".join(lines)


def run_payload_task(run, out: Path) -> dict:
    """``task=payload`` (``run``: the RunConfig; a mapping is validated once)."""
    from robident_twin.config import validate
    from robident_twin.report.payload_html import write_payload_report
    from robident_twin.report.tables import write_json

    run = validate(run)
    summary = run_payload(run, Path(out))
    summary["config"] = run.record()
    write_json(summary, Path(out) / "summary.json")
    print(format_payload_table(summary))
    if run.output.report:
        print(f"report: {write_payload_report(Path(out), summary)}")
    print(f"\nresults in {out}")
    return summary
