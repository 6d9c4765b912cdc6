"""The payload as a body of its own (Jubien 2014: link n+1 of an n-axis arm).

- :func:`with_payload_config`: the robot with the payload the config defines (mass, COM, inertia
  about the COM, mounting frame in the last link's frame); keys left null keep the robot file's.
  The twin is built from this spec, so it carries the payload when it is mounted.
- :class:`PayloadRegressor`: the payload's ten columns alone (Khalil order ``XX YY ... MZ M`` about
  the mounting-frame origin), tau_payload = W_p(q, dq, ddq) phi_p, for a robot whose own dynamics
  are known; with :class:`PayloadColumns` (the identity "base set") it plugs into the design
  optimisers and criteria, which read ``regressor.stack`` and ``base.columns``.
- :func:`payload_truth`: the ten true parameters of a twin's payload (read only by the comparison).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.model.regressor import KHALIL_UNITS, ModelOptions, Regressor, khalil_vector
from robident_twin.model.robot import LinkInertial, RobotSpec


def _vec3(value: Any, key: str) -> np.ndarray:
    v = np.asarray(value, dtype=float)
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise ConfigError(f"payload.{key}: expected a list of 3 finite numbers, got {value!r}")
    return v


def _inertia(value: Mapping[str, Any]) -> np.ndarray:
    try:
        g = {k: float(value.get(k, 0.0)) for k in ("xx", "yy", "zz", "xy", "xz", "yz")}
    except (TypeError, ValueError, AttributeError):
        raise ConfigError(f"payload.inertia_com_kgm2: expected {{xx, yy, zz, xy, xz, yz}} in kg m^2, got {value!r}")
    I = np.array([[g["xx"], g["xy"], g["xz"]], [g["xy"], g["yy"], g["yz"]], [g["xz"], g["yz"], g["zz"]]])
    eig = np.linalg.eigvalsh(I)
    if not np.all(np.isfinite(I)) or eig[0] <= 0:
        raise ConfigError(f"payload.inertia_com_kgm2: not positive definite (principal moments {eig.tolist()})")
    if eig[0] + eig[1] < eig[2] * (1 - 1e-12):
        raise ConfigError(f"payload.inertia_com_kgm2: principal moments {eig.tolist()} violate the triangle "
                          "inequality (a + b >= c for a physical body)")
    return I


def with_payload_config(spec: RobotSpec, payload_cfg, attached: bool | None = None) -> RobotSpec:
    """``spec`` with the payload and mounting frame of the ``payload`` config block
    (:class:`~robident_twin.model.config.PayloadConfig`; null keys: the robot file's), mounted when
    ``attached`` is True (None: unchanged)."""
    from robident_twin.model.config import as_payload

    cfg = as_payload(payload_cfg)
    given = {k: getattr(cfg, k) for k in ("mass_kg", "com_m", "inertia_com_kgm2") if getattr(cfg, k) is not None}
    pl = spec.payload
    if given:
        if pl is None and len(given) < 3:
            missing = sorted({"mass_kg", "com_m", "inertia_com_kgm2"} - set(given))
            raise ConfigError(f"payload: robot {spec.name} ({spec.source}) has no payload; set {missing} as well")
        mass = float(given.get("mass_kg", pl.mass_kg if pl else 0.0))
        if not mass > 0:
            raise ConfigError(f"payload.mass_kg: expected a positive mass in kg, got {mass!r}")
        com = _vec3(given["com_m"], "com_m") if "com_m" in given else pl.com_m
        inertia = _inertia(given["inertia_com_kgm2"]) if "inertia_com_kgm2" in given else pl.inertia_com_kgm2
        pl = LinkInertial(mass, com, inertia)
    changes: dict[str, Any] = {"payload": pl, "_cache": {}}
    if cfg.mount_xyz_m is not None:
        changes["flange_xyz_m"] = _vec3(cfg.mount_xyz_m, "mount_xyz_m")
    if cfg.mount_rpy_rad is not None:
        changes["flange_rpy_rad"] = _vec3(cfg.mount_rpy_rad, "mount_rpy_rad")
    if attached is not None:
        if attached and pl is None:
            raise ConfigError(f"payload: robot {spec.name} ({spec.source}) has no payload; define one with "
                              "payload.mass_kg, payload.com_m and payload.inertia_com_kgm2")
        changes["payload_attached"] = bool(attached)
    return dataclasses.replace(spec, **changes)


def payload_truth(spec: RobotSpec) -> np.ndarray:
    """The ten Khalil parameters of the payload about the mounting-frame origin."""
    if spec.payload is None:
        raise ConfigError(f"robot {spec.name} has no payload")
    return khalil_vector(spec.payload)


class PayloadColumns:
    """The identity base set of the payload regressor (all ten parameters are identifiable with the
    robot known), with the attributes the design optimisers read."""

    def __init__(self, names: tuple[str, ...], units: tuple[str, ...]):
        self.names, self._units = tuple(names), tuple(units)
        self.base_index = np.arange(len(names))
        self.K = np.eye(len(names))

    @property
    def n_base(self) -> int:
        return len(self.names)

    @property
    def units(self) -> tuple[str, ...]:
        return self._units

    def from_standard(self, chi: np.ndarray) -> np.ndarray:
        return np.asarray(chi, float)

    def columns(self, W: np.ndarray) -> np.ndarray:
        return W

    def relation(self, i: int) -> str:
        return self.names[i]


class PayloadRegressor:
    """W_p(q, dq, ddq): the payload's ten columns in the torque channels of ``measurement``."""

    def __init__(self, spec: RobotSpec, measurement: str = "joint_torque"):
        if spec.payload is None:
            raise ConfigError(f"robot {spec.name} ({spec.source}) has no payload; define one in the payload config")
        self.spec = spec.with_payload(True)
        self._reg = Regressor(self.spec, ModelOptions(measurement=measurement, drive_inertia=False, viscous=False,
                                                      coulomb=False, offsets=False, payload=True))
        self.options = self._reg.options
        n = spec.n_joints
        self._cols = slice(10 * n, 10 * n + 10)
        self.names = tuple(self._reg.names[self._cols])
        self.units = tuple(KHALIL_UNITS)

    @property
    def n_joints(self) -> int:
        return self.spec.n_joints

    @property
    def n_channels(self) -> int:
        return self._reg.n_channels

    @property
    def n_params(self) -> int:
        return 10

    def stack(self, q_rad, dq_rad_s, ddq_rad_s2, payload_attached=None) -> np.ndarray:
        """Rows sample-major as :meth:`Regressor.stack`; only the payload's ten columns."""
        return self._reg.stack(q_rad, dq_rad_s, ddq_rad_s2, payload_attached=True)[:, self._cols]

    def base(self) -> PayloadColumns:
        return PayloadColumns(self.names, self.units)
