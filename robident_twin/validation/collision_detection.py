"""Collision detection with the generalised-momentum observer (Haddadin, De Luca,
Albu-Schaeffer 2017; used by Xu et al. 2020, Fig. 7 and Table 10, to compare parameter sets).

With p = M(q) dq and M ddq + C dq + g + f(dq) = tau + tau_ext, dp/dt = tau + tau_ext +
C^T dq - g - f (since dM/dt = C + C^T), so the residual

    r(t) = K_O (p(t) - p(0) - integral_0^t (tau + C^T dq - g - f + r) ds)

follows dr/dt = K_O (tau_ext - r): a first-order low-pass image of the external joint
torque, zero without contact if the model (M, C, g, f) is exact. Model errors leave a
residual without contact, which sets the detection threshold: better parameters, a
lower threshold, a more sensitive detector. It needs q, dq and the measured torque, no
acceleration.

Here M, C, g come from pinocchio (``crba``, ``computeCoriolisMatrix``,
``computeGeneralizedGravity``) of any parameter set given as a RobotSpec (the nominal CAD
model, the identified twin, the truth), f from the same spec
(:mod:`robident_twin.model.dynamics`). ``channel="joint"`` uses the joint-torque sensors (link
dynamics and link friction); ``channel="motor"`` the motor torques (drive inertia,
both frictions and offsets added; independent drives only).

Signals: the twin's encoder positions (quantised, noisy) are smoothed and differentiated
by a centred Savitzky-Golay window of 2h + 1 samples, so the observer runs with a latency
of h samples; detection times include it. The integral uses the trapezoidal rule for the
model terms (r explicit), so the discretisation leaves no bias proportional to dt / K_O.

:class:`CollidingMujocoTwin` is the MuJoCo twin with an external wrench on one link for a
time window (``data.xfrc_applied``, set inside the passive-force callback so every RK4
stage sees it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.model.dynamics import symmetric_from_upper
from robident_twin.model.robot import RobotSpec

# --------------------------------------------------------------------------- observer


def smooth_state(q_rad: np.ndarray, dt_s: float, half_window: int) -> tuple[np.ndarray, np.ndarray]:
    """Centred Savitzky-Golay (quadratic) position and velocity of sampled positions,
    window 2 half_window + 1 samples (a latency of half_window samples online)."""
    from scipy.signal import savgol_filter

    q = np.asarray(q_rad, dtype=float)
    if half_window < 1:
        raise ConfigError(f"collision.half_window: expected >= 1 sample, got {half_window}")
    if q.shape[0] < 2 * half_window + 1:
        raise ConfigError(f"collision: {q.shape[0]} samples are fewer than the smoothing window "
                          f"{2 * half_window + 1}")
    w = 2 * int(half_window) + 1
    return (savgol_filter(q, w, 2, deriv=0, axis=0, mode="interp"),
            savgol_filter(q, w, 2, deriv=1, delta=dt_s, axis=0, mode="interp"))


def momentum_terms(spec: RobotSpec, q_rad: np.ndarray, dq_rad_s: np.ndarray, channel: str = "joint"):
    """p = M dq and the model part of dp/dt, C^T dq - g - f (+ spring torque), per sample,
    of the parameter set ``spec`` (samples x joints each)."""
    import pinocchio as pin

    from robident_twin.model.builders import pinocchio_model
    from robident_twin.model.dynamics import (
        link_friction_Nm,
        motor_side_friction_Nm,
        spring_torque_Nm,
    )

    if channel not in ("joint", "motor"):
        raise ConfigError(f"collision.channel: expected 'joint' or 'motor', got {channel!r}")
    if channel == "motor" and spec.is_coupled:
        raise ConfigError(f"collision: the motor-torque observer needs independent drives; {spec.name} has a "
                          "coupling matrix")
    model = pinocchio_model(spec)
    data = model.createData()
    q, dq = np.atleast_2d(q_rad), np.atleast_2d(dq_rad_s)
    N, n = q.shape
    p = np.empty((N, n))
    u = np.empty((N, n))
    for k in range(N):
        M = pin.crba(model, data, q[k])
        M = symmetric_from_upper(M)
        C = pin.computeCoriolisMatrix(model, data, q[k], dq[k])
        g = pin.computeGeneralizedGravity(model, data, q[k])
        p[k] = M @ dq[k]
        u[k] = C.T @ dq[k] - g
    u -= link_friction_Nm(spec, dq)
    if spec.spring_joints:
        u += spring_torque_Nm(spec, q)
    if channel == "motor":
        p += spec.drive_inertia_kgm2 * dq
        u -= motor_side_friction_Nm(spec, dq)
    return p, u


def momentum_observer(spec: RobotSpec, q_rad: np.ndarray, dq_rad_s: np.ndarray, tau_Nm: np.ndarray, dt_s: float,
                      gain_1_s: float | np.ndarray = 50.0, channel: str = "joint") -> np.ndarray:
    """Residual r (samples x joints, N m) of the momentum observer with gain K_O
    (1/s, scalar or per joint) for measured torques ``tau_Nm`` of ``channel``."""
    K = np.broadcast_to(np.asarray(gain_1_s, dtype=float), (np.atleast_2d(q_rad).shape[1],))
    if np.any(K <= 0) or np.any(K * dt_s >= 1.0):
        raise ConfigError(f"collision.gain_1_s: expected 0 < K_O < 1 / dt = {1 / dt_s:g} per joint, got {K}")
    p, u = momentum_terms(spec, q_rad, dq_rad_s, channel)
    u = u + np.asarray(tau_Nm, dtype=float)
    N, n = p.shape
    r = np.zeros((N, n))
    S = np.zeros(n)
    for k in range(N - 1):
        S += dt_s * (0.5 * (u[k] + u[k + 1]) + r[k])
        r[k + 1] = K * (p[k + 1] - p[0] - S)
    return r


@dataclass
class ObserverRun:
    """Residual of one recording: r at the recording's sample times ``t_s``; a value at
    t_s[k] is available online at t_s[k] + latency_s."""

    t_s: np.ndarray
    r_Nm: np.ndarray
    latency_s: float

    @property
    def peak_Nm(self) -> np.ndarray:
        return np.max(np.abs(self.r_Nm), axis=0)


def residual_of_recording(rec, spec: RobotSpec, gain_1_s: float = 50.0, half_window: int = 10,
                          channel: str = "joint") -> ObserverRun:
    """Run the observer of parameter set ``spec`` on a HAL recording (encoder positions and
    the measured joint or motor torques)."""
    dt = 1.0 / rec.sample_rate_hz
    if channel == "joint" and rec.tau_joint_Nm is None:
        raise ConfigError(f"{rec.metadata.get('source', 'recording')}: no joint-torque channel; use "
                          "collision.channel=motor")
    tau = rec.tau_joint_Nm if channel == "joint" else rec.tau_motor_Nm
    q, dq = smooth_state(rec.q_rad, dt, half_window)
    return ObserverRun(rec.t_s.copy(), momentum_observer(spec, q, dq, tau, dt, gain_1_s, channel),
                       half_window * dt)


def first_exceedance(run: ObserverRun, threshold_Nm: np.ndarray, after_s: float = -np.inf):
    """(time available online, joint index) of the first sample with |r_j| > threshold_j
    whose value is available online (t + latency) at or after ``after_s``, or (None, None)."""
    mask = (np.abs(run.r_Nm) > threshold_Nm[None, :]) & (run.t_s + run.latency_s >= after_s)[:, None]
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None, None
    k = int(rows[0])
    return float(run.t_s[k] + run.latency_s), int(np.argmax(np.abs(run.r_Nm[k]) / threshold_Nm))


# --------------------------------------------------------------------------- colliding twin


@dataclass(frozen=True)
class Collision:
    """An external wrench on one link of the twin: ``force_N`` (world frame, at the body's
    centre of mass, MuJoCo's ``xfrc_applied``) and ``torque_Nm``, from ``start_s`` after the
    start of the recorded window, for ``duration_s``."""

    body: str = "link5"
    force_N: tuple[float, float, float] = (0.0, 20.0, 0.0)
    torque_Nm: tuple[float, float, float] = (0.0, 0.0, 0.0)
    start_s: float = 5.0
    duration_s: float = 0.2

    def __post_init__(self):
        if not self.duration_s > 0 or not self.start_s >= 0:
            raise ConfigError(f"collision: start_s must be >= 0 and duration_s > 0, got {self.start_s}, "
                              f"{self.duration_s}")
        if len(self.force_N) != 3 or len(self.torque_Nm) != 3:
            raise ConfigError("collision: force_N and torque_Nm must have three components (world frame)")

    @staticmethod
    def from_config(d: Mapping[str, Any] | None) -> "Collision":
        allowed = {"body", "force_N", "torque_Nm", "start_s", "duration_s"}
        d = dict(d or {})
        unknown = set(d) - allowed
        if unknown:
            raise ConfigError(f"collision: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
        for k in ("force_N", "torque_Nm"):
            if k in d:
                d[k] = tuple(float(x) for x in d[k])
        return Collision(**d)


def _colliding_twin_class():
    from hal.sim.mujoco_backend import MujocoTwin

    class CollidingMujocoTwin(MujocoTwin):
        """The MuJoCo twin with an optional external wrench on one link during the
        recorded window of the next ``run`` (see :class:`Collision`). Without a collision
        it is the plain twin."""

        def __init__(self, spec: RobotSpec, collision: Collision | None = None, **kwargs):
            # set before the base class builds its passive callback (which reads them when called)
            self.collision = collision
            self._window: tuple[float, float] | None = None
            self._body_id = -1
            super().__init__(spec, **kwargs)
            if collision is not None:
                import mujoco

                self._body_id = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, collision.body)
                if self._body_id < 0:
                    names = [self.model.body(i).name for i in range(1, self.model.nbody)]
                    raise ConfigError(f"collision.body: the twin of {spec.name} has no body '{collision.body}'; "
                                      f"expected one of {names}")

        def _passive_callback(self):
            base = super()._passive_callback()
            if self.collision is None:
                return base
            c = self.collision
            wrench = np.concatenate([np.asarray(c.force_N, float), np.asarray(c.torque_Nm, float)])
            zero = np.zeros(6)

            def passive(m, d):
                base(m, d)
                w = self._window
                if self._body_id >= 0:
                    on = w is not None and w[0] <= d.time < w[1]
                    d.xfrc_applied[self._body_id] = wrench if on else zero

            return passive

        def _simulate(self, ref, record_from, record_to=None):
            if self.collision is None or record_to is None:  # move_to and friends: no collision
                self._window = None
                return super()._simulate(ref, record_from, record_to)
            dt = self.model.opt.timestep
            t0 = self.data.time + record_from * dt + self.collision.start_s - 0.25 * dt
            self._window = (t0, t0 + self.collision.duration_s)
            try:
                return super()._simulate(ref, record_from, record_to)
            finally:
                self._window = None
                self.data.xfrc_applied[:] = 0.0

    return CollidingMujocoTwin


def colliding_twin(spec: RobotSpec, collision: Collision | None = None, noise=None, seed: int = 0, **kwargs):
    """A :class:`CollidingMujocoTwin` of ``spec`` (the class is built on first use, so this
    module imports without the HAL)."""
    return _colliding_twin_class()(spec, collision=collision, noise=noise, seed=seed, **kwargs)


# --------------------------------------------------------------------------- the study


@dataclass
class DetectionResult:
    """One parameter set's observer on the three runs of a study."""

    label: str
    peak_calibration_Nm: np.ndarray  # collision-free calibration run, per joint
    threshold_Nm: np.ndarray
    peak_free_Nm: np.ndarray  # second collision-free run (other sensor noise)
    false_alarm_s: float | None  # first exceedance on that run (None: no false alarm)
    peak_collision_Nm: np.ndarray  # collision run, per joint
    detected_s: float | None  # time the detection is available (recording time)
    detected_joint: int | None  # 0-based
    delay_ms: float | None  # detected_s - collision start
    early_alarm_s: float | None  # an exceedance before the collision (a false alarm) or None


@dataclass
class CollisionStudy:
    collision: Collision
    gain_1_s: float
    half_window: int
    factor: float
    results: dict[str, DetectionResult] = field(default_factory=dict)
    runs: dict[str, dict[str, ObserverRun]] = field(default_factory=dict)  # label -> run name -> residual
    recordings: dict[str, Any] = field(default_factory=dict)  # calibration, free, collision (hal Recording)


def run_collision_study(truth: RobotSpec, parameter_sets: Mapping[str, RobotSpec], reference, collision: Collision,
                        noise=None, seeds: tuple[int, int] = (1, 2), gain_1_s: float = 50.0, half_window: int = 10,
                        factor: float = 1.2, channel: str = "joint") -> CollisionStudy:
    """Xu 2020's comparison on the twin of ``truth``: play ``reference`` (one period of a
    periodic JointTrajectory, e.g. the validation design) three times,

    - collision-free with sensor-noise seed ``seeds[0]`` (calibration: per parameter set
      the per-joint peak |r|, threshold = ``factor`` x peak),
    - collision-free with seed ``seeds[1]`` (false alarms on fresh noise),
    - with the collision, seed ``seeds[1]``: the first |r_j| > threshold_j, its joint and
      the delay after the collision starts (observer latency included);

    and run every parameter set's observer on each."""
    recs = {}
    for name, col, seed in (("calibration", None, seeds[0]), ("free", None, seeds[1]),
                            ("collision", collision, seeds[1])):
        twin = colliding_twin(truth, col, noise=noise, seed=seed)
        try:
            recs[name] = twin.run(reference, periods=1, transient_periods=0)
        finally:
            twin.close()
    study = CollisionStudy(collision, gain_1_s, half_window, factor, recordings=recs)
    t_col = collision.start_s
    for label, spec in parameter_sets.items():
        runs = {k: residual_of_recording(rec, spec, gain_1_s, half_window, channel) for k, rec in recs.items()}
        study.runs[label] = runs
        peak = runs["calibration"].peak_Nm
        th = factor * peak
        fa, _ = first_exceedance(runs["free"], th)
        first, joint = first_exceedance(runs["collision"], th)
        early = first if first is not None and first < t_col else None  # an alarm before the contact
        det, joint = first_exceedance(runs["collision"], th, after_s=t_col)
        study.results[label] = DetectionResult(
            label, peak, th, runs["free"].peak_Nm, fa, runs["collision"].peak_Nm, det, joint,
            None if det is None else 1e3 * (det - t_col), early)
    return study


def format_study(study: CollisionStudy, joint_names: list[str], paper: Mapping[str, list] | None = None) -> str:
    """Per-joint collision-free peaks (Xu 2020 Table 10 layout) and the detection results."""
    labels = list(study.results)
    head = f"{'joint':<7}" + "".join(f"{'peak ' + lab:>18}" for lab in labels)
    if paper:
        head += "".join(f"{'Xu ' + k:>14}" for k in paper)
    lines = [f"collision-free max |r| [N m] (K_O = {study.gain_1_s:g} 1/s, velocity window "
             f"{2 * study.half_window + 1} samples)", head, "-" * len(head)]
    for j, name in enumerate(joint_names):
        row = f"{name:<7}" + "".join(f"{study.results[lab].peak_calibration_Nm[j]:>18.4f}" for lab in labels)
        if paper:
            row += "".join(f"{v[j]:>14.4f}" if v[j] is not None else f"{'-':>14}" for v in paper.values())
        lines.append(row)
    c = study.collision
    lines.append(f"\ncollision: {np.linalg.norm(c.force_N):g} N on {c.body} from t = {c.start_s:g} s for "
                 f"{1e3 * c.duration_s:g} ms; threshold = {study.factor:g} x collision-free peak")
    for lab in labels:
        r = study.results[lab]
        det = (f"detected on {joint_names[r.detected_joint]} after {r.delay_ms:.1f} ms" if r.detected_s is not None
               else "NOT detected")
        fa = "none" if r.false_alarm_s is None else f"at t = {r.false_alarm_s:.3f} s"
        lines.append(f"  {lab:<11} {det}; false alarm on the second collision-free run: {fa}; "
                     f"before the collision: {'none' if r.early_alarm_s is None else r.early_alarm_s}; "
                     f"peak |r| in the collision run {np.round(r.peak_collision_Nm, 2).tolist()}")
    return "\n".join(lines)
