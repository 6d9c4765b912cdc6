"""``robident-twin task=control``: the twin's joint controller with the feed-forward of each chosen
model (none, the CAD-like nominal model, an identified model) along one trajectory; the per-joint
RMS reference error and its ratio to no model (ICMA 2020 Table VII) as a table, ``summary.json``
and ``report.html``. The stages do the work (``validation.control``); this module wires them.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from robident_twin.errors import ConfigError
from robident_twin.validation import control as C

TRAJECTORIES = ("excitation", "validation", "square")


def _trajectory(spec, robot, control, rate_hz: float):
    """The reference of ``control.trajectory`` (``robot``: the typed robot group, ``control`` the
    typed control section)."""
    from robident_twin.design.stored import reference, resolve_design

    kind = control.trajectory
    if kind in ("excitation", "validation"):
        design = getattr(robot, kind)
        if not design:
            raise ConfigError(f"robot.{kind}: the robot config names no {kind} design")
        return C.truncated(reference(resolve_design(design, spec), rate_hz), control.duration_s)
    if kind == "square":
        from robident_twin.design.process_trajectories import square

        if control.square is None:
            raise ConfigError("control.square: expected keys ['centre_m', 'points_per_edge', 'side_m', "
                              "'speed_fraction'] (centre_m required), got []")
        return C.truncated(square(spec, rate_hz=rate_hz, **vars(control.square)).trajectory, control.duration_s)
    raise ConfigError(f"control.trajectory: expected one of {', '.join(TRAJECTORIES)}, got {kind!r}")


def identified_feedforward(run, ident, out: Path) -> tuple[C.FeedForward, str]:
    """The identified model's feed-forward: ``run_dir`` (a finished identify run's summary.json),
    ``robot_file`` (an exported identified twin, identified_<robot>.yaml) or neither (identify now
    with the RunConfig ``run``). ``ident``: the typed ``control.identified``."""
    if ident.run_dir and ident.robot_file:
        raise ConfigError("control.identified: give run_dir or robot_file, not both")
    if ident.robot_file:
        from robident_twin.model.robot import load_robot

        path = Path(ident.robot_file)
        if not path.is_file():
            raise ConfigError(f"control.identified.robot_file: {path} does not exist (an exported identified twin, "
                              f"`robident-twin task=export`)")
        return C.spec_feedforward(load_robot(path)), f"identified twin {path}"
    if ident.run_dir:
        from robident_twin.report.identified_twin import load_run

        model, beta, _, _ = load_run(ident.run_dir)
        return C.regressor_feedforward(model, beta), f"identify run {ident.run_dir}"
    from robident_twin.pipeline import identify

    result = identify(run, out_dir=out / "identify")
    return C.regressor_feedforward(result.model, result.estimate.beta), "identified now (task=identify settings)"


def run_control(run, out: Path) -> dict:
    """The comparison of a run config (a RunConfig; a mapping is validated here once, as the CLI
    edge does); returns the summary (also written to out/summary.json)."""
    from hal.config import ControllerConfig
    from hal.factory import make_robot
    from robident_twin.config import validate
    from robident_twin.estimation.postprocess import nominal_model
    from robident_twin.model.build import resolve_robot, twin_spec

    run = validate(run)
    control = run.control
    choices = list(control.feedforwards or C.FEEDFORWARD_CHOICES)
    bad = [c for c in choices if c not in C.FEEDFORWARD_CHOICES]
    if bad or len(set(choices)) != len(choices):
        raise ConfigError(f"control.feedforwards: expected distinct names from {list(C.FEEDFORWARD_CHOICES)}, got {choices}")
    backend = run.backend
    if backend.name not in ("mujoco", "pybullet"):
        raise ConfigError(f"backend.name: task=control runs on a twin (mujoco or pybullet), got {backend.name!r}")
    spec = resolve_robot(run.robot)
    sim = twin_spec(spec, run.friction)
    rate = float(backend.control_rate_hz)
    traj = _trajectory(spec, run.robot, control, rate)
    periods = int(control.periods or 1) if traj.period_s is not None else 1
    integral_hz = C.integral_hz_for(spec.name, control.integral_hz)
    controller = {"bandwidth_hz": float(control.bandwidth_hz or 5.0),
                  "damping_ratio": float(control.damping_ratio or 1.0), "integral_hz": integral_hz}

    def make(ff_enabled: bool):  # the config's controller replaces the backend's (its other keys: defaults)
        typed = dataclasses.replace(backend, controller=ControllerConfig(**controller, feedforward=ff_enabled))
        return make_robot(sim, typed, run.noise, int(run.seed), twin_cfg=run.twin)

    sources: dict[str, Any] = {}
    notes = {}
    for c in choices:
        if c == "none":
            sources[c] = None
        elif c == "nominal":
            nominal = nominal_model(spec, control.nominal)
            sources[c] = C.spec_feedforward(nominal)
            notes[c] = f"CAD-like nominal {dict(vars(control.nominal))}"
        else:
            sources[c], notes[c] = identified_feedforward(run, control.identified, out)
    results = [C.run_with_feedforward(make, c, sources[c], traj, periods) for c in choices]
    probe = make(False)  # the controller the twin ran: a robot's own drive loop replaces the config's
    run_controller = {k: v for k, v in vars(probe.controller).items() if k != "feedforward"}
    probe.close()
    info = {"robot": spec.name, "backend": backend.name, "trajectory": control.trajectory,
            "duration_s": traj.n_samples / rate * periods, "controller": run_controller,
            "controller_config": controller, "sources": notes,
            "friction": run.record()["friction"], "error": "q_ref - C q_motor_true (rad, the drive encoder's side, as the real CLOOS's deg_e), recorded window"}
    return C.ControlComparison(spec.joint_names, results, info).to_dict()


def run_control_task(run, out: Path) -> dict:
    """``task=control`` (``run``: the RunConfig; a mapping is validated once)."""
    from robident_twin.config import validate
    from robident_twin.report.html import write_control_report
    from robident_twin.report.tables import write_json

    run = validate(run)
    summary = {"control": run_control(run, out), "config": run.record()}
    write_json(summary, out / "summary.json")
    print(C.format_control_table(summary["control"]))
    if run.output.report:
        print(f"report: {write_control_report(out, summary)}")
    print(f"\nresults in {out}")
    return summary
