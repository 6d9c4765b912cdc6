"""Dry run: everything to check about a trajectory before it goes to a real robot.

For a trajectory (a Fourier design or any sampled :class:`hal.protocol.JointTrajectory`)
and a robot configuration, :func:`dry_run` reports on the samples actually sent:

- per-joint margins to the position, velocity and acceleration limits (with the time of
  the smallest margin);
- nominal-model joint torques (the twin's truth model, or ``W_base beta`` for an
  estimate) against the torque limits; for coupled drives (a differential gear) the motor
  torques C^T tau + drive terms, on which the limits are;
- Cartesian bounds of the end effector (height, distance from the base axis, box);
- the closest approach to a collision (link capsules against each other and against
  the configured obstacles, MuJoCo geometry), with the pair and the time;
- the tracking error of the controlled MuJoCo twin (``hal.factory.make_robot`` + run),
  when the reference is within the kinematic limits (the twin refuses it otherwise).

The verdict is pass/fail with one reason per violated item naming the kind, joint (or
pair / bound), time and margin; a NaN or infinite margin fails. A :class:`hal.safety.DryRunRecord`
holding the certified content (trajectory, robot file and model with its payload state, safety
settings, rate, the torque check's parameters and their source, whether the twin simulated)
and the verdict is written; :func:`hal.safety.require_passing_dry_run` recomputes that content
and compares it field by field before any real-controller backend moves. :func:`design_checks`
is what the pipeline injects into a real backend (the HAL never imports this module): the
settings, the simulation requirement and :func:`motion_check`, the same constraint checks for
the lead-in and lead-out a backend plans from the measured pose.

Hydra: ``robident-twin task=dryrun`` checks ``design.trajectory`` (default: the robot's
excitation) with the constraints of ``design.constraints`` and ``design.dryrun``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from robident_twin.design.constraints import (
    ConstraintSet,
    DesignConstraints,
    check_bandwidth,
    torque_limit_model,
)
from robident_twin.design.fourier import FourierTrajectory
from robident_twin.errors import ConfigError, TrajectoryError
from robident_twin.model.robot import RobotSpec


@dataclass(frozen=True)
class DryRunConfig:
    """What a dry run checks.

    constraints: the torque / Cartesian / collision settings (the kinematic limits are always
    checked at their full values; torque is checked when ``constraints.torque`` is set, which is
    the default here). simulate: run the MuJoCo twin for the tracking error. tracking_tol_rad:
    largest allowed tracking error. rate_hz: sampling rate of a Fourier trajectory.
    """

    constraints: DesignConstraints = field(default_factory=lambda: DesignConstraints(torque=True))
    simulate: bool = True
    tracking_tol_rad: float = 0.01
    rate_hz: float = 1000.0
    backend: Any = field(default_factory=lambda: {"name": "mujoco"})  # a mapping or hal.config's typed backend
    measurement: str = "joint_torque"

    def safety_settings(self) -> dict[str, Any]:
        """The settings a dry-run record certifies (``Certified.safety``)."""
        c = self.constraints
        return {
            "torque": c.torque, "torque_limit_fraction": 1.0,
            "cartesian": None if c.cartesian is None else vars(c.cartesian),
            "collision": None if c.collision is None else {
                "self_collision": c.collision.self_collision, "radius_m": c.collision.radius_m,
                "clearance_m": c.collision.clearance_m, "min_link_gap": c.collision.min_link_gap,
                "obstacles": [o.as_dict() for o in c.collision.obstacles]},
            "resonance_hz": c.resonance_hz, "tracking_tol_rad": self.tracking_tol_rad,
            "measurement": self.measurement,
        }

    @classmethod
    def from_design(cls, design) -> "DryRunConfig":
        """From the typed ``design`` group (:class:`robident_twin.design.config.DesignConfig`; a
        mapping is validated once by :func:`~robident_twin.design.config.as_design`)."""
        from robident_twin.design.config import as_design

        design = as_design(design)
        dr = design.dryrun
        return cls(DesignConstraints.from_section(design.constraints), dr.simulate, float(dr.tracking_tol_rad),
                   float(dr.rate_hz))

    @classmethod
    def from_config(cls, design_cfg: Mapping[str, Any] | None) -> "DryRunConfig":
        """From a plain mapping with ``constraints`` / ``dryrun`` (a real backend's ``backend.safety``
        block, data the HAL's schema keeps as a mapping); the design group goes through :meth:`from_design`."""
        d = dict(design_cfg or {})
        cons = dict(d.get("constraints") or {})
        cons.setdefault("torque", True)
        constraints = DesignConstraints.from_config(cons, "design.constraints")
        dr = dict(d.get("dryrun") or {})
        allowed = {"simulate", "tracking_tol_rad", "rate_hz", "records_dir", "plot"}
        unknown = set(dr) - allowed
        if unknown:
            raise ConfigError(f"design.dryrun: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
        tol = dr.get("tracking_tol_rad", 0.01)
        if not isinstance(tol, (int, float)) or not tol > 0:
            raise ConfigError(f"design.dryrun.tracking_tol_rad: expected a positive number (rad), got {tol!r}")
        return cls(constraints, bool(dr.get("simulate", True)), float(tol),
                   float(dr.get("rate_hz", 1000.0)))


@dataclass(frozen=True)
class Margin:
    """Smallest margin (limit minus value; negative = violated) of one item over the trajectory."""

    kind: str
    what: str
    time_s: float
    value: float
    limit: float
    margin: float
    unit: str

    def describe(self) -> str:
        if not np.isfinite(self.margin):
            return (f"{self.kind} {self.what}: VIOLATED (margin not finite: {self.margin} {self.unit}) at t = "
                    f"{self.time_s:.3f} s (value {self.value:.5g} {self.unit}, limit {self.limit:.5g} {self.unit})")
        state = "VIOLATED by" if self.margin < 0 else "margin"
        return (f"{self.kind} {self.what}: {state} {abs(self.margin):.4g} {self.unit} at t = "
                f"{self.time_s:.3f} s (value {self.value:.5g} {self.unit}, limit {self.limit:.5g} {self.unit})")


@dataclass
class DryRunReport:
    """Outcome of :func:`dry_run`; ``passed`` and ``reasons`` are the verdict."""

    robot: str
    hash: str
    passed: bool
    reasons: list[str]
    margins: list[Margin]
    closest_collision: dict[str, Any] | None
    tracking: dict[str, Any] | None
    notes: list[str]
    series: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    record: Any = None  # the hal.safety.DryRunRecord
    record_path: Path | None = None
    plot_path: Path | None = None

    def worst(self, kind: str) -> Margin | None:
        ms = [m for m in self.margins if m.kind == kind]
        return min(ms, key=lambda m: m.margin) if ms else None

    def summary(self) -> dict[str, Any]:
        return {"robot": self.robot, "hash": self.hash, "passed": self.passed, "reasons": self.reasons,
                "margins": [vars(m) for m in self.margins], "closest_collision": self.closest_collision,
                "tracking": self.tracking, "notes": self.notes}

    def format(self) -> str:
        lines = [f"dry run of a trajectory on robot '{self.robot}' (hash {self.hash[:16]}...): "
                 f"{'PASS' if self.passed else 'FAIL'}"]
        lines += [f"  reason: {r}" for r in self.reasons]
        for m in self.margins:
            lines.append(f"  {m.describe()}")
        if self.closest_collision:
            c = self.closest_collision
            lines.append(f"  closest approach: {c['distance_m']:.4g} m between {c['pair']} at t = "
                         f"{c['time_s']:.3f} s (clearance {c['clearance_m']:g} m)")
        if self.tracking:
            t = self.tracking
            lines.append(f"  twin tracking error: max {t['max_rad']:.3g} rad (joint {t['joint']}, t = "
                         f"{t['time_s']:.3f} s), RMS per joint {' '.join(f'{x:.2e}' for x in t['rms_rad'])} rad")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def to_joint_trajectory(traj, rate_hz: float = 1000.0):
    """A :class:`hal.protocol.JointTrajectory` of one period of a Fourier design (or the input)."""
    from hal.protocol import JointTrajectory

    if isinstance(traj, JointTrajectory):
        return traj
    if isinstance(traj, FourierTrajectory):
        t, q, dq, ddq = traj.sample(rate_hz)
        return JointTrajectory(t, q, dq, ddq, period_s=traj.period_s)
    raise TrajectoryError(f"dry run: expected a FourierTrajectory or a JointTrajectory, got "
                          f"{type(traj).__name__}")


def _kinematic_margins(jt, spec: RobotSpec) -> list[Margin]:
    out = []
    t = jt.t_s
    for j, name in enumerate(spec.joint_names):
        q = jt.q_rad[:, j]
        m_hi, m_lo = spec.q_max_rad[j] - q, q - spec.q_min_rad[j]
        k_hi, k_lo = int(np.argmin(m_hi)), int(np.argmin(m_lo))
        if m_hi[k_hi] <= m_lo[k_lo]:
            out.append(Margin("position", f"joint {name}", float(t[k_hi]), float(q[k_hi]),
                              float(spec.q_max_rad[j]), float(m_hi[k_hi]), "rad"))
        else:
            out.append(Margin("position", f"joint {name}", float(t[k_lo]), float(q[k_lo]),
                              float(spec.q_min_rad[j]), float(m_lo[k_lo]), "rad"))
        for kind, x, lim, unit in (("velocity", jt.dq_rad_s[:, j], spec.dq_max_rad_s[j], "rad/s"),
                                   ("acceleration", jt.ddq_rad_s2[:, j], spec.ddq_max_rad_s2[j], "rad/s^2")):
            k = int(np.argmax(np.abs(x)))
            out.append(Margin(kind, f"joint {name}", float(t[k]), float(x[k]), float(lim),
                              float(lim - abs(x[k])), unit))
    return out


def _constraint_margins(jt, spec: RobotSpec, config: DryRunConfig, torque_fn, traj=None):
    """Kinematic, bandwidth, torque, Cartesian and collision margins of a sampled motion:
    (margins, closest approach, series, notes)."""
    notes: list[str] = []
    margins = _kinematic_margins(jt, spec)
    c = config.constraints
    series: dict[str, np.ndarray] = {"t_s": jt.t_s, "q_rad": jt.q_rad, "dq_rad_s": jt.dq_rad_s,
                                     "ddq_rad_s2": jt.ddq_rad_s2}
    if isinstance(traj, FourierTrajectory) and c.resonance_hz is not None:
        try:
            check_bandwidth(traj.n_harmonics, traj.base_freq_hz, c.resonance_hz)
        except ConfigError as exc:
            margins.append(Margin("bandwidth", "highest harmonic", 0.0,
                                  traj.n_harmonics * traj.base_freq_hz, c.resonance_hz,
                                  c.resonance_hz - traj.n_harmonics * traj.base_freq_hz, "Hz"))
            notes.append(str(exc))
    closest = None
    if c.nonlinear:
        cset = ConstraintSet(spec, c, torque_fn)
        with np.errstate(all="ignore"):  # a non-finite model gives non-finite margins: they fail below
            g, extra = cset.margins(jt.q_rad, jt.dq_rad_s, jt.ddq_rad_s2, design=False, detail=True)
        t = jt.t_s
        if c.torque:
            tau = extra["tau_Nm"]
            series["tau_Nm"] = tau
            for j, name in enumerate(spec.joint_names):
                a = np.abs(tau[:, j])
                bad = ~np.isfinite(a)
                k = int(np.argmax(bad)) if bad.any() else int(np.argmax(a))
                lim = float(spec.tau_max_Nm[j])
                margins.append(Margin("torque", f"{cset.torque_side} {name}", float(t[k]), float(tau[k, j]), lim,
                                      lim - abs(float(tau[k, j])), "N m"))
        col = 2 * spec.n_joints if c.torque else 0
        if c.cartesian is not None:
            series["p_m"] = extra["p_m"]
            vals, lims = c.cartesian.values_and_limits(extra["p_m"])
            for i, name in enumerate(c.cartesian.names()):
                gi = np.where(np.isfinite(g[:, col + i]), g[:, col + i], -np.inf)
                k = int(np.argmin(gi))
                margins.append(Margin("cartesian", f"end effector {name}", float(t[k]),
                                      float(vals[k, i]), float(lims[i]), float(g[k, col + i]), "m"))
            col += len(c.cartesian.names())
        if cset.coll is not None:
            d = extra["distance_m"]
            k = int(np.argmin(np.where(np.isfinite(d), d, -np.inf)))
            pair = cset.coll.pair_names[int(extra["closest_pair"][k])]
            clearance = c.collision.clearance_m
            closest = {"distance_m": float(d[k]), "pair": pair, "time_s": float(t[k]),
                       "clearance_m": clearance, "unchecked_pairs": cset.coll.skipped_pairs}
            series["collision_distance_m"] = d
            margins.append(Margin("collision", f"pair {pair}", float(t[k]), float(d[k]), clearance,
                                  float(d[k] - clearance), "m"))
    return margins, closest, series, notes


def _failed(m: Margin) -> bool:
    """A margin fails when it is negative or not finite (NaN compares false with everything)."""
    return not (np.isfinite(m.margin) and m.margin >= 0)


def dry_run(traj, spec: RobotSpec, config: DryRunConfig | None = None, *, regressor=None,
            base=None, beta=None, records_dir: str | Path | None = None,
            out_dir: str | Path | None = None, write: bool = True, seed: int = 0) -> DryRunReport:
    """Check a trajectory on a robot configuration; write the record (``write``) and a plot
    (``out_dir``). ``beta`` (with ``regressor`` and ``base``) replaces the truth model by an
    estimate for the nominal torques; the record names which parameters the torque check used."""
    from hal.safety import (
        Certified,
        DryRunRecord,
        torque_check_of_estimate,
        torque_check_of_model,
        write_record,
    )

    config = config or DryRunConfig()
    jt = to_joint_trajectory(traj, config.rate_hz)
    if jt.q_rad.shape[1] != spec.n_joints:
        raise TrajectoryError(f"dry run: trajectory has {jt.q_rad.shape[1]} joints but robot "
                              f"'{spec.name}' has {spec.n_joints}")
    c = config.constraints
    if not c.torque:
        torque_check = torque_check_of_model(spec, False)
    elif beta is None:
        torque_check = torque_check_of_model(spec, True)
    else:
        torque_check = torque_check_of_estimate(beta, list(getattr(base, "names", []) or []) or None)
    torque_fn = (torque_limit_model(spec, regressor, base, beta, config.measurement)
                 if c.nonlinear and c.torque else None)
    margins, closest, series, notes = _constraint_margins(jt, spec, config, torque_fn, traj)
    reasons = [m.describe() for m in margins if _failed(m)]
    if torque_check["all_zero"]:
        reasons.append("torque check: every parameter of the estimate is zero, so the check would pass any motion")
    tracking = None
    kin_bad = any(_failed(m) for m in margins if m.kind in ("position", "velocity", "acceleration"))
    if config.simulate and kin_bad:
        notes.append("the twin was not run: the reference leaves the kinematic limits")
    elif config.simulate:
        tracking = _simulate(jt, spec, config, seed)
        series["tracking_error_rad"] = tracking.pop("error_rad")
        if not tracking["max_rad"] <= config.tracking_tol_rad:
            reasons.append(f"tracking: joint {tracking['joint']} error {tracking['max_rad']:.4g} rad at t = "
                           f"{tracking['time_s']:.3f} s exceeds {config.tracking_tol_rad:g} rad "
                           f"(margin {config.tracking_tol_rad - tracking['max_rad']:.4g} rad)")
    else:
        notes.append("the twin was not run (simulate = false): no tracking error")
    content = Certified.of(jt, spec, config.safety_settings(), torque_check, tracking is not None)
    report = DryRunReport(spec.name, content.key, not reasons, reasons, margins, closest, tracking, notes, series)
    report.record = DryRunRecord(content, report.passed, tuple(reasons), tuple(vars(m) for m in margins),
                                 tuple(notes), tracking, closest)
    if out_dir is not None:
        report.plot_path = plot_dry_run(report, spec, Path(out_dir) / "dryrun.png")
    if write:
        report.record_path = write_record(report.record, records_dir)
    return report


def motion_check(spec: RobotSpec, config: DryRunConfig):
    """The dry run's constraint checks (kinematic limits, torque with the robot model, Cartesian
    bounds, collisions; no twin run) as a function of a planned motion returning one reason per
    violated item: what a real backend re-checks on the lead-in and lead-out it plans from the
    measured pose, before the first command."""
    c = config.constraints
    torque_fn = torque_limit_model(spec, None, None, None, config.measurement) if c.nonlinear and c.torque else None

    def check(jt) -> list[str]:
        margins, _, _, _ = _constraint_margins(jt, spec, config, torque_fn)
        return [m.describe() for m in margins if _failed(m)]

    return check


def safety_config(safety_cfg: Mapping[str, Any] | None) -> DryRunConfig:
    """The dry-run configuration of a backend's ``safety`` setting (keys of the ``design`` config
    group: ``constraints``, ``dryrun``, and ``measurement``); None gives the defaults of
    ``robident-twin task=dryrun``."""
    import dataclasses

    if safety_cfg is not None and not isinstance(safety_cfg, Mapping):
        raise ConfigError(f"backend.safety: expected a mapping with constraints / dryrun / measurement, "
                          f"got {safety_cfg!r}")
    cfg = dict(safety_cfg or {})
    measurement = cfg.pop("measurement", None)
    unknown = set(cfg) - {"constraints", "dryrun", "trajectory"}
    if unknown:
        raise ConfigError(f"backend.safety: unknown key(s) {sorted(unknown)}; expected constraints, dryrun, "
                          f"measurement")
    dr = DryRunConfig.from_config(cfg)
    if measurement:
        dr = dataclasses.replace(dr, measurement=str(measurement))
    return dr


def design_checks(spec: RobotSpec, safety_cfg: Mapping[str, Any] | None = None,
                  records_dir: str | Path | None = None):
    """The :class:`hal.safety.SafetyChecks` the pipeline gives a real backend, from the backend's
    ``safety`` setting (see :func:`safety_config`)."""
    return checks_of(spec, safety_config(safety_cfg), records_dir)


def checks_of(spec: RobotSpec, config: DryRunConfig, records_dir: str | Path | None = None):
    """:class:`hal.safety.SafetyChecks` of a dry-run configuration: the canonical safety settings,
    whether simulation is required, :func:`motion_check` and the dry run itself (used for an
    emulated controller with ``dry_run_if_emulated``)."""
    from hal.safety import SafetyChecks, robot_model_sha256

    def certify(jt):
        return dry_run(jt, spec, config, records_dir=records_dir).record

    return SafetyChecks(settings=config.safety_settings(), simulate=config.simulate,
                        motion_check=motion_check(spec, config), robot_model_sha256=robot_model_sha256(spec),
                        certify=certify)


def _simulate(jt, spec: RobotSpec, config: DryRunConfig, seed: int) -> dict[str, Any]:
    import dataclasses

    from hal.factory import make_robot

    # the twin's controller runs at the trajectory's own sample rate (1 kHz FRI, 250 Hz RSI ...)
    backend = (dataclasses.replace(config.backend, control_rate_hz=float(jt.rate_hz))
               if dataclasses.is_dataclass(config.backend)  # the run's typed backend (task=dryrun)
               else {**dict(config.backend), "control_rate_hz": jt.rate_hz})
    robot = make_robot(spec, backend, {"enabled": False}, seed=seed)
    try:
        rec = robot.run(jt, periods=1, transient_periods=0)
    finally:
        robot.close()
    q_true = np.asarray(rec.metadata.get("true_q_rad", rec.q_rad))
    err = q_true - rec.q_cmd_rad
    k, j = np.unravel_index(int(np.argmax(np.abs(err))), err.shape)
    return {"max_rad": float(abs(err[k, j])), "joint": spec.joint_names[j], "time_s": float(rec.t_s[k]),
            "rms_rad": np.sqrt(np.mean(err ** 2, axis=0)).tolist(), "error_rad": err}


def dry_run_figure(report: DryRunReport, spec: RobotSpec):
    """Normalised positions, velocities, accelerations, torques, clearances and tracking error
    (a matplotlib figure; the joint legend above the panels, outside the data)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = report.series
    t = s["t_s"]
    centre = 0.5 * (spec.q_max_rad + spec.q_min_rad)
    half = 0.5 * (spec.q_max_rad - spec.q_min_rad)
    panels = [("position / limit", (s["q_rad"] - centre) / half),
              ("velocity / limit", s["dq_rad_s"] / spec.dq_max_rad_s),
              ("acceleration / limit", s["ddq_rad_s2"] / spec.ddq_max_rad_s2)]
    if "tau_Nm" in s:
        panels.append(("nominal torque / limit", s["tau_Nm"] / spec.tau_max_Nm))
    if "collision_distance_m" in s:
        panels.append(("closest distance (m)", s["collision_distance_m"][:, None]))
    if "tracking_error_rad" in s:
        e = s["tracking_error_rad"]
        panels.append(("twin tracking error (rad)", e))
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 1.8 * len(panels) + 0.8), sharex=False,
                             layout="constrained")
    axes = np.atleast_1d(axes)
    for ax, (title, y) in zip(axes, panels):
        tt = t if y.shape[0] == t.shape[0] else np.arange(y.shape[0]) / (y.shape[0] / max(t[-1], 1e-9))
        lines = ax.plot(tt, y, lw=0.8)
        if "/ limit" in title:
            for b in (-1, 1):
                ax.axhline(b, color="r", lw=0.8, ls="--")
        ax.set_ylabel(title, fontsize=8)
        if ax is axes[0] and y.shape[1] == spec.n_joints:
            fig.legend(lines, spec.joint_names, fontsize=8, ncol=spec.n_joints, loc="outside upper right",
                       frameon=False)
    axes[-1].set_xlabel("t (s)")
    fig.suptitle(f"dry run {spec.name}: {'PASS' if report.passed else 'FAIL'} ({report.hash[:12]})", x=0.02,
                 ha="left")
    return fig


def plot_dry_run(report: DryRunReport, spec: RobotSpec, path: Path) -> Path:
    """:func:`dry_run_figure` as a PNG file (written atomically)."""
    import matplotlib.pyplot as plt

    fig = dry_run_figure(report, spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    tmp.replace(path)
    return path


def run_dryrun_task(run, out: Path) -> DryRunReport:
    """``robident-twin task=dryrun``: dry-run ``design.trajectory`` (default: the robot's
    excitation) under ``design.constraints`` / ``design.dryrun``; exit code 2 on FAIL. ``run`` is
    the validated RunConfig."""
    import dataclasses

    from robident_twin.design.auto import is_own_robot
    from robident_twin.design.fourier import load_design
    from robident_twin.model.build import resolve_robot
    from robident_twin.paths import CONF_DIR

    spec = resolve_robot(run.robot)
    config = DryRunConfig.from_design(run.design)
    # the measured torque model as in task=design: model.measurement, else the robot's default
    measurement = run.model.measurement or run.robot.measurement
    if measurement:
        config = dataclasses.replace(config, measurement=str(measurement))
    if run.backend.name == "mujoco":  # the twin with the run's controller
        config = dataclasses.replace(config, backend=run.backend)
    path = run.design.trajectory
    if path is None and not is_own_robot(spec, run.robot):  # a new robot: its own (automatic) designs
        from robident_twin.design.auto import robot_design_dir, robot_designs

        robot_designs(spec, run.robot)
        path = robot_design_dir(spec) / "excitation.yaml"
    p = Path(path or run.robot.excitation)
    if not p.is_absolute() and not p.is_file():
        p = CONF_DIR / p
    traj = load_design(p)
    records_dir = run.design.dryrun.records_dir
    report = dry_run(traj, spec, config, records_dir=records_dir, out_dir=out)
    print(report.format())
    print(f"record: {report.record_path}\nplot: {report.plot_path}")
    if not report.passed:
        raise TrajectoryError(f"dry run FAILED for {p}: " + "; ".join(report.reasons))
    return report


def dryrun_checks_for_backend(spec, backend_cfg):
    """The design stage's safety checks for a real-controller backend (None for a twin or files):
    the HAL gets them injected and never imports the design stage. ``backend_cfg``: the HAL's
    typed backend option (:mod:`hal.config`; a mapping is validated as one)."""
    from hal.config import as_backend
    from hal.factory import REAL_BACKENDS

    backend = as_backend(backend_cfg)
    if backend.name not in REAL_BACKENDS:
        return None
    return design_checks(spec, backend.safety, backend.records_dir)
