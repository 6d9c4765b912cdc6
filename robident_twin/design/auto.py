"""The stored designs of the robot in use, and the automatic designs of a new robot (issue 16).

A robot of the project (``robot=iiwa14``) has its excitation and validation designs in
``conf/excitation/`` (``robot.excitation``, ``robot.validation``). A robot brought from a URDF,
an MJCF or another robot file (``robot.file=...``) has none there, and the configured designs
belong to the robot group's robot: they are never used for it. Its designs live in a per-robot
folder (:func:`robot_design_dir`: ``$ROBIDENT_CACHE`` or ``~/.cache/robident_twin``, then
``robots/<name>-<hash of the robot file and overlay>``, so another robot's designs are never
overwritten and an edited file gets new designs) and are made on first use with the existing
optimiser (:func:`robident_twin.design.optimise.optimise_design`) within the robot's limits,
kept quick (:data:`AUTO_EXCITATION`, :data:`AUTO_VALIDATION`).

A design's nominal torques (the torque constraint) never come from a twin's truth:
:func:`design_nominal` gives the CAD-like nominal of a built-in robot (its robot file is the
twin's truth) and the user's own file for a user's robot (that file is the user's nominal).
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

from robident_twin.design.fourier import FourierTrajectory, load_design, save_design
from robident_twin.errors import ConfigError
from robident_twin.model.config import as_robot
from robident_twin.model.robot import RobotSpec

#: optimiser settings of the automatic designs: few harmonics, starts and iterations (a 7-joint
#: arm takes ~6 s of CPU per design); the validation design is a different, lighter optimum
AUTO_EXCITATION = dict(n_harmonics=3, base_freq_hz=0.1, n_starts=2, seed=0, maxiter=60, n_samples=40)
AUTO_VALIDATION = dict(n_harmonics=3, base_freq_hz=0.1, n_starts=1, seed=1, maxiter=30, n_samples=40)
KINDS = ("excitation", "validation")


def is_own_robot(spec: RobotSpec, robot_cfg) -> bool:
    """True when the robot in use is the robot group's own (its conf/excitation designs apply)."""
    return spec.imported is None and spec.name == as_robot(robot_cfg).name


def design_nominal(spec: RobotSpec, robot_cfg,
                   nominal_cfg=None) -> RobotSpec:
    """The robot whose torques a design's torque constraint bounds: the CAD-like nominal
    (:func:`robident_twin.estimation.postprocess.nominal_model`, ``export.nominal``, the same
    nominal the estimators' priors come from) for the robot group's own robot, whose file is the
    twin's truth; the robot itself for a user's robot (their file is their nominal)."""
    if is_own_robot(spec, robot_cfg):
        from robident_twin.estimation.postprocess import nominal_model

        return nominal_model(spec, nominal_cfg)
    return spec


def cache_root() -> Path:
    from robident_twin.paths import cache_dir

    return cache_dir()


def robot_design_dir(spec: RobotSpec) -> Path:
    """The per-robot design folder: name plus a hash of the robot file (and overlay) contents."""
    h = hashlib.sha256()
    for p in (spec.source, spec.imported.overlay_path if spec.imported else None):
        if p is not None and Path(p).is_file():
            h.update(Path(p).read_bytes())
    h.update(repr((spec.payload_attached, spec.n_joints)).encode())
    return cache_root() / "robots" / f"{spec.name}-{h.hexdigest()[:12]}"


def _design_for_spec(path: Path, spec: RobotSpec) -> FourierTrajectory | None:
    if not path.is_file():
        return None
    traj = load_design(path)
    if traj.n_joints != spec.n_joints or traj.metadata.get("robot") not in (None, spec.name):
        raise ConfigError(f"{path}: the design is for robot {traj.metadata.get('robot')!r} with {traj.n_joints} "
                          f"joints, not for {spec.name} ({spec.n_joints} joints); delete it to redesign")
    return traj


def auto_design(spec: RobotSpec, kind: str, regressor=None, base=None,
                nominal: RobotSpec | None = None) -> FourierTrajectory:
    """Optimise the ``excitation`` or ``validation`` design of a robot (quick settings, the
    robot's limits, the default constraints; torques, where a constraint needs them, of
    ``nominal``, by default the robot's own file: :func:`design_nominal`)."""
    from robident_twin.design.constraints import DesignConstraints
    from robident_twin.design.optimise import optimise_design

    if regressor is None or base is None:
        from robident_twin.model.build import build_model
        from robident_twin.model.regressor import ModelOptions

        measurement = "joint_torque" if spec.has_joint_torque_sensors else "motor_torque"
        model = build_model(spec, ModelOptions(measurement=measurement), n_samples=150)
        regressor, base = model.regressor, model.base
    kw = AUTO_EXCITATION if kind == "excitation" else AUTO_VALIDATION
    t0 = time.perf_counter()
    res = optimise_design(spec, regressor, base, "cond", DesignConstraints(), nominal=nominal, **kw)
    return res.trajectory.with_metadata(robot=spec.name, auto_design=kind,
                                        design_time_s=round(time.perf_counter() - t0, 2))


def robot_designs(spec: RobotSpec, robot_cfg, regressor=None,
                  base=None) -> tuple[FourierTrajectory, FourierTrajectory]:
    """(excitation, validation) of the robot in use: the configured designs for the robot
    group's own robot, else the per-robot designs, made and stored on first use (and said so)."""
    from robident_twin.design.stored import resolve_design

    if is_own_robot(spec, robot_cfg):
        robot = as_robot(robot_cfg)
        return resolve_design(robot.excitation, spec), resolve_design(robot.validation, spec)
    folder = robot_design_dir(spec)
    out = []
    for kind in KINDS:
        path = folder / f"{kind}.yaml"
        traj = _design_for_spec(path, spec)
        if traj is None:
            print(f"design: robot {spec.name} has no {kind} design yet; optimising one "
                  f"({AUTO_EXCITATION['n_harmonics'] if kind == 'excitation' else AUTO_VALIDATION['n_harmonics']} "
                  f"harmonics, within its limits) ...", flush=True)
            traj = auto_design(spec, kind, regressor, base, design_nominal(spec, robot_cfg))
            save_design(traj, path, {"robot": spec.name, "robot_file": str(spec.source)})
            print(f"design: {kind} design of {spec.name} stored as {path} "
                  f"({traj.metadata.get('design_time_s')} s)", flush=True)
        else:
            print(f"design: using the stored {kind} design of {spec.name}: {path}", flush=True)
        out.append(traj)
    return out[0], out[1]


def install_target(spec: RobotSpec, robot_cfg, conf_dir: Path) -> Path:
    """Where ``design.install=true`` may write the excitation design: the configured file for the
    robot group's own robot (refused if that file holds another robot's design), else the
    robot's own design folder."""
    if not is_own_robot(spec, robot_cfg):
        return robot_design_dir(spec) / "excitation.yaml"
    target = conf_dir / as_robot(robot_cfg).excitation
    if target.is_file():
        other = load_design(target).metadata.get("robot")
        if other not in (None, spec.name):
            raise ConfigError(f"design.install: {target} holds the design of robot {other!r}, not of "
                              f"{spec.name}; it is not overwritten")
    return target


def excitation_path(spec: RobotSpec, robot_cfg) -> str | Path:
    """The excitation design a job of the robot in use runs: ``robot.excitation`` for the robot
    group's own robot, else the robot's own (automatic, made on first use) design."""
    if is_own_robot(spec, robot_cfg):
        return as_robot(robot_cfg).excitation
    robot_designs(spec, robot_cfg)
    return robot_design_dir(spec) / "excitation.yaml"
