"""``robident-twin task=design``: optimal excitation design from the Hydra config.

Every criterion, constraint, optimiser and Swevers' iteration of
:func:`robident_twin.design.optimise.optimise_design` is reachable from the ``design:`` section::

    robident-twin task=design                                   # Swevers c1 (cond), multistart SLSQP
    robident-twin task=design design.criterion=dopt design.method=de
    robident-twin task=design design.criterion=goal design.goal.goal_cond=null   # Kolyubin eq. 10
    robident-twin task=design design.constraints.zero_start=true design.constraints.resonance_hz=2
    robident-twin task=design 'design.constraints.cartesian={preset: kolyubin2017}'
    robident-twin task=design robot=kuka_ir361 design.iterations=2   # Swevers' iteration on the twin

The constraints are those of ``design.constraints`` (the same block the dry run checks, so a
design made here passes ``task=dryrun`` with the same settings). ``design.iterations = k > 0``
runs Swevers' iteration: design, acquire the design on the twin (``hal.factory.make_robot``,
the run's backend, noise and friction), estimate (the run's estimator), then redesign with the
Cramer-Rao bound at the new estimate (estimated noise std, and ``W beta`` nominal torques for the
torque limits), k times. Output: the design YAML (the robot's excitation file name) in the run
directory, ``design_summary.json`` and, with iterations, one design file per step.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from robident_twin.design.auto import design_nominal, install_target, is_own_robot
from robident_twin.design.constraints import DesignConstraints, noise_std_Nm
from robident_twin.design.criteria import (
    CRITERIA,
    CRITERION_NAMES,
    GoalSettings,
    covariance_log10_det,
    design_criterion,
)
from robident_twin.design.fourier import (
    DEFAULT_N_SAMPLES,
    FourierTrajectory,
    save_design,
)
from robident_twin.design.iteration import swevers_iteration
from robident_twin.design.optimise import optimise_design
from robident_twin.errors import ConfigError, IdentificationError

METHODS = ("slsqp", "de")
#: keys of the ``design:`` section read by this task (``trajectory`` and ``dryrun`` belong to
#: task=dryrun, ``constraints`` to both).
DESIGN_KEYS = ("harmonics", "base_freq_hz", "starts", "seed", "install", "criterion", "method",
               "maxiter", "samples", "max_cond", "goal", "de", "iterations", "iteration",
               "constraints", "trajectory", "dryrun")


def _int(d: Mapping[str, Any], key: str, least: int, default=None) -> int:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < least:
        raise ConfigError(f"design.{key}: expected an integer >= {least}, got {v!r}")
    return int(v)


def _pos(d: Mapping[str, Any], key: str, where: str, default=None) -> float:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{where}.{key}: expected a positive number, got {v!r}")
    return float(v)


def _sub(d: Mapping[str, Any], key: str, allowed: set[str]) -> dict[str, Any]:
    sub = d.get(key) or {}
    if not isinstance(sub, Mapping):
        raise ConfigError(f"design.{key}: expected a mapping, got {sub!r}")
    unknown = set(sub) - allowed
    if unknown:
        raise ConfigError(f"design.{key}: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
    return dict(sub)


@dataclass(frozen=True)
class DesignSettings:
    """The ``design:`` section, validated (errors name the key and what was expected)."""

    criterion: str = "cond"
    method: str = "slsqp"
    harmonics: int = 5
    base_freq_hz: float = 0.1
    starts: int = 4
    seed: int = 0
    maxiter: int = 200
    samples: int = DEFAULT_N_SAMPLES
    max_cond: float = 1e4
    goal: GoalSettings = field(default_factory=GoalSettings)
    de_maxiter: int = 30
    de_popsize: int = 2
    iterations: int = 0
    iteration_criterion: str = "dopt"
    rel_tol: float = 1e-3
    constraints: DesignConstraints = field(default_factory=DesignConstraints)

    @classmethod
    def from_design(cls, design) -> "DesignSettings":
        """From the typed ``design`` group (:class:`robident_twin.design.config.DesignConfig`; a
        mapping is validated once by :func:`~robident_twin.design.config.as_design`)."""
        from robident_twin.design.config import as_design

        d = as_design(design)
        g = d.goal
        goal = GoalSettings(goal_cond=None if g.goal_cond is None else float(g.goal_cond), k_tau=float(g.k_tau),
                            weak_joints=None if g.weak_joints is None else tuple(int(j) for j in g.weak_joints),
                            cond_criterion=g.cond_criterion)
        return cls(criterion=d.criterion, method=d.method, harmonics=int(d.harmonics),
                   base_freq_hz=float(d.base_freq_hz), starts=int(d.starts), seed=int(d.seed),
                   maxiter=int(d.maxiter), samples=int(d.samples), max_cond=float(d.max_cond), goal=goal,
                   de_maxiter=int(d.de.maxiter), de_popsize=int(d.de.popsize), iterations=int(d.iterations),
                   iteration_criterion=d.iteration.criterion, rel_tol=float(d.iteration.rel_tol),
                   constraints=DesignConstraints.from_section(d.constraints))

    @classmethod
    def from_config(cls, d: Mapping[str, Any]) -> "DesignSettings":
        d = dict(d or {})
        crit = d.get("criterion", "cond")
        if crit not in CRITERIA:
            raise ConfigError(f"design.criterion: unknown criterion {crit!r}; expected one of "
                              f"{', '.join(CRITERIA)} ({'; '.join(f'{k}: {v}' for k, v in CRITERION_NAMES.items())})")
        method = d.get("method", "slsqp")
        if method not in METHODS:
            raise ConfigError(f"design.method: unknown optimiser {method!r}; expected one of "
                              f"{', '.join(METHODS)} (multistart SLSQP or differential evolution + SLSQP polish)")
        goal_d = _sub(d, "goal", {"goal_cond", "k_tau", "weak_joints", "cond_criterion"})
        if goal_d.get("cond_criterion", "cond") not in ("cond", "cond_raw"):
            raise ConfigError(f"design.goal.cond_criterion: expected cond or cond_raw, got "
                              f"{goal_d['cond_criterion']!r}")
        gc = goal_d.get("goal_cond", 35.0)
        goal = GoalSettings(
            goal_cond=None if gc is None else _pos(goal_d, "goal_cond", "design.goal"),
            k_tau=_pos(goal_d, "k_tau", "design.goal", 0.9),
            weak_joints=None if goal_d.get("weak_joints") is None
            else tuple(int(j) for j in goal_d["weak_joints"]),
            cond_criterion=goal_d.get("cond_criterion", "cond"))
        de_d = _sub(d, "de", {"maxiter", "popsize"})
        it_d = _sub(d, "iteration", {"criterion", "rel_tol"})
        it_crit = it_d.get("criterion", "dopt")
        if it_crit not in ("cond", "dopt", "eopt"):
            raise ConfigError(f"design.iteration.criterion: expected cond, dopt or eopt (a Cramer-Rao "
                              f"criterion of the redesign), got {it_crit!r}")
        max_cond = d.get("max_cond", 1e4)
        if isinstance(max_cond, str):  # YAML 1.1 reads 1e4 as a string
            try:
                max_cond = float(max_cond)
            except ValueError:
                pass
        return cls(
            criterion=crit, method=method, harmonics=_int(d, "harmonics", 1, 5),
            base_freq_hz=_pos(d, "base_freq_hz", "design", 0.1), starts=_int(d, "starts", 1, 4),
            seed=_int(d, "seed", 0, 0), maxiter=_int(d, "maxiter", 0, 200),
            samples=_int(d, "samples", 1, DEFAULT_N_SAMPLES),
            max_cond=_pos({"max_cond": max_cond}, "max_cond", "design"),
            goal=goal, de_maxiter=_int(de_d, "maxiter", 1, 30), de_popsize=_int(de_d, "popsize", 1, 2),
            iterations=_int(d, "iterations", 0, 0), iteration_criterion=it_crit,
            rel_tol=_pos(it_d, "rel_tol", "design.iteration", 1e-3),
            constraints=DesignConstraints.from_config(d.get("constraints"), "design.constraints"))

    def optimiser_kw(self) -> dict[str, Any]:
        return dict(n_harmonics=self.harmonics, base_freq_hz=self.base_freq_hz, n_starts=self.starts,
                    seed=self.seed, method=self.method, n_samples=self.samples, maxiter=self.maxiter,
                    max_cond=self.max_cond, de_maxiter=self.de_maxiter, de_popsize=self.de_popsize)


def twin_estimator(run, spec, model, out_dir: Path | None = None):
    """``estimate(traj) -> (beta_hat, noise_std_Nm)`` for :func:`swevers_iteration`: play the
    design on the twin of the run (backend, noise, friction, acquisition periods), average the
    periods, differentiate in the frequency domain, estimate with the run's estimator. The noise
    std per channel is the per-sample std from the spread between periods. Each call uses the
    next seed (independent noise). ``run``: the RunConfig."""
    from hal.factory import make_robot
    from hal.files.npz_recording import save_recording
    from robident_twin.design.dryrun import dryrun_checks_for_backend
    from robident_twin.design.stored import reference
    from robident_twin.estimation.estimators import estimate, estimator_context
    from robident_twin.model.build import twin_spec
    from robident_twin.processing.signal import process_periodic

    acq = run.acquisition
    periods, transient = int(acq.periods), int(acq.transient_periods)
    if periods < 2:
        raise ConfigError(f"acquisition.periods: Swevers' iteration estimates the noise from the spread "
                          f"between periods and needs at least 2, got {periods}")
    estimator = run.estimator
    measurement = model.regressor.options.measurement
    calls = [0]

    def acquire(traj: FourierTrajectory):
        k = calls[0]
        calls[0] += 1
        robot_spec = twin_spec(spec, run.friction)
        robot = make_robot(robot_spec, run.backend, run.noise, seed=int(run.seed) + k,
                           checks=dryrun_checks_for_backend(robot_spec, run.backend))
        try:
            if not robot.info.is_simulation:  # a real controller: the design must pass a dry run
                from robident_twin.design.dryrun import DryRunConfig, dry_run

                report = dry_run(traj, spec, DryRunConfig.from_design(run.design))
                if not report.passed:
                    raise IdentificationError("Swevers' iteration: design failed its dry run: "
                                              + "; ".join(report.reasons))
            rec = robot.run(reference(traj, robot.info.control_rate_hz), periods=periods,
                            transient_periods=transient)
        finally:
            robot.close()
        if out_dir is not None and acq.save_recordings:
            save_recording(rec, Path(out_dir) / f"recording_design_iter{k}.npz")
        data = process_periodic(rec, measurement, traj.n_harmonics)
        W = model.base_regressor(data)
        est = estimate(estimator.name, W, data.tau_Nm, model.base.names, data.tau_var_Nm2,
                       getattr(estimator, "weights", None) or "period", sigma2_sample_Nm2=data.tau_var_sample_Nm2,
                       context=estimator_context(estimator, model, data, rec, traj, 1), options=estimator)
        if data.tau_var_Nm2 is None or not np.all(np.asarray(data.tau_var_Nm2) > 0):
            raise ConfigError("Swevers' iteration estimates the torque noise from the spread between "
                              "periods, but the recorded torques have none (noise.enabled=false?); "
                              "run it with sensor noise")
        sd = np.sqrt(np.asarray(data.tau_var_Nm2, dtype=float) * data.n_periods)
        return est.beta, sd

    return acquire


def _write_json(obj: Any, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    tmp.replace(path)


def run_design_task(run, out: Path) -> Path:
    """``robident-twin task=design``: optimise (and with ``design.iterations`` iterate on the twin)
    an excitation design; write it to the run directory and, with ``design.install``, to
    ``conf/${robot.excitation}``. ``run``: the validated RunConfig (:func:`robident_twin.config.validate`
    makes one from a mapping, at the CLI edge or by a Python caller)."""
    from robident_twin.model.build import build_model, model_options, resolve_robot
    from robident_twin.paths import CONF_DIR

    settings = DesignSettings.from_design(run.design)
    spec = resolve_robot(run.robot)
    model = build_model(spec, model_options(run.model, run.robot), int(run.base.n_samples), int(run.base.seed))
    reg, base = model.regressor, model.base
    measurement = reg.options.measurement
    sd_file = noise_std_Nm(spec, measurement)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    summary: dict[str, Any] = {"robot": spec.name, "measurement": measurement, "n_base": int(base.n_base),
                               "criterion": settings.criterion, "method": settings.method,
                               "iterations": settings.iterations}
    kw = settings.optimiser_kw()
    # the torque constraint's nominal torques: never the twin's truth (the CAD-like nominal of a built-in robot)
    kw["nominal"] = design_nominal(spec, run.robot, run.export.nominal)
    summary["torque_model"] = kw["nominal"].description if kw["nominal"] is not spec else f"robot file {spec.source}"
    print(f"design: robot {spec.name}, {base.n_base} base parameters ({measurement}), criterion "
          f"{settings.criterion}, optimiser {settings.method}, {settings.harmonics} harmonic(s) at "
          f"{settings.base_freq_hz:g} Hz, {settings.starts} start(s)")
    if settings.iterations == 0:
        res = optimise_design(spec, reg, base, settings.criterion, settings.constraints,
                              goal=settings.goal, progress=True, **kw)
        traj = res.trajectory
        summary["starts"] = res.history
    else:
        estimate_fn = twin_estimator(run, spec, model, out)
        steps = swevers_iteration(spec, reg, base, estimate_fn, n_iterations=settings.iterations,
                                  criterion=settings.iteration_criterion, constraints=settings.constraints,
                                  rel_tol=settings.rel_tol, first_criterion=settings.criterion,
                                  goal=settings.goal, **kw)
        rows = []
        print(f"Swevers' iteration on the {run.backend.name} twin ({settings.iteration_criterion} "
              f"redesigns): log10 det covariance per step")
        for k, st in enumerate(steps):
            p = save_design(st.design, out / f"design_iter{k}.yaml", {"iteration": k})
            row = {"step": k, "log10_det_cov_at_own_estimate": st.log10_det_cov,
                   "log10_det_cov_at_previous_estimate": st.log10_det_cov_prior,
                   "previous_design_at_previous_estimate": None if k == 0 else
                   covariance_log10_det(steps[k - 1].design, reg, base, steps[k - 1].noise_std_Nm,
                                        settings.samples),
                   "kept_previous": st.kept_previous,
                   "cond_c1": design_criterion(st.design, reg, base, "cond", st.noise_std_Nm, settings.samples),
                   "noise_std_Nm": st.noise_std_Nm.tolist(), "noise_std_file_Nm": sd_file.tolist(),
                   "time_s": round(st.time_s, 2), "file": str(p)}
            rows.append(row)
            prev = "" if k == 0 else (f"; at the previous estimate {row['log10_det_cov_at_previous_estimate']:.3f} "
                                      f"vs the previous design's {row['previous_design_at_previous_estimate']:.3f}"
                                      + (" (previous design kept)" if st.kept_previous else ""))
            print(f"  step {k}: log10 det cov {st.log10_det_cov:.3f} at its estimate, cond c1 "
                  f"{row['cond_c1']:.3f}, noise std {np.round(st.noise_std_Nm, 3).tolist()} N m{prev}")
        summary["steps"] = rows
        traj = steps[-1].design
    elapsed = time.perf_counter() - t0
    sd_meta = sd_file if settings.iterations == 0 else steps[-1].noise_std_Nm
    meta = {"robot": spec.name, "criterion_key": settings.criterion, "method": settings.method,
            "measurement": measurement, "n_base": int(base.n_base), "seed": settings.seed,
            "harmonics": settings.harmonics,
            "cond": round(design_criterion(traj, reg, base, "cond", sd_meta, settings.samples), 6),
            "log10_det_cov": covariance_log10_det(traj, reg, base, sd_meta, settings.samples),
            "swevers_iterations": settings.iterations, "design_time_s": round(elapsed, 2)}
    own = is_own_robot(spec, run.robot)
    path = out / (Path(run.robot.excitation).name if own else "excitation.yaml")
    save_design(traj, path, meta)
    summary.update({k: meta[k] for k in ("cond", "log10_det_cov")}, design_time_s=round(elapsed, 2),
                   file=str(path), constraints=traj.metadata.get("constraints"))
    _write_json(summary, out / "design_summary.json")
    print(f"design: cond {meta['cond']:.4g}, log10 det covariance {meta['log10_det_cov']:.3f} after "
          f"{elapsed:.1f} s, written to {path}")
    if run.design.install:
        target = install_target(spec, run.robot, CONF_DIR)  # only ever the robot in use's design
        save_design(traj, target, meta)
        print(f"installed as {target}")
    return path
