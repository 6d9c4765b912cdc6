"""Design constraints: nominal-model torques (motor torques for coupled drives), Cartesian, collision,
bandwidth and zero start; the constraint set evaluated on a grid and the dense re-check of a design.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from robident_twin.design.fourier import (
    DEFAULT_N_CONSTRAINT,
    DENSE_CHECK_FACTOR,
    FourierTrajectory,
)
from robident_twin.design.geometry import (
    CartesianBounds,
    CollisionChecker,
    CollisionSettings,
    EndEffector,
    _opt_float,
)
from robident_twin.design.limits import _check_joints, _check_margin, check_limits
from robident_twin.errors import ConfigError
from robident_twin.model.robot import RobotSpec

_SOFTMIN_M = 0.005  # smoothing length of the soft-min over collision pairs during design, m
CONSTRAINT_KINDS = ("position", "velocity", "acceleration", "torque", "cartesian", "collision")
_KIND_UNITS = {"position": "rad", "velocity": "rad/s", "acceleration": "rad/s^2", "torque": "N m",
               "cartesian": "m", "collision": "m"}


def nominal_torque_model(spec: RobotSpec, regressor=None, base=None, beta=None,
                         measurement: str | None = None):
    """Callable ``(q, dq, ddq) -> tau_Nm`` (samples x joints) of the nominal model.

    With ``beta`` (an estimate of the base parameters): ``W_base(q, dq, ddq) beta``; otherwise
    the twin's ground truth (:class:`robident_twin.model.dynamics.TruthModel`), joint or motor torque
    as ``measurement`` (default: the regressor's, else joint torque)."""
    if beta is not None:
        if regressor is None or base is None:
            raise ConfigError("nominal torque from an estimate needs the regressor and the base set")
        beta = np.asarray(beta, dtype=float)
        if beta.shape != (base.n_base,):
            raise ConfigError(f"beta: expected {base.n_base} base parameters, got shape {beta.shape}")

        def from_estimate(q, dq, ddq):
            q = np.atleast_2d(q)
            tau = base.columns(regressor.stack(q, np.atleast_2d(dq), np.atleast_2d(ddq))) @ beta
            return tau.reshape(q.shape[0], -1)[:, -q.shape[1]:]  # 'both': the motor channels
        return from_estimate
    from robident_twin.model.dynamics import TruthModel

    truth = TruthModel(spec)
    if measurement is None:
        measurement = regressor.options.measurement if regressor is not None else "joint_torque"
    idx = 0 if measurement == "joint_torque" else 1  # the drive torque when motors are measured

    def from_truth(q, dq, ddq):
        return truth.torques(q, dq, ddq)[idx]
    return from_truth


class LimitedTorque:
    """The torques the robot file's limits bound, as a callable ``(q, dq, ddq) -> (T, n)`` N m.

    side: 'joint' (link-side joint torques, or the drive torque of an independent drive) or
    'motor' (motor torques in motor coordinates, C^T tau_joint + Ia ddq_m + f_m(dq_m), for a
    robot with coupled drives, e.g. the CLOOS differential wrist gear)."""

    def __init__(self, fn, side: str):
        self.fn, self.side = fn, side

    def __call__(self, q, dq, ddq) -> np.ndarray:
        return self.fn(q, dq, ddq)


def torque_limit_model(spec: RobotSpec, regressor=None, base=None, beta=None,
                       measurement: str | None = None) -> LimitedTorque:
    """Nominal torques to compare with ``spec.tau_max_Nm``.

    With coupled drives (``coupling_matrix``: q_joint = C q_motor) the limits are on the motors,
    so the motor torques C^T tau_joint + Ia ddq_m + f_m(dq_m) are returned whatever the
    measurement: a motor can exceed its limit through the coupling while every joint torque is
    within its own (the wrist motor of a differential gear also turns, and works, when only the
    other wrist joint moves). From an estimate ``beta`` this needs a regressor with motor
    channels (motor_torque or both). Independent drives: :func:`nominal_torque_model` of
    ``measurement`` (joint torque by default, the drive torque for motor_torque)."""
    if not spec.is_coupled:
        return LimitedTorque(nominal_torque_model(spec, regressor, base, beta, measurement), "joint")
    if beta is not None:
        meas = regressor.options.measurement if regressor is not None else None
        if meas not in ("motor_torque", "both"):
            raise ConfigError(
                f"torque limits of robot '{spec.name}' are on its coupled motors: the motor torques "
                f"from an estimate need a motor_torque or both regressor, got measurement {meas!r}")
        return LimitedTorque(nominal_torque_model(spec, regressor, base, beta), "motor")
    return LimitedTorque(nominal_torque_model(spec, measurement="motor_torque"), "motor")


def noise_std_Nm(spec: RobotSpec, measurement: str = "joint_torque") -> np.ndarray:
    """Torque noise std (N m) per measured channel from the robot file: per joint for
    joint_torque / motor_torque, joint then motor channels for both, the root sum of squares
    for difference. Unit weights when the file gives no (positive) noise."""
    j = np.asarray(spec.tau_joint_std_Nm, dtype=float)
    m = np.asarray(spec.tau_motor_std_Nm, dtype=float)
    std = {"motor_torque": m, "joint_torque": j, "both": np.concatenate([j, m]),
           "difference": np.hypot(j, m)}.get(measurement, j)
    if np.any(std <= 0):
        return np.ones_like(std)
    return std


def _n_channels(regressor) -> int:
    return int(getattr(regressor, "n_channels", regressor.n_joints))


@dataclass(frozen=True)
class DesignConstraints:
    """Every constraint and option of a design.

    margin: fraction of the position/velocity/acceleration limits used while optimising;
    zero_start: dq = ddq = 0 at the start and, by periodicity, at the end (Xu 2020 eq. 10);
    resonance_hz: lowest resonance; designs need n_f f0 < resonance_hz (Kolyubin 2017);
    torque: |tau_nominal| <= torque_margin x tau_max; cartesian: :class:`CartesianBounds`,
    tightened by cartesian_margin_m while optimising; collision: :class:`CollisionSettings`;
    n_check / n_check_nonlinear: grid points per period of the linear / nonlinear
    constraints while optimising (the final check uses a grid DENSE_CHECK_FACTOR x denser).
    """

    margin: float = 0.95
    zero_start: bool = False
    resonance_hz: float | None = None
    torque: bool = False
    torque_margin: float = 0.9
    cartesian: CartesianBounds | None = None
    cartesian_margin_m: float = 0.01
    collision: CollisionSettings | None = None
    n_check: int = DEFAULT_N_CONSTRAINT
    n_check_nonlinear: int = 100

    def __post_init__(self):
        _check_margin(self.margin)
        if not 0 < self.torque_margin <= 1:
            raise ConfigError(f"torque_margin: expected a fraction in (0, 1], got {self.torque_margin!r}")
        if self.resonance_hz is not None and not self.resonance_hz > 0:
            raise ConfigError(f"resonance_hz: expected a positive frequency in Hz, got {self.resonance_hz!r}")
        for name in ("n_check", "n_check_nonlinear"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 2:
                raise ConfigError(f"{name}: expected an integer >= 2, got {v!r}")

    @property
    def nonlinear(self) -> bool:
        return self.torque or self.cartesian is not None or self.collision is not None

    @classmethod
    def from_section(cls, c) -> "DesignConstraints":
        """From the typed ``design.constraints`` section
        (:class:`robident_twin.design.config.ConstraintsConfig`); its cartesian and collision
        blocks are checked in depth here, as :meth:`from_config` does."""
        from robident_twin.design.geometry import CartesianBounds, CollisionSettings

        cartesian = None if c.cartesian is None else {
            k: v for k, v in vars(c.cartesian).items() if v is not None}  # the keys the user set
        return cls(margin=c.margin, zero_start=c.zero_start, resonance_hz=c.resonance_hz, torque=c.torque,
                   torque_margin=c.torque_margin,
                   cartesian=CartesianBounds.from_config(cartesian, "design.constraints.cartesian"),
                   collision=CollisionSettings.from_config(c.collision, "design.constraints.collision"))

    @classmethod
    def from_config(cls, d: Mapping[str, Any] | None, where: str = "design") -> "DesignConstraints":
        """From a config mapping (the ``design.constraints`` block); errors name the key."""
        d = dict(d or {})
        allowed = {"margin", "zero_start", "resonance_hz", "torque", "torque_margin", "cartesian",
                   "cartesian_margin_m", "collision", "n_check", "n_check_nonlinear"}
        unknown = set(d) - allowed
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
        kw: dict[str, Any] = {}
        for k in ("margin", "torque_margin", "cartesian_margin_m"):
            if d.get(k) is not None:
                kw[k] = _opt_float(d, k, where)
        if d.get("resonance_hz") is not None:
            kw["resonance_hz"] = _opt_float(d, "resonance_hz", where, positive=True)
        for k in ("zero_start", "torque"):
            if d.get(k) is not None:
                kw[k] = bool(d[k])
        for k in ("n_check", "n_check_nonlinear"):
            if d.get(k) is not None:
                kw[k] = d[k]
        kw["cartesian"] = CartesianBounds.from_config(d.get("cartesian"), f"{where}.cartesian")
        kw["collision"] = CollisionSettings.from_config(d.get("collision"), f"{where}.collision")
        return cls(**kw)


@dataclass(frozen=True)
class ConstraintViolation:
    """The worst violation of one constraint (kind, joint or what) on a check grid.

    ``margin`` is signed: limit minus value (negative = violated by that much), in ``unit``."""

    kind: str
    what: str
    time_s: float
    value: float
    limit: float
    margin: float

    @property
    def unit(self) -> str:
        return _KIND_UNITS[self.kind]

    def describe(self) -> str:
        return (f"{self.kind}: {self.what} at t = {self.time_s:.4f} s: value {self.value:.6g} "
                f"{self.unit}, limit {self.limit:.6g} {self.unit}, margin {self.margin:.4g} {self.unit}")


class ConstraintSet:
    """Evaluates the nonlinear constraints (torque, Cartesian, collision) of a design on states.

    ``margins(q, dq, ddq, design=True)`` returns (T, m) signed margins (>= 0 satisfied); with
    ``design=True`` the design-time tightening (torque_margin, cartesian_margin_m, clearance)
    applies, with ``design=False`` the true limits (plus the configured clearance)."""

    def __init__(self, spec: RobotSpec, constraints: DesignConstraints, torque_fn=None):
        self.spec, self.c = spec, constraints
        if constraints.torque and torque_fn is None:
            torque_fn = torque_limit_model(spec)  # the twin's truth; motors for coupled drives
        self.torque_fn = torque_fn
        # 'motor' when the limits bound motor torques (coupled drives), else 'joint'
        self.torque_side = getattr(torque_fn, "side", "joint")
        self.ee = EndEffector(spec) if constraints.cartesian is not None else None
        self.coll = CollisionChecker(spec, constraints.collision) if constraints.collision else None
        self.labels: list[tuple[str, str]] = []  # (kind, what) per column
        if constraints.torque:
            for j in spec.joint_names:
                self.labels += [("torque", f"{self.torque_side} {j} upper"),
                                ("torque", f"{self.torque_side} {j} lower")]
        if constraints.cartesian is not None:
            self.labels += [("cartesian", s) for s in constraints.cartesian.names()]
        if self.coll is not None:
            self.labels.append(("collision", "closest pair"))
        self.uses_rates = constraints.torque  # the others depend on q only

    @property
    def m(self) -> int:
        return len(self.labels)

    def torque_part(self, q, dq, ddq, design: bool = True) -> np.ndarray:
        """(T, 2n) torque margins: lim - tau and lim + tau per joint (empty without torque)."""
        if not self.c.torque:
            return np.zeros((np.atleast_2d(q).shape[0], 0))
        tau = self.torque_fn(q, dq, ddq)
        lim = self.spec.tau_max_Nm * (self.c.torque_margin if design else 1.0)
        return np.stack([lim - tau, lim + tau], axis=2).reshape(tau.shape[0], -1)

    def geometric_part(self, q, design: bool = True, detail: bool = False):
        """(T, m) Cartesian and collision margins, functions of q only."""
        c = self.c
        cols = []
        extra: dict[str, Any] = {}
        if self.ee is not None:
            p = self.ee.positions(q)
            cols.append(c.cartesian.margins(p) - (c.cartesian_margin_m if design else 0.0))
            extra["p_m"] = p
        if self.coll is not None:
            dist = self.coll.distances(q)
            k = np.argmin(dist, axis=1)
            dmin = dist[np.arange(dist.shape[0]), k]
            if design:
                # smooth soft-min over the pairs (a lower bound of the min, no kinks for SLSQP)
                kappa = _SOFTMIN_M
                dsoft = dmin - kappa * np.log(np.sum(np.exp(-(dist - dmin[:, None]) / kappa), axis=1))
                cols.append((dsoft - self.c.collision.clearance_m - c.cartesian_margin_m)[:, None])
            else:
                cols.append((dmin - self.c.collision.clearance_m)[:, None])
            extra["distance_m"], extra["closest_pair"] = dmin, k
        g = np.hstack(cols) if cols else np.zeros((np.atleast_2d(q).shape[0], 0))
        return (g, extra) if detail else g

    def margins(self, q, dq, ddq, design: bool = True, detail: bool = False):
        g_geo, extra = self.geometric_part(q, design, detail=True)
        g = np.hstack([self.torque_part(q, dq, ddq, design), g_geo])
        if detail and self.c.torque:
            extra["tau_Nm"] = self.torque_fn(q, dq, ddq)
        return (g, extra) if detail else g

    def violations(self, t_s, q, dq, ddq) -> list[ConstraintViolation]:
        """Worst violation per constraint column at the true limits."""
        g, extra = self.margins(q, dq, ddq, design=False, detail=True)
        out = []
        tau_lim = self.spec.tau_max_Nm
        for col, (kind, what) in enumerate(self.labels):
            k = int(np.argmin(g[:, col]))
            if g[k, col] >= 0:
                continue
            if kind == "torque":
                j = col // 2
                value, limit = float(extra["tau_Nm"][k, j]), float(tau_lim[j]) * (1 if col % 2 == 0 else -1)
            elif kind == "collision":
                value = float(extra["distance_m"][k])
                limit = float(self.c.collision.clearance_m)
                what = f"closest pair {self.coll.pair_names[int(extra['closest_pair'][k])]}"
            else:
                vals, lims = self.c.cartesian.values_and_limits(extra["p_m"][k:k + 1])
                i = col - (2 * self.spec.n_joints if self.c.torque else 0)
                value, limit = float(vals[0, i]), float(lims[i])
                what = f"end effector {what} (p = {np.round(extra['p_m'][k], 4).tolist()} m)"
            out.append(ConstraintViolation(kind, what, float(t_s[k]), value, limit, float(g[k, col])))
        return out


def check_design(traj: FourierTrajectory, spec: RobotSpec, constraints: DesignConstraints,
                 torque_fn=None, n_grid: int | None = None,
                 cset: ConstraintSet | None = None) -> list[ConstraintViolation]:
    """Every violated constraint of a design at the FULL limits on ``n_grid`` points per period
    (default DENSE_CHECK_FACTOR x the design grid), worst per joint and kind, plus the
    zero-start and bandwidth options. Empty when the design satisfies everything."""
    _check_joints(traj, spec)
    n_grid = DENSE_CHECK_FACTOR * constraints.n_check if n_grid is None else int(n_grid)
    out = []
    for v in check_limits(traj, spec, n_grid=n_grid):
        margin = -v.excess
        limit = v.limit
        out.append(ConstraintViolation(v.kind, f"joint {v.joint}", v.time_s, v.value, limit, margin))
    if constraints.zero_start:
        _, dq0, ddq0 = traj.evaluate(0.0)
        for j, name in enumerate(spec.joint_names):
            if abs(dq0[0, j]) > 1e-6:
                out.append(ConstraintViolation("velocity", f"joint {name} at rest at start/end", 0.0,
                                               float(dq0[0, j]), 0.0, -abs(float(dq0[0, j]))))
            if abs(ddq0[0, j]) > 1e-6:
                out.append(ConstraintViolation("acceleration", f"joint {name} at rest at start/end",
                                               0.0, float(ddq0[0, j]), 0.0, -abs(float(ddq0[0, j]))))
    if constraints.nonlinear:
        cset = cset or ConstraintSet(spec, constraints, torque_fn)
        t = traj.time_grid(n_grid)
        out += cset.violations(t, *traj.evaluate(t))
    return out


def check_bandwidth(n_harmonics: int, base_freq_hz: float, resonance_hz: float | None) -> None:
    """Kolyubin 2017: the highest excited frequency n_f f0 must stay below the lowest resonance."""
    if resonance_hz is not None and n_harmonics * base_freq_hz >= resonance_hz:
        raise ConfigError(
            f"bandwidth: {n_harmonics} harmonics x {base_freq_hz:g} Hz = "
            f"{n_harmonics * base_freq_hz:g} Hz is not below the lowest resonance {resonance_hz:g} Hz; "
            f"use fewer harmonics or a lower base frequency (n_f f0 < f_r)")
