"""The safety gate every real-controller backend must pass before moving hardware.

A motion may only be sent to a real robot when a *passing* dry run exists for exactly what
decides whether it is safe. That content is a :class:`Certified` (plain data the HAL owns):

- the sampled reference (SHA-256 of its float64 samples, number of samples, rate, period);
- the robot: name, SHA-256 of the robot file, SHA-256 of the loaded model (every kinematic,
  inertial, limit, drive and friction value) and the payload state (attached or not, its mass,
  centre of mass and inertia);
- the safety settings the dry run checked (torque, Cartesian bounds, obstacles, clearance ...);
- the torque check: whether it ran, which parameters it used and where they came from (the
  robot model, or an estimate with the SHA-256 of its parameters and whether they are all zero);
- whether the twin simulated the motion (the tracking check).

A :class:`DryRunRecord` is that content plus the verdict (passed, reasons, margins). The design
stage (:mod:`robident_twin.design.dryrun`) produces it; :func:`write_record` stores it as JSON under
``<records_dir>/<robot>-<trajectory key>/<content key>.json``. The gate
(:func:`require_passing_dry_run`) recomputes the content from what the backend is about to run
(its trajectory, its robot, its safety settings, its rate, whether it requires simulation) and
compares every record stored for that trajectory field by field: it accepts only a record whose
content equals the recomputed one and whose verdict is a pass with every margin finite and
non-negative, and otherwise refuses with a message naming what changed ("payload changed",
"torque-check parameters changed", "not simulated" ...). A file that is not a complete record
(e.g. ``{"hash": ..., "passed": true}``) or whose stored hash does not match its content is
refused.

The run-time check of the motion actually planned from the measured pose (lead-in, lead-out)
needs the design stage's constraint checker; it is injected as :class:`SafetyChecks` (the HAL
never imports a pipeline stage): ``hal.factory.make_robot(..., checks=...)`` or
``backend.attach_checks(...)``. A real (non-emulated) backend refuses to run without it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robident_twin.atomic import write_text_atomic
from robident_twin.errors import TrajectoryError
from robident_twin.paths import ROOT

from .protocol import JointTrajectory

RECORD_VERSION = 2


class SafetyError(TrajectoryError):
    """A motion was refused by the safety gate (no passing dry run for exactly it)."""


def default_records_dir() -> Path:
    """``$ROBIDENT_DRYRUN_DIR`` or ``<repo>/outputs/dryrun_records``."""
    return Path(os.environ.get("ROBIDENT_DRYRUN_DIR", ROOT / "outputs" / "dryrun_records"))


def _plain(v: Any) -> Any:
    """JSON-able canonical form (non-finite floats as strings, so they never compare equal to numbers)."""
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        return _plain(v.item())
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return float(repr(v)) if math.isfinite(v) else str(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v) if not f.name.startswith("_")}
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, Path):
        return str(v)
    return repr(v)


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(_plain(obj), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# --------------------------------------------------------------------------- what is certified


def trajectory_sha256(trajectory: JointTrajectory) -> str:
    """SHA-256 of the samples (t, q, dq, ddq as little-endian float64) and the period."""
    if not isinstance(trajectory, JointTrajectory):
        raise SafetyError(f"safety gate: expected a hal.protocol.JointTrajectory, got {type(trajectory).__name__}")
    h = hashlib.sha256(b"robident-twin trajectory v1\n")
    for name in ("t_s", "q_rad", "dq_rad_s", "ddq_rad_s2"):
        a = np.ascontiguousarray(getattr(trajectory, name), dtype="<f8")
        h.update(name.encode() + str(a.shape).encode())
        h.update(a.tobytes())
    h.update(repr(None if trajectory.period_s is None else float(trajectory.period_s)).encode())
    return h.hexdigest()


def robot_model_sha256(spec) -> str:
    """SHA-256 of every value of the loaded robot (kinematics, inertials, limits, drives,
    friction, sensors, payload and whether it is attached); not the file path."""
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)
              if f.name not in ("source", "_cache", "description")}
    return _sha(fields)


def robot_file_sha256(spec) -> str | None:
    try:
        return hashlib.sha256(Path(spec.source).read_bytes()).hexdigest()
    except (OSError, TypeError):
        return None


def payload_state(spec) -> dict[str, Any] | None:
    """None when the robot file has no payload, else whether it is attached and its inertials."""
    pl = getattr(spec, "payload", None)
    if pl is None:
        return None
    return _plain({"attached": bool(spec.payload_attached), "mass_kg": pl.mass_kg, "com_m": pl.com_m,
                   "inertia_com_kgm2": pl.inertia_com_kgm2})


def torque_check_of_model(spec, enabled: bool) -> dict[str, Any]:
    """The torque check with the robot file's own model (what every real backend requires)."""
    if not enabled:
        return {"enabled": False, "source": None, "parameters_sha256": None, "all_zero": None}
    return {"enabled": True, "source": "robot model", "parameters_sha256": robot_model_sha256(spec),
            "all_zero": False}


def torque_check_of_estimate(beta, names=None) -> dict[str, Any]:
    b = np.asarray(beta, dtype=float)
    return {"enabled": True, "source": "estimate", "parameters_sha256": _sha({"beta": b, "names": names}),
            "all_zero": bool(np.all(b == 0.0))}


@dataclass(frozen=True)
class Certified:
    """Everything that decides whether a motion is safe (see the module doc)."""

    robot: str
    robot_file_sha256: str | None
    robot_model_sha256: str
    payload: Mapping[str, Any] | None
    trajectory_sha256: str
    n_samples: int
    rate_hz: float
    period_s: float | None
    safety: Mapping[str, Any]
    torque_check: Mapping[str, Any]
    simulated: bool

    @classmethod
    def of(cls, trajectory: JointTrajectory, spec, safety: Mapping[str, Any], torque_check: Mapping[str, Any],
           simulated: bool) -> Certified:
        return cls(str(spec.name), robot_file_sha256(spec), robot_model_sha256(spec), payload_state(spec),
                   trajectory_sha256(trajectory), int(trajectory.n_samples), float(trajectory.rate_hz),
                   None if trajectory.period_s is None else float(trajectory.period_s),
                   _plain(dict(safety)), _plain(dict(torque_check)), bool(simulated))

    def as_dict(self) -> dict[str, Any]:
        return _plain(self)

    @property
    def key(self) -> str:
        """SHA-256 of the whole content (the record's file name)."""
        return _sha(self.as_dict())


def _describe_payload(p) -> str:
    if p is None:
        return "none in the robot file"
    return (f"attached, {p['mass_kg']:g} kg" if p["attached"] else f"detached ({p['mass_kg']:g} kg available)")


def _describe_torque(t) -> str:
    if not t.get("enabled"):
        return "torque not checked"
    s = f"{t.get('source')} (parameters {str(t.get('parameters_sha256'))[:12]}...)"
    return s + (", every parameter zero" if t.get("all_zero") else "")


def differences(certified: Certified, required: Certified, *, compare_safety: bool = True) -> list[str]:
    """What differs between a record's content and what the backend is about to run, named
    (empty: the record certifies exactly this motion). ``simulated`` differs only when the
    backend requires a simulation and the record has none."""
    c, r = certified, required
    out = []
    if c.robot != r.robot:
        out.append(f"robot changed (certified '{c.robot}', now '{r.robot}')")
    if c.payload != r.payload:
        out.append(f"payload changed (certified: {_describe_payload(c.payload)}; now: {_describe_payload(r.payload)})")
    if c.robot_file_sha256 != r.robot_file_sha256:
        out.append(f"robot file changed (SHA-256 {str(c.robot_file_sha256)[:12]}... certified, "
                   f"{str(r.robot_file_sha256)[:12]}... now)")
    if c.robot_model_sha256 != r.robot_model_sha256 and c.payload == r.payload:
        out.append("robot model changed (kinematic, inertial, limit or drive values differ from the certified ones)")
    if (c.trajectory_sha256, c.n_samples, c.period_s) != (r.trajectory_sha256, r.n_samples, r.period_s):
        out.append(f"trajectory changed ({c.n_samples} samples certified, {r.n_samples} now; the samples differ)")
    if not math.isclose(c.rate_hz, r.rate_hz, rel_tol=1e-9):
        out.append(f"rate changed (certified at {c.rate_hz:g} Hz, the controller runs at {r.rate_hz:g} Hz)")
    if compare_safety and dict(c.safety) != dict(r.safety):
        keys = sorted(k for k in set(c.safety) | set(r.safety) if c.safety.get(k) != r.safety.get(k))
        out.append(f"safety settings changed ({', '.join(keys)})")
    if dict(c.torque_check) != dict(r.torque_check):
        out.append(f"torque-check parameters changed (certified: {_describe_torque(c.torque_check)}; "
                   f"required: {_describe_torque(r.torque_check)})")
    if r.simulated and not c.simulated:
        out.append("not simulated (the dry run was made with simulate = false; this backend requires the "
                   "twin's tracking check)")
    return out


# --------------------------------------------------------------------------- the record


def _margin_ok(m: Mapping[str, Any]) -> bool:
    v = m.get("margin")
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


@dataclass(frozen=True)
class DryRunRecord:
    """A dry run's certified content and verdict (``margins``: ``{kind, what, margin, unit, ...}``)."""

    content: Certified
    passed: bool
    reasons: tuple[str, ...]
    margins: tuple[Mapping[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    tracking: Mapping[str, Any] | None = None
    closest_collision: Mapping[str, Any] | None = None

    def __post_init__(self):
        bad = [m for m in self.margins if not _margin_ok(m)]
        if self.passed and (self.reasons or bad):
            raise SafetyError("dry-run record: passed with " + (f"reasons {list(self.reasons)}" if self.reasons else
                              f"a negative or non-finite margin ({bad[0].get('kind')} {bad[0].get('what')}: "
                              f"{bad[0].get('margin')})"))

    def as_dict(self) -> dict[str, Any]:
        d = {"version": RECORD_VERSION, "content": self.content.as_dict(),
             "verdict": _plain({"passed": self.passed, "reasons": list(self.reasons), "margins": list(self.margins),
                                "notes": list(self.notes), "tracking": self.tracking,
                                "closest_collision": self.closest_collision})}
        d["hash"] = _sha(d)
        return d

    @classmethod
    def from_dict(cls, data: Any, where: str = "dry-run record") -> DryRunRecord:
        """Validate a stored record: every field present with its type, the stored hash equal to
        the content's; a SafetyError naming the field otherwise."""
        if not isinstance(data, Mapping):
            raise SafetyError(f"{where}: expected a JSON object, got {type(data).__name__}")
        missing = [k for k in ("version", "content", "verdict", "hash") if k not in data]
        if missing:
            raise SafetyError(f"{where}: not a complete dry-run record: missing field(s) {missing} (a record holds "
                              f"the certified content and the verdict; a bare hash is not one)")
        if data["version"] != RECORD_VERSION:
            raise SafetyError(f"{where}: field 'version': expected {RECORD_VERSION}, got {data['version']!r}")
        content, verdict = data["content"], data["verdict"]
        if not isinstance(content, Mapping) or not isinstance(verdict, Mapping):
            raise SafetyError(f"{where}: fields 'content' and 'verdict' must be objects")
        names = [f.name for f in dataclasses.fields(Certified)]
        miss = [k for k in names if k not in content]
        extra = sorted(set(content) - set(names))
        if miss or extra:
            raise SafetyError(f"{where}: field 'content': missing {miss}, unexpected {extra}")
        types = {"robot": str, "robot_model_sha256": str, "trajectory_sha256": str, "n_samples": int,
                 "rate_hz": (int, float), "safety": Mapping, "torque_check": Mapping, "simulated": bool}
        for k, t in types.items():
            if not isinstance(content[k], t) or (t is int and isinstance(content[k], bool)):
                raise SafetyError(f"{where}: field 'content.{k}': expected {getattr(t, '__name__', 'a number')}, "
                                  f"got {content[k]!r}")
        if not isinstance(verdict.get("passed"), bool) or not isinstance(verdict.get("reasons"), list) \
                or not isinstance(verdict.get("margins"), list):
            raise SafetyError(f"{where}: field 'verdict': expected passed (true/false), reasons and margins lists")
        stored = data["hash"]
        again = _sha({k: v for k, v in data.items() if k != "hash"})
        if stored != again:
            raise SafetyError(f"{where}: field 'hash': {str(stored)[:16]}... does not match the record's content "
                              f"({again[:16]}...): the record was edited; refusing")
        try:
            return cls(Certified(**{k: content[k] for k in names}), verdict["passed"], tuple(verdict["reasons"]),
                       tuple(verdict["margins"]), tuple(verdict.get("notes") or ()), verdict.get("tracking"),
                       verdict.get("closest_collision"))
        except SafetyError as exc:
            raise SafetyError(f"{where}: {exc}") from None


def record_dir(robot: str, traj_sha256: str, records_dir: str | Path | None = None) -> Path:
    """Where the records of one trajectory on one robot are kept."""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in robot)
    return Path(records_dir or default_records_dir()) / f"{safe}-{traj_sha256[:24]}"


def write_record(record: DryRunRecord, records_dir: str | Path | None = None) -> Path:
    """Write a dry-run record atomically (temporary file + os.replace); returns its path."""
    if not isinstance(record, DryRunRecord):
        raise SafetyError(f"write_record: expected a DryRunRecord, got {type(record).__name__}")
    c = record.content
    path = record_dir(c.robot, c.trajectory_sha256, records_dir) / f"{c.key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(record.as_dict(), indent=1), fsync=True)
    return path


def read_record(path: str | Path) -> DryRunRecord:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SafetyError(f"dry-run record {path}: unreadable ({exc})") from None
    return DryRunRecord.from_dict(data, f"dry-run record {path}")


def require_passing_dry_run(required: Certified, records_dir: str | Path | None = None, *,
                            compare_safety: bool = True) -> DryRunRecord:
    """The passing record certifying exactly ``required``, or :class:`SafetyError` naming, for
    each record stored for this trajectory, what differs (or why the record is invalid)."""
    d = record_dir(required.robot, required.trajectory_sha256, records_dir)
    files = sorted(d.glob("*.json")) if d.is_dir() else []
    who = f"robot '{required.robot}'"
    if not files:
        raise SafetyError(
            f"safety gate: refusing to send the trajectory to {who}: there is no dry-run record for this exact "
            f"trajectory (looked in {d}). Run the dry run first (robident-twin task=dryrun) with the same "
            f"trajectory and configuration; any change to either needs a new dry run.")
    problems = []
    for f in files:
        try:
            rec = read_record(f)
        except SafetyError as exc:
            problems.append(str(exc))
            continue
        diff = differences(rec.content, required, compare_safety=compare_safety)
        if diff:
            problems.append(f"{f.name}: " + "; ".join(diff))
        elif not rec.passed:
            problems.append(f"{f.name}: its dry run FAILED ({'; '.join(rec.reasons) or 'no reason recorded'})")
        else:
            return rec
    raise SafetyError(f"safety gate: refusing to send the trajectory to {who}: no dry-run record certifies this "
                      f"motion: " + " | ".join(problems))


# --------------------------------------------------------------------------- what the design stage injects


MotionCheck = Callable[[JointTrajectory], "list[str]"]


@dataclass(frozen=True)
class SafetyChecks:
    """What the design stage gives a real backend (the HAL never imports it).

    settings: the canonical safety settings a record must have certified; simulate: whether
    the dry run must have simulated the motion; motion_check: the dry run's constraint checks
    (kinematic, torque, Cartesian, collision) on a planned motion, returning one reason per
    violation (empty: safe); certify: run and record the dry run of a trajectory (used only
    for an emulated controller with ``dry_run_if_emulated``); robot_model_sha256: the robot
    the checks were built for (a backend refuses checks made for another robot)."""

    settings: Mapping[str, Any]
    simulate: bool
    motion_check: MotionCheck
    robot_model_sha256: str
    certify: Callable[[JointTrajectory], DryRunRecord] | None = None

    def required(self, trajectory: JointTrajectory, spec, rate_hz: float) -> Certified:
        """What a record must certify for this trajectory on ``spec`` at the controller's rate."""
        c = Certified.of(trajectory, spec, self.settings, torque_check_of_model(spec, bool(self.settings.get("torque"))),
                         self.simulate)
        return dataclasses.replace(c, rate_hz=float(rate_hz))


# --------------------------------------------------------------------------- what a real backend calls


def attach_checks_for(spec, checks: SafetyChecks) -> SafetyChecks:
    """Validate injected checks: a SafetyChecks built for exactly this robot model."""
    if not isinstance(checks, SafetyChecks):
        raise SafetyError(f"safety checks: expected a hal.safety.SafetyChecks, got {type(checks).__name__}")
    if checks.robot_model_sha256 != robot_model_sha256(spec):
        raise SafetyError(f"safety checks: they were built for another model of robot '{spec.name}' (payload, "
                          f"limits or inertials differ); build them for the robot the backend drives")
    return checks


def _raw(safety_cfg: Mapping[str, Any] | None, group: str, key: str, default: Any) -> Any:
    g = (safety_cfg or {}).get(group) if isinstance(safety_cfg, Mapping) else None
    v = g.get(key, default) if isinstance(g, Mapping) else default
    if not isinstance(v, bool):
        raise SafetyError(f"backend.safety.{group}.{key}: expected true or false, got {v!r}")
    return v


def gate_trajectory(backend, trajectory: JointTrajectory, emulated: bool, records_dir=None,
                    safety_cfg: Mapping[str, Any] | None = None, dry_run_if_emulated: bool = False) -> DryRunRecord:
    """The gate of a real backend (``backend.spec``, ``backend.info``, ``backend.checks``):
    the passing record certifying exactly this motion, or SafetyError. A real controller needs
    the injected checks; an emulated one without them compares everything except the safety
    settings (which only the design stage can normalise) and says so in ``backend.gate_notes``."""
    spec, rate = backend.spec, float(backend.info.control_rate_hz)
    checks = getattr(backend, "checks", None)
    backend.gate_notes = []
    if checks is None:
        if not emulated:
            raise SafetyError(
                f"safety gate: refusing to run robot '{spec.name}' on a real controller without the design "
                f"stage's safety checks (the lead-in and lead-out from the measured pose could not be "
                f"re-checked); the pipeline injects them: hal.factory.make_robot(..., checks="
                f"robident_twin.design.dryrun.design_checks(spec, backend.safety)) or backend.attach_checks(...)")
        torque = _raw(safety_cfg, "constraints", "torque", True)
        simulate = _raw(safety_cfg, "dryrun", "simulate", True)
        required = Certified.of(trajectory, spec, {}, torque_check_of_model(spec, torque), simulate)
        required = dataclasses.replace(required, rate_hz=rate)
        backend.gate_notes = [("emulated without injected safety checks: the safety settings were not compared "
                               "and the lead-in / lead-out were checked against the joint limits only")]
        return require_passing_dry_run(required, records_dir, compare_safety=False)
    required = checks.required(trajectory, spec, rate)
    try:
        return require_passing_dry_run(required, records_dir)
    except SafetyError:
        if not (emulated and dry_run_if_emulated and checks.certify is not None):
            raise
    checks.certify(trajectory)  # emulated only: dry-run the trajectory, then gate as always
    return require_passing_dry_run(required, records_dir)


def planned_segments(plan) -> list[tuple[str, JointTrajectory]]:
    """The lead-in (from the measured pose) and the lead-out of a ``hal.sim.playback.RunPlan``."""
    ref = plan.reference
    out = []
    for name, a, b in (("lead-in from the measured pose", 0, plan.lead_in_samples),
                       ("lead-out", plan.stop, ref.n_samples)):
        if b - a >= 2:
            out.append((name, JointTrajectory(ref.t_s[a:b] - ref.t_s[a], ref.q_rad[a:b], ref.dq_rad_s[a:b],
                                              ref.ddq_rad_s2[a:b])))
    return out


def check_planned_motion(backend, plan) -> None:
    """Re-check the lead-in and lead-out actually planned from the measured pose with the dry
    run's constraints (torque, Cartesian, collision, kinematic), before the first command;
    SafetyError naming the segment and the violations."""
    checks = getattr(backend, "checks", None)
    if checks is None:  # only an emulated backend gets here without them (gate_trajectory)
        return
    for name, seg in planned_segments(plan):
        reasons = checks.motion_check(seg)
        if reasons:
            q0 = np.round(plan.reference.q_rad[0], 4).tolist()
            raise SafetyError(f"safety gate: refusing to move robot '{backend.spec.name}': the {name} "
                              f"(start {q0} rad) violates the dry run's constraints: " + "; ".join(reasons)
                              + "; nothing was commanded")
