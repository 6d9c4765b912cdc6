"""The identification pipeline as plain functions, one per stage.

robot file -> model (regressor, base parameters) -> excitation -> acquisition
through the HAL -> processing -> estimation -> validation -> summary.
Data flow one way; only :mod:`hal.factory` knows which backend runs.
"""
from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .base import BaseParameters, compute_base_parameters
from .errors import ConfigError
from .estimate import Estimate, estimate, estimator_context
from .excitation import FourierTrajectory, load_design
from .paths import CONF_DIR
from .regressor import ModelOptions, Regressor
from .robot import RobotSpec, load_robot
from .signal import IdentificationData, process_periodic


class StageTimer:
    """Wall-clock time per pipeline stage, in seconds."""

    def __init__(self):
        self.timings_s: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings_s[name] = self.timings_s.get(name, 0.0) + time.perf_counter() - t0


@dataclass(frozen=True)
class IdentificationModel:
    spec: RobotSpec
    regressor: Regressor
    base: BaseParameters

    def base_regressor(self, data: IdentificationData) -> np.ndarray:
        return self.base.columns(self.regressor.stack(data.q_rad, data.dq_rad_s, data.ddq_rad_s2))

    def true_base(self) -> np.ndarray:
        return self.base.from_standard(self.regressor.true_parameters())


def resolve_robot(robot_cfg: Mapping[str, Any]) -> RobotSpec:
    """Load the robot named in the config (or its explicit ``file``), with its payload
    mounted or not as ``robot.payload_attached`` says (null: as in the robot file)."""
    path = robot_cfg.get("file")
    spec = load_robot(path if path else robot_cfg.get("name"))
    attached = robot_cfg.get("payload_attached")
    if attached is not None:
        if not isinstance(attached, bool):
            raise ConfigError(f"robot.payload_attached: expected true, false or null, got {attached!r}")
        spec = spec.with_payload(attached)
    return spec


def twin_spec(spec: RobotSpec, friction_cfg: Mapping[str, Any] | None) -> RobotSpec:
    """The robot the simulator runs: the nominal robot, or with the friction variant the
    ``friction`` config group selects (a model mismatch: the identification model and
    the ground truth it is compared with stay the nominal viscous + Coulomb)."""
    from .robot import with_friction_variant

    if not friction_cfg:
        return spec
    cfg = dict(friction_cfg)
    kind = cfg.pop("kind", "nominal")
    if kind == "nominal":
        return spec
    return with_friction_variant(spec, kind, **cfg)


def model_options(model_cfg: Mapping[str, Any], robot_cfg: Mapping[str, Any] | None = None) -> ModelOptions:
    """Model options from ``model``; ``model.measurement: null`` takes the robot's default
    (``robot.measurement``: joint_torque where it has torque sensors, else motor_torque)."""
    allowed = {"measurement", "drive_inertia", "viscous", "coulomb", "offsets", "payload"}
    unknown = set(model_cfg) - allowed
    if unknown:
        raise ConfigError(f"model: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
    d = {k: v for k, v in dict(model_cfg).items() if v is not None or k in ("drive_inertia", "offsets")}
    if d.get("measurement") is None:
        d["measurement"] = (robot_cfg or {}).get("measurement") or "joint_torque"
    return ModelOptions(**d)


def build_model(spec: RobotSpec, options: ModelOptions, n_samples: int = 300, seed: int = 0) -> IdentificationModel:
    reg = Regressor(spec, options)
    return IdentificationModel(spec, reg, compute_base_parameters(reg, n_samples=n_samples, seed=seed))


def resolve_design(path: str | os.PathLike, spec: RobotSpec) -> FourierTrajectory:
    """Load a stored excitation design (a path relative to ``conf/`` or absolute)."""
    p = Path(path)
    if not p.is_absolute():
        p = CONF_DIR / p
    if not p.is_file():
        raise ConfigError(f"excitation design {p} does not exist (run `robident-twin task=design "
                          f"robot={spec.name} design.install=true` to create it)")
    traj = load_design(p)
    if traj.n_joints != spec.n_joints:
        raise ConfigError(f"{p}: design has {traj.n_joints} joints, robot {spec.name} has {spec.n_joints}")
    return traj


def reference(traj: FourierTrajectory, rate_hz: float):
    """One period of a Fourier design sampled at the controller rate, as a HAL reference."""
    from hal.protocol import JointTrajectory

    t, q, dq, ddq = traj.sample(rate_hz)
    return JointTrajectory(t, q, dq, ddq, period_s=traj.period_s)


def save_recording(rec, path: Path) -> None:
    """Write a recording atomically (a killed run never leaves a half-written file)."""
    tmp = path.with_suffix(".tmp.npz")
    arrays = {k: v for k, v in rec.channels().items()}
    np.savez(tmp, **arrays, sample_rate_hz=rec.sample_rate_hz,
             period_samples=-1 if rec.period_samples is None else rec.period_samples,
             n_periods=-1 if rec.n_periods is None else rec.n_periods,
             metadata=json.dumps({k: v for k, v in rec.metadata.items() if not isinstance(v, np.ndarray)}))
    os.replace(tmp, path)


def channel_names(spec: RobotSpec, measurement: str) -> list[str]:
    """Names of the torque channels of a measurement model (``A1`` or ``A1 joint``/``A1 motor``)."""
    if measurement == "both":
        return [f"{n} joint" for n in spec.joint_names] + [f"{n} motor" for n in spec.joint_names]
    return list(spec.joint_names)


def validation_metrics(tau_meas_Nm: np.ndarray, tau_pred_Nm: np.ndarray) -> dict[str, list[float]]:
    """Per-joint RMSE and normalised RMSE (100 * RMSE / RMS of the measured torque)."""
    err = tau_meas_Nm - tau_pred_Nm
    rmse = np.sqrt(np.mean(err**2, axis=0))
    rms = np.sqrt(np.mean(tau_meas_Nm**2, axis=0))
    return {"torque_rmse_Nm": rmse.tolist(), "torque_nrmse_percent": (100 * rmse / rms).tolist()}


@dataclass
class IdentificationResult:
    model: IdentificationModel
    estimate: Estimate
    data: IdentificationData
    validation_data: IdentificationData
    tau_val_pred_Nm: np.ndarray
    summary: dict[str, Any]


def identify(cfg: Mapping[str, Any], out_dir: Path | None = None, progress: bool = True) -> IdentificationResult:
    """Run the whole identification described by a (Hydra) config mapping.

    Writes the recordings to ``out_dir`` as soon as they are acquired; the summary
    is returned (the CLI writes it)."""
    from hal.factory import make_robot

    timer = StageTimer()
    with timer.stage("model"):
        spec = resolve_robot(cfg["robot"])
        options = model_options(cfg["model"], cfg["robot"])
        est_cfg = cfg["estimator"]
        traj = resolve_design(cfg["robot"]["excitation"], spec)
        val_traj = resolve_design(cfg["robot"]["validation"], spec)
        acq = cfg["acquisition"]
        periods, transient = int(acq["periods"]), int(acq["transient_periods"])
        if periods < 1 or transient < 0:
            raise ConfigError(f"acquisition.periods must be >= 1 and transient_periods >= 0, got {periods}, {transient}")
    with timer.stage("base_parameters"):
        model = build_model(spec, options, int(cfg["base"]["n_samples"]), int(cfg["base"]["seed"]))
        nominal = None  # the CAD-like nominal for priors and bounds, built before the twin runs
        if (cfg.get("physical") or {}).get("method", "none") not in (None, "none"):
            from .postprocess import nominal_model

            nominal = nominal_model(spec, (cfg.get("export") or {}).get("nominal"))
    with timer.stage("acquisition"):
        robot = make_robot(twin_spec(spec, cfg.get("friction")), cfg["backend"], cfg.get("noise"),
                           seed=int(cfg["seed"]), twin_cfg=cfg.get("twin"))
        try:
            rate = robot.info.control_rate_hz
            ref, val_ref = reference(traj, rate), reference(val_traj, rate)
            rec = robot.run(ref, periods=periods, transient_periods=transient)
            if out_dir is not None and acq.get("save_recordings", True):
                save_recording(rec, Path(out_dir) / "recording_excitation.npz")
            val_rec = robot.run(val_ref, periods=periods, transient_periods=transient)
            if out_dir is not None and acq.get("save_recordings", True):
                save_recording(val_rec, Path(out_dir) / "recording_validation.npz")
        finally:
            robot.close()
    with timer.stage("processing"):
        proc = cfg.get("processing", {}) or {}
        H = proc.get("n_harmonics") or traj.n_harmonics
        Hv = proc.get("n_harmonics") or val_traj.n_harmonics
        dec = int(proc.get("decimate", 1) or 1)
        data = process_periodic(rec, options.measurement, int(H), decimate=dec)
        val_data = process_periodic(val_rec, options.measurement, int(Hv), decimate=dec)
    with timer.stage("regressor"):
        W = model.base_regressor(data)
    with timer.stage("estimation"):
        est = estimate(est_cfg["name"], W, data.tau_Nm, model.base.names, data.tau_var_Nm2,
                       est_cfg.get("weights") or "period", sigma2_sample_Nm2=data.tau_var_sample_Nm2,
                       context=estimator_context(est_cfg, model, data, rec, traj, dec), options=est_cfg)
    with timer.stage("validation"):
        W_val = model.base_regressor(val_data)
        tau_pred = (W_val @ est.beta).reshape(val_data.tau_Nm.shape)
        val = validation_metrics(val_data.tau_Nm, tau_pred)
        noise = rec.metadata.get("noise")
        if noise is not None:
            tj, tm = np.asarray(noise["tau_joint_std_Nm"]), np.asarray(noise["tau_motor_std_Nm"])
            std = {"joint_torque": tj, "motor_torque": tm, "both": np.concatenate([tj, tm]),
                   "difference": np.hypot(tj, tm)}[options.measurement]
            val["simulated_noise_std_Nm"] = std.tolist()
    post = {}  # optional stages (reduction.method, physical.method; robident_twin.postprocess)
    if (cfg.get("reduction") or {}).get("method", "none") not in (None, "none"):
        from .postprocess import run_reduction

        with timer.stage("reduction"):
            post["reduction"] = run_reduction(cfg["reduction"], model, est, W, data.tau_Nm, W_val, val_data.tau_Nm)
    if (cfg.get("physical") or {}).get("method", "none") not in (None, "none"):
        from .postprocess import run_physical

        with timer.stage("physical"):
            post["physical"] = run_physical(cfg["physical"], model, est, W, data.tau_Nm, W_val, val_data.tau_Nm,
                                            np.vstack([data.q_rad, val_data.q_rad]), robot.info.is_simulation,
                                            nominal=nominal)
    summary = make_summary(cfg, spec, robot.info, model, est, data, val, timer.timings_s)
    summary.update(post)
    summary["twin"] = twin_statement(robot, rec)
    summary["mismatch"] = mismatch_diagnostics(est, summary)
    return IdentificationResult(model, est, data, val_data, tau_pred, summary)


def twin_statement(robot, rec) -> dict[str, Any]:
    """Which twin produced the data (``twin`` group; hal/sim/effects.py); a real robot or files: none."""
    if not robot.info.is_simulation:
        return {"name": "none (measured data)", "effects": []}
    return rec.metadata.get("twin") or {"name": "ideal", "effects": []}


def mismatch_diagnostics(est: Estimate, summary: Mapping[str, Any]) -> dict[str, Any]:
    """What a model mismatch does to the fit, stated without failing: chi2/dof, the residuals'
    whiteness per channel (Durbin-Watson, about 2 when white; lag-1 autocorrelation, about 0)
    and, on a twin, the base parameters beyond 3 std of the truth."""
    r = np.asarray(est.residuals_Nm, float)
    rc = r - r.mean(axis=0)
    den = np.sum(rc * rc, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        lag1 = np.sum(rc[1:] * rc[:-1], axis=0) / den
    out: dict[str, Any] = {"chi2_per_dof": float(est.chi2_per_dof),
                           "durbin_watson": [float(x) for x in est.durbin_watson],
                           "residual_lag1_autocorrelation": [float(x) for x in lag1]}
    params = summary.get("parameters", [])
    if params and all("true" in p for p in params):
        out["beyond_3std"] = [p["name"] for p in params
                              if p["std"] > 0 and abs(p["estimate"] - p["true"]) > 3 * p["std"]]
    return out


def make_summary(cfg, spec, info, model: IdentificationModel, est: Estimate, data: IdentificationData,
                 validation: dict, timings_s: dict) -> dict[str, Any]:
    true = model.true_base() if info.is_simulation else None
    params = []
    std = est.std
    rsd = est.rsd_percent
    for i, name in enumerate(est.names):
        p = {"name": name, "unit": model.base.units[i], "estimate": float(est.beta[i]),
             "std": float(std[i]), "rsd_percent": float(rsd[i]) if np.isfinite(rsd[i]) else None,
             "regroups": model.base.relation(i)}
        if true is not None:
            p["true"] = float(true[i])
        params.append(p)
    out: dict[str, Any] = {
        "robot": spec.name,
        "backend": info.backend,
        "estimator": est.method,
        "measurement": model.regressor.options.measurement,
        "n_samples": int(data.n_samples),
        "n_periods": int(data.n_periods),
        "n_base_parameters": model.base.n_base,
        "cond": est.cond,
        "chi2_per_dof": est.chi2_per_dof,
        "residual_rms_Nm": est.residual_rms_Nm.tolist(),
        "noise_std_of_mean_Nm": np.sqrt(est.sigma2_joint_Nm2).tolist(),
        "parameters": params,
        "validation": validation,
        "timings_s": {k: round(v, 4) for k, v in timings_s.items()},
    }
    if true is not None:
        z = (est.beta - true) / std
        out["ground_truth"] = {
            "fraction_within_3std": float(np.mean(np.abs(z) <= 3)),
            "max_abs_z": float(np.max(np.abs(z))),
        }
    return out
