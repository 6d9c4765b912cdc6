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
