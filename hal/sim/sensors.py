"""Sensor model shared by the simulator backends.

Encoder quantisation and Gaussian position noise; motor torque = current x drive gain, read
with an optional relative gain error and torque ripple (``ripple_Nm`` sin(``ripple_per_rev``
x motor angle), the motor angle being gear ratio x motor coordinate); joint-torque sensors
behind the gearbox; per-channel Gaussian torque noise, white or coloured (first-order
autoregressive with coefficient ``torque_noise_ar1`` and the same variance). Every draw comes
from the generator passed in (an explicit seed)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.model.robot import RobotSpec


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
    motor_gain_error: np.ndarray | None = None  # relative error of the current-to-torque gain
    torque_noise_ar1: float = 0.0  # 0: white noise; (0, 1): coloured AR(1) noise
    ripple_Nm: np.ndarray | None = None  # motor torque ripple amplitude (joint side)
    ripple_per_rev: float = 0.0  # ripple periods per motor revolution
    gear_ratio: np.ndarray | None = None  # for the motor angle of the ripple

    @classmethod
    def from_config(cls, spec: RobotSpec, q_std_rad=None, encoder_resolution_rad=None,
                    torque_std_Nm=None, motor_torque_std_Nm=None, enabled: bool = True,
                    motor_gain_error=None, torque_noise_ar1=0.0, ripple_Nm=None,
                    ripple_per_rev=0.0) -> "SensorNoise":
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
            motor_gain_error=None if motor_gain_error is None else _signed_per_joint(motor_gain_error, n,
                                                                                    "motor_gain_error"),
            torque_noise_ar1=_ar1(torque_noise_ar1),
            ripple_Nm=None if ripple_Nm is None else _per_joint(ripple_Nm, n, np.zeros(n), "ripple_Nm"),
            ripple_per_rev=float(ripple_per_rev or 0.0),
            gear_ratio=spec.gear_ratio * np.diag(spec.coupling_inv) if spec.is_coupled else spec.gear_ratio,
        )

    def quantise(self, q_rad: np.ndarray) -> np.ndarray:
        res = self.encoder_resolution_rad
        out = np.array(q_rad, dtype=float, copy=True)
        m = res > 0
        if m.any():
            out[..., m] = np.round(out[..., m] / res[m]) * res[m]
        return out

    def _noise(self, rng: np.random.Generator, shape, std: np.ndarray) -> np.ndarray:
        w = rng.standard_normal(shape)
        a = self.torque_noise_ar1
        if a > 0:  # AR(1) with the same marginal variance: e_k = a e_k-1 + sqrt(1 - a^2) w_k
            from scipy.signal import lfilter

            w[0] /= np.sqrt(1 - a * a)  # start in the stationary distribution
            w = lfilter([np.sqrt(1 - a * a)], [1.0, -a], w, axis=0)
        return w * std

    def measure(self, rng: np.random.Generator, q_rad, tau_motor_Nm, tau_joint_Nm, q_motor_rad=None):
        """Noisy, quantised measurements of true signals (samples x joints); ``q_motor_rad``
        (motor coordinates, joint side; default q) places the torque ripple."""
        q = self.quantise(q_rad) + rng.standard_normal(q_rad.shape) * self.q_std_rad
        tm = np.array(tau_motor_Nm, dtype=float, copy=True)
        if self.motor_gain_error is not None:
            tm = tm * (1.0 + self.motor_gain_error)
        if self.ripple_Nm is not None and self.ripple_per_rev > 0:
            qm = q_rad if q_motor_rad is None else q_motor_rad
            tm = tm + self.ripple_Nm * np.sin(self.ripple_per_rev * self.gear_ratio * qm)
        tm = tm + self._noise(rng, tm.shape, self.tau_motor_std_Nm)
        tj = None
        if tau_joint_Nm is not None:
            tj = tau_joint_Nm + self._noise(rng, tau_joint_Nm.shape, self.tau_joint_std_Nm)
        return q, tm, tj

    def as_dict(self) -> dict:
        d = {k: getattr(self, k).tolist() for k in
             ("q_std_rad", "encoder_resolution_rad", "tau_joint_std_Nm", "tau_motor_std_Nm")}
        d["motor_gain_error"] = None if self.motor_gain_error is None else self.motor_gain_error.tolist()
        d["torque_noise_ar1"] = self.torque_noise_ar1
        d["ripple_Nm"] = None if self.ripple_Nm is None else self.ripple_Nm.tolist()
        d["ripple_per_rev"] = self.ripple_per_rev
        return d


def _signed_per_joint(value, n: int, name: str) -> np.ndarray:
    arr = np.asarray(list(value) if not np.isscalar(value) else [value] * n, dtype=float)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)) or np.any(np.abs(arr) >= 1):
        raise ConfigError(f"noise.{name}: expected a number or a list of {n} numbers in (-1, 1), got {value!r}")
    return arr


def _ar1(value) -> float:
    a = float(value or 0.0)
    if not 0.0 <= a < 1.0:
        raise ConfigError(f"noise.torque_noise_ar1: expected a number in [0, 1), got {value!r}")
    return a
