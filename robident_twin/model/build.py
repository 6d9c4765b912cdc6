"""The identification model of a robot: its spec from the config, the regressor options and the
base parameters (the model layer's entry point used by every stage).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.model.config import as_friction, as_model, as_robot
from robident_twin.model.base_params import BaseParameters, compute_base_parameters
from robident_twin.model.regressor import ModelOptions, Regressor
from robident_twin.model.robot import RobotSpec, load_robot

if TYPE_CHECKING:  # annotation only: the model layer imports no stage
    from robident_twin.processing.signal import IdentificationData


@dataclass(frozen=True)
class IdentificationModel:
    spec: RobotSpec
    regressor: Regressor
    base: BaseParameters

    def base_regressor(self, data: IdentificationData) -> np.ndarray:
        return self.base.columns(self.regressor.stack(data.q_rad, data.dq_rad_s, data.ddq_rad_s2,
                                                      payload_attached=getattr(data, "payload_attached", None)))

    def true_base(self) -> np.ndarray:
        return self.base.from_standard(self.regressor.true_parameters())


_ANNOUNCED: set[str] = set()  # imported robot files whose import summary was printed


def resolve_robot(robot_cfg) -> RobotSpec:
    """Load the robot named in the ``robot`` group (:class:`~robident_twin.model.config.RobotConfig`;
    a mapping of its keys is validated once here) or its explicit ``file``, with its payload mounted
    or not as ``robot.payload_attached`` says (null: as in the robot file)."""
    robot = as_robot(robot_cfg)
    path = robot.file
    if robot.overlay and not path:
        raise ConfigError(f"robot.overlay: {robot.overlay} applies to a URDF or MJCF given as robot.file; "
                          "robot.file is not set")
    spec = load_robot(path if path else robot.name, robot.overlay if path else None)
    if spec.imported is not None and str(spec.source) not in _ANNOUNCED:
        from robident_twin.model.importer import describe_import

        _ANNOUNCED.add(str(spec.source))
        print(describe_import(spec), flush=True)
    if robot.payload_attached is not None:
        spec = spec.with_payload(robot.payload_attached)
    return spec


def twin_spec(spec: RobotSpec, friction_cfg) -> RobotSpec:
    """The robot the simulator runs: the nominal robot, or with the friction variant the
    ``friction`` config group selects (a model mismatch: the identification model and
    the ground truth it is compared with stay the nominal viscous + Coulomb)."""
    from robident_twin.model.robot import with_friction_variant

    friction = as_friction(friction_cfg)
    if friction.kind == "nominal":
        return spec
    return with_friction_variant(spec, friction.kind, **{f.name: getattr(friction, f.name)
                                                         for f in dataclasses.fields(friction) if f.name != "kind"})


def model_options(model_cfg, robot_cfg=None) -> ModelOptions:
    """Model options from the ``model`` group; ``model.measurement: null`` takes the robot's default
    (``robot.measurement``: joint_torque where it has torque sensors, else motor_torque)."""
    m = as_model(model_cfg)
    measurement = m.measurement or (as_robot(robot_cfg).measurement if robot_cfg is not None else None) or "joint_torque"
    return ModelOptions(measurement=measurement, drive_inertia=m.drive_inertia, viscous=m.viscous, coulomb=m.coulomb,
                        offsets=m.offsets, payload=m.payload)


def build_model(spec: RobotSpec, options: ModelOptions, n_samples: int = 300, seed: int = 0) -> IdentificationModel:
    reg = Regressor(spec, options)
    return IdentificationModel(spec, reg, compute_base_parameters(reg, n_samples=n_samples, seed=seed))


def channel_names(spec: RobotSpec, measurement: str) -> list[str]:
    """Names of the torque channels of a measurement model (``A1`` or ``A1 joint``/``A1 motor``)."""
    if measurement == "both":
        return [f"{n} joint" for n in spec.joint_names] + [f"{n} motor" for n in spec.joint_names]
    return list(spec.joint_names)
