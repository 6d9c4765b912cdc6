"""The identification model of a robot: its spec from the config, the regressor options and the
base parameters (the model layer's entry point used by every stage).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from robident_twin.errors import ConfigError
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


def resolve_robot(robot_cfg: Mapping[str, Any]) -> RobotSpec:
    """Load the robot named in the config (or its explicit ``file``), with its payload
    mounted or not as ``robot.payload_attached`` says (null: as in the robot file)."""
    path = robot_cfg.get("file")
    if robot_cfg.get("overlay") and not path:
        raise ConfigError(f"robot.overlay: {robot_cfg['overlay']} applies to a URDF or MJCF given as robot.file; "
                          "robot.file is not set")
    spec = load_robot(path if path else robot_cfg.get("name"), robot_cfg.get("overlay") if path else None)
    if spec.imported is not None and str(spec.source) not in _ANNOUNCED:
        from robident_twin.model.importer import describe_import

        _ANNOUNCED.add(str(spec.source))
        print(describe_import(spec), flush=True)
    attached = robot_cfg.get("payload_attached")
    if attached is not None:
        if not isinstance(attached, bool):
            raise ConfigError(f"robot.payload_attached: expected true, false or null, got {attached!r}")
        spec = spec.with_payload(attached)
    return spec


def twin_spec(spec: RobotSpec, friction_cfg: Mapping[str, Any] | None) -> RobotSpec:
    """The robot the simulator runs: the nominal robot, or with the friction variant the
    ``friction`` config group selects (a model mismatch: the identification model and
    the ground truth it is compared with stay the nominal viscous + Coulomb)."""
    from robident_twin.model.robot import with_friction_variant

    if not friction_cfg:
        return spec
    cfg = dict(friction_cfg)
    kind = cfg.pop("kind", "nominal")
    if kind == "nominal":
        return spec
    return with_friction_variant(spec, kind, **cfg)


def model_options(model_cfg: Mapping[str, Any], robot_cfg: Mapping[str, Any] | None = None) -> ModelOptions:
    """Model options from ``model``; ``model.measurement: null`` takes the robot's default
    (``robot.measurement``: joint_torque where it has torque sensors, else motor_torque)."""
    allowed = {"measurement", "drive_inertia", "viscous", "coulomb", "offsets", "payload"}
    unknown = set(model_cfg) - allowed
    if unknown:
        raise ConfigError(f"model: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
    d = {k: v for k, v in dict(model_cfg).items() if v is not None or k in ("drive_inertia", "offsets")}
    if d.get("measurement") is None:
        d["measurement"] = (robot_cfg or {}).get("measurement") or "joint_torque"
    return ModelOptions(**d)


def build_model(spec: RobotSpec, options: ModelOptions, n_samples: int = 300, seed: int = 0) -> IdentificationModel:
    reg = Regressor(spec, options)
    return IdentificationModel(spec, reg, compute_base_parameters(reg, n_samples=n_samples, seed=seed))


def channel_names(spec: RobotSpec, measurement: str) -> list[str]:
    """Names of the torque channels of a measurement model (``A1`` or ``A1 joint``/``A1 motor``)."""
    if measurement == "both":
        return [f"{n} joint" for n in spec.joint_names] + [f"{n} motor" for n in spec.joint_names]
    return list(spec.joint_names)
