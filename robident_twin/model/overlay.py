"""The overlay YAML of an imported robot: what a URDF or MJCF does not describe.

A robot description has kinematics, inertials and (usually) position, velocity and effort
limits. The identification twin also needs drives, friction, sensors and noise, acceleration
limits and the torque channel. The overlay gives them; every key is optional and every
unknown key is an error (:class:`robident_twin.errors.OverlayError` naming the file and key)::

    name: panda                     # robot name (default: the URDF robot / MJCF model name)
    flange: panda_hand_tcp          # frame (URDF link or joint, MJCF body or site) of the flange
    lock: {panda_finger_joint1: 0.0, panda_finger_joint2: 0.0}   # joints held at a position
    gravity_m_s2: [0, 0, -9.81]
    coulomb_smoothing_rad_s: 0.01
    home_rad: [0, 0, 0, -1.57, 0, 1.57, 0]
    torque_channel: joint_sensors   # joint_sensors (joint-torque sensors) | motor_currents
    coupling_matrix: null           # q_joint = C q_motor (n x n), null: independent drives
    joints:
      default:                      # every joint (a named joint overrides it key by key)
        drive: {inertia_kgm2: 0.1, gear_ratio: 100}
      panda_joint1:
        limits: {position_rad: [-2.8, 2.8], velocity_rad_s: 2.1, acceleration_rad_s2: 15, torque_Nm: 87}
        friction: {link: {viscous_Nms_rad: 0.1, coulomb_Nm: 0.2},
                   motor: {viscous_Nms_rad: 0.0, coulomb_Nm: 0.0, offset_Nm: 0.0}}
        sensors: {q_std_rad: 1e-5, encoder_resolution_rad: 6e-6, tau_joint_std_Nm: 0.1, tau_motor_std_Nm: 0.3}

What is left out gets the documented default of :data:`JOINT_DEFAULTS` (scaled by the joint's
torque or velocity limit), and the import lists every default it used.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from robident_twin.errors import OverlayError

TOP_KEYS = {"name", "flange", "lock", "gravity_m_s2", "coulomb_smoothing_rad_s", "home_rad", "torque_channel",
            "coupling_matrix", "joints"}
JOINT_SECTIONS = {
    "limits": {"position_rad", "velocity_rad_s", "acceleration_rad_s2", "torque_Nm"},
    "drive": {"inertia_kgm2", "gear_ratio"},
    "friction": {"link", "motor"},
    "sensors": {"q_std_rad", "encoder_resolution_rad", "tau_joint_std_Nm", "tau_motor_std_Nm"},
}
FRICTION_KEYS = {"link": {"viscous_Nms_rad", "coulomb_Nm"}, "motor": {"viscous_Nms_rad", "coulomb_Nm", "offset_Nm"}}
TORQUE_CHANNELS = ("joint_sensors", "motor_currents")

# Defaults of what the overlay leaves out, per joint, as (factor, what it scales, unit). They are
# the ratios of the KUKA iiwa 14 robot file (sim_assets/iiwa14/robot.yaml) to its torque limit
# (drive inertia 0.4 kg m^2 at 320 Nm, friction ~1e-3 of the torque limit, torque noise 0.3 Nm)
# and to its velocity limit (acceleration ~5.8 x the velocity limit). A non-zero drive inertia
# keeps the MuJoCo twin stable on links with tiny inertia about their axis (a zero one made it
# diverge).
JOINT_DEFAULTS: dict[str, tuple[float, str]] = {
    "limits.acceleration_rad_s2": (5.0, "velocity_rad_s"),     # 5 x velocity limit [1/s]
    "drive.inertia_kgm2": (1.25e-3, "torque_Nm"),              # kg m^2 per N m of torque limit
    "drive.gear_ratio": (100.0, ""),
    "friction.link.viscous_Nms_rad": (1e-3, "torque_Nm"),      # N m s/rad per N m
    "friction.link.coulomb_Nm": (1e-3, "torque_Nm"),
    "friction.motor.viscous_Nms_rad": (0.0, ""),
    "friction.motor.coulomb_Nm": (0.0, ""),
    "friction.motor.offset_Nm": (0.0, ""),
    "sensors.q_std_rad": (1e-5, ""),
    "sensors.encoder_resolution_rad": (6e-6, ""),
    "sensors.tau_joint_std_Nm": (1e-3, "torque_Nm"),
    "sensors.tau_motor_std_Nm": (3e-3, "torque_Nm"),
}


@dataclass(frozen=True)
class Overlay:
    """A validated overlay (all optional). ``joints`` maps a joint name (or ``default``) to
    a flat mapping ``"section.key"`` (``"friction.link.coulomb_Nm"``) -> value."""

    path: Path | None = None
    name: str | None = None
    flange: str | None = None
    lock: dict[str, float] = field(default_factory=dict)
    gravity_m_s2: list[float] | None = None
    coulomb_smoothing_rad_s: float | None = None
    home_rad: list[float] | None = None
    torque_channel: str | None = None
    coupling_matrix: list[list[float]] | None = None
    joints: dict[str, dict[str, Any]] = field(default_factory=dict)

    def joint_value(self, joint: str, key: str) -> Any:
        """The overlay's value of ``key`` for ``joint`` (its own, else ``default``, else None)."""
        for j in (joint, "default"):
            v = self.joints.get(j, {}).get(key)
            if v is not None:
                return v
        return None


def _fail(path, where: str, what: str) -> OverlayError:
    return OverlayError(f"{path or 'overlay'}: field '{where}': {what}")


def _number(path, where: str, v: Any, *, positive=False, nonneg=False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise _fail(path, where, f"expected a finite number, got {v!r}")
    if positive and v <= 0:
        raise _fail(path, where, f"expected a positive number, got {v}")
    if nonneg and v < 0:
        raise _fail(path, where, f"expected a non-negative number, got {v}")
    return float(v)


def _numbers(path, where: str, v: Any, n: int | None = None) -> list[float]:
    if not isinstance(v, (list, tuple)) or (n is not None and len(v) != n):
        raise _fail(path, where, f"expected a list of {n if n is not None else ''} numbers, got {v!r}".replace("  ", " "))
    return [_number(path, f"{where}[{i}]", x) for i, x in enumerate(v)]


def _mapping(path, where: str, v: Any, allowed: set[str]) -> dict:
    if not isinstance(v, dict):
        raise _fail(path, where, f"expected a mapping, got {type(v).__name__}")
    unknown = set(v) - allowed
    if unknown:
        raise _fail(path, where, f"unknown key(s) {sorted(map(str, unknown))}; expected some of {sorted(allowed)}")
    return v


def _joint_entry(path, where: str, raw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for sec, sv in _mapping(path, where, raw, set(JOINT_SECTIONS)).items():
        w = f"{where}.{sec}"
        if sec == "friction":
            for side, fv in _mapping(path, w, sv, set(FRICTION_KEYS)).items():
                for k, x in _mapping(path, f"{w}.{side}", fv, FRICTION_KEYS[side]).items():
                    out[f"friction.{side}.{k}"] = _number(path, f"{w}.{side}.{k}", x, nonneg=(k != "offset_Nm"))
            continue
        for k, x in _mapping(path, w, sv, JOINT_SECTIONS[sec]).items():
            if k == "position_rad":
                lo, hi = _numbers(path, f"{w}.{k}", x, 2)
                if not lo < hi:
                    raise _fail(path, f"{w}.{k}", f"expected [lower, upper] with lower < upper, got {x!r}")
                out[f"{sec}.{k}"] = (lo, hi)
            elif k == "gear_ratio":
                g = _number(path, f"{w}.{k}", x)
                if g == 0:
                    raise _fail(path, f"{w}.{k}", "must not be zero")
                out[f"{sec}.{k}"] = g
            else:
                positive = sec == "limits"
                out[f"{sec}.{k}"] = _number(path, f"{w}.{k}", x, positive=positive, nonneg=not positive)
    return out


def parse_overlay(raw: Any, path: Path | None = None) -> Overlay:
    """Validate a parsed overlay; every error names the file and the field."""
    if raw is None:
        return Overlay(path=path)
    raw = _mapping(path, "(top level)", raw, TOP_KEYS)
    lock = {}
    if raw.get("lock") is not None:
        if not isinstance(raw["lock"], dict):
            raise _fail(path, "lock", f"expected a mapping joint name -> position, got {raw['lock']!r}")
        lock = {str(k): _number(path, f"lock.{k}", v) for k, v in raw["lock"].items()}
    channel = raw.get("torque_channel")
    if channel is not None and channel not in TORQUE_CHANNELS:
        raise _fail(path, "torque_channel", f"expected one of {', '.join(TORQUE_CHANNELS)}, got {channel!r}")
    joints = {}
    if raw.get("joints") is not None:
        if not isinstance(raw["joints"], dict):
            raise _fail(path, "joints", "expected a mapping joint name (or default) -> settings")
        joints = {str(k): _joint_entry(path, f"joints.{k}", v) for k, v in raw["joints"].items()}
    coupling = raw.get("coupling_matrix")
    if coupling is not None:
        if not isinstance(coupling, list):
            raise _fail(path, "coupling_matrix", "expected a list of rows")
        coupling = [_numbers(path, f"coupling_matrix[{i}]", row) for i, row in enumerate(coupling)]
    for key in ("name", "flange"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise _fail(path, key, f"expected a string, got {raw[key]!r}")
    return Overlay(
        path=path,
        name=raw.get("name"),
        flange=raw.get("flange"),
        lock=lock,
        gravity_m_s2=_numbers(path, "gravity_m_s2", raw["gravity_m_s2"], 3) if raw.get("gravity_m_s2") is not None else None,
        coulomb_smoothing_rad_s=(_number(path, "coulomb_smoothing_rad_s", raw["coulomb_smoothing_rad_s"], positive=True)
                                 if raw.get("coulomb_smoothing_rad_s") is not None else None),
        home_rad=_numbers(path, "home_rad", raw["home_rad"]) if raw.get("home_rad") is not None else None,
        torque_channel=channel,
        coupling_matrix=coupling,
        joints=joints,
    )


def load_overlay(path: str | Path | None) -> Overlay:
    """Read and validate an overlay file (``None``: the empty overlay, every default)."""
    if path is None or str(path) == "":
        return Overlay()
    p = Path(path)
    if not p.is_file():
        raise OverlayError(f"robot.overlay: the overlay file {p} does not exist")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise OverlayError(f"{p}: not valid YAML: {exc}") from exc
    return parse_overlay(raw, p)
