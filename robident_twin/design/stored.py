"""Stored excitation designs: resolve a design file for a robot and sample it as a HAL reference.
"""
from __future__ import annotations

import os
from pathlib import Path

from robident_twin.design.fourier import FourierTrajectory, load_design
from robident_twin.errors import ConfigError
from robident_twin.model.robot import RobotSpec
from robident_twin.paths import CONF_DIR


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


def recorded_reference(path, format=None, options=None, cutoff_hz: float = 10.0, raw: bool = False):
    """A recorded trajectory file as a non-periodic HAL reference (``trajectory=recorded``): its
    commanded positions (its measured ones when it has no commands), low-passed by a zero-phase
    Butterworth filter (``cutoff_hz``) and differentiated by central differences; ``raw``: the
    positions as recorded (what the file backend matches its files by)."""
    from hal.files.io import load_recording
    from hal.protocol import JointTrajectory
    from robident_twin.processing.signal import butter_filtfilt, central_differences

    rec = load_recording(path, format, **dict(options or {}))
    q = rec.q_cmd_rad if rec.metadata.get("q_cmd_recorded", True) else rec.q_rad
    fs = float(rec.sample_rate_hz)
    qf = q if raw else butter_filtfilt(q, fs, min(cutoff_hz, 0.4 * fs), 4)
    dq = central_differences(qf, fs)
    return JointTrajectory(rec.t_s - rec.t_s[0], qf, dq, central_differences(dq, fs), period_s=None)


def trajectory_references(spec: RobotSpec, traj_cfg, backend_cfg, rate_hz: float):
    """The (identification, validation) references of a ``trajectory`` group other than
    ``excitation`` (conf/trajectory/) and the process trajectories (None for a recorded file):
    pick_and_place and square (ICMA 2020, :mod:`robident_twin.design.process_trajectories`,
    periodic: one repetition each) or a recorded file (non-periodic; its path defaults to
    ``backend.path`` / ``backend.validation_path``)."""
    from robident_twin.design import process_trajectories as pt

    from hal.config import as_backend
    from robident_twin.design.config import as_trajectory

    traj, backend = as_trajectory(traj_cfg), as_backend(backend_cfg)  # typed (a mapping is validated)
    if traj.kind == "recorded":
        path = traj.path or getattr(backend, "path", None)
        if not path:
            raise ConfigError("trajectory.path: trajectory=recorded needs a recording file (trajectory.path=..., "
                              "or backend=file backend.path=...)")
        vpath = traj.validation_path or getattr(backend, "validation_path", None) or path
        raw = backend.name == "file"
        return (recorded_reference(path, traj.format, traj.options, raw=raw),
                recorded_reference(vpath, traj.format, traj.options, raw=raw), None)
    proc = pt.from_config(spec, traj, rate_hz)
    val = pt.from_config(spec, traj, rate_hz, validation=True)
    return proc.trajectory, val.trajectory, (proc, val)
