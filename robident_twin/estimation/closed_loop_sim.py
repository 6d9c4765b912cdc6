"""Closed-loop simulation of the identification *model* (never the twin, never its truth) for
IDIM-IV and DIDIM (Gautier, Janot, Vandanjon, IEEE TCST 2013).

The model with the current estimate ``beta`` (:class:`~robident_twin.estimation.model_dynamics.
ModelDynamics`: pinocchio CRBA / non-linear effects plus drives, couplings, springs, friction,
offsets) is driven along the robot's reference by the robot's own controller law and gains:

    u = ff(t) + C^T [kp (q_ref - q) + kd (dq_ref - dq) + ki integral(dq_ref - dq + kp/kd (q_ref - q))]

with ``ff`` the model feed-forward of the reference computed with the *current estimate* (the
controller's model-based feed-forward; the twin's uses its own model, which the estimator never
reads) or zero when the controller has none. The controller runs at its own rate and its torque reaches each command over one period
(first-order hold, the feed-forward advanced one period, as the twin's drives); the model is
integrated by RK4 under that ramp, with substeps where a stiff loop needs them (a joint-torque
model lacks the drive inertia the gains were tuned on). A loop closed on the measurements (a
realistic twin's ``closed_loop`` effect, a real drive) is simulated as it runs: ``dq`` in the law is
the drive's velocity estimate (backward difference of the position, first-order low-pass at
``velocity_filter_hz``) and the command reaches the drive ``delay_cycles`` periods late; the
position noise it also sees is not simulated (zero mean). The simulation
starts on the reference ``lead_s`` before the first recorded sample so that the loop's transient
has died out (periodic references: the steady state the recording averages). At the recorded
instants the state and its instantaneous acceleration (the model's forward dynamics under the
controller torque) are returned: noise free, hence uncorrelated with the measurement noise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from robident_twin.errors import ConfigError, IdentificationError
from robident_twin.estimation.integrate import rk4_step
from robident_twin.estimation.model_dynamics import ModelDynamics

Reference = Callable[[np.ndarray], tuple]  # t_s -> (q_rad, dq_rad_s, ddq_rad_s2), each samples x joints


@dataclass(frozen=True)
class LoopController:
    """The robot's joint controller (joint coordinates; per-joint gains)."""

    kp_Nm_rad: np.ndarray
    kd_Nms_rad: np.ndarray
    ki_Nm_rad: np.ndarray | None = None  # gain of the PI velocity loop's integral (None / 0: PD)
    feedforward: bool = True
    control_rate_hz: float = 1000.0  # the controller's rate: the model loop runs at it (first-order hold)
    damping_ratio: float = 1.0  # of the gains' design: they were tuned on the inertia kd^2 / (4 zeta^2 kp)
    delay_cycles: int = 0  # the command (feed-forward and feedback) reaches the drive this many periods later
    velocity_filter_hz: float | None = None  # the loop's velocity: backward difference + this low-pass (None: true)

    def __post_init__(self):
        if not isinstance(self.delay_cycles, (int, np.integer)) or self.delay_cycles < 0:
            raise ConfigError(f"closed-loop model simulation: delay_cycles must be an integer >= 0, got "
                              f"{self.delay_cycles!r}")
        if self.velocity_filter_hz is not None and not float(self.velocity_filter_hz) > 0:
            raise ConfigError(f"closed-loop model simulation: velocity_filter_hz must be positive or None, got "
                              f"{self.velocity_filter_hz!r}")
        for name in ("kp_Nm_rad", "kd_Nms_rad"):
            v = np.asarray(getattr(self, name), dtype=float)
            if v.ndim != 1 or not np.all(np.isfinite(v)) or np.any(v <= 0):
                raise ConfigError(f"closed-loop model simulation: {name} must be positive finite per-joint gains, "
                                  f"got {getattr(self, name)!r}")


def _channel_rows(regressor) -> slice | None:
    """Rows of one sample that belong to the actuated channel (the motor rows of measurement=both)."""
    n = regressor.n_joints
    return slice(n, 2 * n) if regressor.options.measurement == "both" else None


class ModelLoop:
    """beta -> simulated base regressor at the recorded instants (call it); the last simulated
    states are kept in ``states`` and the largest tracking error of each simulation in
    ``tracking_error_rad``."""

    def __init__(self, regressor, base, reference: Reference, t_record_s: np.ndarray, controller: LoopController,
                 sim_rate_hz: float | None = None, lead_s: float = 1.0):
        t = np.asarray(t_record_s, dtype=float)
        if t.ndim != 1 or t.size < 2 or np.any(np.diff(t) <= 0):
            raise ConfigError("closed-loop model simulation: the recorded instants must be increasing (>= 2)")
        dt = float(np.median(np.diff(t)))
        if np.max(np.abs(np.diff(t) - dt)) > 1e-6 * dt:
            raise ConfigError("closed-loop model simulation: the recorded instants must be equally spaced")
        sim_rate_hz = float(controller.control_rate_hz if sim_rate_hz is None else sim_rate_hz)
        if not sim_rate_hz > 0 or not lead_s >= 0:
            raise ConfigError(f"closed-loop model simulation: sim_rate_hz > 0 and lead_s >= 0 expected, got "
                              f"{sim_rate_hz}, {lead_s}")
        n = regressor.n_joints
        if np.asarray(controller.kp_Nm_rad).shape != (n,) or np.asarray(controller.kd_Nms_rad).shape != (n,):
            raise ConfigError(f"closed-loop model simulation: {n} gains per joint expected, got kp "
                              f"{np.asarray(controller.kp_Nm_rad).shape}, kd {np.asarray(controller.kd_Nms_rad).shape}")
        self.regressor, self.base, self.controller = regressor, base, controller
        self.m = max(1, int(np.ceil(dt * sim_rate_hz - 1e-6)))  # control periods per recorded interval
        self.h = dt / self.m
        self.n_lead = int(np.ceil(lead_s / self.h))
        self.n_steps = self.n_lead + (t.size - 1) * self.m
        self.t_steps = t[0] + (np.arange(self.n_steps + 1) - self.n_lead) * self.h
        self.record_at = self.n_lead + np.arange(t.size) * self.m
        self.q_ref, self.dq_ref, self.ddq_ref = (np.asarray(x, dtype=float) for x in reference(self.t_steps))
        if self.q_ref.shape != (self.t_steps.size, n):
            raise ConfigError(f"closed-loop model simulation: the reference gave shape {self.q_ref.shape}, "
                              f"expected {(self.t_steps.size, n)}")
        self._W_ff = None
        if controller.feedforward:  # the channel's base regressor along the reference: ff = W_ff beta
            W = base.columns(regressor.stack(self.q_ref, self.dq_ref, self.ddq_ref))
            rows = _channel_rows(regressor)
            W = W.reshape(self.t_steps.size, -1, W.shape[1])
            self._W_ff = W if rows is None else W[:, rows]
        self.states = None
        self.tracking_error_rad: list[float] = []

    def simulate(self, beta: np.ndarray):
        """(q, dq, ddq) of the model with ``beta`` in closed loop at the recorded instants."""
        dyn = ModelDynamics(self.regressor, self.base, beta)
        c = self.controller
        n, h = self.regressor.n_joints, self.h
        kp, kd = np.asarray(c.kp_Nm_rad, float), np.asarray(c.kd_Nms_rad, float)
        ki = None if c.ki_Nm_rad is None else np.asarray(c.ki_Nm_rad, float)
        CT = dyn.C.T
        ff = np.zeros((self.t_steps.size, n)) if self._W_ff is None else self._W_ff @ beta
        # a joint-torque model has no drives, but the gains were tuned on the drive + link inertia at
        # the robot's home pose, kd^2 / (4 zeta^2 kp): the loop's plant gets the drive inertia that
        # implies, in the plant and in the feed-forward alike (so it changes no torque along the
        # reference); without it the link-only mass matrix of an estimate can be near singular
        # (coaxial joints) and the loop unstable
        extra = np.zeros(n)
        if dyn.channel == "joint":
            J = kd**2 / (4 * c.damping_ratio**2 * kp)
            extra = np.maximum(J - np.diag(dyn.mass(np.asarray(self.regressor.spec.home_rad, float))), 0.0)
            ff = ff + extra * self.ddq_ref
        ff = np.vstack([ff[1:], ff[-1:]])  # advanced one period: the ramp reaches ff(t_k+1) at t_k+1
        q, v = self.q_ref[0].copy(), self.dq_ref[0].copy()
        u_prev = dyn.mass(q) @ self.ddq_ref[0] + extra * self.ddq_ref[0] + dyn.bias(q, v)  # on the reference
        integ = np.zeros(n)
        rec = self.record_at
        Q, V, A = (np.empty((rec.size, n)) for _ in range(3))
        ns = self._substeps(dyn, kd, extra)
        hs = h / ns
        r = 0
        acc = dyn.forward(extra)
        ramp = [(j / ns, 0.5 * (j / ns + (j + 1) / ns), (j + 1) / ns) for j in range(ns)]  # FOH fractions
        q_next = self.q_ref[1:]
        # the drive's velocity estimate (backward difference, first-order low-pass), settled on the reference
        alpha = None if c.velocity_filter_hz is None else 1.0 - np.exp(-2 * np.pi * float(c.velocity_filter_hz) * h)
        q_prev, v_f = q - h * v, v.copy()
        queue = [u_prev] * int(c.delay_cycles)  # commands on their way to the drive
        for k in range(self.n_steps + 1):
            if r < rec.size and rec[r] == k:  # the state and its acceleration under the applied torque
                Q[r], V[r] = q, v
                A[r] = acc(q, v, u_prev)
                r += 1
            if k == self.n_steps:
                break
            if alpha is not None:
                v_f = v_f + alpha * ((q - q_prev) / h - v_f)
                q_prev = q
                e_q, e_v = self.q_ref[k] - q, self.dq_ref[k] - v_f
            else:
                e_q, e_v = self.q_ref[k] - q, self.dq_ref[k] - v
            fb = kp * e_q + kd * e_v
            if ki is not None:
                integ += (e_v + kp / kd * e_q) * h
                fb = fb + ki * integ
            u = ff[k] + (CT @ fb if dyn.coupled else fb)
            if queue:
                queue.append(u)
                u = queue.pop(0)
            du = u - u_prev
            for s0, sm, s1 in ramp:  # RK4 under the first-order-hold torque u_prev -> u over the period
                q, v = rk4_step(acc, q, v, hs, u_prev + du * s0, u_prev + du * sm, u_prev + du * s1)
            u_prev = u
            # NaN fails the comparison, so a non-finite q or v is caught too
            if not (np.abs(q - q_next[k]).max() <= 1.0 and np.isfinite(v.sum())):
                raise IdentificationError(
                    f"closed-loop simulation of the model diverged at t = {self.t_steps[k + 1]:.3f} s (tracking "
                    "error above 1 rad): the estimate is not a simulable model (e.g. its mass matrix is not "
                    "positive definite); start from a better estimate")
        self.states = (Q, V, A)
        self.tracking_error_rad.append(float(np.max(np.abs(Q - self.q_ref[rec]))))
        return Q, V, A

    def _substeps(self, dyn: ModelDynamics, kd: np.ndarray, extra: np.ndarray) -> int:
        """RK4 substeps per control period that keep the stiffest loop pole (kd over the loop's
        inertia) well inside RK4's stability region (h lambda <= 1)."""
        Ad = np.abs(np.diag((dyn.mass(self.q_ref[0]) + np.diag(extra)) @ dyn.Cinv))
        lam = float(np.max(kd / np.maximum(Ad, 1e-12)))
        return int(min(100, max(1, np.ceil(self.h * lam))))

    def __call__(self, beta: np.ndarray) -> np.ndarray:
        return self.base.columns(self.regressor.stack(*self.simulate(beta)))


def loop_controller(robot, est_cfg) -> LoopController | None:
    """The controller the model is simulated with: ``estimator.kp_Nm_rad`` / ``kd_Nms_rad`` (and
    optionally ``ki_Nm_rad``, ``feedforward``) when given (real robots, recorded files), else the
    gains of a twin's controller (``robot.kp``, ``robot.kd``, ``robot.ki``: numbers of the
    controller, not of the plant; the twin's feed-forward model itself is never read) and, when
    the twin's loop is closed on the measurements (``closed_loop`` effect), its command delay and
    velocity filter; else None. ``est_cfg``: the typed closed-loop estimator option (IV or DIDIM;
    a mapping of its keys is validated as ``estimator=iv``'s)."""
    from robident_twin.estimation.config import as_estimator

    est_cfg = as_estimator(est_cfg, name="iv")
    if est_cfg.kp_Nm_rad is not None or est_cfg.kd_Nms_rad is not None:
        if est_cfg.kp_Nm_rad is None or est_cfg.kd_Nms_rad is None:
            raise ConfigError("estimator.kp_Nm_rad and estimator.kd_Nms_rad: give both (per-joint gains)")
        ki = est_cfg.ki_Nm_rad
        ff = est_cfg.feedforward
        return LoopController(np.asarray(est_cfg.kp_Nm_rad, float), np.asarray(est_cfg.kd_Nms_rad, float),
                              None if ki is None else np.asarray(ki, float), True if ff is None else bool(ff),
                              float(robot.info.control_rate_hz))
    kp, kd = getattr(robot, "kp", None), getattr(robot, "kd", None)
    if kp is None or kd is None:
        return None
    ctrl = getattr(robot, "controller", None)
    integral = float(getattr(ctrl, "integral_hz", 0.0) or 0.0)
    ki = getattr(robot, "ki", None) if integral > 0 else None
    ff = bool(getattr(ctrl, "feedforward", True)) if est_cfg.feedforward is None else est_cfg.feedforward
    delay, v_filter = 0, None
    twin = getattr(robot, "twin", None)  # a realistic twin's loop closed on the measurements (hal.sim.effects)
    if twin is not None and not twin.ideal and twin.has("closed_loop"):
        delay, v_filter = int(twin.params.closed_loop.delay_cycles), float(twin.params.closed_loop.velocity_filter_hz)
    return LoopController(np.array(kp, float), np.array(kd, float), None if ki is None else np.array(ki, float), ff,
                          float(robot.info.control_rate_hz), float(getattr(ctrl, "damping_ratio", 1.0)), delay, v_filter)


def estimator_details(est) -> dict:
    """What an iterative estimator reports in summary.json: its iterations and convergence, the
    model loop's tracking error (IV, DIDIM) and the full covariance of the base parameters."""
    out = {}
    for key in ("iterations", "last_relative_change", "converged", "nfev"):
        if key in est.extra:
            v = est.extra[key]
            out[key] = bool(v) if isinstance(v, (bool, np.bool_)) else (int(v) if isinstance(v, (int, np.integer))
                                                                       else float(v))
    loop = est.extra.get("model_loop")
    if loop is not None and loop.tracking_error_rad:
        out["model_loop_max_tracking_error_rad"] = loop.tracking_error_rad[-1]
        out["model_loop_step_s"] = loop.h
    out["covariance"] = np.asarray(est.cov, float).tolist()
    return out
