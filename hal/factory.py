"""The one place that knows which backends exist: build a Robot from configuration."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from robident_twin.errors import ConfigError
from robident_twin.model.robot import RobotSpec

from .config import NoiseConfig, TwinConfig, as_backend, as_noise, as_twin
from .protocol import Robot

BACKENDS = ("mujoco", "pybullet", "file", "lwr_fri", "sunrise_fri", "rsi", "ros2")


def make_noise(spec: RobotSpec, noise_cfg: NoiseConfig | Mapping[str, Any] | None):
    """The sensor model of the ``noise`` group (None: the robot file's)."""
    from .sim.sensors import SensorNoise

    n = as_noise(noise_cfg)
    return SensorNoise.from_config(
        spec, q_std_rad=n.q_std_rad, encoder_resolution_rad=n.encoder_resolution_rad,
        torque_std_Nm=n.torque_std_Nm, motor_torque_std_Nm=n.motor_torque_std_Nm, enabled=n.enabled,
        motor_gain_error=n.motor_gain_error, torque_noise_ar1=n.torque_noise_ar1,
        ripple_Nm=n.ripple_Nm, ripple_per_rev=n.ripple_per_rev)


REAL_BACKENDS = ("lwr_fri", "sunrise_fri", "rsi", "ros2")


def make_twin_setup(spec: RobotSpec, twin_cfg: TwinConfig | Mapping[str, Any] | None):
    """The twin (``twin`` config group: ideal | realistic with its effects) for ``spec``."""
    from .sim.effects import twin_setup

    return twin_setup(spec, twin_cfg)


def make_robot(spec: RobotSpec, backend_cfg, noise_cfg: NoiseConfig | Mapping[str, Any] | None = None,
               seed: int = 0, twin_cfg: TwinConfig | Mapping[str, Any] | None = None, checks=None) -> Robot:
    """A Robot for ``backend_cfg.name`` (``mujoco``); ``twin_cfg`` (the ``twin`` group) chooses the
    ideal or the realistic twin for the simulators (None: ideal). ``checks`` (a
    :class:`hal.safety.SafetyChecks`, made by the design stage:
    ``robident_twin.design.dryrun.design_checks``) is given to a real backend for its safety gate; a
    real controller (not emulated) refuses to run without it. The configs are the typed objects of
    :mod:`hal.config` (a mapping is validated here once, as the CLI edge does)."""
    backend_cfg, noise_cfg, twin_cfg = as_backend(backend_cfg), as_noise(noise_cfg), as_twin(twin_cfg)
    robot = _make_robot(spec, backend_cfg, noise_cfg, seed, twin_cfg)
    if checks is not None:
        if not hasattr(robot, "attach_checks"):
            raise ConfigError(f"backend.name: safety checks are for the real backends ({', '.join(REAL_BACKENDS)}), "
                              f"not {backend_cfg.name!r}")
        try:
            robot.attach_checks(checks)
        except BaseException:
            robot.close()
            raise
    return robot


def _make_robot(spec: RobotSpec, backend_cfg, noise_cfg: NoiseConfig, seed: int,
                twin_cfg: TwinConfig | None) -> Robot:
    name = backend_cfg.name
    if name in ("mujoco", "pybullet"):
        from .sim.effects import realistic_noise
        from .sim.mujoco_backend import controller_of

        common = dict(seed=seed, control_rate_hz=float(backend_cfg.control_rate_hz),
                      controller=controller_of(backend_cfg.controller))
        twin = make_twin_setup(spec, twin_cfg)
        if not twin.ideal:
            common["twin"] = twin
        noise = realistic_noise(twin, make_noise(spec, noise_cfg), noise_cfg)
        if name == "mujoco":
            from .sim.mujoco_backend import MujocoTwin

            robot = MujocoTwin(spec, noise, **common)
        else:
            from .sim.pybullet_backend import PyBulletTwin

            robot = PyBulletTwin(spec, noise, substeps=backend_cfg.substeps, **common)
        robot.info = dataclasses.replace(robot.info, replicable=True)  # a simulator: another make_robot, another robot
        return robot
    if name == "file":  # recorded files played back (hal/files/backend.py)
        from .files.backend import make_file_robot

        return make_file_robot(spec, backend_cfg)
    if name in ("lwr_fri", "sunrise_fri"):  # real controllers over UDP (hal/real/), emulate: true serves the twin
        from .real.base import make_real_backend

        if name == "lwr_fri":
            from .emulators.lwr_fri import start_lwr_emulator as emu
            from .real.lwr_fri import LwrFriBackend as cls
        else:
            from .emulators.sunrise_fri import start_sunrise_emulator as emu
            from .real.sunrise_fri import SunriseFriBackend as cls
        return make_real_backend(cls, emu, spec, backend_cfg, make_noise(spec, noise_cfg), seed)
    if name == "rsi":  # KUKA RSI (XML over UDP, hal/real/rsi.py); emulate: true serves the twin
        from .real.rsi import make_rsi_robot

        return make_rsi_robot(spec, backend_cfg, make_noise(spec, noise_cfg), seed)
    if name == "ros2":  # optional: needs a sourced ROS 2 (rclpy is not on PyPI), hal/real/ros2.py
        from .real.ros2 import make_ros2_robot

        return make_ros2_robot(spec, backend_cfg)
    raise ConfigError(f"backend.name: unknown backend '{name}'; available: {', '.join(BACKENDS)}")
