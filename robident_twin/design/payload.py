"""The payload's own excitation design (task=payload): short, and optimised for the payload's ten
parameters alone (the robot is known), with the existing optimiser
(:func:`robident_twin.design.optimise.optimise_design`, criterion ``cond``) on the payload-only
regressor (:class:`robident_twin.model.payload.PayloadRegressor`).

Stored like the other designs: ``payload.excitation`` when set (relative to ``conf/`` or absolute),
else ``conf/excitation/<robot>_payload.yaml`` of the robot group's own robot when it exists, else the
robot's design folder (``$ROBIDENT_CACHE``, :func:`robident_twin.design.auto.robot_design_dir`),
made on first use. The torque limits are checked with the CAD-like nominal robot carrying the
configured payload (never the twin's truth).
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from robident_twin.design.auto import is_own_robot, robot_design_dir
from robident_twin.design.fourier import FourierTrajectory, load_design, save_design
from robident_twin.errors import ConfigError
from robident_twin.estimation.config import as_nominal
from robident_twin.model.config import as_payload
from robident_twin.model.robot import RobotSpec
from robident_twin.paths import CONF_DIR

CRITERION = "cond(column-normalised, noise-scaled payload-only regressor)"


def design_settings(payload) -> dict[str, Any]:
    """The optimiser's settings of ``payload.design`` (``payload``: the typed payload section, or a
    mapping validated once by :func:`robident_twin.model.config.as_payload`)."""
    d = as_payload(payload).design
    return dict(n_harmonics=int(d.harmonics), base_freq_hz=float(d.base_freq_hz), n_starts=int(d.starts),
                maxiter=int(d.maxiter), n_samples=int(d.samples), seed=int(d.seed))


def optimise_payload_design(spec: RobotSpec, measurement: str, settings: Mapping[str, Any],
                            nominal=None) -> FourierTrajectory:
    """The payload design of ``spec`` (which carries the payload): min cond of the payload regressor
    within the kinematic limits and the CAD-like nominal torques (with the payload) under the limits."""
    from robident_twin.design.constraints import DesignConstraints, torque_limit_model
    from robident_twin.design.optimise import optimise_design
    from robident_twin.model.nominal import cad_nominal
    from robident_twin.model.payload import PayloadRegressor

    reg = PayloadRegressor(spec, measurement)
    c = as_nominal(nominal)  # ``export.nominal`` (NominalConfig; a mapping is validated here)
    cad = cad_nominal(spec.with_payload(True), seed=c.seed, mass_rel=c.mass_rel, com_m=c.com_m,
                      inertia_rel=c.inertia_rel)
    limit = torque_limit_model(cad, measurement="motor_torque" if spec.is_coupled else "joint_torque")
    t0 = time.perf_counter()
    res = optimise_design(spec.with_payload(True), reg, reg.base(), "cond", DesignConstraints(torque=True),
                          torque_fn=limit, **dict(settings))
    return res.trajectory.with_metadata(robot=spec.name, payload_design=True, criterion=CRITERION,
                                        cond=round(float(res.cond), 4),
                                        design_time_s=round(time.perf_counter() - t0, 2))


def _key(spec: RobotSpec, measurement: str, settings: Mapping[str, Any]) -> str:
    pl = spec.payload
    h = hashlib.sha256(repr((np.round(spec.flange_xyz_m, 9).tolist(), np.round(spec.flange_rpy_rad, 9).tolist(),
                             round(pl.mass_kg, 6), measurement, sorted(settings.items()))).encode())
    return h.hexdigest()[:10]


def payload_design(spec: RobotSpec, robot, payload, measurement: str,
                   nominal=None) -> tuple[FourierTrajectory, Path]:
    """(design, its file): the configured, the stored or a new (then stored) payload design.
    ``robot``, ``payload``, ``nominal``: the typed robot group, payload section and
    ``export.nominal`` (a mapping is validated once, by the model / estimation layers' as_*())."""
    payload = as_payload(payload)
    if payload.excitation:
        p = Path(payload.excitation)
        p = p if p.is_absolute() else CONF_DIR / p
        if not p.is_file():
            raise ConfigError(f"payload.excitation: {p} does not exist")
        traj = load_design(p)
        if traj.n_joints != spec.n_joints:
            raise ConfigError(f"payload.excitation: {p} has {traj.n_joints} joints, robot {spec.name} has "
                              f"{spec.n_joints}")
        return traj, p
    settings = design_settings(payload)
    stored = CONF_DIR / "excitation" / f"{spec.name}_payload.yaml"
    if is_own_robot(spec, robot) and stored.is_file():
        traj = load_design(stored)
        if traj.metadata.get("payload_key") == _key(spec, measurement, settings):
            return traj, stored
    path = robot_design_dir(spec) / f"payload_{_key(spec, measurement, settings)}.yaml"
    if path.is_file():
        print(f"design: using the stored payload design of {spec.name}: {path}", flush=True)
        return load_design(path), path
    print(f"design: optimising the payload design of {spec.name} ({settings['n_harmonics']} harmonics at "
          f"{settings['base_freq_hz']:g} Hz, {settings['n_starts']} starts) ...", flush=True)
    traj = optimise_payload_design(spec, measurement, settings, nominal)
    traj = traj.with_metadata(payload_key=_key(spec, measurement, settings))
    save_design(traj, path, {"robot": spec.name, "robot_file": str(spec.source)})
    print(f"design: payload design of {spec.name} stored as {path} (cond {traj.metadata['cond']}, "
          f"{traj.metadata['design_time_s']} s)", flush=True)
    return traj, path
