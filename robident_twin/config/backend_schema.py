"""Schemas of the ``backend`` group's options (conf/backend/): the twins, recorded files, the real
controllers and their emulators' fault injection (split from :mod:`robident_twin.config.schema`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .check import Errors, key
from .trajectory_schema import FILE_FORMATS

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
    emulate: bool = True
    dry_run_if_emulated: bool = True
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
    mode: str = key("correction", choices=("correction", "monitor"))
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
        from .check import build

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
