"""One entry point per direction: load any supported recording, save a recording or a trajectory.

Formats (``format=None`` detects them from the path):

=========  ==========================================  ===========================
format     path                                        direction
=========  ==========================================  ===========================
``csv``    ``*.csv``                                   recording, trajectory
``npz``    ``*.npz`` (the run directory's recordings)  recording
``mat``    ``*.mat`` (CLOOS dataset or generic)        recording
``mcap``   ``*.mcap``, ``*.db3`` or a rosbag2 folder   recording, trajectory
``krc4``   ``*.dat`` / ``*.r64`` of a KRC4 trace       recording (import only)
``krl``    ``*.src`` (+ ``.dat``)                      trajectory (export only)
=========  ==========================================  ===========================
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from robident_twin.errors import RobidentError

from ..protocol import JointTrajectory, Recording
from .common import (FileFormatError, atomic_path, json_metadata, make_recording, recording_valid,
                     refuse_near_misses)

FORMATS = ("csv", "npz", "mat", "mcap", "krc4", "krl")
#: The arrays of the project's .npz recording (others are ignored, unless a near miss of these).
NPZ_ARRAYS = ("t_s", "q_rad", "tau_motor_Nm", "tau_joint_Nm", "q_cmd_rad", "valid", "sample_rate_hz", "period_samples",
              "n_periods", "metadata")


def detect_format(path: str | Path) -> str:
    p = Path(path)
    if p.is_dir():
        if (p / "metadata.yaml").is_file() or list(p.glob("*.mcap")) or list(p.glob("*.db3")):
            return "mcap"
        raise FileFormatError(f"{p}: a folder that is not a rosbag2 recording (no metadata.yaml)")
    suffix = p.suffix.lower()
    table = {".csv": "csv", ".npz": "npz", ".mat": "mat", ".mcap": "mcap", ".db3": "mcap", ".dat": "krc4",
             ".r64": "krc4", ".src": "krl"}
    if suffix not in table:
        raise FileFormatError(f"{p}: unknown file type '{suffix}'; expected one of {', '.join(sorted(table))} "
                              "(or pass format=)")
    return table[suffix]


def read_npz(path: str | Path) -> Recording:
    """A recording written by :func:`hal.files.npz_recording.save_recording` or :func:`write_npz`."""
    path = Path(path)
    if not path.is_file():
        raise FileFormatError(f"{path}: file not found")
    try:
        z = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise FileFormatError(f"{path}: not a readable .npz file: {exc}") from exc
    with z:
        for key in ("t_s", "q_rad", "tau_motor_Nm"):
            if key not in z.files:
                raise FileFormatError(f"{path}: missing array {key} (file has {sorted(z.files)})")
        arrays = {}
        for key in z.files:
            try:
                arrays[key] = z[key]
            except ValueError as exc:  # object arrays (pickles) are refused: they could run code
                raise FileFormatError(f"{path}: array {key}: not a plain numeric array ({exc}); expected "
                                      "numbers (object arrays are not read)") from None
            except Exception as exc:  # a damaged member of the zip archive
                raise FileFormatError(f"{path}: array {key}: unreadable ({type(exc).__name__}: {exc})") from None
    refuse_near_misses(path, [k for k in arrays if k not in NPZ_ARRAYS], NPZ_ARRAYS, "array")
    md: dict = {}
    if "metadata" in arrays:
        try:
            md = json.loads(str(arrays["metadata"]))
        except json.JSONDecodeError as exc:
            raise FileFormatError(f"{path}: array metadata: expected a JSON object, got {exc}") from None
        if not isinstance(md, dict):
            raise FileFormatError(f"{path}: array metadata: expected a JSON object, got {type(md).__name__}")
    md.update({"source": str(path), "format": "npz", "units": {"t": "s", "q": "rad", "tau": "Nm"}})

    def scalar(key):
        if key not in arrays:
            return None
        a = arrays[key]
        if a.dtype.kind not in "biuf" or a.size != 1:
            raise FileFormatError(f"{path}: array {key}: expected one number, got {a.dtype} of shape {a.shape}")
        return a.reshape(-1)[0].item()

    ps, npd = scalar("period_samples"), scalar("n_periods")
    return make_recording(
        path, t_s=arrays["t_s"], q_rad=arrays["q_rad"], tau_motor_Nm=arrays["tau_motor_Nm"],
        tau_joint_Nm=arrays.get("tau_joint_Nm"),
        q_cmd_rad=arrays["q_cmd_rad"] if "q_cmd_rad" in arrays and md.get("q_cmd_recorded", True) else None,
        sample_rate_hz=scalar("sample_rate_hz"),
        period_samples=None if ps == -1 else ps, n_periods=None if npd == -1 else npd, metadata=md,
        valid=arrays.get("valid"))


def write_npz(rec: Recording, path: str | Path) -> Path:
    """The project's .npz recording (as the run directory's ``recording_*.npz``); atomic."""
    arrays = dict(rec.channels())
    valid = recording_valid(rec)
    if valid is not None:
        arrays["valid"] = valid
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays, sample_rate_hz=rec.sample_rate_hz,
                     period_samples=-1 if rec.period_samples is None else rec.period_samples,
                     n_periods=-1 if rec.n_periods is None else rec.n_periods,
                     metadata=json.dumps(json_metadata(rec.metadata)))
    return Path(path)


def load_recording(path: str | Path, format: str | None = None, **options: Any) -> Recording:
    """Import a recording; ``options`` go to the format's reader (e.g. ``topic=`` for MCAP,
    ``variables=`` for .mat, ``sample_time_s=`` for a KRC4 trace)."""
    fmt = format or detect_format(path)
    if fmt == "csv":
        from .csv_io import read_recording_csv as reader
    elif fmt == "npz":
        reader = read_npz
    elif fmt == "mat":
        from .mat_io import read_mat as reader
    elif fmt == "mcap":
        from .ros_io import read_recording_mcap as reader
    elif fmt == "krc4":
        from .kuka_trace import read_kuka_trace as reader
    else:
        raise FileFormatError(f"{path}: cannot import format '{fmt}'; importable: csv, npz, mat, mcap, krc4")
    import inspect

    try:
        inspect.signature(reader).bind(path, **options)
    except TypeError as exc:
        raise FileFormatError(f"{path}: bad option for the {fmt} importer: {exc}") from exc
    try:
        return reader(path, **options)
    except RobidentError:
        raise
    except Exception as exc:  # a malformation no check above names: still a named refusal, never a traceback
        raise FileFormatError(f"{path}: not a readable {fmt} recording ({type(exc).__name__}: {exc}); expected "
                              f"the {fmt} format described in hal/files/") from exc


def save_recording(rec: Recording, path: str | Path, format: str | None = None, **options: Any) -> Path:
    """Export a recording as csv, npz, mat or mcap (atomic)."""
    fmt = format or detect_format(path)
    if fmt == "csv":
        from .csv_io import write_recording_csv

        return write_recording_csv(rec, path)
    if fmt == "npz":
        return write_npz(rec, path)
    if fmt == "mat":
        from .mat_io import write_mat

        return write_mat(rec, path)
    if fmt == "mcap":
        from .ros_io import write_recording_mcap

        return write_recording_mcap(rec, path, **options)
    raise FileFormatError(f"{path}: cannot export a recording as '{fmt}'; exportable: csv, npz, mat, mcap")


def save_trajectory(traj: JointTrajectory, path: str | Path, format: str | None = None, **options: Any) -> Path:
    """Export a trajectory as csv, mcap (trajectory_msgs/JointTrajectory) or krl (atomic)."""
    fmt = format or detect_format(path)
    if fmt == "csv":
        from .csv_io import write_trajectory_csv

        return write_trajectory_csv(traj, path)
    if fmt == "mcap":
        from .ros_io import write_trajectory_mcap

        return write_trajectory_mcap(traj, path, **options)
    if fmt == "krl":
        from .krl import write_krl

        return write_krl(traj, path, **options)
    raise FileFormatError(f"{path}: cannot export a trajectory as '{fmt}'; exportable: csv, mcap, krl")


def summary(rec: Recording) -> dict[str, Any]:
    """Channels, duration, rate and gaps of a recording (for ``task=import``)."""
    from .common import gaps

    chans = {k: list(v.shape) for k, v in rec.channels().items()}
    g = gaps(rec.t_s)
    valid = recording_valid(rec)
    return {"source": rec.metadata.get("source"), "format": rec.metadata.get("format"),
            "n_samples": int(rec.t_s.size), "n_joints": rec.n_joints, "channels": chans,
            "duration_s": float(rec.t_s[-1] - rec.t_s[0]), "sample_rate_hz": float(rec.sample_rate_hz),
            "period_samples": rec.period_samples, "n_periods": rec.n_periods,
            "q_cmd_recorded": bool(rec.metadata.get("q_cmd_recorded", True)),
            "gaps": len(g), "largest_gap_s": max((d for _, d in g), default=0.0),
            "first_gap_sample": g[0][0] if g else None,
            "invalid_samples": None if valid is None else int((~valid).sum())}
