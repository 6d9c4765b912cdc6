"""CLI tasks of the file HAL: ``task=import`` and ``task=export_trajectory`` (config section ``files:``).

    robident-twin task=import files.input=/data/trace_KRCIpo.dat files.options.sample_time_s=0.004
    robident-twin task=import files.input=/data/run.mcap files.output_format=npz
    robident-twin task=export_trajectory files.output_format=krl robot=kuka_ir361
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from robident_twin.config.schema import FilesConfig
from robident_twin.errors import ConfigError
from robident_twin.typed import coerce

from hal.protocol import RobotInfo, check_reference_limits
from hal.files.common import write_text_atomic
from hal.files.io import load_recording, save_recording, save_trajectory, summary

EXT = {"csv": ".csv", "npz": ".npz", "mat": ".mat", "mcap": ".mcap", "krl": ".src"}


def as_files(files: Any) -> FilesConfig:
    """The typed ``files`` section (None: the defaults); a mapping is validated once, errors name ``files.<key>``."""
    if isinstance(files, FilesConfig):
        return files
    return coerce(FilesConfig, {} if files is None else files, "files")


def format_summary(s: dict[str, Any]) -> str:
    chans = ", ".join(f"{k} {'x'.join(map(str, v))}" for k, v in s["channels"].items())
    lines = [f"source:       {s['source']} ({s['format']})",
             f"channels:     {chans}" + ("" if s["q_cmd_recorded"] else " (q_cmd = q: no command recorded)"),
             f"size:         {s['n_samples']} samples, {s['n_joints']} joints",
             f"duration:     {s['duration_s']:.6g} s at {s['sample_rate_hz']:.6g} Hz",
             f"periods:      {s['n_periods']} x {s['period_samples']} samples" if s["period_samples"] else
             "periods:      not a periodic recording (no period information)",
             f"gaps:         {s['gaps']}" + (f" (first at sample {s['first_gap_sample']}, largest "
                                            f"{s['largest_gap_s']:.6g} s)" if s["gaps"] else "")]
    if s.get("invalid_samples") is not None:
        lines.append(f"invalid:      {s['invalid_samples']} samples flagged")
    return "\n".join(lines)


def run_import(run, out: Path) -> dict[str, Any]:
    """``task=import``: :func:`import_recording` of the run's ``files`` section (``run``: the RunConfig)."""
    return import_recording(run.files, out)


def import_recording(files: FilesConfig | Any, out: Path) -> dict[str, Any]:
    """Convert ``files.input`` to the project's CSV / NPZ (``files.output_format``) and print a summary."""
    f = as_files(files)
    if not f.input:
        raise ConfigError("files.input: give the file to import (files.input=/path/recording.mcap)")
    rec = load_recording(f.input, f.input_format, **f.options)
    fmt = f.output_format or "csv"
    if fmt not in ("csv", "npz", "mat", "mcap"):
        raise ConfigError(f"files.output_format: '{fmt}' is not a recording format; expected csv, npz, mat or mcap")
    target = Path(f.output) if f.output else Path(out) / (Path(f.input).stem + EXT[fmt])
    save_recording(rec, target, fmt)
    s = summary(rec)
    s["output"] = str(target)
    write_text_atomic(Path(out) / "import_summary.json", json.dumps(s, indent=2) + "\n")
    print(format_summary(s))
    print(f"written to {target}")
    return s


def run_export_trajectory(run, out: Path) -> Path:
    """Write the robot's excitation (or validation) trajectory as CSV, ROS MCAP or KRL (``run``: the
    validated RunConfig; its ``robot``, ``backend.control_rate_hz`` and ``files``)."""
    from robident_twin.design.stored import reference, resolve_design
    from robident_twin.model.build import resolve_robot

    f = as_files(run.files)
    spec = resolve_robot(run.robot)
    which = f.trajectory or "excitation"
    if which not in ("excitation", "validation"):
        raise ConfigError(f"files.trajectory: expected excitation or validation, got '{which}'")
    design = resolve_design(getattr(run.robot, which), spec)
    rate = float(f.rate_hz or getattr(run.backend, "control_rate_hz", None) or 1000.0)  # RSI, file: none
    ref = reference(design, rate)
    info = RobotInfo(name=spec.name, backend="file", joint_names=tuple(spec.joint_names), control_rate_hz=rate,
                     is_simulation=False, q_min_rad=spec.q_min_rad, q_max_rad=spec.q_max_rad,
                     dq_max_rad_s=spec.dq_max_rad_s, ddq_max_rad_s2=spec.ddq_max_rad_s2, tau_max_Nm=spec.tau_max_Nm)
    check_reference_limits(ref, info, what=f"{which} trajectory of {spec.name}")
    fmt = f.output_format or "csv"
    if fmt not in ("csv", "mcap", "krl"):
        raise ConfigError(f"files.output_format: '{fmt}' is not a trajectory format; expected csv, mcap or krl")
    target = Path(f.output) if f.output else Path(out) / f"{spec.name}_{which}{EXT[fmt]}"
    opts: dict[str, Any] = {}
    if fmt == "mcap":
        opts["joint_names"] = list(spec.joint_names)
    if fmt == "krl":
        opts.update(vars(f.krl))
        if target.stem[:1].isdigit() or not target.stem.replace("_", "").isalnum():
            opts.setdefault("name", "robident_excitation")
    path = save_trajectory(ref, target, fmt, **opts)
    print(f"{which} trajectory of {spec.name}: {ref.n_samples} samples at {rate:g} Hz, period "
          f"{ref.period_s} s, written as {fmt} to {path}")
    return path
