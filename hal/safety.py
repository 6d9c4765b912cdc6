"""The safety gate every real-controller backend must pass before moving hardware.

A trajectory may only be sent to a real robot when a *passing* dry run
(:mod:`robident_twin.design.dryrun`) exists for exactly that trajectory and robot
configuration. Both are identified by a content hash
(:func:`content_hash`): SHA-256 over the sampled trajectory's raw float64 bytes
(time, position, velocity, acceleration, period) and the canonical JSON of the
robot configuration (:func:`robot_config`: robot name, source-file hash, limits
and the safety settings the dry run checked). Changing one sample, one limit or
one obstacle changes the hash, and the gate refuses.

A real backend's ``run`` starts with::

    from hal.safety import require_passing_dry_run
    require_passing_dry_run(trajectory, robot_config(spec, safety_settings))

Dry-run records are JSON files ``<records_dir>/<hash>.json`` written atomically
by :func:`write_record`; ``records_dir`` defaults to ``$ROBIDENT_DRYRUN_DIR`` or
``outputs/dryrun_records`` in the repository.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from robident_twin.errors import TrajectoryError
from robident_twin.paths import ROOT

from .protocol import JointTrajectory

RECORD_VERSION = 1


class SafetyError(TrajectoryError):
    """A trajectory was refused by the safety gate (no passing dry run for it)."""


def default_records_dir() -> Path:
    """``$ROBIDENT_DRYRUN_DIR`` or ``<repo>/outputs/dryrun_records``."""
    return Path(os.environ.get("ROBIDENT_DRYRUN_DIR", ROOT / "outputs" / "dryrun_records"))


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        return _plain(v.item())
    if isinstance(v, float):
        return float(repr(v)) if np.isfinite(v) else str(v)
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, Path):
        return str(v)
    return v


def robot_config(spec, safety: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The robot configuration a dry run certifies: name, SHA-256 of the robot file, limits
    and the safety settings (Cartesian bounds, obstacles, clearance, torque margin ...)."""
    try:
        file_hash = hashlib.sha256(Path(spec.source).read_bytes()).hexdigest()
    except OSError:
        file_hash = None
    return _plain({
        "robot": spec.name,
        "robot_file_sha256": file_hash,
        "joints": list(spec.joint_names),
        "q_min_rad": spec.q_min_rad, "q_max_rad": spec.q_max_rad,
        "dq_max_rad_s": spec.dq_max_rad_s, "ddq_max_rad_s2": spec.ddq_max_rad_s2,
        "tau_max_Nm": spec.tau_max_Nm,
        "safety": dict(safety or {}),
    })


def content_hash(trajectory: JointTrajectory, config: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the trajectory samples and the robot configuration."""
    if not isinstance(trajectory, JointTrajectory):
        raise SafetyError(f"safety gate: expected a hal.protocol.JointTrajectory, got "
                          f"{type(trajectory).__name__}")
    h = hashlib.sha256()
    h.update(b"robident-twin dry run v1\n")
    for name in ("t_s", "q_rad", "dq_rad_s", "ddq_rad_s2"):
        a = np.ascontiguousarray(getattr(trajectory, name), dtype="<f8")
        h.update(name.encode() + str(a.shape).encode())
        h.update(a.tobytes())
    h.update(repr(None if trajectory.period_s is None else float(trajectory.period_s)).encode())
    h.update(json.dumps(_plain(dict(config)), sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()


def record_path(digest: str, records_dir: str | Path | None = None) -> Path:
    return Path(records_dir or default_records_dir()) / f"{digest}.json"


def write_record(digest: str, record: Mapping[str, Any], records_dir: str | Path | None = None) -> Path:
    """Write a dry-run record atomically (temporary file + os.replace)."""
    path = record_path(digest, records_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {**_plain(dict(record)), "hash": digest, "record_version": RECORD_VERSION}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def require_passing_dry_run(trajectory: JointTrajectory, config: Mapping[str, Any],
                            records_dir: str | Path | None = None) -> dict[str, Any]:
    """Return the passing dry-run record of exactly this trajectory and configuration, or raise
    :class:`SafetyError` (no record, an unreadable or mismatching record, or a failed dry run)."""
    digest = content_hash(trajectory, config)
    path = record_path(digest, records_dir)
    robot = config.get("robot", "?")
    if not path.is_file():
        raise SafetyError(
            f"safety gate: refusing to send the trajectory to robot '{robot}': there is no dry-run "
            f"record for this exact trajectory and robot configuration (hash {digest[:16]}..., "
            f"looked for {path}). Run the dry run first (robident-twin task=dryrun) with the same "
            f"trajectory and configuration; any change to either needs a new dry run.")
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SafetyError(f"safety gate: dry-run record {path} is unreadable ({exc}); refusing") from None
    if record.get("hash") != digest:
        raise SafetyError(f"safety gate: dry-run record {path} is for hash {record.get('hash')!r}, "
                          f"not {digest}; refusing")
    if record.get("passed") is not True:
        reasons = "; ".join(record.get("reasons", [])) or "no reason recorded"
        raise SafetyError(f"safety gate: refusing to send the trajectory to robot '{robot}': its dry "
                          f"run FAILED ({reasons}) [record {path}]")
    return record
