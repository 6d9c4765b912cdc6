"""The realistic twin's effects: what a real robot does that the identification model does not.

A twin is ``ideal`` (today's exact twin: the simulation and the regressor share one model, so
noise-free identification is exact) or ``realistic``: the ideal twin plus the effects listed in
``twin.effects`` (config group ``conf/twin``), each switchable alone, with per-robot magnitudes
from ``sim_assets/<robot>/twin.yaml`` (each figure with its source; loaded strictly by
:func:`load_twin_params`). The per-cycle code lives here and is used by both engines
(:mod:`hal.sim.mujoco_backend`, :mod:`hal.sim.pybullet_backend`):

``closed_loop``
    the position controller reads the *measured* position (quantised, plus the encoder noise
    that is also recorded) and a velocity estimated from it by the drive's filter (backward
    difference and a first-order low-pass at ``velocity_filter_hz``), at the controller rate,
    and its torque command reaches the drive ``delay_cycles`` control periods later (the real
    interface's actuation delay, on top of the first-order hold of the current loop).
    :class:`LoopController`. A robot whose twin.yaml has a ``drive_loop`` section runs its drive's
    own tuning then (:mod:`hal.sim.drive_loop`: P / PI cascade on the whole axis inertia).
``elasticity``
    two-mass joints: a motor (rotor inertia = the drive inertia) and the link coupled by the
    gear's stiffness ``stiffness_Nm_rad`` and damping ``damping_Nms_rad`` with a backlash
    dead zone ``backlash_rad`` (total play) in motor coordinates;
    ``tau_spring = K dz(theta_m - C^-1 q) + D (dtheta_m - C^-1 dq)``. The motor torque drives
    the rotor, the links feel ``C^-T tau_spring``, the joint-torque sensor measures the spring
    torque, the position controller closes its loop on the motor encoder. :func:`spring_torque_Nm`.
``friction_unmodelled``
    friction the regressor (smoothed ``Fc tanh(dq / eps) + Fv dq``) does not have, added on the
    side where the robot's friction acts: a discontinuous Coulomb sign or a Stribeck peak
    (``law`` per joint), a load-dependent Coulomb term ``load_coefficient |tau_drive|`` and a
    temperature drift that scales the Coulomb and viscous levels by
    ``1 + drift_fraction min(t / drift_time_s, 1)`` over the run. :func:`extra_friction_Nm`.
``sensor``
    the torque channels lag the position channel by ``torque_delay_cycles`` samples, pass an
    anti-aliasing Butterworth low-pass (``antialias_order``, ``antialias_hz``) and are held
    for ``torque_hold_cycles`` samples (a slower torque sampling); the joint-torque sensor
    reads ``(1 + gain_error) tau + offset``; the motor torque has the torque-constant error and
    the cogging ripple of :class:`hal.sim.sensors.SensorNoise` (set from ``twin.yaml`` unless
    the ``noise`` group sets them). :func:`apply_sensor_effects`.
``transmission_error``
    the gears' flank-wise transmission error (:class:`TransmissionErrorParams`): the drive-side
    disturbance torque ``J (e'' dtheta^2 + 2 e' ddtheta)`` of :func:`transmission_error_torque_Nm`
    from the motor-side position and velocity of the current integrator stage and the engine's
    latest motor acceleration, ``J`` the axis inertia in motor coordinates held over each control
    period; the motor torque overcomes it, the link side does not feel it.
    :class:`TransmissionErrorEffect`. Optional section of ``twin.yaml``: a robot without it has no
    transmission error (the effect is a no-op there, and the summary says so).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robident_twin.errors import ConfigError

from .drive_loop import DriveLoopParams, load_drive_loop
from .sourced import sourced_values

EFFECTS = ("closed_loop", "elasticity", "friction_unmodelled", "sensor", "transmission_error")
TWIN_NAMES = ("ideal", "realistic")
#: samples simulated before the recorded window so that the sensor delay and filter start settled
SENSOR_PAD_SAMPLES = 500


# ---------------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class ClosedLoopParams:
    delay_cycles: int
    velocity_filter_hz: float


@dataclass(frozen=True)
class ElasticityParams:
    stiffness_Nm_rad: np.ndarray
    damping_Nms_rad: np.ndarray
    backlash_rad: np.ndarray


@dataclass(frozen=True)
class FrictionParams:
    law: tuple[str, ...]  # per joint: discontinuous | stribeck
    stribeck_ratio: np.ndarray  # static level / Coulomb level
    stribeck_velocity_rad_s: np.ndarray
    load_coefficient: np.ndarray  # extra Coulomb torque per Nm of drive torque
    drift_fraction: float  # relative change of Coulomb and viscous levels at drift_time_s
    drift_time_s: float


@dataclass(frozen=True)
class SensorParams:
    torque_delay_cycles: int
    antialias_hz: float  # 0: no filter
    antialias_order: int
    torque_hold_cycles: int
    joint_torque_offset_Nm: np.ndarray
    joint_torque_gain_error: np.ndarray
    motor_gain_error: np.ndarray
    ripple_Nm: np.ndarray
    ripple_per_rev: float


@dataclass(frozen=True)
class TwinParams:
    """A robot's realistic-twin magnitudes (``sim_assets/<robot>/twin.yaml``) and their sources."""

    path: Path
    closed_loop: ClosedLoopParams
    elasticity: ElasticityParams
    friction_unmodelled: FrictionParams
    sensor: SensorParams
    sources: dict = field(default_factory=dict)
    #: None: the robot's twin.yaml has no ``transmission_error`` section (the effect is a no-op)
    transmission_error: "TransmissionErrorParams | None" = None
    #: None: no ``drive_loop`` section (the twin's controller config tunes the loop; hal/sim/drive_loop.py)
    drive_loop: "DriveLoopParams | None" = None


_SCHEMA: dict[str, dict[str, str]] = {  # section -> key -> kind
    "closed_loop": {"delay_cycles": "int", "velocity_filter_hz": "pos"},
    "elasticity": {"stiffness_Nm_rad": "joints_pos", "damping_Nms_rad": "joints", "backlash_rad": "joints"},
    "friction_unmodelled": {"law": "joints_law", "stribeck_ratio": "joints_pos", "stribeck_velocity_rad_s": "joints_pos",
                            "load_coefficient": "joints", "drift_fraction": "signed", "drift_time_s": "pos"},
    "sensor": {"torque_delay_cycles": "int", "antialias_hz": "nonneg", "antialias_order": "int_pos",
               "torque_hold_cycles": "int_pos", "joint_torque_offset_Nm": "joints_signed",
               "joint_torque_gain_error": "joints_gain", "motor_gain_error": "joints_gain",
               "ripple_Nm": "joints", "ripple_per_rev": "nonneg"},
}
_CLASSES = {"closed_loop": ClosedLoopParams, "elasticity": ElasticityParams,
            "friction_unmodelled": FrictionParams, "sensor": SensorParams}


def _value(path: Path, where: str, kind: str, raw: Any, n: int):
    def bad(what: str):
        return ConfigError(f"{path}: field '{where}.value': expected {what}, got {raw!r}")

    if kind in ("int", "int_pos"):
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < (1 if kind == "int_pos" else 0):
            raise bad("a positive integer" if kind == "int_pos" else "a non-negative integer")
        return int(raw)
    if kind == "joints_law":
        vals = [raw] * n if isinstance(raw, str) else raw
        if not isinstance(vals, list) or len(vals) != n or any(v not in ("discontinuous", "stribeck") for v in vals):
            raise bad(f"discontinuous | stribeck, or a list of {n} of them")
        return tuple(vals)
    if kind.startswith("joints"):
        vals = [raw] * n if isinstance(raw, (int, float)) and not isinstance(raw, bool) else raw
        try:
            arr = np.asarray(vals, dtype=float)
        except (TypeError, ValueError):
            raise bad(f"a number or a list of {n} numbers") from None
        if arr.shape != (n,) or not np.all(np.isfinite(arr)):
            raise bad(f"a number or a list of {n} finite numbers")
        if kind == "joints_pos" and np.any(arr <= 0):
            raise bad("positive numbers")
        if kind == "joints" and np.any(arr < 0):
            raise bad("non-negative numbers")
        if kind == "joints_gain" and np.any(np.abs(arr) >= 1):
            raise bad("relative errors in (-1, 1)")
        return arr
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not np.isfinite(raw):
        raise bad("a finite number")
    if kind == "pos" and raw <= 0:
        raise bad("a positive number")
    if kind == "nonneg" and raw < 0:
        raise bad("a non-negative number")
    if kind == "signed" and not -1 < raw < 1:
        raise bad("a number in (-1, 1)")
    return float(raw)


def load_twin_params(path: Path, n_joints: int) -> TwinParams:
    """Strictly load a robot's ``twin.yaml``: every section and key of the schema, no other,
    each as ``{value: ..., source: "<reference>" | "plausible estimate ..."}``."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: the realistic twin needs this file (per-robot effect magnitudes); it does not exist")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of the sections {sorted(_SCHEMA)}")
    unknown = set(raw) - set(_SCHEMA) - {"transmission_error", "drive_loop"}
    missing = set(_SCHEMA) - set(raw)
    if unknown or missing:
        raise ConfigError(f"{path}: sections: unknown {sorted(unknown)}, missing {sorted(missing)}; "
                          f"expected exactly {sorted(_SCHEMA)} (and optionally transmission_error, drive_loop)")
    sections, sources = {}, {}
    for sec, keys in _SCHEMA.items():
        body = raw[sec]
        vals = {key: _value(path, f"{sec}.{key}", keys[key], raw_value, n_joints)
                for key, raw_value in sourced_values(path, body, sec, tuple(keys), sources).items()}
        sections[sec] = _CLASSES[sec](**vals)
    if "transmission_error" in raw:
        sections["transmission_error"] = _load_transmission_error(path, raw["transmission_error"], n_joints, sources)
    if "drive_loop" in raw:
        sections["drive_loop"] = load_drive_loop(path, raw["drive_loop"], sources)
    return TwinParams(path=path, sources=sources, **sections)


_TE_KEYS = ("cycles_per_rad", "amplitude_rad", "phase_rad", "blend_velocity_rad_s")


def _load_transmission_error(path: Path, body: Any, n: int, sources: dict) -> "TransmissionErrorParams":
    """The optional ``transmission_error`` section: ``cycles_per_rad`` (n x k lines per motor axis),
    ``amplitude_rad`` and ``phase_rad`` (n x k x 2: positive, negative direction flank) and
    ``blend_velocity_rad_s``, each as ``{value, source}``."""
    vals = {}
    for key, raw in sourced_values(path, body, "transmission_error", _TE_KEYS, sources).items():
        where = f"transmission_error.{key}"
        if key == "blend_velocity_rad_s":
            vals[key] = _value(path, where, "pos", raw, n)
            continue
        try:
            arr = np.asarray(raw, dtype=float)
        except (TypeError, ValueError):
            raise ConfigError(f"{path}: field '{where}.value': expected nested lists of numbers") from None
        if key == "cycles_per_rad":
            shape = (n, arr.shape[1] if arr.ndim == 2 else -1)
        else:
            shape = vals["cycles_per_rad"].shape + (2,)
        if arr.shape != shape or not np.all(np.isfinite(arr)) or (key != "phase_rad" and np.any(arr < 0)):
            what = "positive " if key != "phase_rad" else ""
            raise ConfigError(f"{path}: field '{where}.value': expected {shape[0]} rows of {what}finite numbers of "
                              f"shape {list(shape)} (joints x lines{'' if key == 'cycles_per_rad' else ' x flanks'}), "
                              f"got shape {list(arr.shape)}")
        vals[key] = arr
    return TransmissionErrorParams(**vals)


@dataclass(frozen=True)
class TwinSetup:
    """Which twin runs: ``ideal`` (no effect) or ``realistic`` with ``effects`` and the robot's magnitudes."""

    name: str = "ideal"
    effects: tuple[str, ...] = ()
    params: TwinParams | None = None

    def has(self, effect: str) -> bool:
        return effect in self.effects

    @property
    def ideal(self) -> bool:
        return not self.effects

    def as_dict(self) -> dict:
        """What the summary and the recordings state about the twin."""
        out: dict[str, Any] = {"name": self.name, "effects": list(self.effects)}
        if self.params is not None and self.effects:
            out["file"] = str(self.params.path)
            mags = {}
            for e in self.effects:
                if getattr(self.params, e) is None:
                    mags[e] = f"none: {self.params.path.name} has no {e} section (the effect is a no-op)"
                    continue
                d = dataclasses.asdict(getattr(self.params, e))
                mags[e] = {k: (v.tolist() if isinstance(v, np.ndarray) else list(v) if isinstance(v, tuple) else v)
                           for k, v in d.items()}
            if self.has("closed_loop") and self.params.drive_loop is not None:  # the robot's own loop tuning
                mags["closed_loop"]["drive_loop"] = dataclasses.asdict(self.params.drive_loop)
            out["magnitudes"] = mags
            out["sources"] = {k: v for k, v in self.params.sources.items()
                              if k.split(".")[0] in self.effects or (k[:11] == "drive_loop." and self.has("closed_loop"))}
        return out


IDEAL = TwinSetup()


def twin_setup(spec, twin_cfg) -> TwinSetup:
    """The twin the ``twin`` config group (:class:`hal.config.TwinConfig`, or a mapping validated as
    one) names for ``spec`` (None or ``ideal``: the ideal twin).
    ``realistic`` reads ``twin.yaml`` beside the robot file."""
    from hal.config import as_twin

    twin = as_twin(twin_cfg)
    if twin is None or twin.name == "ideal":
        return IDEAL
    effects = tuple(e for e in EFFECTS if e in twin.effects)  # canonical order, no duplicates
    params = load_twin_params(Path(spec.source).parent / "twin.yaml", spec.n_joints)
    return TwinSetup("realistic", effects, params)


def realistic_noise(setup: TwinSetup, noise, noise_cfg=None):
    """The sensor model with the ``sensor`` effect's motor torque-constant error and ripple
    (unless the ``noise`` group, :class:`hal.config.NoiseConfig`, sets them)."""
    if not setup.has("sensor"):
        return noise
    from hal.config import as_noise

    p = setup.params.sensor
    cfg = as_noise(noise_cfg)
    changes = {}
    if cfg.motor_gain_error is None and np.any(p.motor_gain_error != 0):
        changes["motor_gain_error"] = p.motor_gain_error
    if cfg.ripple_Nm is None and np.any(p.ripple_Nm != 0) and p.ripple_per_rev > 0:
        changes["ripple_Nm"], changes["ripple_per_rev"] = p.ripple_Nm, p.ripple_per_rev
    if not np.any(noise.q_std_rad) and not np.any(noise.tau_joint_std_Nm) and not np.any(noise.tau_motor_std_Nm) \
            and not np.any(noise.encoder_resolution_rad):
        return noise  # noise=none: perfect sensors stay perfect
    return dataclasses.replace(noise, **changes) if changes else noise


# ---------------------------------------------------------------------------------- closed loop
def loop_rng(seed: int) -> np.random.Generator:
    """The generator of the encoder noise the controller sees (and the recording keeps),
    independent of the torque-noise generator ``default_rng(seed)``."""
    return np.random.default_rng([int(seed), 0xC105ED])


def loop_bandwidth_rad_s(setup: TwinSetup, bandwidth_hz: float, damping_ratio: float, rate_hz: float,
                         max_phase_rad: float = 0.5) -> float:
    """The position loop's bandwidth as a drive tuned for its dead time would set it: with
    ``closed_loop``, the velocity loop's crossover (~2 zeta w) may lose at most ``max_phase_rad``
    to the loop's dead time (actuation delay + torque ramp + the velocity filter's lag); a higher
    configured bandwidth is lowered to that. The delay is counted in cycles, so at a slower rate
    the same loop has more dead time: the IR 361's 2 cycles at 250 Hz (15 ms in all) with the
    5 Hz loop on the rotor of an elastic joint diverged; at 1000 Hz no built-in robot is capped."""
    w = 2 * np.pi * float(bandwidth_hz)
    if setup.ideal or not setup.has("closed_loop"):
        return w
    p = setup.params.closed_loop
    dead_s = (p.delay_cycles + 1) / float(rate_hz) + 1.0 / (2 * np.pi * p.velocity_filter_hz)
    return min(w, max_phase_rad / (2 * float(damping_ratio) * dead_s))


class LoopController:
    """The joint position controller of a twin, ideal or closed on the measurements.

    Ideal: PD on the quantised true position and the true velocity. ``closed_loop``: PD on the
    measured position (quantised + encoder noise, drawn here and remembered so the recording
    carries the very noise the loop saw) and on the drive's velocity estimate, the command
    delayed by ``delay_cycles``. ``command`` returns the motor-coordinate torque the drive
    starts to ramp to now."""

    def __init__(self, setup: TwinSetup, noise, kp, kd, rate_hz: float, coupling_T: np.ndarray | None,
                 u0_Nm: np.ndarray, seed: int, ki=None):
        self.closed = setup.has("closed_loop")
        # PI velocity loop (ki > 0, the CLOOS's cascade, as the ideal twin's control_step)
        self.ki = None if ki is None or not np.any(np.asarray(ki) > 0) else np.asarray(ki, float)
        self.noise = noise
        self.kp, self.kd = np.asarray(kp, float), np.asarray(kd, float)
        self.rate_hz = float(rate_hz)
        self.ct = coupling_T
        n = self.kp.size
        if self.closed:
            p = setup.params.closed_loop
            self.alpha = 1.0 - np.exp(-2 * np.pi * p.velocity_filter_hz / self.rate_hz)
            self.delay = p.delay_cycles
            self.rng = loop_rng(seed)
        else:
            self.delay = 0
        self.reset(u0_Nm, n)

    def reset(self, u0_Nm, n: int | None = None) -> None:
        n = self.kp.size if n is None else n
        self.queue = [np.array(u0_Nm, float) for _ in range(self.delay)]
        self.q_prev = None
        self.v_f = np.zeros(n)
        self.last_q_meas = None
        self.u0 = np.array(u0_Nm, float)
        self.integral = None  # PI: set at the first command to hold u0 (a drive starts holding its load)

    def measured(self, q_true: np.ndarray) -> np.ndarray:
        return self.noise.quantise(q_true) + self.rng.standard_normal(q_true.shape) * self.noise.q_std_rad

    def command(self, qref, dqref, ff, q_true, dq_true) -> np.ndarray:
        if self.closed:
            q = self.measured(q_true)
            if self.q_prev is not None:
                v_raw = (q - self.q_prev) * self.rate_hz
                self.v_f = self.v_f + self.alpha * (v_raw - self.v_f)
            self.q_prev = q
            self.last_q_meas = q
            v = self.v_f
        else:
            q, v = self.noise.quantise(q_true), dq_true
        fb = self.kp * (qref - q) + self.kd * (dqref - v)
        if self.ki is not None:  # on the velocity loop's command dq_ref + (kp / kd) e_q
            if self.integral is None:  # the integral holds the torque applied at rest, u0 - ff (bumpless start)
                hold = self.u0 - ff
                self.integral = (np.linalg.solve(self.ct, hold) if self.ct is not None else hold) / self.ki
            self.integral += ((dqref - v) + self.kp / self.kd * (qref - q)) / self.rate_hz
            fb = fb + self.ki * self.integral
        u = ff + (self.ct @ fb if self.ct is not None else fb)
        if self.delay:
            self.queue.append(u)
            u = self.queue.pop(0)
        return u


# ---------------------------------------------------------------------------------- elasticity
def deadzone(x: np.ndarray, backlash_rad: np.ndarray) -> np.ndarray:
    """Backlash: no transmission inside the play (total width ``backlash_rad``)."""
    h = 0.5 * backlash_rad
    return np.where(x > h, x - h, np.where(x < -h, x + h, 0.0))


def spring_torque_Nm(p: ElasticityParams, dtheta_rad, ddtheta_rad_s) -> np.ndarray:
    """Gear torque (motor coordinates) for the motor-minus-link deflection and its rate."""
    return p.stiffness_Nm_rad * deadzone(np.asarray(dtheta_rad), p.backlash_rad) + p.damping_Nms_rad * ddtheta_rad_s


def elastic_substeps(spec, p: ElasticityParams, link_inertia_kgm2: np.ndarray, rate_hz: float,
                     max_omega_h: float = 1.5) -> int:
    """Engine steps per control period that resolve the stiffest joint mode
    (omega = sqrt(K (1/I_link + 1/I_motor)), omega h <= ``max_omega_h``)."""
    ci = spec.coupling_inv
    k_joint = np.diag(ci.T @ np.diag(p.stiffness_Nm_rad) @ ci)
    i_m = np.diag(ci.T @ np.diag(spec.drive_inertia_kgm2) @ ci)
    omega = np.sqrt(k_joint * (1.0 / np.maximum(link_inertia_kgm2, 1e-9) + 1.0 / i_m))
    return max(1, int(np.ceil(float(omega.max()) / rate_hz / max_omega_h)))


# ---------------------------------------------------------------------------------- friction
def drift_scale(p: FrictionParams, t_s: float) -> float:
    """Factor on the Coulomb and viscous levels at time ``t_s`` (temperature drift)."""
    return 1.0 + p.drift_fraction * min(max(t_s, 0.0) / p.drift_time_s, 1.0)


def extra_friction_Nm(p: FrictionParams, v, fc_Nm, fv_Nms_rad, eps_rad_s: float, t_s: float,
                      load_Nm=None, load_coefficient=None) -> np.ndarray:
    """Friction beyond the regressor's ``Fv v + Fc tanh(v / eps)`` (the caller adds that), per
    joint of one side: the discontinuous sign or a Stribeck peak in place of the smoothed
    sign, the load-dependent Coulomb term and the temperature drift of both levels."""
    v = np.asarray(v, float)
    sg = np.sign(v)
    smooth = np.tanh(v / eps_rad_s)
    scale = drift_scale(p, t_s)
    f = scale * (fc_Nm * sg) - fc_Nm * smooth + (scale - 1.0) * fv_Nms_rad * v
    strib = p.stribeck_ratio - 1.0
    if any(law == "stribeck" for law in p.law):
        mask = np.array([law == "stribeck" for law in p.law])
        f = f + np.where(mask, scale * strib * fc_Nm * np.exp(-(v / p.stribeck_velocity_rad_s) ** 2) * sg, 0.0)
    if load_Nm is not None:
        c = p.load_coefficient if load_coefficient is None else load_coefficient
        f = f + c * np.abs(load_Nm) * sg
    return f


class FrictionEffect:
    """The unmodelled friction of a robot in joint coordinates, for (robots x) joints: each side
    (link; motor, mapped by C^-T) where the robot has friction gets :func:`extra_friction_Nm`;
    the load term goes on the side with the larger Coulomb level. Arrays are precomputed: this
    runs in every integrator stage."""

    def __init__(self, spec, p: FrictionParams):
        self.p = p
        self.eps = float(spec.coulomb_smoothing_rad_s)
        fcl, fvl = spec.fc_link_Nm, spec.fv_link_Nms_rad
        fcm, fvm = spec.fc_motor_Nm, spec.fv_motor_Nms_rad
        load_motor = float(np.sum(fcm)) > float(np.sum(fcl))
        strib = np.array([law == "stribeck" for law in p.law], float) * (p.stribeck_ratio - 1.0)
        z = np.zeros_like(fcl)
        self.coupled = spec.is_coupled
        self.ci = spec.coupling_inv
        self.sides = []  # (is_motor, fc, fv, stribeck amplitude, load coefficient)
        if np.any(fcl) or np.any(fvl) or not load_motor:
            self.sides.append((False, fcl, fvl, strib * fcl, z if load_motor else p.load_coefficient))
        if np.any(fcm) or np.any(fvm) or load_motor:
            self.sides.append((True, fcm, fvm, strib * fcm, p.load_coefficient if load_motor else z))
        self.inv_vs = 1.0 / p.stribeck_velocity_rad_s

    def link_total_Nm(self, dq_rad_s, t_s: float, tau_drive_motor_Nm) -> np.ndarray | None:
        """The whole link-side friction, the ideal law plus :meth:`joint_Nm`'s link part fused
        (``scale (Fv v + (Fc + Stribeck) sign v) + load``; the smoothed terms cancel), for
        uncoupled robots; None when the link side is not simpler that way."""
        if self.coupled or not self.sides or self.sides[0][0]:
            return None
        _, fc, fv, sa, lc = self.sides[0]
        p = self.p
        scale = 1.0 + p.drift_fraction * min(max(t_s, 0.0) / p.drift_time_s, 1.0)
        x = dq_rad_s * self.inv_vs
        return scale * (fv * dq_rad_s + (fc + sa * np.exp(-x * x)) * np.sign(dq_rad_s)) \
            + lc * np.abs(tau_drive_motor_Nm) * np.sign(dq_rad_s)

    def motor_part_Nm(self, dq_rad_s, t_s: float, tau_drive_motor_Nm):
        """:meth:`joint_Nm` of the motor side alone (0.0 when the robot has none)."""
        if len(self.sides) < 2 and not (self.sides and self.sides[0][0]):
            return 0.0
        keep = self.sides
        self.sides = [sd for sd in keep if sd[0]]
        try:
            return self.joint_Nm(dq_rad_s, t_s, tau_drive_motor_Nm)
        finally:
            self.sides = keep

    def link_part_Nm(self, dq_rad_s, t_s: float, tau_drive_motor_Nm):
        """:meth:`joint_Nm` of the link side alone (0.0 when the robot has none)."""
        keep = self.sides
        self.sides = [sd for sd in keep if not sd[0]]
        try:
            return self.joint_Nm(dq_rad_s, t_s, tau_drive_motor_Nm) if self.sides else 0.0
        finally:
            self.sides = keep

    def rotor_Nm(self, dtheta_motor_rad_s, t_s: float, tau_drive_motor_Nm, coupling: np.ndarray):
        """The motor side's part in motor coordinates, on the rotor velocities (elastic joints:
        the motor friction acts on the rotor, before the gear spring, not on the link)."""
        f = self.motor_part_Nm(coupling @ dtheta_motor_rad_s, t_s, tau_drive_motor_Nm)
        return coupling.T @ f if self.coupled and not np.isscalar(f) else f

    def joint_Nm(self, dq_rad_s, t_s: float, tau_drive_motor_Nm) -> np.ndarray:
        """Extra friction torque opposing the joints (joint coordinates); ``tau_drive_motor_Nm``:
        the drive torque in motor coordinates (for the load term)."""
        p = self.p
        scale = 1.0 + p.drift_fraction * min(max(t_s, 0.0) / p.drift_time_s, 1.0)
        load = np.abs(tau_drive_motor_Nm)
        f = 0.0
        for motor, fc, fv, sa, lc in self.sides:
            if motor and self.coupled:
                v, ld = dq_rad_s @ self.ci.T, load
            elif self.coupled:
                v, ld = dq_rad_s, load @ self.ci  # |C^-T tau_m| approximated by C^-T |tau_m|
            else:
                v, ld = dq_rad_s, load
            sg = np.sign(v)
            x = v * self.inv_vs
            g = (scale * (fc + sa * np.exp(-x * x)) + lc * ld) * sg - fc * np.tanh(v / self.eps) \
                + (scale - 1.0) * fv * v
            f = f + (g @ self.ci if (motor and self.coupled) else g)
        return f if not np.isscalar(f) else np.zeros_like(dq_rad_s)


# ---------------------------------------------------------------------------------- sensors
def apply_sensor_effects(p: SensorParams, rate_hz: float, tau_motor_Nm: np.ndarray, tau_joint_Nm: np.ndarray,
                         pad: int) -> tuple[np.ndarray, np.ndarray]:
    """True torques over [window - pad, window) + window (samples x joints) -> the torque
    channels' readings over the window (before noise): delay, anti-aliasing filter, sample
    hold, joint-torque sensor gain and offset. ``pad`` samples of history precede the window."""
    out = []
    for tau, is_joint in ((tau_motor_Nm, False), (tau_joint_Nm, True)):
        x = np.asarray(tau, float)
        if p.antialias_hz > 0:  # Butterworth, started settled at the first value (scipy.signal's, bit for bit)
            from .antialias import lowpass_settled

            x = lowpass_settled(x, p.antialias_order, p.antialias_hz, rate_hz)
        d = p.torque_delay_cycles
        if d:
            x = np.vstack([np.repeat(x[:1], d, axis=0), x[:-d]])
        m = p.torque_hold_cycles
        if m > 1:
            idx = (np.arange(x.shape[0]) // m) * m
            x = x[idx]
        if is_joint:
            x = (1.0 + p.joint_torque_gain_error) * x + p.joint_torque_offset_Nm
        out.append(x[pad:])
    return out[0], out[1]


# ---------------------------------------------------------------------------------- transmission error
@dataclass(frozen=True)
class TransmissionErrorParams:
    """Gear transmission error: the output lags or leads the drive by a position-periodic
    ``e(theta) = sum_i a_i sin(2 pi k_i theta + phi_i)`` [rad] (tooth / wave frequency ``k_i`` in
    cycles per rad of the drive coordinate), with one amplitude and phase per flank: the
    pushing flank changes with the direction of motion, so ``a``, ``phi`` have a last axis
    (positive, negative direction), blended over ``blend_velocity_rad_s``.

    The drive has to accelerate the inertia it carries through the error: to leading order in
    ``e'`` the extra drive torque is ``J (e'' dtheta^2 + 2 e' ddtheta)`` (virtual work through
    the ratio ``1 + e'``), an inertial reaction that grows with the square of the speed at a
    frequency ``k |dtheta|``: the position-locked, speed-dependent line of a real gearbox.
    The HAL twins' ``transmission_error`` effect (:class:`TransmissionErrorEffect`) and the CLOOS
    twin against the real data (``robident_twin.validation.twin_vs_real``) use it."""

    cycles_per_rad: np.ndarray  # (n, k)
    amplitude_rad: np.ndarray  # (n, k, 2): positive, negative direction
    phase_rad: np.ndarray  # (n, k, 2)
    blend_velocity_rad_s: float = 0.01


def transmission_error_columns(cycles_per_rad, theta_rad, dtheta_rad_s, ddtheta_rad_s2, inertia_kgm2):
    """The torque ``J (e'' dtheta^2 + 2 e' ddtheta)`` of a unit error ``sin(2 pi k theta)`` and of
    ``cos(2 pi k theta)``, as two columns (samples x 2): the calibration's least-squares basis
    (amplitude a, phase phi: coefficients ``a cos phi`` and ``a sin phi``)."""
    w = 2 * np.pi * np.asarray(cycles_per_rad, float)
    ph = w * np.asarray(theta_rad, float)
    s, c = np.sin(ph), np.cos(ph)
    v2, a = np.asarray(dtheta_rad_s, float) ** 2, np.asarray(ddtheta_rad_s2, float)
    J = np.asarray(inertia_kgm2, float)
    return np.stack([J * (-w * w * s * v2 + 2 * w * c * a), J * (-w * w * c * v2 - 2 * w * s * a)], axis=-1)


def transmission_error_torque_Nm(p: TransmissionErrorParams, theta_rad, dtheta_rad_s, ddtheta_rad_s2,
                                 inertia_kgm2) -> np.ndarray:
    """The drive torque of :class:`TransmissionErrorParams` per axis (one state: arrays (n,))."""
    theta, v = np.asarray(theta_rad, float), np.asarray(dtheta_rad_s, float)
    up = 0.5 * (1.0 + np.tanh(v / p.blend_velocity_rad_s))  # weight of the positive-direction flank
    w = 2 * np.pi * p.cycles_per_rad  # (n, k)
    out = 0.0
    for f, wt in ((0, up), (1, 1.0 - up)):
        ph = w * theta[:, None] + p.phase_rad[..., f]
        a = p.amplitude_rad[..., f]
        e1, e2 = a * w * np.cos(ph), -a * w * w * np.sin(ph)  # e', e''
        out = out + wt * np.sum(e2 * (v * v)[:, None] + 2 * e1 * np.asarray(ddtheta_rad_s2, float)[:, None], axis=1)
    return np.asarray(inertia_kgm2, float) * out


class TransmissionErrorEffect:
    """The ``transmission_error`` effect of a HAL twin (both engines call it in their per-cycle
    code): the drive-side torque :func:`transmission_error_torque_Nm` per motor axis from the
    motor-side position, velocity and acceleration (motor coordinates, joint side), with ``J``
    the axis inertia in motor coordinates, ``diag(C^T M(q) C) + Ia`` (the truth model's links
    and the drive inertia), evaluated by :meth:`hold_inertia` once per control period. In joint
    coordinates the torque acts as ``C^-T tau_te`` on the links (rigid joints) or on the rotors
    (``elasticity``); the motor torque overcomes it."""

    def __init__(self, spec, p: TransmissionErrorParams, truth):
        self.p = p
        self.truth = truth
        self.coupled = spec.is_coupled
        self.C, self.ci = np.asarray(spec.coupling, float), np.asarray(spec.coupling_inv, float)
        self.ia = np.asarray(spec.drive_inertia_kgm2, float)
        self.J = self.inertia_kgm2(spec.home_rad)
        # transmission_error_torque_Nm's arrays, precomputed (this runs in every integrator stage)
        w = 2 * np.pi * np.asarray(p.cycles_per_rad, float)[..., None]  # (n, k, 1)
        self._w, self._aw, self._aw2 = w, p.amplitude_rad * w, -p.amplitude_rad * w * w
        self._phase, self._inv_blend = p.phase_rad, 1.0 / p.blend_velocity_rad_s

    def inertia_kgm2(self, q_rad) -> np.ndarray:
        """Axis inertia in motor coordinates at the link position ``q_rad``."""
        import pinocchio as pin

        from robident_twin.model.dynamics import symmetric_from_upper

        M = pin.crba(self.truth.model, self.truth.data, np.asarray(q_rad, float))
        M = symmetric_from_upper(M)
        return (np.diag(self.C.T @ M @ self.C) if self.coupled else np.diag(M).copy()) + self.ia

    def hold_inertia(self, q_rad) -> None:
        self.J = self.inertia_kgm2(q_rad)

    def motor_Nm(self, theta_rad, dtheta_rad_s, ddtheta_rad_s2) -> np.ndarray:
        """:func:`transmission_error_torque_Nm` with the held ``J`` (both flanks at once)."""
        v = np.asarray(dtheta_rad_s, float)
        ph = self._w * np.asarray(theta_rad, float)[:, None, None] + self._phase  # (n, k, 2)
        f = np.sum(self._aw2 * np.sin(ph) * (v * v)[:, None, None]
                   + 2.0 * self._aw * np.cos(ph) * np.asarray(ddtheta_rad_s2, float)[:, None, None], axis=1)
        up = 0.5 * (1.0 + np.tanh(v * self._inv_blend))
        return self.J * (up * f[:, 0] + (1.0 - up) * f[:, 1])

    def joint_Nm(self, q_rad, dq_rad_s, ddq_rad_s2) -> np.ndarray:
        """The torque in joint coordinates for a rigid joint state (motor state = C^-1 x)."""
        if not self.coupled:
            return self.motor_Nm(q_rad, dq_rad_s, ddq_rad_s2)
        ci = self.ci
        return ci.T @ self.motor_Nm(ci @ q_rad, ci @ dq_rad_s, ci @ ddq_rad_s2)


def transmission_error_effect(setup: TwinSetup, spec, truth) -> TransmissionErrorEffect | None:
    """The effect of a twin, or None when it is off or the robot's twin.yaml has none (no-op)."""
    if not setup.has("transmission_error") or setup.params.transmission_error is None:
        return None
    return TransmissionErrorEffect(spec, setup.params.transmission_error, truth)
