"""The model layer's own config types: the ``robot`` and ``model`` groups and the ``friction``
group's options (by ``kind``). :mod:`robident_twin.config` assembles the RunConfig from them and
validates it at the CLI edge; the model functions (``model/build.py``) take these typed objects and
read attributes (a mapping given to their Python API is validated once at entry, :func:`as_robot`,
:func:`as_model`, :func:`as_friction`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..errors import ConfigError
from ..typed import Errors, coerce, key

MEASUREMENTS = ("joint_torque", "motor_torque", "both", "difference")
SIDES = ("link", "motor", "both")


@dataclass(frozen=True)
class ModelConfig:
    measurement: Optional[str] = key(None, choices=MEASUREMENTS)
    drive_inertia: Optional[bool] = None
    viscous: bool = True
    coulomb: bool = True
    offsets: Optional[bool] = None
    payload: bool = False


@dataclass(frozen=True)
class RobotConfig:
    name: str = key()
    excitation: str = key()
    validation: str = key()
    file: Optional[str] = None
    overlay: Optional[str] = None  # with a URDF/MJCF file: drives, friction, sensors, limits (model/overlay.py)
    measurement: str = key("joint_torque", choices=MEASUREMENTS)
    payload_attached: Optional[bool] = None


# friction (by kind)
@dataclass(frozen=True)
class NominalFriction:
    kind: str = key("nominal", choices=("nominal",))


@dataclass(frozen=True)
class StribeckFriction:
    kind: str = key("stribeck", choices=("stribeck",))
    side: str = key("both", choices=SIDES)
    stribeck_ratio: float = key(1.5, ge=0)
    stribeck_velocity_rad_s: float = key(0.05, gt=0)


@dataclass(frozen=True)
class AsymmetricFriction:
    kind: str = key("asymmetric", choices=("asymmetric",))
    side: str = key("both", choices=SIDES)
    negative_ratio: float = key(0.8, ge=0)


@dataclass(frozen=True)
class PayloadDesignConfig:
    harmonics: int = key(3, ge=1)
    base_freq_hz: float = key(0.2, gt=0)
    starts: int = key(2, ge=1)
    maxiter: int = key(60, ge=0)
    samples: int = key(40, ge=2)
    seed: int = key(0, ge=0)


@dataclass(frozen=True)
class PayloadConfig:
    """The payload (robident_twin/payload_task.py, model/payload.py): task=payload and model.payload=true."""
    mass_kg: Optional[float] = key(None, gt=0)
    com_m: Optional[tuple[float, ...]] = None
    inertia_com_kgm2: Optional[dict[str, float]] = None  # {xx, yy, zz, xy, xz, yz}
    mount_xyz_m: Optional[tuple[float, ...]] = None
    mount_rpy_rad: Optional[tuple[float, ...]] = None
    robot_model: str = key("identified", choices=("identified", "nominal"))
    run_dir: Optional[str] = None
    robot_file: Optional[str] = None
    excitation: Optional[str] = None
    recording: Optional[str] = None
    design: PayloadDesignConfig = PayloadDesignConfig()

    def check(self, path: str, errors: Errors) -> None:
        for k, v in ((k, getattr(self, k)) for k in ("com_m", "mount_xyz_m", "mount_rpy_rad")):
            if v is not None and len(v) != 3:
                errors.add(f"{path}.{k}", list(v), "null or a list of 3 numbers")
        I = self.inertia_com_kgm2 or {}
        bad = set(I) - {"xx", "yy", "zz", "xy", "xz", "yz"} or (I and not {"xx", "yy", "zz"} <= set(I)) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in I.values())
        if bad:
            errors.add(f"{path}.inertia_com_kgm2", I, "null or {xx, yy, zz[, xy, xz, yz]} (numbers, kg m^2)")
        if self.run_dir and self.robot_file:
            errors.add(f"{path}.robot_file", self.robot_file, "null when payload.run_dir is set (one robot model)")


FRICTIONS = {"nominal": NominalFriction, "stribeck": StribeckFriction, "asymmetric": AsymmetricFriction}


def as_robot(cfg: Any) -> RobotConfig:
    """The typed ``robot`` group (a mapping may name only the keys the caller reads, e.g. ``{name: iiwa14}``)."""
    return coerce(RobotConfig, cfg, "robot", partial=True)


def as_model(cfg: Any) -> ModelConfig:
    """The typed ``model`` group (None: its defaults)."""
    return ModelConfig() if cfg is None else coerce(ModelConfig, cfg, "model")


def as_friction(cfg: Any):
    """The typed ``friction`` option (None: the nominal friction), picked by ``kind``."""
    if cfg is None or isinstance(cfg, tuple(FRICTIONS.values())):
        return cfg or NominalFriction()
    kind = cfg.get("kind", "nominal") if hasattr(cfg, "get") else None
    if kind not in FRICTIONS:
        raise ConfigError(f"friction.kind: expected one of {sorted(FRICTIONS)}, got {kind!r}")
    return coerce(FRICTIONS[kind], {**cfg, "kind": kind}, "friction")


def as_payload(cfg: Any) -> PayloadConfig:
    """The typed ``payload`` block (None: its defaults, the robot file's payload)."""
    return PayloadConfig() if cfg is None else coerce(PayloadConfig, cfg, "payload")
