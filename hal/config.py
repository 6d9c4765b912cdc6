"""The HAL's own config types: the ``backend`` group's options (conf/backend/: the twins, recorded
files, the real controllers and their emulators' fault injection), ``noise`` and ``twin``.

The CLI edge validates them (``robident_twin.config`` assembles the RunConfig from these schemas);
the HAL's builders (:mod:`hal.factory`) take the typed objects and read attributes. A mapping given
to the HAL's Python API is validated once at its entry by :func:`as_backend`, :func:`as_noise`,
:func:`as_twin` (the same checks, ConfigError naming the key)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from robident_twin.typed import Errors, build, coerce, key

from .sim.effects import EFFECTS as TWIN_EFFECTS
from .sim.effects import TWIN_NAMES

FILE_FORMATS = ("csv", "npz", "mat", "mcap", "krc4", "krl")  # as robident_twin.config.schema.FILE_FORMATS

PORT = dict(ge=0, le=65535)


@dataclass(frozen=True)
class ControllerConfig:
    bandwidth_hz: float = key(5.0, gt=0)
    damping_ratio: float = key(1.0, gt=0)
    feedforward: bool = True
    integral_hz: float = key(0.0, ge=0, optional_key=True)


@dataclass(frozen=True)
class MujocoBackend:
    name: str = key("mujoco", choices=("mujoco",))
    control_rate_hz: float = key(1000.0, gt=0)
    controller: ControllerConfig = ControllerConfig()


@dataclass(frozen=True)
class PybulletBackend:
    name: str = key("pybullet", choices=("pybullet",))
    control_rate_hz: float = key(1000.0, gt=0)
    substeps: int = key(1, ge=1)
    controller: ControllerConfig = ControllerConfig()


@dataclass(frozen=True)
class FileBackend:
    name: str = key("file", choices=("file",))
    path: Optional[str] = None
    validation_path: Optional[str] = None
    format: Optional[str] = key(None, choices=FILE_FORMATS)
    options: dict[str, Any] = key({})
    check_command: bool = True
    command_tol_rad: float = key(1e-6, ge=0)


PROB = dict(ge=0, le=1)


@dataclass(frozen=True)
class FaultsConfig:
    """Emulator faults (hal/emulators/common.Faults): probabilities in [0, 1], delays >= 0."""
    loss: float = key(0.0, **PROB, optional_key=True)
    delay_prob: float = key(0.0, **PROB, optional_key=True)
    delay_s: float = key(0.0, ge=0, optional_key=True)
    jitter_s: float = key(0.0, ge=0, optional_key=True)
    duplicate: float = key(0.0, **PROB, optional_key=True)
    reorder: float = key(0.0, **PROB, optional_key=True)
    truncate: float = key(0.0, **PROB, optional_key=True)
    malformed: float = key(0.0, **PROB, optional_key=True)
    wrong_id: float = key(0.0, **PROB, optional_key=True)
    blackout_after_cycles: Optional[int] = key(None, ge=0, optional_key=True)
    seed: int = key(0, ge=0, optional_key=True)
    blackout_cycles: Optional[int] = key(None, ge=1, optional_key=True)
    oversize: float = key(0.0, **PROB, optional_key=True)
    burst_loss: float = key(0.0, **PROB, optional_key=True)
    burst_cycles: int = key(5, ge=1, optional_key=True)
    foreign: float = key(0.0, **PROB, optional_key=True)
    counter_jump: int = key(0, optional_key=True)
    counter_jump_at_cycles: Optional[int] = key(None, ge=0, optional_key=True)
    mode_drop_at_cycles: Optional[int] = key(None, ge=0, optional_key=True)
    mode_drop_cycles: int = key(50, ge=1, optional_key=True)
    report_offset_rad: float = key(0.0, optional_key=True)
    report_offset_joint: int = key(0, ge=0, optional_key=True)
    report_offset_cycles: Optional[int] = key(None, ge=0, optional_key=True)


@dataclass(frozen=True)
class RsiFaultsConfig(FaultsConfig):
    reply_loss: float = key(0.0, **PROB, optional_key=True)
    reply_delay_prob: float = key(0.0, **PROB, optional_key=True)
    reply_delay_s: float = key(0.0, ge=0, optional_key=True)
    reply_jitter_s: float = key(0.0, ge=0, optional_key=True)
    reply_blackout_after_cycles: Optional[int] = key(None, ge=0, optional_key=True)


@dataclass(frozen=True)
class FriEmulatorConfig:
    reply_timeout_s: float = key(0.2, gt=0)
    stop_after_missed: int = key(20, ge=1)
    hold_after_stop_cycles: int = key(500, ge=0)
    faults: FaultsConfig = FaultsConfig()
    ready_after: Optional[int] = key(None, ge=0, optional_key=True)
    start_seq: Optional[int] = key(None, ge=0, optional_key=True)
    program_delay_cycles: Optional[int] = key(None, ge=0, optional_key=True)


@dataclass(frozen=True)
class SunriseEmulatorConfig(FriEmulatorConfig):
    receive_multiplier: int = key(1, ge=1)


@dataclass(frozen=True)
class RsiEmulatorConfig:
    reply_timeout_s: float = key(0.2, gt=0)
    stop_after_missed: int = key(20, ge=1)
    hold_after_stop_cycles: Optional[int] = key(None, ge=0, optional_key=True)  # null: the emulator's default
    faults: RsiFaultsConfig = RsiFaultsConfig()
    ipoc0: Optional[int] = key(None, ge=0, optional_key=True)


@dataclass(frozen=True)
class _RealCommon:
    host: Optional[str] = None  # required for a real robot (hal/real/base.RealConfig says so, naming the key)
    port: int = key(0, **PORT)
    bind_host: str = "127.0.0.1"
    controller_port: Optional[int] = key(None, **PORT)
    watchdog_s: float = key(1.0, gt=0)
    connect_timeout_s: float = key(10.0, gt=0)
    late_after_s: float = key(0.01, gt=0)
    step_margin: float = key(1.0, gt=0, le=1)
    limit_margin_rad: float = key(0.01, ge=0, le=0.5)
    hold_cycles_on_abort: int = key(20, ge=0)
    ready_cycles: int = key(5, ge=0)
    records_dir: Optional[str] = None
    safety: Optional[dict[str, Any]] = None
    emulate: bool = False  # conf/backend/ sets both; these defaults are the HAL's (hal/real/base.RealConfig)
    dry_run_if_emulated: bool = False
    controller: ControllerConfig = ControllerConfig()


@dataclass(frozen=True)
class LwrFriBackend(_RealCommon):
    name: str = key("lwr_fri", choices=("lwr_fri",))
    port: int = key(49938, **PORT)
    mode: str = key("monitor", choices=("monitor", "command"))
    control_rate_hz: float = key(1000.0, gt=0)
    program_start_timeout_s: float = key(30.0, gt=0)
    program_dir: Optional[str] = None
    emulator: FriEmulatorConfig = FriEmulatorConfig()


@dataclass(frozen=True)
class SunriseFriBackend(LwrFriBackend):
    name: str = key("sunrise_fri", choices=("sunrise_fri",))
    port: int = key(30200, **PORT)
    emulator: SunriseEmulatorConfig = SunriseEmulatorConfig()


@dataclass(frozen=True)
class RsiChannel:
    tag: str = key()
    to_Nm: float = key(1.0)


@dataclass(frozen=True)
class RsiBackend(_RealCommon):
    name: str = key("rsi", choices=("rsi",))
    mode: str = key("correction", choices=("correction", "monitor", "command"))  # command: correction's HAL name
    cycle_ms: int = key(4, choices=(4, 12))
    sen_type: str = "ImFree"
    correction_tag: str = "AK"
    stop_tag: str = "Stop"
    channels: dict[str, Any] = key({"motor_torque": {"tag": "MotTorque", "to_Nm": 1.0}})
    decimals: int = key(6, ge=0, le=15)
    max_gap_cycles: int = key(2500, ge=1)
    max_late_in_row: Optional[int] = key(None, ge=1, optional_key=True)
    late_after_s: float = key(0.012, gt=0)
    emulator: RsiEmulatorConfig = RsiEmulatorConfig()

    def check(self, path: str, errors: Errors) -> None:
        for ch, spec in self.channels.items():
            if ch not in ("motor_torque", "joint_torque"):
                errors.add(f"{path}.channels.{ch}", spec, "channels named motor_torque or joint_torque")
            else:
                build(RsiChannel, spec, f"{path}.channels.{ch}", errors)


@dataclass(frozen=True)
class Ros2Backend:
    name: str = key("ros2", choices=("ros2",))
    controller: str = "joint_trajectory_controller"
    joint_states_topic: str = "/joint_states"
    joint_names: Optional[tuple[str, ...]] = None
    control_rate_hz: float = key(500.0, gt=0)
    point_rate_hz: float = key(100.0, gt=0)
    effort_as: str = key("motor_torque", choices=("motor_torque", "joint_torque"))
    start_delay_s: float = key(0.5, ge=0)
    server_timeout_s: float = key(10.0, gt=0)
    max_gap_s: Optional[float] = key(None, gt=0)
    step_margin: float = key(1.0, gt=0, le=1)
    limit_margin_rad: float = key(0.01, ge=0, le=0.5)
    records_dir: Optional[str] = None
    safety: Optional[dict[str, Any]] = None


def per_joint(default=None, **bounds):
    """A number, a per-joint list of numbers, or null (``bounds`` apply to each)."""
    return key(default, **bounds, per_joint=True)


@dataclass(frozen=True)
class NoiseConfig:
    enabled: bool = True
    q_std_rad: Any = per_joint(ge=0)
    encoder_resolution_rad: Any = per_joint(ge=0)
    torque_std_Nm: Any = per_joint(ge=0)
    motor_torque_std_Nm: Any = per_joint(ge=0)
    motor_gain_error: Any = per_joint(gt=-1)
    torque_noise_ar1: float = key(0.0, ge=0, lt=1)
    ripple_Nm: Any = per_joint(ge=0)
    ripple_per_rev: float = key(0.0, ge=0)


@dataclass(frozen=True)
class TwinConfig:
    """The ``twin`` group (hal/sim/effects.py): the ideal twin or the realistic one with its effects."""
    name: str = key("realistic", choices=TWIN_NAMES)
    effects: tuple[str, ...] = key(TWIN_EFFECTS, choices=TWIN_EFFECTS)

    def check(self, path: str, errors: Errors) -> None:
        if self.name == "ideal" and self.effects:
            errors.add(f"{path}.effects", list(self.effects), "no effects for the ideal twin (use twin=realistic)")


BACKENDS = {"mujoco": MujocoBackend, "pybullet": PybulletBackend, "file": FileBackend, "lwr_fri": LwrFriBackend,
            "sunrise_fri": SunriseFriBackend, "rsi": RsiBackend, "ros2": Ros2Backend}


def as_backend(cfg: Any):
    """The typed backend option of ``cfg`` (one of :data:`BACKENDS`, picked by ``name``)."""
    if isinstance(cfg, tuple(BACKENDS.values())):
        return cfg
    from robident_twin.errors import ConfigError

    name = cfg.get("name") if hasattr(cfg, "get") else None
    if name not in BACKENDS:
        raise ConfigError(f"backend.name: unknown backend {name!r}; available: {', '.join(BACKENDS)}")
    return coerce(BACKENDS[name], cfg, "backend")


def as_noise(cfg: Any) -> NoiseConfig:
    """The typed ``noise`` group (None: the robot file's sensor model)."""
    return NoiseConfig() if cfg is None else coerce(NoiseConfig, cfg, "noise")


def as_twin(cfg: Any) -> TwinConfig | None:
    """The typed ``twin`` group; None (or an empty mapping) is the ideal twin."""
    if cfg is None or (not isinstance(cfg, TwinConfig) and not cfg):
        return None
    if not isinstance(cfg, TwinConfig) and hasattr(cfg, "get") and cfg.get("name") == "ideal" and "effects" not in cfg:
        cfg = {**cfg, "effects": []}  # the ideal twin has none
    return coerce(TwinConfig, cfg, "twin")
