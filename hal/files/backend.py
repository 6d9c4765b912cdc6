"""The ``file`` HAL backend: recorded files played back as if a robot had just run them.

    robident-twin backend=file backend.path=/data/rec_excitation.csv backend.validation_path=/data/rec_val.csv

``run(trajectory, periods, transient_periods)`` returns the recording, of the configured files,
that was made with this trajectory, so the identification pipeline runs unchanged on recorded data:

- which file: when the files hold the commanded position (``q_cmd``), the one whose first
  period of commands equals the reference to ``command_tol_rad``; otherwise the files in the
  order given (``path`` for the first call - the excitation - then ``validation_path``);
- checks: the file's joint count (and joint names, where it has them) equal the robot's; the
  file's sample rate equals the reference's; where the file says so (``period_samples``) the
  period equals the trajectory's; the file holds at least ``periods`` whole periods - the last
  ``periods`` are returned (the earlier ones play the part of the transient, which a file
  cannot replay: ``transient_periods`` is only recorded in the metadata).

The control rate reported in ``info`` is the files' sample rate (the pipeline samples the
reference at it). ``info.is_simulation`` is False: a file has no ground truth.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.model.robot import RobotSpec

from ..protocol import JointTrajectory, Recording, RobotInfo
from .common import FileFormatError
from .io import load_recording

GENERIC_NAMES = "joint"


def _slice(rec: Recording, start: int, stop: int, **changes) -> Recording:
    """A copy of rec restricted to samples [start, stop) (every per-sample array field sliced,
    including an optional ``valid`` mask)."""
    N = rec.t_s.shape[0]
    kw = {}
    for f in dataclasses.fields(rec):
        v = getattr(rec, f.name)
        if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == N:
            kw[f.name] = v[start:stop]
    kw["t_s"] = rec.t_s[start:stop] - rec.t_s[start]
    md = {k: (v[start:stop] if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == N else v)
          for k, v in rec.metadata.items()}
    md.update(changes.pop("metadata", {}))
    return dataclasses.replace(rec, **kw, metadata=md, **changes)


class FileRobot:
    """A Robot whose runs are recorded files (see the module docstring)."""

    def __init__(self, spec: RobotSpec, path: str, validation_path: str | None = None, format: str | None = None,
                 options: Mapping[str, Any] | None = None, check_command: bool = True,
                 command_tol_rad: float = 1e-6):
        if not path:
            raise ConfigError("backend.path: the file backend needs a recording file (backend.path=/path/rec.csv)")
        self.spec = spec
        self.paths = [Path(p) for p in (path, validation_path) if p]
        self.recordings = [load_recording(p, format, **dict(options or {})) for p in self.paths]
        self.check_command, self.tol = bool(check_command), float(command_tol_rad)
        self.calls = 0
        rate = self.recordings[0].sample_rate_hz
        for p, rec in zip(self.paths, self.recordings):
            if rec.n_joints != spec.n_joints:
                raise FileFormatError(f"{p}: {rec.n_joints} joints, robot {spec.name} has {spec.n_joints} "
                                      f"({', '.join(spec.joint_names)})")
            names = rec.metadata.get("joint_names")
            if names and not all(str(n).startswith(GENERIC_NAMES) and str(n)[5:].isdigit() for n in names) \
                    and list(names) != list(spec.joint_names):
                raise FileFormatError(f"{p}: joints {list(names)}, robot {spec.name} has {list(spec.joint_names)}")
            robot = rec.metadata.get("robot")
            if robot and robot != spec.name:
                raise FileFormatError(f"{p}: recorded on robot {robot!r}, the configured robot is {spec.name!r}")
            if abs(rec.sample_rate_hz - rate) > 1e-9 * rate:
                raise FileFormatError(f"{p}: sample rate {rec.sample_rate_hz} Hz, {self.paths[0]} has {rate} Hz")
        self.info = RobotInfo(
            name=spec.name, backend="file", joint_names=tuple(spec.joint_names), control_rate_hz=float(rate),
            is_simulation=False, q_min_rad=spec.q_min_rad, q_max_rad=spec.q_max_rad,
            dq_max_rad_s=spec.dq_max_rad_s, ddq_max_rad_s2=spec.ddq_max_rad_s2, tau_max_Nm=spec.tau_max_Nm)

    def move_to(self, q_rad: np.ndarray) -> None:
        """Nothing moves: a file backend only plays recordings back."""

    def close(self) -> None:
        self.recordings = []

    def _command_error(self, rec: Recording, trajectory: JointTrajectory) -> float | None:
        """Largest |q_cmd - reference| over the file's first period (None: the file has no commands)."""
        if not rec.metadata.get("q_cmd_recorded", True):
            return None
        P = trajectory.n_samples
        if rec.q_cmd_rad.shape[0] < P:
            return float("inf")
        return float(np.max(np.abs(rec.q_cmd_rad[:P] - trajectory.q_rad)))

    def _pick(self, trajectory: JointTrajectory) -> tuple[Path, Recording, float | None]:
        if self.check_command:
            errs = [self._command_error(r, trajectory) for r in self.recordings]
            if any(e is not None for e in errs):
                for p, r, e in zip(self.paths, self.recordings, errs):
                    if e is not None and e <= self.tol:
                        return p, r, e
                k = min(self.calls, len(self.paths) - 1)
                if errs[k] is None and trajectory.period_s is None:  # a non-periodic file without commands
                    return self.paths[k], self.recordings[k], None  # (e.g. measured positions only): in order
                detail = "; ".join(f"{p}: max |q_cmd - reference| = {e:.3g} rad" if e is not None else
                                   f"{p}: no q_cmd" for p, e in zip(self.paths, errs))
                hint = ("" if len(self.paths) > 1 else " - give the validation trajectory's recording as "
                        "backend.validation_path, or backend.check_command=false to use the files in order")
                raise FileFormatError(f"no recording was made with this reference trajectory (tolerance "
                                      f"{self.tol:g} rad): {detail}{hint}")
        k = min(self.calls, len(self.paths) - 1)
        return self.paths[k], self.recordings[k], None

    def run(self, trajectory: JointTrajectory, periods: int = 1, transient_periods: int = 0) -> Recording:
        path, rec, cmd_err = self._pick(trajectory)
        self.calls += 1
        N = rec.t_s.shape[0]
        ref_rate = trajectory.rate_hz
        if abs(ref_rate - rec.sample_rate_hz) > 1e-6 * rec.sample_rate_hz:
            raise FileFormatError(f"{path}: sample rate {rec.sample_rate_hz:.9g} Hz, the reference is sampled at "
                                  f"{ref_rate:.9g} Hz")
        md = {"file_backend": {"file": str(path), "transient_periods_requested": int(transient_periods),
                               "command_error_rad": cmd_err, "matched_by": "command" if cmd_err is not None
                               else "order"}, "source": str(path)}
        if trajectory.period_s is None:
            return _slice(rec, 0, N, metadata=md)
        P = trajectory.n_samples
        if rec.period_samples is not None and rec.period_samples != P:
            raise FileFormatError(f"{path}: the file's period is {rec.period_samples} samples "
                                  f"({rec.period_samples / rec.sample_rate_hz:.6g} s), the trajectory's is {P} samples "
                                  f"({trajectory.period_s:.6g} s)")
        if rec.period_samples is None and N % P:
            raise FileFormatError(f"{path}: {N} samples is not a whole number of periods of {P} samples "
                                  f"(the trajectory's period {trajectory.period_s:.6g} s at {ref_rate:.9g} Hz)")
        M = N // P
        if M < periods:
            raise FileFormatError(f"{path}: {M} recorded period(s), acquisition.periods asks for {periods}")
        start = (M - periods) * P
        md["file_backend"]["periods_in_file"] = M
        return _slice(rec, start, N, period_samples=P, n_periods=int(periods), metadata=md)


def make_file_robot(spec: RobotSpec, backend_cfg) -> FileRobot:
    """A FileRobot from the ``backend`` group (conf/backend/file.yaml; :class:`hal.config.FileBackend`,
    or a mapping validated as one)."""
    from hal.config import FileBackend, coerce

    b = coerce(FileBackend, backend_cfg, "backend")
    return FileRobot(spec, b.path, b.validation_path, b.format, b.options, b.check_command, b.command_tol_rad)
