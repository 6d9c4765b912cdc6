"""Advance a MuJoCo twin one controller cycle at a time (for the controller emulators).

:class:`TwinStepper` wraps a :class:`hal.sim.mujoco_backend.MujocoTwin` and uses its own
per-cycle code (``sample`` and ``control_step``): the same PD + feed-forward controller,
first-order-hold drive torque, friction, springs and sensor model as ``MujocoTwin.run``,
so an emulator that plays a reference through the stepper reproduces the twin's run.

    stepper = TwinStepper(spec, noise, seed=0)
    res = stepper.reset(q0_rad)              # the measurement at the first instant
    while ...:
        send(res)                            # q_meas_rad, tau_motor_Nm, tau_joint_Nm
        res = stepper.step(q_cmd_rad)        # one cycle with the command; next measurement

A command without velocity / acceleration gets them by backward differences of the
commands (a position-only stream, as FRI's joint position mode); the feed-forward torque
is the twin's truth model (or its ``feedforward_source``, the model chosen by the control stage)
at the command unless ``tau_ff_Nm`` is given (an emulator that
knows the whole reference passes :meth:`TwinStepper.feedforward`, the advanced feed-forward
``MujocoTwin.run`` uses). Measurement noise is drawn per sample from the seeded generator
(white noise; the coloured AR(1) option of the sensor model is refused here).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robident_twin.errors import ConfigError, RecordingError
from robident_twin.model.robot import RobotSpec

from ..protocol import JointTrajectory, RobotInfo
from .mujoco_backend import ControllerConfig, MujocoTwin
from .playback import feedforward_Nm
from .sensors import SensorNoise


@dataclass(frozen=True)
class StepResult:
    """One sample of the twin (joints,): measured (noisy, quantised) position, measured motor
    and joint-sensor torques (None without joint-torque sensors), true position and velocity."""

    q_meas_rad: np.ndarray
    tau_motor_Nm: np.ndarray
    tau_joint_Nm: np.ndarray | None
    q_true_rad: np.ndarray
    dq_true_rad_s: np.ndarray
    tau_motor_true_Nm: np.ndarray
    tau_joint_true_Nm: np.ndarray
    cycle: int


class TwinStepper:
    """A MuJoCo twin advanced one control period per :meth:`step` (see the module doc)."""

    def __init__(self, spec: RobotSpec, noise: SensorNoise | None = None, seed: int = 0,
                 control_rate_hz: float = 1000.0, controller: ControllerConfig = ControllerConfig()):
        self.twin = MujocoTwin(spec, noise, seed=seed, control_rate_hz=control_rate_hz, controller=controller)
        if self.twin.noise.torque_noise_ar1 > 0:
            raise ConfigError("noise.torque_noise_ar1: coloured torque noise is not supported by the "
                              "cycle-by-cycle stepper of the controller emulators; use white noise")
        self.spec = spec
        self.noise = self.twin.noise
        self.rng = self.twin.rng
        self.info: RobotInfo = self.twin.info
        self.dt_s = 1.0 / control_rate_hz
        self.cycle = 0
        self._cmd_hist: list[np.ndarray] = []
        nz = self.noise
        self._perfect = not any(np.any(np.asarray(a) != 0) for a in (
            nz.q_std_rad, nz.encoder_resolution_rad, nz.tau_joint_std_Nm, nz.tau_motor_std_Nm)) and \
            nz.motor_gain_error is None and nz.ripple_Nm is None
        self.current = self._measure()

    # ------------------------------------------------------------------ state
    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """True q and dq now."""
        return self.twin.state()

    def reset(self, q_rad) -> StepResult:
        """Put the twin at rest at ``q_rad`` with its holding torque; the measurement there."""
        import mujoco

        q = np.asarray(q_rad, dtype=float)
        if q.shape != (self.spec.n_joints,) or not np.all(np.isfinite(q)):
            raise ConfigError(f"stepper reset: expected {self.spec.n_joints} finite joint positions, got {q_rad!r}")
        d = self.twin.data
        z = np.zeros_like(q)
        d.qpos[:] = q
        d.qvel[:] = 0.0
        d.act[:] = self.twin.truth.torques(q, z, z)[1][0]
        mujoco.mj_forward(self.twin.model, d)
        self.cycle = 0
        self._cmd_hist = []
        self.current = self._measure()
        return self.current

    def feedforward(self, reference: JointTrajectory) -> np.ndarray:
        """The advanced model feed-forward along a whole reference (as ``MujocoTwin.run``)."""
        return feedforward_Nm(self.twin.truth, reference, self.twin.controller.feedforward,
                              self.twin.feedforward_source)

    # ------------------------------------------------------------------ cycle
    def step(self, q_cmd_rad, dq_cmd_rad_s=None, ddq_cmd_rad_s2=None, tau_ff_Nm=None) -> StepResult:
        """Apply one command for one control period; return the measurement at the next instant."""
        q = np.asarray(q_cmd_rad, dtype=float)
        n = self.spec.n_joints
        if q.shape != (n,) or not np.all(np.isfinite(q)):
            raise ConfigError(f"stepper: expected {n} finite commanded positions, got {q_cmd_rad!r}")
        h = self._cmd_hist
        h.append(q)
        if len(h) > 3:
            del h[0]
        if dq_cmd_rad_s is None:
            dq = (h[-1] - h[-2]) / self.dt_s if len(h) >= 2 else np.zeros(n)
        else:
            dq = np.asarray(dq_cmd_rad_s, dtype=float)
        if ddq_cmd_rad_s2 is None:
            ddq = (h[-1] - 2 * h[-2] + h[-3]) / self.dt_s**2 if len(h) >= 3 else np.zeros(n)
        else:
            ddq = np.asarray(ddq_cmd_rad_s2, dtype=float)
        if tau_ff_Nm is None and self.twin.feedforward_source is not None and self.twin.controller.feedforward:
            ff = feedforward_Nm(None, JointTrajectory(np.zeros(1), q[None], dq[None], ddq[None]), True,
                                self.twin.feedforward_source)[0]  # the chosen model (validation.control)
        elif tau_ff_Nm is None:
            ff = (self.twin.truth.torques(q, dq, ddq)[1][0] if self.twin.controller.feedforward
                  else np.zeros(n))
        else:
            ff = np.asarray(tau_ff_Nm, dtype=float)
        with self.twin.physics():
            self.twin.control_step(q, dq, ff)
            q_true, tm, tj = self.twin.sample()
        if not (np.all(np.isfinite(self.twin.data.qpos)) and np.all(np.isfinite(self.twin.data.qvel))):
            raise RecordingError(f"the stepped twin of {self.spec.name} diverged at cycle {self.cycle}")
        self.cycle += 1
        self.current = self._measure(q_true, tm, tj)
        return self.current

    def _measure(self, q=None, tm=None, tj=None) -> StepResult:
        if q is None:
            with self.twin.physics():
                q, tm, tj = self.twin.sample()
        sensors = self.spec.has_joint_torque_sensors
        if self._perfect:
            qm, tmm, tjm = q[None], tm[None], tj[None] if sensors else None
        else:
            qm, tmm, tjm = self.noise.measure(self.rng, q[None], tm[None], tj[None] if sensors else None)
        return StepResult(qm[0], tmm[0], None if tjm is None else tjm[0], q, self.twin.data.qvel.copy(),
                          tm, tj, self.cycle)
