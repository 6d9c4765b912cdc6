"""What every simulated backend does around its engine loop: check a trajectory, plan the
reference (lead-in, transient and recorded periods, lead-out) and assemble the Recording."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robident_twin.errors import ConfigError

from ..motion import lead_in, lead_out
from ..protocol import JointTrajectory, Recording, RobotInfo, check_reference_limits


@dataclass(frozen=True)
class RunPlan:
    """The full reference a twin follows for one ``run`` and the recorded window [start, stop)."""

    reference: JointTrajectory
    start: int
    stop: int
    lead_in_samples: int
    period_samples: int | None
    periods: int | None
    transient_periods: int


def plan_run(info: RobotInfo, backend: str, trajectory: JointTrajectory, q0: np.ndarray, v0: np.ndarray,
             periods: int, transient_periods: int) -> RunPlan:
    if periods < 1 or transient_periods < 0:
        raise ConfigError(f"acquisition: periods must be >= 1 and transient_periods >= 0, got "
                          f"{periods}, {transient_periods}")
    if abs(trajectory.rate_hz - info.control_rate_hz) > 1e-6 * info.control_rate_hz:
        raise ConfigError(f"trajectory sampled at {trajectory.rate_hz:g} Hz but the "
                          f"{backend} controller runs at {info.control_rate_hz:g} Hz")
    check_reference_limits(trajectory, info)
    periodic = trajectory.period_s is not None
    if not periodic and (periods != 1 or transient_periods != 0):
        raise ConfigError("a non-periodic trajectory is played once: periods=1, transient_periods=0")
    repeats = periods + transient_periods if periodic else 1
    # enter the trajectory from the current state and, after the last period, come to rest
    # along its path, so that the next run starts from rest again
    app = lead_in(info, trajectory, q0, v0)
    check_reference_limits(app, info, what="approach to the trajectory start")
    out = lead_out(info, trajectory)
    parts = [app] + [trajectory] * repeats + ([] if out is None else [out])
    q = np.vstack([p.q_rad for p in parts])
    ref = JointTrajectory(np.arange(q.shape[0]) / info.control_rate_hz, q,
                          np.vstack([p.dq_rad_s for p in parts]), np.vstack([p.ddq_rad_s2 for p in parts]))
    n = trajectory.n_samples
    start = app.n_samples + (repeats - periods) * n if periodic else app.n_samples
    return RunPlan(ref, start, app.n_samples + repeats * n, app.n_samples, n if periodic else None,
                   periods if periodic else None, transient_periods)


def make_recording(plan: RunPlan, info: RobotInfo, q_meas, tau_motor, tau_joint, q_true,
                   metadata: dict) -> Recording:
    N = q_meas.shape[0]
    md = dict(metadata)
    md.update({"approach_s": plan.lead_in_samples / info.control_rate_hz,
               "transient_periods": plan.transient_periods, "true_q_rad": q_true})
    return Recording(
        t_s=np.arange(N) / info.control_rate_hz, q_rad=q_meas, tau_motor_Nm=tau_motor, tau_joint_Nm=tau_joint,
        q_cmd_rad=plan.reference.q_rad[plan.start:plan.stop].copy(), sample_rate_hz=info.control_rate_hz,
        period_samples=plan.period_samples, n_periods=plan.periods, metadata=md)


def feedforward_Nm(truth, reference: JointTrajectory, enabled: bool, source=None) -> np.ndarray:
    """Model feed-forward motor torques along a reference (zeros when disabled), advanced one
    control period: a first-order-hold torque reaches a command one period after it is set.
    ``source`` (a callable ``ff_Nm(q, dq, ddq) -> (N, n)`` motor torques, e.g. an identified
    model's prediction) replaces the truth model when given."""
    if not enabled:
        return np.zeros_like(reference.q_rad)
    if source is None:
        _, ff = truth.torques(reference.q_rad, reference.dq_rad_s, reference.ddq_rad_s2)
    else:
        ff = np.asarray(source(reference.q_rad, reference.dq_rad_s, reference.ddq_rad_s2), dtype=float)
        if ff.shape != reference.q_rad.shape or not np.all(np.isfinite(ff)):
            raise ConfigError(f"feed-forward source: expected finite motor torques of shape "
                              f"{reference.q_rad.shape}, got shape {ff.shape}")
    return np.vstack([ff[1:], ff[-1:]])


class SimulatedRobot:
    """The Robot-protocol methods every simulated twin shares. A subclass provides
    ``state()``, ``_simulate(reference, record_from, record_to)`` (true q, motor and joint
    torques over the recorded window) and the attributes ``info``, ``backend``, ``spec``,
    ``noise``, ``rng``, ``seed`` and ``controller``; ``_metadata()`` may add to the metadata."""

    #: the controller's feed-forward model: None (the twin's truth model) or a callable
    #: ``ff_Nm(q, dq, ddq) -> (N, n)`` motor torques (set by the control stage)
    feedforward_source = None

    def _metadata(self) -> dict:
        return {}

    def move_to(self, q_rad: np.ndarray) -> None:
        from ..motion import approach

        q0, v0 = self.state()
        z = np.zeros_like(q0)
        ref = approach(self.info, q0, v0, z, np.asarray(q_rad, float), z, z)
        self._simulate(ref, record_from=ref.n_samples)

    def run(self, trajectory: JointTrajectory, periods: int = 1, transient_periods: int = 0) -> Recording:
        q0, v0 = self.state()
        plan = plan_run(self.info, self.backend, trajectory, q0, v0, periods, transient_periods)
        twin = getattr(self, "twin", None)
        if twin is not None and not twin.ideal:
            return self._run_realistic(plan)
        q_true, tau_m, tau_j = self._simulate(plan.reference, record_from=plan.start, record_to=plan.stop)
        q_meas, tm_meas, tj_meas = self.noise.measure(
            self.rng, q_true, tau_m, tau_j if self.spec.has_joint_torque_sensors else None)
        md = {"source": f"{self.backend} twin of {self.spec.name}", "robot": self.spec.name,
              "backend": self.backend, "seed": self.seed, "noise": self.noise.as_dict(),
              "controller": dict(vars(self.controller))}
        md.update(self._metadata())
        return make_recording(plan, self.info, q_meas, tm_meas, tj_meas, q_true, md)

    def _run_realistic(self, plan: RunPlan) -> Recording:
        """A run of the realistic twin (:mod:`hal.sim.effects`): the sensor effects on the torque
        channels (simulated from ``SENSOR_PAD_SAMPLES`` before the window, so the delay and the
        anti-aliasing filter start settled), the recorded position = the very measurement the
        closed loop used, the motor positions in the metadata."""
        from . import effects as fx

        twin = self.twin
        pad = min(fx.SENSOR_PAD_SAMPLES, plan.start) if twin.has("sensor") else 0
        q_true, tau_m, tau_j = self._simulate(plan.reference, record_from=plan.start - pad, record_to=plan.stop)
        extras = self._extras
        if twin.has("sensor"):
            tau_m, tau_j = fx.apply_sensor_effects(twin.params.sensor, self.info.control_rate_hz, tau_m, tau_j, pad)
        q_true = q_true[pad:]
        q_motor = extras["q_motor_rad"][pad:]
        q_meas, tm_meas, tj_meas = self.noise.measure(
            self.rng, q_true, tau_m, tau_j if self.spec.has_joint_torque_sensors else None,
            q_motor_rad=q_motor)
        if extras.get("q_loop_rad") is not None:
            q_meas = extras["q_loop_rad"][pad:]
        md = {"source": f"{self.backend} twin of {self.spec.name}", "robot": self.spec.name,
              "backend": self.backend, "seed": self.seed, "noise": self.noise.as_dict(),
              "controller": dict(vars(self.controller)), "true_q_motor_rad": q_motor,
              "true_tau_joint_Nm": tau_j}
        md.update(self._metadata())
        return make_recording(plan, self.info, q_meas, tm_meas, tj_meas, q_true, md)
