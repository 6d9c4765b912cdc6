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
from . import effects as fx
from .drive_loop import drive_controller, tuned_on_axis
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


def controller_of(cfg) -> ControllerConfig:
    """The twin's controller from the ``backend.controller`` config (:class:`hal.config.ControllerConfig`)."""
    return ControllerConfig(bandwidth_hz=cfg.bandwidth_hz, damping_ratio=cfg.damping_ratio,
                            feedforward=cfg.feedforward, integral_hz=cfg.integral_hz)


def robot_info(spec: RobotSpec, backend: str, control_rate_hz: float, is_simulation: bool = True) -> RobotInfo:
    return RobotInfo(
        name=spec.name, backend=backend, joint_names=tuple(spec.joint_names),
        control_rate_hz=control_rate_hz, is_simulation=is_simulation,
        q_min_rad=spec.q_min_rad, q_max_rad=spec.q_max_rad, dq_max_rad_s=spec.dq_max_rad_s,
        ddq_max_rad_s2=spec.ddq_max_rad_s2, tau_max_Nm=spec.tau_max_Nm)


class MujocoTwin(SimulatedRobot):
    """A simulated robot in MuJoCo with the twin's drive, friction and sensor models."""

    backend = "mujoco"
    #: True: ``run`` steps through the per-cycle reference methods (``sample``, ``control_step``)
    #: instead of :mod:`hal.sim.fastloop` (bit-identical, for the test that checks that)
    reference_loop = False

    def __init__(self, spec: RobotSpec, noise: SensorNoise | None = None, seed: int = 0,
                 control_rate_hz: float = 1000.0, controller: ControllerConfig = ControllerConfig(),
                 integrator: str = "RK4", twin: fx.TwinSetup = fx.IDEAL):
        import mujoco

        if not control_rate_hz > 0:
            raise ConfigError(f"backend.control_rate_hz must be positive, got {control_rate_hz}")
        self.twin = twin
        self.spec = spec
        self.noise = noise if noise is not None else SensorNoise.from_config(spec)
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.controller = drive_controller(twin, controller)  # the robot's own drive loop, if it has one
        self.info = robot_info(spec, self.backend, control_rate_hz)
        import pinocchio as pin

        self.truth = TruthModel(spec)
        link_diag = np.diag(pin.crba(self.truth.model, self.truth.data, spec.home_rad))
        self.elastic = twin.has("elasticity")
        self.substeps = 1
        if self.elastic:
            self.substeps = fx.elastic_substeps(spec, twin.params.elasticity, link_diag, control_rate_hz)
            self.model = mujoco.MjModel.from_xml_string(
                elastic_mjcf(spec, 1.0 / (control_rate_hz * self.substeps), integrator, twin.params.elasticity))
        else:
            self.model = mujoco_model(spec, timestep_s=1.0 / control_rate_hz, integrator=integrator,
                                      actuator="ramp")
        self.data = mujoco.MjData(self.model)
        z = np.zeros(spec.n_joints)
        self._act0 = self.truth.torques(spec.home_rad, z, z)[1][0]  # holding torque at rest
        self.data.qpos[:spec.n_joints] = spec.home_rad
        if self.elastic:
            self.data.qpos[spec.n_joints:] = elastic_rest_motor_rad(spec, twin.params.elasticity, spec.home_rad,
                                                                    self._act0)
        self.data.act[:] = self._act0
        mujoco.mj_forward(self.model, self.data)
        # with elastic joints the position loop closes on the motor encoder and is tuned on the
        # rotor inertia (what the drive sees above the joint resonance; the link inertia there
        # would give gains that the actuation delay destabilises), unless the robot's own drive loop
        # (hal/sim/drive_loop.py) is tuned on the whole axis inertia, as the real drive is
        rotor = self.elastic and not tuned_on_axis(twin)
        J = spec.drive_inertia_kgm2 if rotor else link_diag + spec.drive_inertia_kgm2
        controller = self.controller
        w = fx.loop_bandwidth_rad_s(twin, controller.bandwidth_hz, controller.damping_ratio, control_rate_hz)
        self.kp = J * w**2
        self.kd = 2 * controller.damping_ratio * J * w
        self.ki = self.kd * 2 * np.pi * controller.integral_hz
        self._integral = np.zeros(spec.n_joints)  # integral of the velocity-loop error (PI)
        self._coupled = spec.is_coupled
        self._ct, self._cinv_t = spec.coupling.T, spec.coupling_inv.T
        self._te = None if twin.ideal else fx.transmission_error_effect(twin, spec, self.truth)
        self._passive = self._passive_callback() if twin.ideal else self._realistic_passive()
        if self._te is not None:
            self._passive = self._with_transmission_error(self._passive)
        if not twin.ideal:
            self.loop = fx.LoopController(twin, self.noise, self.kp, self.kd, control_rate_hz,
                                          self._ct if self._coupled else None, self._act0, seed, ki=self.ki)

    # ------------------------------------------------------------------ protocol
    def state(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.spec.n_joints
        return self.data.qpos[:n].copy(), self.data.qvel[:n].copy()

    def _metadata(self) -> dict:
        return {"twin": self.twin.as_dict(), "substeps": self.substeps} if not self.twin.ideal else {}

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

    def _realistic_passive(self):
        """Passive forces of the realistic twin: the ideal twin's friction and springs, the
        unmodelled friction (``friction_unmodelled``) and, with ``elasticity``, the gear spring
        between the rotor joints (dofs n..2n-1, motor coordinates) and the links."""
        from robident_twin.model import dynamics as dyn

        from .batch import _frozen

        spec, twin = self.spec, self.twin
        n = spec.n_joints
        cinv_t, cinv, C = spec.coupling_inv.T, spec.coupling_inv, spec.coupling
        coupled = spec.is_coupled
        springs = bool(spec.spring_joints)
        spec = _frozen(spec)  # the RobotSpec properties rebuild their arrays on every access
        fe = fx.FrictionEffect(self.spec, twin.params.friction_unmodelled) if twin.has("friction_unmodelled") else None
        el = twin.params.elasticity if self.elastic else None

        plain = all(j.friction_link_variant.kind == j.friction_motor_variant.kind == "viscous_coulomb"
                    for j in spec.joints)
        fvl, fcl, fvm, fcm = spec.fv_link_Nms_rad, spec.fc_link_Nm, spec.fv_motor_Nms_rad, spec.fc_motor_Nm
        off, eps = spec.offset_motor_Nm, spec.coulomb_smoothing_rad_s
        link_fr, motor_fr = bool(np.any(fvl) or np.any(fcl)), bool(np.any(fvm) or np.any(fcm) or np.any(off))

        def side(v, fv, fc, o=0.0):  # the ideal twin's viscous + smoothed Coulomb law (dynamics.py)
            return fv * v + fc * np.tanh(v / eps) + o

        fused = fe is not None and fe.link_total_Nm(np.zeros(n), 0.0, np.zeros(n)) is not None

        def passive(m, d):
            q, v = d.qpos[:n], d.qvel[:n].copy()
            if el is not None and fe is not None:  # the motor side's unmodelled friction acts on the rotor
                d.qfrc_passive[n:] -= fe.rotor_Nm(d.qvel[n:], d.time, d.act, C)
            if plain and fused:  # uncoupled, link-side friction with the unmodelled law fused in
                f = fe.link_total_Nm(v, d.time, d.act)
                if el is None:
                    f = f + fe.motor_part_Nm(v, d.time, d.act)
                if springs:
                    f = f - dyn.spring_torque_Nm(spec, q)[0]
                if el is None and motor_fr:
                    f = f + side(v, fvm, fcm, off)
                elif el is not None and motor_fr:
                    d.qfrc_passive[n:] -= side(d.qvel[n:], fvm, fcm, off)
                d.qfrc_passive[:n] -= f
                return
            if plain:
                f = side(v, fvl, fcl) if link_fr else np.zeros(n)
                if springs:
                    f = f - dyn.spring_torque_Nm(spec, q)[0]
                if el is None and motor_fr:
                    vm = cinv @ v if coupled else v
                    fm = side(vm, fvm, fcm, off)
                    f = f + (cinv_t @ fm if coupled else fm)
                if el is not None and motor_fr:  # the gear spring is MuJoCo's (tendons of elastic_mjcf)
                    d.qfrc_passive[n:] -= side(d.qvel[n:], fvm, fcm, off)
                if fe is not None:
                    f = f + (fe.joint_Nm(v, d.time, d.act) if el is None else fe.link_part_Nm(v, d.time, d.act))
                d.qfrc_passive[:n] -= f
                return
            f = dyn.link_friction_Nm(spec, v)
            if springs:
                f = f - dyn.spring_torque_Nm(spec, q)[0]
            if el is not None:  # the gear spring is MuJoCo's (tendons of elastic_mjcf)
                d.qfrc_passive[n:] -= dyn.motor_side_friction_Nm(spec, d.qvel[n:].copy())
            else:
                fm = dyn.motor_side_friction_Nm(spec, cinv @ v if coupled else v)
                f = f + (cinv_t @ fm if coupled else fm)
            if fe is not None:
                f = f + (fe.joint_Nm(v, d.time, d.act) if el is None else fe.link_part_Nm(v, d.time, d.act))
            d.qfrc_passive[:n] -= f

        return passive

    def _with_transmission_error(self, passive):
        """``passive`` plus the gears' transmission error (hal/sim/effects.py), a drive-side torque
        from the motor state of this integrator stage and the latest motor acceleration: on the
        rotor dofs with elasticity, else mapped to the joints by C^-T."""
        te, n = self._te, self.spec.n_joints

        if self.elastic:
            def with_te(m, d):
                passive(m, d)
                d.qfrc_passive[n:] -= te.motor_Nm(d.qpos[n:], d.qvel[n:], d.qacc[n:])
        else:
            def with_te(m, d):
                passive(m, d)
                d.qfrc_passive[:n] -= te.joint_Nm(d.qpos[:n], d.qvel[:n], d.qacc[:n])

        return with_te

    def motor_rad(self) -> np.ndarray:
        """Motor positions (motor coordinates, joint side): the rotor joints with elasticity,
        else C^-1 q."""
        n = self.spec.n_joints
        if self.elastic:
            return self.data.qpos[n:].copy()
        return to_motor(self.spec, self.data.qpos[:n].copy())

    def _sample_realistic(self):
        """True link q, applied motor torque and joint-sensor torque at the sample instant (the
        gear's spring torque with elasticity, else as :meth:`sample`)."""
        import mujoco

        d, spec, n = self.data, self.spec, self.spec.n_joints
        if not self.elastic:
            q, act, tj = self.sample()
            if self._te is not None:  # the joint side does not feel the drive-side transmission error
                tj = tj - self._te.joint_Nm(q, d.qvel[:n], d.qacc[:n])
            return q, act, tj
        mujoco.mj_forward(self.model, d)
        q = d.qpos[:n].copy()
        # the gear torque: the tendon lengths are theta_m - C^-1 q (elastic_mjcf)
        ts = fx.spring_torque_Nm(self.twin.params.elasticity, d.ten_length[:n].copy(), d.ten_velocity[:n].copy())
        return q, d.act.copy(), (self._cinv_t @ ts if self._coupled else ts)

    def _control_step_realistic(self, qref_rad, dqref_rad_s, ff_Nm) -> None:
        """One control period of the realistic twin: the loop controller (ideal or closed on the
        measurements, delayed) on the link position, or on the motor encoder with elasticity."""
        import mujoco

        d, n = self.data, self.spec.n_joints
        if self.elastic:
            C = self.spec.coupling
            qc, vc = C @ d.qpos[n:], C @ d.qvel[n:]
        else:
            qc, vc = d.qpos[:n].copy(), d.qvel[:n].copy()
        u = self.loop.command(qref_rad, dqref_rad_s, ff_Nm, qc, vc)
        if self._te is not None:
            self._te.hold_inertia(d.qpos[:n])
        d.ctrl[:] = (u - d.act) * self.info.control_rate_hz
        for _ in range(self.substeps):
            mujoco.mj_step(self.model, d)

    def _simulate_realistic(self, ref: JointTrajectory, record_from: int, record_to: int | None = None):
        N, n = ref.q_rad.shape
        ff = feedforward_Nm(self.truth, ref, self.controller.feedforward, self.feedforward_source)
        record_to = N if record_to is None else record_to
        n_rec = record_to - record_from
        q_out, tau_m_out, tau_j_out, qm_out, qloop = (np.empty((n_rec, n)) for _ in range(5))
        with self.physics():
            for k in range(N):
                rec = record_from <= k < record_to
                if rec:
                    i = k - record_from
                    q_out[i], tau_m_out[i], tau_j_out[i] = self._sample_realistic()
                    qm_out[i] = self.motor_rad()
                self._control_step_realistic(ref.q_rad[k], ref.dq_rad_s[k], ff[k])
                if rec and self.loop.closed:
                    qloop[i] = self.loop.last_q_meas
        d = self.data
        if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
            raise RecordingError(f"the {self.backend} simulation of {self.spec.name} diverged (non-finite state)")
        self._extras = {"q_motor_rad": qm_out, "q_loop_rad": qloop if self.loop.closed else None}
        return q_out, tau_m_out, tau_j_out

    @contextmanager
    def physics(self, passive=None):
        """Install the twin's passive-force callback (process-global in MuJoCo; ``passive``: an
        equivalent one, see :func:`hal.sim.fastloop.lean_passive`) while simulating; a module
        lock serialises twins and steppers that simulate in different threads."""
        import mujoco

        with _PASSIVE_LOCK:
            previous = mujoco.get_mjcb_passive()
            mujoco.set_mjcb_passive(passive or self._passive)
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
        if not self.reference_loop:
            from . import fastloop

            return fastloop.simulate(self, ref, record_from, record_to)
        if not self.twin.ideal:
            return self._simulate_realistic(ref, record_from, record_to)
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


def elastic_mjcf(spec: RobotSpec, timestep_s: float, integrator: str = "RK4", elasticity=None) -> str:
    """The twin's MJCF with elastic joints: the links without drive inertia, one rotor body per
    motor (a hinge at the world origin, its armature the drive inertia, motor coordinates) that
    the first-order-hold actuators drive, and per motor a fixed tendon ``theta_m - C^-1 q`` with
    the gear's stiffness, damping and backlash (MuJoCo's dead-band spring length), so MuJoCo
    evaluates the spring in C in every integrator stage."""
    import re

    from robident_twin.model.builders import to_mjcf

    xml = to_mjcf(spec, timestep_s, integrator, actuator="ramp")
    xml = re.sub(r'armature="[^"]*"', 'armature="0"', xml)
    xml = re.sub(r"  <tendon>.*?  </tendon>\n", "", xml, flags=re.S)
    rotors = []
    for i, j in enumerate(spec.joints):
        rotors += [f'    <body name="rotor{i + 1}" pos="0 0 {-1.0 - 0.1 * i}">',
                   f'      <joint name="{j.name}_rotor" type="hinge" axis="0 0 1" armature="{j.drive_inertia_kgm2!r}" '
                   'damping="0" frictionloss="0"/>',
                   '      <inertial pos="0 0 0" mass="1e-6" diaginertia="1e-12 1e-12 1e-12"/>',
                   '    </body>']
    xml = xml.replace("  </worldbody>", "\n".join(rotors) + "\n  </worldbody>")
    xml = re.sub(r'(tendon|joint)="([^"]*?)(_drive)?" dyntype', lambda m: f'joint="{m.group(2)}_rotor" dyntype', xml)
    if elasticity is not None:
        cinv = spec.coupling_inv
        ten = ["  <tendon>"]
        for k, j in enumerate(spec.joints):
            half = 0.5 * float(elasticity.backlash_rad[k])
            ten.append(f'    <fixed name="{j.name}_gear" stiffness="{float(elasticity.stiffness_Nm_rad[k])!r}" '
                       f'damping="{float(elasticity.damping_Nms_rad[k])!r}" springlength="{-half!r} {half!r}">')
            ten.append(f'      <joint joint="{j.name}_rotor" coef="1"/>')
            for i, ji in enumerate(spec.joints):
                if abs(cinv[k, i]) > 0:
                    ten.append(f'      <joint joint="{ji.name}" coef="{float(-cinv[k, i])!r}"/>')
            ten.append("    </fixed>")
        ten.append("  </tendon>")
        xml = xml.replace("  <actuator>", "\n".join(ten) + "\n  <actuator>")
    return xml


def elastic_rest_motor_rad(spec: RobotSpec, p, q_rad: np.ndarray, act_Nm: np.ndarray) -> np.ndarray:
    """Motor positions holding the links at rest at ``q_rad`` with the drive torque ``act_Nm``:
    the gear transmits act minus the motor offsets, K dz(dtheta) = that."""
    ts = act_Nm - spec.offset_motor_Nm
    x = ts / p.stiffness_Nm_rad
    x = x + np.sign(x) * 0.5 * p.backlash_rad
    return to_motor(spec, q_rad) + x
