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
  :mod:`robident_twin.dynamics` are evaluated inside every integrator stage,
  in a passive-force callback (link-side friction and springs on the joints,
  motor-side friction and offsets mapped from motor coordinates by C^-T); the
  drive inertia is MuJoCo's ``armature`` (of the joints, or of the fixed
  tendons through which coupled drives act, see :mod:`robident_twin.builders`);
- the joint-torque sensor reads C^-T (motor torque minus drive inertia times
  the motor acceleration at the sample minus motor-side friction).

So the continuous-time model holds exactly at every sample instant and the
only discretisation error is RK4's. Recorded per control period: encoder
position (quantised, plus Gaussian noise), motor torque and joint-torque
sensor (plus Gaussian noise). Every random draw comes from the seed given.

The passive-force callback is process-global in MuJoCo: a twin installs it
only while it simulates, so twins must not simulate concurrently in threads.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robident_twin.builders import mujoco_model
from robident_twin.dynamics import TruthModel
from robident_twin.errors import ConfigError, RecordingError
from robident_twin.robot import RobotSpec

from ..protocol import JointTrajectory, RobotInfo
from .playback import SimulatedRobot, feedforward_Nm
from .sensors import SensorNoise


@dataclass(frozen=True)
class ControllerConfig:
    """Joint position controller: PD gains from a bandwidth and damping ratio on the
    diagonal of the joint-space inertia (drive inertia included) at home, plus an
    optional model feed-forward."""

    bandwidth_hz: float = 5.0
    damping_ratio: float = 1.0
    feedforward: bool = True

    def __post_init__(self):
        if not self.bandwidth_hz > 0 or not self.damping_ratio > 0:
            raise ConfigError(f"controller: bandwidth_hz and damping_ratio must be positive, got "
                              f"{self.bandwidth_hz}, {self.damping_ratio}")


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

    # ------------------------------------------------------------------ protocol
    def state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.data.qpos.copy(), self.data.qvel.copy()

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ simulation
    def _passive_callback(self):
        from robident_twin import dynamics as dyn

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

    def _simulate(self, ref: JointTrajectory, record_from: int, record_to: int | None = None):
        """Run the controlled twin along ``ref``; return true q, motor and joint torques
        for the samples from ``record_from`` on."""
        import mujoco

        m, d, spec = self.model, self.data, self.spec
        N, n = ref.q_rad.shape
        ff = feedforward_Nm(self.truth, ref, self.controller.feedforward)
        qref, dqref = ref.q_rad, ref.dq_rad_s
        record_to = N if record_to is None else record_to
        n_rec = record_to - record_from
        q_out = np.empty((n_rec, n))
        tau_m_out = np.empty((n_rec, n))
        tau_j_out = np.empty((n_rec, n))
        kp, kd, ia = self.kp, self.kd, spec.drive_inertia_kgm2
        from robident_twin.dynamics import motor_side_friction_Nm, to_motor

        coupled = spec.is_coupled
        ct, cinv_t = spec.coupling.T, spec.coupling_inv.T
        rate = self.info.control_rate_hz
        quantise = self.noise.quantise
        qpos, qvel, qacc, ctrl, act = d.qpos, d.qvel, d.qacc, d.ctrl, d.act
        previous = mujoco.get_mjcb_passive()
        mujoco.set_mjcb_passive(self._passive_callback())
        try:
            for k in range(N):
                q = qpos.copy()
                v = qvel.copy()
                fb = kp * (qref[k] - quantise(q)) + kd * (dqref[k] - v)
                u = ff[k] + (ct @ fb if coupled else fb)
                if record_from <= k < record_to:
                    mujoco.mj_forward(m, d)  # acceleration at the sample instant
                    i = k - record_from
                    q_out[i] = q
                    tau_m_out[i] = act
                    drive = act - ia * to_motor(spec, qacc) - motor_side_friction_Nm(spec, to_motor(spec, v))
                    tau_j_out[i] = cinv_t @ drive if coupled else drive
                ctrl[:] = (u - act) * rate
                mujoco.mj_step(m, d)
        finally:
            mujoco.set_mjcb_passive(previous)
        if not (np.all(np.isfinite(qpos)) and np.all(np.isfinite(qvel))):
            raise RecordingError(f"the {self.backend} simulation of {spec.name} diverged (non-finite state)")
        return q_out, tau_m_out, tau_j_out
