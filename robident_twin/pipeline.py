"""The identification pipeline as plain functions, one per stage.

robot file -> model (regressor, base parameters) -> excitation -> acquisition
through the HAL -> processing -> estimation -> validation -> summary.
Data flow one way; only :mod:`hal.factory` knows which backend runs.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

if TYPE_CHECKING:
    from robident_twin.config import RunConfig

from hal.files.npz_recording import save_recording
from robident_twin import forked
from robident_twin.design.auto import robot_designs
from robident_twin.design.dryrun import dryrun_checks_for_backend
from robident_twin.design.stored import reference
from robident_twin.errors import ConfigError
from robident_twin.estimation.closed_loop_sim import estimator_details, loop_controller
from robident_twin.estimation.estimators import Estimate, estimate, estimator_context
from robident_twin.model.build import (
    IdentificationModel,
    build_model,
    model_options,
    resolve_robot,
    twin_spec,
)
from robident_twin.processing.plausibility import check_recording
from robident_twin.processing.signal import IdentificationData, process_periodic


class StageTimer:
    """Wall-clock time per pipeline stage, in seconds."""

    def __init__(self, bar=None):
        self.timings_s: dict[str, float] = {}
        self.bar = bar  # a progress bar advanced by one per stage (robident_twin.progress)

    @contextmanager
    def stage(self, name: str):
        t0 = time.perf_counter()
        if self.bar is not None:
            self.bar.set_postfix_str(name, refresh=True)
        try:
            yield
        finally:
            self.timings_s[name] = self.timings_s.get(name, 0.0) + time.perf_counter() - t0
            if self.bar is not None:
                self.bar.update(1)


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


def identify(cfg: RunConfig | Mapping[str, Any], out_dir: Path | None = None,
             progress: bool = True, after_excitation=None, after_fork=None) -> IdentificationResult:
    """Run the whole identification described by a validated :class:`~robident_twin.config.RunConfig`
    or a (Hydra) config mapping (validated here through the same ``config.validate``: a bad
    key raises ConfigError before any work).

    Writes the recordings to ``out_dir`` as soon as they are acquired; the summary
    is returned (the CLI writes it). ``after_excitation()`` is called once the excitation run is
    done (the CLI starts side work there: on a simulator a core frees up while the fit runs);
    ``after_fork()`` just before the excitation run, after the validation run's child is forked
    when there is one (the CLI imports pyplot there: the children forked later inherit it, and the
    validation child does not wait for it)."""
    from robident_twin import progress as prog

    with prog.bar(None, "identify", progress, unit="stage") as bar:  # drawn at once on a terminal
        return _identify(cfg, out_dir, bar, after_excitation, after_fork)


def _acquisition_ticker(bar, what: str, other=None):
    """The identify bar's postfix during a twin run: which recording, how far (and how far the
    validation child ``other`` is, when it runs at the same time)."""
    def tick(done, total):
        both = "" if other is None or not other.parallel else f", validation {other.fraction.value:.0%}"
        bar.set_postfix_str(f"acquisition: {what} {done / max(total, 1):.0%}{both}")

    return tick


#: the tag that makes the validation twin's seed from ``seed`` (its own noise streams)
VALIDATION_STREAM = 0x7A11D


def validation_seed(seed: int) -> int:
    """The seed of the validation twin on a simulator: derived from ``seed`` (deterministic),
    another stream than the excitation twin's ``seed``."""
    return int(np.random.SeedSequence([int(seed), VALIDATION_STREAM]).generate_state(1)[0])


def _start_validation(robot, val_ref, periods: int, transient: int, spec, save, bar, prepare=None):
    """The validation run on its own twin ``robot``: in a forked child when a core is free
    (:mod:`robident_twin.forked`), else here when its result is asked for. It checks and saves its
    recording itself (as soon as acquired) and reports its progress through ``job.fraction``.
    Its result: (recording, None), or (None, ``prepare(recording)``) when ``prepare`` is given: the
    processing and regressor of the validation data need no estimate, so the child makes them
    while the excitation is fitted here."""
    import os

    from robident_twin import progress as prog

    frac = forked.shared_fraction()
    parent = os.getpid()
    show = _acquisition_ticker(bar, "validation")

    def tick(done, total):
        frac.value = done / max(total, 1)
        if os.getpid() == parent:  # the sequential route draws here; a child only sets the fraction
            show(done, total)

    def run():
        with prog.ticking(tick):
            val_rec = robot.run(val_ref, periods=periods, transient_periods=transient)
        check_recording(val_rec, spec, "validation recording")
        save(val_rec, "recording_validation.npz")
        if prepare is None:
            return val_rec, None
        return None, prepare(val_rec)  # the recording itself is not needed any more (nor sent through the pipe)

    job = forked.start(run, "validation acquisition")
    job.fraction = frac
    return job


def _await_validation(job, bar):
    """The validation recording, drawing the child's progress while it runs."""
    while job.parallel and not job.ready(0.1):
        bar.set_postfix_str(f"acquisition: validation {job.fraction.value:.0%}")
    return job.result()


def _identify(cfg, out_dir: Path | None, bar, after_excitation=None, after_fork=None) -> IdentificationResult:
    from hal.factory import make_robot
    from robident_twin import progress as prog
    from robident_twin.config import validate

    run = validate(cfg)  # the edge of the Python API (a RunConfig passes as it is); typed objects below
    optional = [k for k in ("reduction", "physical") if getattr(run, k).method != "none"]
    bar.total = 7 + len(optional)  # model .. validation, and the optional post-processing stages
    bar.set_description(f"identify {run.robot.name}".strip())
    timer = StageTimer(bar)
    with timer.stage("model"):
        spec = resolve_robot(run.robot)
        options = model_options(run.model, run.robot)
        if options.payload:  # Jubien 2014: runs without and with the payload, stacked (payload_route.py)
            from robident_twin import payload_route

            spec = payload_route.route_spec(spec, run)
        else:  # payload keys without the payload route are refused, never ignored
            from robident_twin.payload_route import refuse_unused

            refuse_unused(run.payload)
        est_cfg = run.estimator
        traj_cfg = run.trajectory  # conf/trajectory/
        periodic = traj_cfg.kind == "excitation"
        if periodic:
            traj, val_traj = robot_designs(spec, run.robot)  # a new robot's are designed on first use
        else:
            traj = val_traj = None
            if run.reduction.basis == "icma2020" and spec.name != "cloos_qrc350":
                raise ConfigError(f"reduction.basis=icma2020: the paper's basis is the CLOOS QRC 350's, got robot "
                                  f"{spec.name!r}; use reduction.basis=numeric")
            if est_cfg.name in ("iv", "ml", "didim"):
                raise ConfigError(f"estimator={est_cfg.name}: needs a periodic Fourier excitation "
                                  f"(trajectory=excitation), got trajectory={traj_cfg.kind}")
            if options.payload:
                raise ConfigError(f"model.payload=true: Jubien's two experiments repeat a periodic excitation "
                                  f"(trajectory=excitation), got trajectory={traj_cfg.kind}")
        acq = run.acquisition
        periods, transient = acq.periods, acq.transient_periods
        if periods < 1 or transient < 0:
            raise ConfigError(f"acquisition.periods must be >= 1 and transient_periods >= 0, got {periods}, {transient}")
    with timer.stage("base_parameters"):
        model = build_model(spec, options, run.base.n_samples, run.base.seed)
        nominal = None  # the CAD-like nominal for priors and bounds, built before the twin runs
        if run.physical.method != "none":
            from robident_twin.estimation.postprocess import nominal_model

            nominal = nominal_model(spec, run.export.nominal)
    proc = run.processing
    dec = proc.decimate
    fit = None  # the excitation's processing, regressor and estimate: (data, W, est, stage times)
    with timer.stage("acquisition"):
        robot_spec = twin_spec(spec, run.friction)
        checks = dryrun_checks_for_backend(robot_spec, run.backend)

        def new_robot(seed: int):
            return make_robot(robot_spec, run.backend, run.noise, seed=seed, twin_cfg=run.twin, checks=checks)

        robot = new_robot(run.seed)
        val_robot = None
        try:
            if robot.info.replicable:  # a simulator: the validation run is its own experiment, on a fresh copy
                val_robot = new_robot(validation_seed(run.seed))
            loop = loop_controller(robot, est_cfg) if est_cfg.name in ("iv", "didim") else None  # gains only
            rate = robot.info.control_rate_hz
            if periodic:
                ref, val_ref = reference(traj, rate), reference(val_traj, rate)
            else:  # process motions (repeated `periods` times) or a recorded file (played once)
                from robident_twin.design.process_run import checked_references

                ref, val_ref, dryrun_summary = checked_references(spec, run, rate, robot.info.is_simulation)
                if ref.period_s is None:
                    periods, transient = 1, 0

            def save(r, name: str) -> None:
                if out_dir is not None and acq.save_recordings:
                    save_recording(r, Path(out_dir) / name)

            def fit_fn():
                H = int(proc.n_harmonics or traj.n_harmonics)
                return _fit(model, rec, options.measurement, H, dec, est_cfg, traj, loop, keep_W=bool(optional))

            fits = periodic and not options.payload  # the fit needs only the excitation recording
            Hv = int(proc.n_harmonics or val_traj.n_harmonics) if periodic else 0

            def prepare(r):  # the validation data and regressor (periodic path)
                vd = process_periodic(r, options.measurement, Hv, decimate=dec)
                return vd, model.base_regressor(vd)

            val_prepared = None  # (val_data, W_val) when the validation job made them
            val_job = None if val_robot is None else _start_validation(val_robot, val_ref, periods, transient, spec,
                                                                        save, bar, prepare if periodic else None)
            try:
                if after_fork is not None:
                    after_fork()
                with prog.ticking(_acquisition_ticker(bar, "excitation", val_job)):  # live progress of the twin(s)
                    rec = robot.run(ref, periods=periods, transient_periods=transient)
                check_recording(rec, spec, "excitation recording")  # positions, torques, rate vs the robot
                if after_excitation is not None:
                    after_excitation()
                if val_job is None:  # one robot: the validation run follows; the fit goes to the second core
                    if fits:
                        fit_job = forked.start(fit_fn, "estimation")
                    save(rec, "recording_excitation.npz")
                    with prog.ticking(_acquisition_ticker(bar, "validation")):
                        val_rec = robot.run(val_ref, periods=periods, transient_periods=transient)
                    check_recording(val_rec, spec, "validation recording")
                    save(val_rec, "recording_validation.npz")
                    if fits:
                        fit = fit_job.result()
                else:  # the validation child holds the other core: the fit runs here meanwhile
                    save(rec, "recording_excitation.npz")
                    if fits:
                        bar.set_postfix_str("acquisition: excitation estimate" + (
                            f", validation {val_job.fraction.value:.0%}" if val_job.parallel else ""))
                        fit = fit_fn()
                    val_rec, val_prepared = _await_validation(val_job, bar)
            except BaseException:
                if val_job is not None:
                    val_job.cancel()
                raise
        finally:
            robot.close()
            if val_robot is not None:
                val_robot.close()
        if options.payload:  # the same excitation with the payload mounted
            rec_loaded = payload_route.loaded_run(run, spec, ref, periods, transient, out_dir)
    if fit is not None:
        data, W, est, fit_s = fit
        timer.timings_s.update(fit_s)  # their own wall times
        if val_job is not None:  # the fit ran here inside the acquisition stage: its time is its own
            timer.timings_s["acquisition"] -= sum(fit_s.values())
    with timer.stage("processing"):
        full = val_full = None  # undecimated time-domain data (non-periodic path)
        if periodic:
            H = proc.n_harmonics or traj.n_harmonics
            if fit is None:
                data = process_periodic(rec, options.measurement, int(H), decimate=dec)
            if val_prepared is None:
                val_data = process_periodic(val_rec, options.measurement, Hv, decimate=dec)
            else:
                val_data, W_val = val_prepared
            if options.payload:
                data = payload_route.stacked(data, process_periodic(rec_loaded, options.measurement, int(H),
                                                                    decimate=dec))
        else:  # the non-periodic path: Butterworth, central differences, parallel decimation (Jubien 2014)
            from robident_twin.processing.signal import decimate_data, process_time_domain

            tdp = dict(cutoff_hz=proc.cutoff_hz, order=proc.filter_order, derivatives=proc.derivatives)
            data = full = process_time_domain(rec, options.measurement, **tdp)
            val_data = val_full = process_time_domain(val_rec, options.measurement, **tdp)
    with timer.stage("regressor"):
        if fit is None:
            W = model.base_regressor(data)
        if not periodic:
            data, W = decimate_data(data, W, dec)
            val_data, W_val = decimate_data(val_data, model.base_regressor(val_data), dec)
    with timer.stage("estimation"):
        if fit is None:
            est = _estimate(model, data, W, est_cfg, rec, traj, dec, loop)
    with timer.stage("validation"):
        if periodic and val_prepared is None:
            W_val = model.base_regressor(val_data)
        tau_pred = (W_val @ est.beta).reshape(val_data.tau_Nm.shape)
        val = validation_metrics(val_data.tau_Nm, tau_pred)
        noise = rec.metadata.get("noise")
        if noise is not None:
            tj, tm = np.asarray(noise["tau_joint_std_Nm"]), np.asarray(noise["tau_motor_std_Nm"])
            std = {"joint_torque": tj, "motor_torque": tm, "both": np.concatenate([tj, tm]),
                   "difference": np.hypot(tj, tm)}[options.measurement]
            val["simulated_noise_std_Nm"] = std.tolist()
    post = {}  # optional stages (reduction.method, physical.method; robident_twin.estimation.postprocess)
    if run.reduction.method != "none":
        from robident_twin.estimation.postprocess import run_reduction

        with timer.stage("reduction"):
            if run.reduction.method == "sensitivity":  # ICMA 2020 Algorithm 1
                from robident_twin.estimation.process_reduction import sensitivity_summary

                Wr, Wvr, names = W, W_val, est.names
                if run.reduction.basis == "icma2020":  # the paper's Appendix I basis
                    Wr, names = _icma2020_design(spec, data, full, dec)
                    Wvr, _ = _icma2020_design(spec, val_data, val_full, dec)
                post["reduction"] = sensitivity_summary(run.reduction, Wr, data, Wvr, val_data, names)
            else:
                post["reduction"] = run_reduction(run.reduction, model, est, W, data.tau_Nm, W_val,
                                                  val_data.tau_Nm)
    if run.physical.method != "none":
        from robident_twin.estimation.postprocess import run_physical

        with timer.stage("physical"):
            post["physical"] = run_physical(run.physical, model, est, W, data.tau_Nm, W_val, val_data.tau_Nm,
                                            np.vstack([data.q_rad, val_data.q_rad]), robot.info.is_simulation,
                                            nominal=nominal, reduction=post.get("reduction"))
    summary = make_summary(run, spec, robot.info, model, est, data, val, timer.timings_s)
    summary.update(post)
    if est.extra:
        summary["estimator_details"] = estimator_details(est)
    summary["twin"] = twin_statement(robot, rec)
    summary["mismatch"] = mismatch_diagnostics(est, summary)
    if options.payload:
        summary["payload"] = payload_route.payload_part(summary, spec.n_joints)
    if not periodic:
        own = run.processing.derivatives != "filtered" and "dq_rad_s" in rec.metadata
        summary["trajectory"] = {"kind": traj_cfg.kind, "decimate": dec, "dryrun": dryrun_summary,
                                 "processing": "non-periodic: " + ("the file's own averaged derivatives" if own else
                                                                   "zero-phase Butterworth, central differences")
                                 + (", parallel decimation" if dec > 1 else "")}
    return IdentificationResult(model, est, data, val_data, tau_pred, summary)


def _estimate(model, data, W, est_cfg, rec, traj, dec: int, loop) -> Estimate:
    return estimate(est_cfg.name, W, data.tau_Nm, model.base.names, data.tau_var_Nm2,
                    est_cfg.weights or "period", sigma2_sample_Nm2=data.tau_var_sample_Nm2,
                    context=estimator_context(est_cfg, model, data, rec, traj, dec, loop), options=est_cfg)


def _fit(model, rec, measurement: str, H: int, dec: int, est_cfg, traj, loop, keep_W: bool = True):
    """The excitation recording's processing, base regressor (None unless ``keep_W``: only the
    optional stages read it) and estimate (periodic path), and the wall time of each of the three stages."""
    timer = StageTimer()
    with timer.stage("processing"):
        data = process_periodic(rec, measurement, H, decimate=dec)
    with timer.stage("regressor"):
        W = model.base_regressor(data)
    with timer.stage("estimation"):
        est = _estimate(model, data, W, est_cfg, rec, traj, dec, loop)
    return data, (W if keep_W else None), est, timer.timings_s


def _icma2020_design(spec, data, full, dec: int):
    """The design matrix in the ICMA 2020 paper's basis (CLOOS only), decimated in parallel as W."""
    from robident_twin.datasets.cloos_model import icma2020_design
    from robident_twin.processing.signal import decimate_data

    if full is None:
        return icma2020_design(spec, data)
    Wb, names = icma2020_design(spec, full)
    return decimate_data(full, Wb, dec)[1], names


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
        # a numbered parameter (XX3) is of joint 3 / the link it moves; an imported robot's names carry them
        "joint_names": list(spec.joint_names),
        "link_names": list(spec.imported.link_names) if spec.imported else [f"link{i + 1}" for i in range(spec.n_joints)],
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
