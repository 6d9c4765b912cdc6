"""Sensor model shared by the simulator backends: encoder quantisation and Gaussian noise."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.robot import RobotSpec


def _per_joint(value, n: int, default: np.ndarray, name: str) -> np.ndarray:
    """A scalar, a list of n numbers, or None (robot default) -> array (n,)."""
    if value is None:
        return np.asarray(default, dtype=float)
    arr = np.asarray(list(value) if not np.isscalar(value) else [value] * n, dtype=float)
    if arr.shape != (n,):
        raise ConfigError(f"noise.{name}: expected a number or a list of {n} numbers, got {value!r}")
    if np.any(~np.isfinite(arr)) or np.any(arr < 0):
        raise ConfigError(f"noise.{name}: expected non-negative finite values, got {value!r}")
    return arr


@dataclass(frozen=True)
class SensorNoise:
    """Per-joint measurement noise of a simulated robot (standard deviations)."""

    q_std_rad: np.ndarray
    encoder_resolution_rad: np.ndarray
    tau_joint_std_Nm: np.ndarray
    tau_motor_std_Nm: np.ndarray

    @classmethod
    def from_config(cls, spec: RobotSpec, q_std_rad=None, encoder_resolution_rad=None,
                    torque_std_Nm=None, motor_torque_std_Nm=None, enabled: bool = True) -> "SensorNoise":
        """Robot defaults from its source of truth, overridden per key; ``enabled=False``
        gives perfect sensors (no noise, no quantisation)."""
        n = spec.n_joints
        if not enabled:
            z = np.zeros(n)
            return cls(z, z, z, z)
        return cls(
            q_std_rad=_per_joint(q_std_rad, n, spec.q_std_rad, "q_std_rad"),
            encoder_resolution_rad=_per_joint(encoder_resolution_rad, n, spec.encoder_resolution_rad,
                                              "encoder_resolution_rad"),
            tau_joint_std_Nm=_per_joint(torque_std_Nm, n, spec.tau_joint_std_Nm, "torque_std_Nm"),
            tau_motor_std_Nm=_per_joint(motor_torque_std_Nm, n, spec.tau_motor_std_Nm, "motor_torque_std_Nm"),
        )

    def quantise(self, q_rad: np.ndarray) -> np.ndarray:
        res = self.encoder_resolution_rad
        out = np.array(q_rad, dtype=float, copy=True)
        m = res > 0
        if m.any():
            out[..., m] = np.round(out[..., m] / res[m]) * res[m]
        return out

    def measure(self, rng: np.random.Generator, q_rad, tau_motor_Nm, tau_joint_Nm):
        """Noisy, quantised measurements of true signals (samples x joints)."""
        q = self.quantise(q_rad) + rng.standard_normal(q_rad.shape) * self.q_std_rad
        tm = tau_motor_Nm + rng.standard_normal(tau_motor_Nm.shape) * self.tau_motor_std_Nm
        tj = None
        if tau_joint_Nm is not None:
            tj = tau_joint_Nm + rng.standard_normal(tau_joint_Nm.shape) * self.tau_joint_std_Nm
        return q, tm, tj

    def as_dict(self) -> dict:
        return {k: getattr(self, k).tolist() for k in
                ("q_std_rad", "encoder_resolution_rad", "tau_joint_std_Nm", "tau_motor_std_Nm")}
