"""MuJoCo twin behind the HAL.

The twin is torque-driven: a joint position controller (PD on the encoder
position and the joint velocity, plus an optional feed-forward torque from
the robot's nominal model, here the twin's own truth model) runs at the
controller rate, as a real controller's position mode does.

Continuous-time faithfulness (what makes noise-free identification exact):

- the motor torque is continuous and piecewise linear in time: each control
  period the actuator's activation ramps from the torque applied now to the
  new command (first-order hold, a one-period delay, as a current loop does);
  the recorded motor torque is the torque actually applied at the sample;
- MuJoCo integrates with RK4, and the ground-truth friction and springs of
  :mod:`robident_twin.model.dynamics` are evaluated inside every integrator stage,
  in a passive-force callback (link-side friction and springs on the joints,
  motor-side friction and offsets mapped from motor coordinates by C^-T); the
  drive inertia is MuJoCo's ``armature`` (of the joints, or of the fixed
  tendons through which coupled drives act, see :mod:`robident_twin.model.builders`);
- the joint-torque sensor reads C^-T (motor torque minus drive inertia times
  the motor acceleration at the sample minus motor-side friction).

So the continuous-time model holds exactly at every sample instant and the
only discretisation error is RK4's. Recorded per control period: encoder
position (quantised, plus Gaussian noise), motor torque and joint-torque
sensor (plus Gaussian noise). Every random draw comes from the seed given.

The passive-force callback is process-global in MuJoCo: a twin installs it
only while it simulates (:meth:`MujocoTwin.physics`, under a module lock, so twins
and :class:`hal.sim.stepper.TwinStepper` s in other threads take turns). The
per-cycle code (:meth:`MujocoTwin.sample`, :meth:`MujocoTwin.control_step`) is the one
implementation the twin's ``run`` and the emulators' stepper share.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from robident_twin.model.builders import mujoco_model
from robident_twin.model.dynamics import TruthModel, motor_side_friction_Nm, to_motor
from robident_twin.errors import ConfigError, RecordingError
from robident_twin.model.robot import RobotSpec

from ..protocol import JointTrajectory, RobotInfo
from .playback import SimulatedRobot, feedforward_Nm
from .sensors import SensorNoise

#: held while a twin's passive-force callback is installed (MuJoCo's callback is process-global)
_PASSIVE_LOCK = threading.RLock()


@dataclass(frozen=True)
class ControllerConfig:
    """Joint position controller: PD gains from a bandwidth and damping ratio on the
    diagonal of the joint-space inertia (drive inertia included) at home, plus an
    optional model feed-forward. ``integral_hz`` > 0 makes the velocity loop PI (the
    CLOOS's cascade of ICMA 2020 Fig. 3: P position loop, PI velocity loop, torque
    feed-forward), with its zero at that frequency: ki = kd 2 pi integral_hz."""

    bandwidth_hz: float = 5.0
    damping_ratio: float = 1.0
    feedforward: bool = True
    integral_hz: float = 0.0

    def __post_init__(self):
        if not self.bandwidth_hz > 0 or not self.damping_ratio > 0:
            raise ConfigError(f"controller: bandwidth_hz and damping_ratio must be positive, got "
                              f"{self.bandwidth_hz}, {self.damping_ratio}")
        if not 0 <= self.integral_hz < self.bandwidth_hz:
            raise ConfigError(f"controller: integral_hz must be in [0, bandwidth_hz), got {self.integral_hz}")


def robot_info(spec: RobotSpec, backend: str, control_rate_hz: float, is_simulation: bool = True) -> RobotInfo:
    return RobotInfo(
        name=spec.name, backend=backend, joint_names=tuple(spec.joint_names),
        control_rate_hz=control_rate_hz, is_simulation=is_simulation,
        q_min_rad=spec.q_min_rad, q_max_rad=spec.q_max_rad, dq_max_rad_s=spec.dq_max_rad_s,
        ddq_max_rad_s2=spec.ddq_max_rad_s2, tau_max_Nm=spec.tau_max_Nm)


class MujocoTwin(SimulatedRobot):
    """A simulated robot in MuJoCo with the twin's drive, friction and sensor models."""

    backend = "mujoco"

    def __init__(self, spec: RobotSpec, noise: SensorNoise | None = None, seed: int = 0,
                 control_rate_hz: float = 1000.0, controller: ControllerConfig = ControllerConfig(),
                 integrator: str = "RK4"):
        import mujoco

        if not control_rate_hz > 0:
            raise ConfigError(f"backend.control_rate_hz must be positive, got {control_rate_hz}")
        self.spec = spec
        self.noise = noise if noise is not None else SensorNoise.from_config(spec)
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.controller = controller
        self.info = robot_info(spec, self.backend, control_rate_hz)
        self.model = mujoco_model(spec, timestep_s=1.0 / control_rate_hz, integrator=integrator,
                                  actuator="ramp")
        self.data = mujoco.MjData(self.model)
        self.truth = TruthModel(spec)
        self.data.qpos[:] = spec.home_rad
        z = np.zeros(spec.n_joints)
        self.data.act[:] = self.truth.torques(spec.home_rad, z, z)[1][0]  # holding torque at rest
        mujoco.mj_forward(self.model, self.data)
        import pinocchio as pin

        J = np.diag(pin.crba(self.truth.model, self.truth.data, spec.home_rad)) + spec.drive_inertia_kgm2
        w = 2 * np.pi * controller.bandwidth_hz
        self.kp = J * w**2
        self.kd = 2 * controller.damping_ratio * J * w
        self.ki = self.kd * 2 * np.pi * controller.integral_hz
        self._integral = np.zeros(spec.n_joints)  # integral of the velocity-loop error (PI)
        self._coupled = spec.is_coupled
        self._ct, self._cinv_t = spec.coupling.T, spec.coupling_inv.T
        self._passive = self._passive_callback()

    # ------------------------------------------------------------------ protocol
    def state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.data.qpos.copy(), self.data.qvel.copy()

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ simulation
    def _passive_callback(self):
        from robident_twin.model import dynamics as dyn

        spec = self.spec
        simple = (not spec.is_coupled and not spec.spring_joints
                  and all(j.friction_link_variant.kind == j.friction_motor_variant.kind == "viscous_coulomb"
                          for j in spec.joints))
        if simple:  # the common case, kept cheap: it runs four times per RK4 step
            fv = spec.fv_link_Nms_rad + spec.fv_motor_Nms_rad
            fcl, fcm = spec.fc_link_Nm, spec.fc_motor_Nm
            off = spec.offset_motor_Nm
            eps = spec.coulomb_smoothing_rad_s

            def passive(m, d):
                s = np.tanh(d.qvel / eps)
                d.qfrc_passive[:] -= fv * d.qvel + (fcl + fcm) * s + off

            return passive
        cinv_t = spec.coupling_inv.T

        def passive(m, d):
            v = d.qvel.copy()
            f = dyn.link_friction_Nm(spec, v) - dyn.spring_torque_Nm(spec, d.qpos.copy())[0]
            f = f + cinv_t @ dyn.motor_side_friction_Nm(spec, dyn.to_motor(spec, v))
            d.qfrc_passive[:] -= f

        return passive

    @contextmanager
    def physics(self):
        """Install the twin's passive-force callback (process-global in MuJoCo) while simulating;
        a module lock serialises twins and steppers that simulate in different threads."""
        import mujoco

        with _PASSIVE_LOCK:
            previous = mujoco.get_mjcb_passive()
            mujoco.set_mjcb_passive(self._passive)
            try:
                yield
            finally:
                mujoco.set_mjcb_passive(previous)

    def sample(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """True q, applied motor torque and joint-sensor torque at the current sample instant
        (the acceleration at the instant comes from ``mj_forward``; the state is not changed)."""
        import mujoco

        d, spec = self.data, self.spec
        q = d.qpos.copy()
        v = d.qvel.copy()
        mujoco.mj_forward(self.model, d)  # acceleration at the sample instant
        act = d.act.copy()
        drive = act - spec.drive_inertia_kgm2 * to_motor(spec, d.qacc) - motor_side_friction_Nm(spec, to_motor(spec, v))
        return q, act, (self._cinv_t @ drive if self._coupled else drive)

    def control_step(self, qref_rad: np.ndarray, dqref_rad_s: np.ndarray, ff_Nm: np.ndarray) -> None:
        """One control period: PD on the encoder position and the joint velocity plus the
        feed-forward motor torque, reached by a first-order hold over the period (one step)."""
        import mujoco

        d = self.data
        e_q = qref_rad - self.noise.quantise(d.qpos.copy())
        e_v = dqref_rad_s - d.qvel.copy()
        fb = self.kp * e_q + self.kd * e_v
        if self.controller.integral_hz > 0:  # PI velocity loop on its command dq_ref + (kp / kd) e_q
            self._integral += (e_v + self.kp / self.kd * e_q) / self.info.control_rate_hz
            fb = fb + self.ki * self._integral
        u = ff_Nm + (self._ct @ fb if self._coupled else fb)
        d.ctrl[:] = (u - d.act) * self.info.control_rate_hz
        mujoco.mj_step(self.model, d)

    def _simulate(self, ref: JointTrajectory, record_from: int, record_to: int | None = None):
        """Run the controlled twin along ``ref``; return true q, motor and joint torques
        for the samples from ``record_from`` on."""
        N, n = ref.q_rad.shape
        ff = feedforward_Nm(self.truth, ref, self.controller.feedforward, self.feedforward_source)
        qref, dqref = ref.q_rad, ref.dq_rad_s
        record_to = N if record_to is None else record_to
        n_rec = record_to - record_from
        q_out = np.empty((n_rec, n))
        tau_m_out = np.empty((n_rec, n))
        tau_j_out = np.empty((n_rec, n))
        with self.physics():
            for k in range(N):
                if record_from <= k < record_to:
                    i = k - record_from
                    q_out[i], tau_m_out[i], tau_j_out[i] = self.sample()
                self.control_step(qref[k], dqref[k], ff[k])
        d = self.data
        if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
            raise RecordingError(f"the {self.backend} simulation of {self.spec.name} diverged (non-finite state)")
        return q_out, tau_m_out, tau_j_out
