"""``robident-twin task=control``: the twin's joint controller with the feed-forward of each chosen
model (none, the CAD-like nominal model, an identified model) along one trajectory; the per-joint
RMS reference error and its ratio to no model (ICMA 2020 Table VII) as a table, ``summary.json``
and ``report.html``. The stages do the work (``validation.control``); this module wires them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from omegaconf import OmegaConf

from robident_twin.errors import ConfigError
from robident_twin.validation import control as C

TRAJECTORIES = ("excitation", "validation", "square")


def _trajectory(spec, robot_cfg: Mapping[str, Any], ccfg: Mapping[str, Any], rate_hz: float):
    from robident_twin.design.stored import reference, resolve_design

    kind = ccfg.get("trajectory", "validation")
    if kind in ("excitation", "validation"):
        design = robot_cfg.get(kind)
        if not design:
            raise ConfigError(f"robot.{kind}: the robot config names no {kind} design")
        return C.truncated(reference(resolve_design(design, spec), rate_hz), ccfg.get("duration_s"))
    if kind == "square":
        from robident_twin.design.process_trajectories import square

        sq = dict(ccfg.get("square") or {})
        allowed = {"centre_m", "side_m", "speed_fraction", "points_per_edge"}
        if set(sq) - allowed or "centre_m" not in sq:
            raise ConfigError(f"control.square: expected keys {sorted(allowed)} (centre_m required), got {sorted(sq)}")
        return C.truncated(square(spec, rate_hz=rate_hz, **sq).trajectory, ccfg.get("duration_s"))
    raise ConfigError(f"control.trajectory: expected one of {', '.join(TRAJECTORIES)}, got {kind!r}")


def identified_feedforward(plain: dict, ident: Mapping[str, Any] | None, out: Path) -> tuple[C.FeedForward, str]:
    """The identified model's feed-forward: ``run_dir`` (a finished identify run's summary.json),
    ``robot_file`` (an exported identified twin, identified_<robot>.yaml) or neither (identify now)."""
    ident = dict(ident or {})
    unknown = set(ident) - {"run_dir", "robot_file"}
    if unknown:
        raise ConfigError(f"control.identified: unknown key(s) {sorted(unknown)}; expected run_dir, robot_file")
    if ident.get("run_dir") and ident.get("robot_file"):
        raise ConfigError("control.identified: give run_dir or robot_file, not both")
    if ident.get("robot_file"):
        from robident_twin.model.robot import load_robot

        path = Path(ident["robot_file"])
        if not path.is_file():
            raise ConfigError(f"control.identified.robot_file: {path} does not exist (an exported identified twin, "
                              f"`robident-twin task=export`)")
        return C.spec_feedforward(load_robot(path)), f"identified twin {path}"
    if ident.get("run_dir"):
        from robident_twin.report.identified_twin import load_run

        model, beta, _, _ = load_run(ident["run_dir"])
        return C.regressor_feedforward(model, beta), f"identify run {ident['run_dir']}"
    from robident_twin.pipeline import identify

    result = identify(plain, out_dir=out / "identify")
    return C.regressor_feedforward(result.model, result.estimate.beta), "identified now (task=identify settings)"


def run_control(plain: dict, out: Path) -> dict:
    """The comparison of a plain config; returns the summary (also written to out/summary.json)."""
    from hal.factory import make_robot
    from robident_twin.model.build import resolve_robot, twin_spec
    from robident_twin.report.identified_twin import nominal_from_config

    ccfg = dict(plain.get("control") or {})
    allowed = {"trajectory", "duration_s", "periods", "feedforwards", "bandwidth_hz", "damping_ratio",
               "integral_hz", "identified", "nominal", "square"}
    unknown = set(ccfg) - allowed
    if unknown:
        raise ConfigError(f"control: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
    choices = list(ccfg.get("feedforwards") or C.FEEDFORWARD_CHOICES)
    bad = [c for c in choices if c not in C.FEEDFORWARD_CHOICES]
    if bad or len(set(choices)) != len(choices):
        raise ConfigError(f"control.feedforwards: expected distinct names from {list(C.FEEDFORWARD_CHOICES)}, got {choices}")
    backend = dict(plain.get("backend") or {})
    if backend.get("name") not in ("mujoco", "pybullet"):
        raise ConfigError(f"backend.name: task=control runs on a twin (mujoco or pybullet), got {backend.get('name')!r}")
    spec = resolve_robot(plain["robot"])
    sim = twin_spec(spec, plain.get("friction"))
    rate = float(backend.get("control_rate_hz", 1000.0))
    traj = _trajectory(spec, plain["robot"], ccfg, rate)
    periods = int(ccfg.get("periods") or 1) if traj.period_s is not None else 1
    integral_hz = C.integral_hz_for(spec.name, ccfg.get("integral_hz"))
    controller = {"bandwidth_hz": float(ccfg.get("bandwidth_hz") or 5.0),
                  "damping_ratio": float(ccfg.get("damping_ratio") or 1.0), "integral_hz": integral_hz}

    def make(ff_enabled: bool):
        cfg = dict(backend, controller=dict(controller, feedforward=ff_enabled))
        return make_robot(sim, cfg, plain.get("noise"), int(plain.get("seed", 0)), twin_cfg=plain.get("twin"))

    sources: dict[str, Any] = {}
    notes = {}
    for c in choices:
        if c == "none":
            sources[c] = None
        elif c == "nominal":
            nominal = nominal_from_config(spec, ccfg.get("nominal"))
            sources[c] = C.spec_feedforward(nominal)
            notes[c] = f"CAD-like nominal {dict(ccfg.get('nominal') or {})}"
        else:
            sources[c], notes[c] = identified_feedforward(plain, ccfg.get("identified"), out)
    results = [C.run_with_feedforward(make, c, sources[c], traj, periods) for c in choices]
    probe = make(False)  # the controller the twin ran: a robot's own drive loop replaces the config's
    run_controller = {k: v for k, v in vars(probe.controller).items() if k != "feedforward"}
    probe.close()
    info = {"robot": spec.name, "backend": backend["name"], "trajectory": ccfg.get("trajectory", "validation"),
            "duration_s": traj.n_samples / rate * periods, "controller": run_controller,
            "controller_config": controller, "sources": notes,
            "friction": dict(plain.get("friction") or {}), "error": "q_ref - C q_motor_true (rad, the drive encoder's side, as the real CLOOS's deg_e), recorded window"}
    return C.ControlComparison(spec.joint_names, results, info).to_dict()


def run_control_task(cfg, out: Path) -> dict:
    from robident_twin.report.html import write_control_report
    from robident_twin.report.tables import write_json

    plain = OmegaConf.to_container(cfg, resolve=True) if not isinstance(cfg, dict) else cfg
    summary = {"control": run_control(plain, out), "config": plain}
    write_json(summary, out / "summary.json")
    print(C.format_control_table(summary["control"]))
    if (plain.get("output") or {}).get("report", True):
        print(f"report: {write_control_report(out, summary)}")
    print(f"\nresults in {out}")
    return summary
