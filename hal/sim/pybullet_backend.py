"""PyBullet twin behind the HAL.

The same robot, controller, drive, friction and sensor model as the MuJoCo twin
(:mod:`hal.sim.mujoco_backend`), integrated by another engine. Every torque term
beyond the rigid links comes from :mod:`robident_twin.model.dynamics`, so the two
engines share one ground-truth model.

PyBullet specifics (each one checked by ``tests/test_pybullet_backend.py``):

- the URDF is :func:`robident_twin.model.builders.to_urdf` loaded with
  ``URDF_USE_INERTIA_FROM_FILE`` and a fixed base, in ``DIRECT`` mode with one
  physics client per twin; the links without an ``<inertial>`` (``flange``)
  get PyBullet's default 1 kg, which is set to zero. This must happen before the
  first ``calculateInverseDynamics`` call: PyBullet caches the inverse-dynamics
  tree of a body on first use;
- PyBullet's per-joint velocity motors are disabled (``VELOCITY_CONTROL`` with
  force 0), the links' linear and angular damping (default 0.04) and the URDF's
  joint damping are zeroed (each in its own ``changeDynamics`` call: combined
  with other keys, ``jointDamping`` was observed not to take effect), and the
  joint velocity clamp is lifted;
- PyBullet has no drive inertia (armature), so the drive chain lives outside the
  engine. The controller is the MuJoCo twin's (PD on the encoder plus the truth
  model's motor-torque feed-forward, gains on the inertia diagonal with the drive
  inertia, first-order hold of the motor torque over each control period). Each
  engine step the twin solves the drive chain and links together with PyBullet's
  own mass matrix and bias forces (``calculateMassMatrix``,
  ``calculateInverseDynamics``): ``(M + C^-T Ia C^-1) a = C^-T (tau_m - f_motor)
  - f_link - bias + tau_spring``, all terms from :mod:`robident_twin.model.dynamics`,
  and applies ``M a + bias`` to the links, which PyBullet then integrates. The
  recorded joint torque is the engine's rigid-body inverse dynamics plus link
  friction minus springs at the sample, the motor torque
  :func:`robident_twin.model.dynamics.motor_torque_Nm` (``C^T tau_joint + Ia ddq_m +
  f_motor(dq_m)``) with the acceleration the engine realised, so the
  measurement model holds exactly at every sample;
- ``TORQUE_CONTROL`` lasts one engine step, so the twin steps the engine itself,
  ``substeps`` steps of ``1 / (control_rate_hz * substeps)`` per control period
  (default 1), setting the torque before each.

Integration accuracy. PyBullet integrates semi-implicitly (``v += h a``, then
``q += h v``), so the positions satisfy ``q[n+1] - 2 q[n] + q[n-1] = h^2 a[n]``
and ``(q[n+1] - q[n-1]) / 2h = v[n] + h a[n] / 2`` exactly: ``a[n]`` and the
*central* velocity ``v[n] + h a[n] / 2`` are what the derivatives of a smooth
interpolant of the samples converge to, while the engine's own velocity ``v[n]``
lags by ``h a / 2``. So the twin evaluates friction and Coriolis forces at the
central velocity (friction linearly implicit, which keeps heavy smoothed Coulomb
friction stable at 1 ms: the CLOOS wrist has h |df/dv| / inertia = 25), gives
the PD controller the central velocity, and records torques at (q[n], central
velocity, a[n]). With the engine's lagging velocity in the PD loop the
noise-free iiwa 14 identification erred by 0.23 % (1 substep) and 0.056 % (4
substeps); with the central velocity by 0.0084 % at 1 substep (MuJoCo RK4:
0.013 %), see ``tests/test_pybullet_backend.py``.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from robident_twin.model.builders import to_urdf
from robident_twin.model.dynamics import (
    TruthModel,
    link_friction_Nm,
    motor_side_friction_Nm,
    motor_torque_Nm,
    spring_torque_Nm,
    to_motor,
)
from robident_twin.errors import ConfigError, RecordingError
from robident_twin.model.robot import RobotSpec

from ..protocol import JointTrajectory
from . import effects as fx
from .drive_loop import drive_controller, tuned_on_axis
from .mujoco_backend import ControllerConfig, robot_info
from .playback import SimulatedRobot, feedforward_Nm
from .sensors import SensorNoise


@contextlib.contextmanager
def _quiet_c_output():
    """Silence what C code prints to the process's stdout and stderr (file descriptors 1, 2)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


class PyBulletTwin(SimulatedRobot):
    """A simulated robot in PyBullet with the twin's drive, friction and sensor models."""

    backend = "pybullet"

    def __init__(self, spec: RobotSpec, noise: SensorNoise | None = None, seed: int = 0,
                 control_rate_hz: float = 1000.0, controller: ControllerConfig = ControllerConfig(),
                 substeps: int = 1, twin: fx.TwinSetup = fx.IDEAL):
        import pybullet as pb

        if not control_rate_hz > 0:
            raise ConfigError(f"backend.control_rate_hz must be positive, got {control_rate_hz}")
        if isinstance(substeps, bool) or int(substeps) != substeps or substeps < 1:
            raise ConfigError(f"backend.substeps must be a positive integer, got {substeps!r}")
        if controller.integral_hz > 0:
            raise ConfigError("backend.controller.integral_hz: the PI velocity loop is in the mujoco twin only "
                              "(pybullet: 0)")
        self.twin = twin
        self.elastic = twin.has("elasticity")
        if self.elastic:  # engine steps that resolve the stiffest gear mode (as the MuJoCo twin)
            import pinocchio as pin

            tm_ = TruthModel(spec)
            link_diag = np.diag(pin.crba(tm_.model, tm_.data, spec.home_rad))
            # semi-implicit Euler with the explicit gear spring needs finer steps than MuJoCo's RK4
            # (iiwa 14: 2 engine steps per period diverged, 4 did not)
            substeps = max(int(substeps), fx.elastic_substeps(spec, twin.params.elasticity, link_diag,
                                                               control_rate_hz, max_omega_h=0.75))
        self._time_s = 0.0
        self.pb = pb
        self.spec = spec
        self.noise = noise if noise is not None else SensorNoise.from_config(spec)
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.controller = controller = drive_controller(twin, controller)  # the robot's own drive loop, if any
        self.substeps = int(substeps)
        self.info = robot_info(spec, self.backend, control_rate_hz)
        self.h_s = 1.0 / (control_rate_hz * self.substeps)
        self.client = pb.connect(pb.DIRECT)
        try:
            self.body = self._load(spec)
        except Exception:
            pb.disconnect(self.client)
            raise
        self.truth = TruthModel(spec)
        self._set_state(spec.home_rad, np.zeros(spec.n_joints))
        z = np.zeros(spec.n_joints)
        self._act = self.truth.torques(spec.home_rad, z, z)[1][0]  # holding motor torque at rest
        ci = spec.coupling_inv
        self._ia_joint = ci.T @ np.diag(spec.drive_inertia_kgm2) @ ci  # drive inertia in joint space
        self._a_prev = np.zeros(spec.n_joints)
        import pinocchio as pin

        J = np.diag(pin.crba(self.truth.model, self.truth.data, spec.home_rad) + self._ia_joint)
        w = fx.loop_bandwidth_rad_s(twin, controller.bandwidth_hz, controller.damping_ratio, control_rate_hz)
        self.kp = J * w**2
        self.kd = 2 * controller.damping_ratio * J * w
        if self.elastic:  # the loop closes on the motor encoder, tuned on the rotor inertia (as MuJoCo's)
            from .mujoco_backend import elastic_rest_motor_rad

            if not tuned_on_axis(twin):  # (the robot's own drive loop: on the whole axis inertia)
                self.kp = spec.drive_inertia_kgm2 * w**2
                self.kd = 2 * controller.damping_ratio * spec.drive_inertia_kgm2 * w
            self._theta = elastic_rest_motor_rad(spec, twin.params.elasticity, spec.home_rad, self._act)
            self._omega = np.zeros(spec.n_joints)
        if not twin.ideal:
            self.ki = self.kd * 2 * np.pi * controller.integral_hz  # PI velocity loop (0: PD)
            self.loop = fx.LoopController(twin, self.noise, self.kp, self.kd, control_rate_hz,
                                          spec.coupling.T if spec.is_coupled else None, self._act, seed, ki=self.ki)
        self._fe = (fx.FrictionEffect(spec, twin.params.friction_unmodelled)
                    if twin.has("friction_unmodelled") else None)
        self._te = None if twin.ideal else fx.transmission_error_effect(twin, spec, self.truth)
        self._rotor_acc = np.zeros(spec.n_joints)  # the rotors' last acceleration (elasticity)

    # ------------------------------------------------------------------ engine set-up
    def _load(self, spec: RobotSpec) -> int:
        pb, c = self.pb, self.client
        with tempfile.TemporaryDirectory(prefix="robident_pybullet_") as tmp:
            path = Path(tmp) / f"{spec.name}.urdf"
            path.write_text(to_urdf(spec))
            with _quiet_c_output():  # PyBullet warns that the massless links have no <inertial>
                body = pb.loadURDF(str(path), useFixedBase=True, flags=pb.URDF_USE_INERTIA_FROM_FILE,
                                   physicsClientId=c)
        n_pb = pb.getNumJoints(body, physicsClientId=c)
        self.joint_ids = []
        by_name = {}
        for i in range(n_pb):
            info = pb.getJointInfo(body, i, physicsClientId=c)
            by_name[info[1].decode()] = (i, info[2])
        for name in spec.joint_names:
            if name not in by_name or by_name[name][1] != pb.JOINT_REVOLUTE:
                raise ConfigError(f"pybullet: the URDF of {spec.name} has no revolute joint '{name}'")
            self.joint_ids.append(by_name[name][0])
        # links without an <inertial> element get 1 kg in PyBullet: massless, as in the URDF
        for i in range(n_pb):
            if pb.getJointInfo(body, i, physicsClientId=c)[12].decode() == "flange":
                pb.changeDynamics(body, i, mass=0.0, localInertiaDiagonal=[0.0, 0.0, 0.0], physicsClientId=c)
        for i in range(-1, n_pb):
            pb.changeDynamics(body, i, linearDamping=0.0, physicsClientId=c)
            pb.changeDynamics(body, i, angularDamping=0.0, physicsClientId=c)
            pb.changeDynamics(body, i, jointDamping=0.0, physicsClientId=c)
            pb.changeDynamics(body, i, maxJointVelocity=1e4, physicsClientId=c)
        pb.setJointMotorControlArray(body, self.joint_ids, pb.VELOCITY_CONTROL,
                                     forces=[0.0] * len(self.joint_ids), physicsClientId=c)
        pb.setGravity(*(float(g) for g in spec.gravity_m_s2), physicsClientId=c)
        pb.setPhysicsEngineParameter(fixedTimeStep=self.h_s, numSubSteps=0, physicsClientId=c)
        return body

    def _friction_and_jacobian(self, dq_rad_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Joint-space friction of both sides, f_link(dq) + C^-T f_motor(C^-1 dq) (motor
        offsets included), and its Jacobian (numerical: each side is separable per joint)."""
        spec = self.spec
        dqm = to_motor(spec, dq_rad_s)
        d = 1e-3 * spec.coulomb_smoothing_rad_s
        fl = link_friction_Nm(spec, dq_rad_s)
        dl = (link_friction_Nm(spec, dq_rad_s + d) - link_friction_Nm(spec, dq_rad_s - d)) / (2 * d)
        fm = motor_side_friction_Nm(spec, dqm)
        dm = (motor_side_friction_Nm(spec, dqm + d) - motor_side_friction_Nm(spec, dqm - d)) / (2 * d)
        if spec.is_coupled:
            ci = spec.coupling_inv
            return fl + ci.T @ fm, np.diag(dl) + ci.T @ (dm[:, None] * ci)
        return fl + fm, np.diag(dl + dm)

    def _set_state(self, q_rad: np.ndarray, dq_rad_s: np.ndarray) -> None:
        for k, j in enumerate(self.joint_ids):
            self.pb.resetJointState(self.body, j, float(q_rad[k]), float(dq_rad_s[k]), physicsClientId=self.client)

    # ------------------------------------------------------------------ engine checks
    def inverse_dynamics_links(self, q_rad, dq_rad_s, ddq_rad_s2) -> np.ndarray:
        """PyBullet's rigid-body inverse dynamics (links and payload, gravity), samples x joints."""
        q, dq, ddq = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q_rad, dq_rad_s, ddq_rad_s2))
        out = np.empty_like(q)
        for k in range(q.shape[0]):
            out[k] = self.pb.calculateInverseDynamics(self.body, q[k].tolist(), dq[k].tolist(), ddq[k].tolist(),
                                                      physicsClientId=self.client)
        return out

    def inverse_dynamics(self, q_rad, dq_rad_s, ddq_rad_s2) -> tuple[np.ndarray, np.ndarray]:
        """(tau_joint_Nm, tau_motor_Nm) from PyBullet's rigid-body inverse dynamics plus the
        drive, friction and spring terms of :mod:`robident_twin.model.dynamics`."""
        q, dq, ddq = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q_rad, dq_rad_s, ddq_rad_s2))
        tau_joint = self.inverse_dynamics_links(q, dq, ddq) + link_friction_Nm(self.spec, dq)
        if self.spec.spring_joints:
            tau_joint = tau_joint - spring_torque_Nm(self.spec, q)
        return tau_joint, motor_torque_Nm(self.spec, tau_joint, dq, ddq)

    def step_links(self, tau_links_Nm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One engine step with the given torques on the links (no friction added);
        returns the new (q, dq). For tests of the engine set-up."""
        pb = self.pb
        pb.setJointMotorControlArray(self.body, self.joint_ids, pb.TORQUE_CONTROL,
                                     forces=np.asarray(tau_links_Nm, float).tolist(), physicsClientId=self.client)
        pb.stepSimulation(physicsClientId=self.client)
        return self.state()

    # ------------------------------------------------------------------ protocol
    def state(self) -> tuple[np.ndarray, np.ndarray]:
        st = self.pb.getJointStates(self.body, self.joint_ids, physicsClientId=self.client)
        return np.array([s[0] for s in st]), np.array([s[1] for s in st])

    def _metadata(self) -> dict:
        return {"substeps": self.substeps, **({"twin": self.twin.as_dict()} if not self.twin.ideal else {})}

    def close(self) -> None:
        if getattr(self, "client", None) is not None:
            try:
                self.pb.disconnect(self.client)
            except Exception:  # already disconnected
                pass
            self.client = None

    def __del__(self):
        self.close()

    # ------------------------------------------------------------------ simulation
    def _simulate(self, ref: JointTrajectory, record_from: int, record_to: int | None = None):
        """Run the controlled twin along ``ref``; return true q, motor and joint torques
        for the samples from ``record_from`` on."""
        pb, c, body, ids, spec = self.pb, self.client, self.body, self.joint_ids, self.spec
        if c is None:
            raise RecordingError(f"the {self.backend} twin of {spec.name} is closed")
        if self.elastic:
            return self._simulate_elastic(ref, record_from, record_to)
        N, n = ref.q_rad.shape
        ff = feedforward_Nm(self.truth, ref, self.controller.feedforward, self.feedforward_source)
        qref, dqref = ref.q_rad, ref.dq_rad_s
        record_to = N if record_to is None else record_to
        n_rec = record_to - record_from
        q_out = np.empty((n_rec, n))
        tau_j_out = np.empty((n_rec, n))
        vel_rec = np.empty((n_rec, n))
        acc_rec = np.empty((n_rec, n))
        kp, kd, h, ns = self.kp, self.kd, self.h_s, self.substeps
        quantise = self.noise.quantise
        springs = bool(spec.spring_joints)
        coupled = spec.is_coupled
        ci_T = spec.coupling_inv.T  # C^-T: joint torques that balance motor torques
        c_T = spec.coupling.T
        ia_joint = self._ia_joint
        torque_mode = pb.TORQUE_CONTROL
        set_torques, step, get_states = pb.setJointMotorControlArray, pb.stepSimulation, pb.getJointStates
        mass_matrix, inv_dyn = pb.calculateMassMatrix, pb.calculateInverseDynamics
        zeros = [0.0] * n
        act = self._act
        a_prev = self._a_prev
        q, v = self.state()
        fractions = np.arange(ns) / ns
        realistic = not self.twin.ideal
        fe = self._fe
        te = self._te
        if realistic:
            qloop = np.empty((n_rec, n))
            extra_rec = np.zeros((n_rec, n))
            te_rec = np.zeros((n_rec, n))
        for k in range(N):
            if te is not None:
                te.hold_inertia(q)
            # PD on the encoder and on the central velocity (the engine's own velocity lags
            # the positions' derivative by h a / 2, which would bias the feedback)
            if realistic:  # the loop controller of hal/sim/effects.py (closed on the measurements or not)
                u = self.loop.command(qref[k], dqref[k], ff[k], q, v + 0.5 * h * a_prev)
                if self.loop.closed and record_from <= k < record_to:
                    qloop[k - record_from] = self.loop.last_q_meas
            else:
                fb = kp * (qref[k] - quantise(q)) + kd * (dqref[k] - (v + 0.5 * h * a_prev))
                u = ff[k] + (c_T @ fb if coupled else fb)  # motor coordinates
            for i in range(ns):
                tau_m = act + (u - act) * fractions[i]  # first-order hold of the motor torque
                v_c = v + 0.5 * h * a_prev  # the positions' central velocity, extrapolated
                ql = q.tolist()
                M = np.array(mass_matrix(body, ql, physicsClientId=c))
                bias_c = np.array(inv_dyn(body, ql, v_c.tolist(), zeros, physicsClientId=c))
                bias_n = np.array(inv_dyn(body, ql, v.tolist(), zeros, physicsClientId=c))
                # drive chain: tau_m = C^T tau_joint + Ia ddq_m + f_motor(dq_m) (motor coordinates),
                # links: M a + bias + f_link - spring = tau_joint
                f_c, D = self._friction_and_jacobian(v_c)
                if fe is not None:  # unmodelled friction (explicit in the step)
                    f_c = f_c + fe.joint_Nm(v_c, self._time_s, tau_m)
                if te is not None:  # the gears' transmission error (drive side, explicit in the step)
                    f_c = f_c + te.joint_Nm(q, v_c, a_prev)
                rhs = (ci_T @ tau_m if coupled else tau_m) - f_c - bias_c + 0.5 * h * (D @ a_prev)
                if springs:
                    rhs = rhs + spring_torque_Nm(spec, q)[0]
                # friction linearly implicit at the step's own central velocity v + h a / 2
                # (stable for stiff smoothed Coulomb friction on light links)
                a = np.linalg.solve(M + ia_joint + 0.5 * h * D, rhs)
                # torque on the links that makes the engine (Coriolis at its own lagging
                # velocity v) realise a: M a + bias(q, v)
                set_torques(body, ids, torque_mode, forces=(M @ a + bias_n).tolist(), physicsClientId=c)
                step(physicsClientId=c)
                st = get_states(body, ids, physicsClientId=c)
                q_new = np.array([s[0] for s in st])
                v_new = np.array([s[1] for s in st])
                a_real = (v_new - v) / h
                if i == 0 and record_from <= k < record_to:
                    # the sensors at the sample instant, from the positions' own derivatives:
                    # q[n+1] - 2 q[n] + q[n-1] = h^2 a_real and (q[n+1] - q[n-1]) / 2h = v_rec
                    r = k - record_from
                    v_rec = v + 0.5 * h * a_real
                    q_out[r] = q
                    vel_rec[r] = v_rec
                    acc_rec[r] = a_real
                    # link-side drive torque (the joint-torque sensor): RNEA + f_link - spring
                    tau_j_out[r] = np.array(inv_dyn(body, ql, v_rec.tolist(), a_real.tolist(), physicsClientId=c))
                    if fe is not None:
                        extra_rec[r] = fe.joint_Nm(v_rec, self._time_s, tau_m)
                    if te is not None:  # motor side: in the motor torque, not in the joint torque
                        te_rec[r] = te.motor_Nm(to_motor(spec, q), to_motor(spec, v_rec), to_motor(spec, a_real))
                q, v, a_prev = q_new, v_new, a_real
                self._time_s += h
            act = u
        self._act, self._a_prev = act, a_prev
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
            raise RecordingError(f"the {self.backend} simulation of {spec.name} diverged (non-finite state)")
        if realistic:
            self._extras = {"q_motor_rad": to_motor(spec, q_out), "q_loop_rad": qloop if self.loop.closed else None}
            tau_j_out += extra_rec
        if n_rec:
            tau_j_out += link_friction_Nm(spec, vel_rec)
            if springs:
                tau_j_out -= spring_torque_Nm(spec, q_out)
        tau_m_out = motor_torque_Nm(spec, tau_j_out, vel_rec, acc_rec)
        if te is not None:
            tau_m_out += te_rec
        return q_out, tau_m_out, tau_j_out

    def _simulate_elastic(self, ref: JointTrajectory, record_from: int, record_to: int | None = None):
        """The elastic-joint twin (``elasticity``, hal/sim/effects.py): PyBullet integrates the
        links under the gear torque C^-T tau_spring (link friction linearly implicit, as in
        :meth:`_simulate`); the twin integrates the rotors (drive inertia, motor friction
        linearly implicit) semi-implicitly at the same engine step. Recorded: link q, the motor
        torque applied, the joint-torque sensor = the gear torque, the motor positions."""
        pb, c, body, ids, spec = self.pb, self.client, self.body, self.joint_ids, self.spec
        N, n = ref.q_rad.shape
        ff = feedforward_Nm(self.truth, ref, self.controller.feedforward, self.feedforward_source)
        record_to = N if record_to is None else record_to
        n_rec = record_to - record_from
        q_out, tau_m_out, tau_j_out, qm_out, qloop = (np.empty((n_rec, n)) for _ in range(5))
        h, ns = self.h_s, self.substeps
        el = self.twin.params.elasticity
        coupled = spec.is_coupled
        C, ci = spec.coupling, spec.coupling_inv
        ia = spec.drive_inertia_kgm2
        fe = self._fe
        springs = bool(spec.spring_joints)
        set_torques, step, get_states = pb.setJointMotorControlArray, pb.stepSimulation, pb.getJointStates
        mass_matrix, inv_dyn = pb.calculateMassMatrix, pb.calculateInverseDynamics
        zeros = [0.0] * n
        act, a_prev, th, om = self._act, self._a_prev, self._theta, self._omega
        te, om_acc = self._te, self._rotor_acc
        d = 1e-3 * spec.coulomb_smoothing_rad_s
        q, v = self.state()
        fractions = np.arange(ns) / ns
        for k in range(N):
            u = self.loop.command(ref.q_rad[k], ref.dq_rad_s[k], ff[k], C @ th if coupled else th,
                                  C @ om if coupled else om)
            if te is not None:
                te.hold_inertia(q)
            for i in range(ns):
                tau_m = act + (u - act) * fractions[i]
                v_c = v + 0.5 * h * a_prev
                ts = fx.spring_torque_Nm(el, th - (ci @ q if coupled else q), om - (ci @ v_c if coupled else v_c))
                tj = ci.T @ ts if coupled else ts
                if i == 0 and record_from <= k < record_to:
                    r = k - record_from
                    q_out[r], tau_m_out[r], tau_j_out[r], qm_out[r] = q, tau_m, tj, th
                    if self.loop.closed:
                        qloop[r] = self.loop.last_q_meas
                ql = q.tolist()
                M = np.array(mass_matrix(body, ql, physicsClientId=c))
                bias_c = np.array(inv_dyn(body, ql, v_c.tolist(), zeros, physicsClientId=c))
                bias_n = np.array(inv_dyn(body, ql, v.tolist(), zeros, physicsClientId=c))
                fl = link_friction_Nm(spec, v_c)
                dl = (link_friction_Nm(spec, v_c + d) - link_friction_Nm(spec, v_c - d)) / (2 * d)
                if fe is not None:  # the link side's unmodelled friction here, the motor side's on the rotor
                    fl = fl + fe.link_part_Nm(v_c, self._time_s, tau_m)
                rhs = tj - fl - bias_c + 0.5 * h * dl * a_prev
                if springs:
                    rhs = rhs + spring_torque_Nm(spec, q)[0]
                a = np.linalg.solve(M + 0.5 * h * np.diag(dl), rhs)
                set_torques(body, ids, pb.TORQUE_CONTROL, forces=(M @ a + bias_n).tolist(), physicsClientId=c)
                step(physicsClientId=c)
                st = get_states(body, ids, physicsClientId=c)
                q_new = np.array([s_[0] for s_ in st])
                v_new = np.array([s_[1] for s_ in st])
                # rotors: Ia dw = tau_m - tau_spring - f_motor(w), friction linearly implicit
                fm = motor_side_friction_Nm(spec, om)
                if fe is not None:
                    fm = fm + fe.rotor_Nm(om, self._time_s, tau_m, C)
                dm = (motor_side_friction_Nm(spec, om + d) - motor_side_friction_Nm(spec, om - d)) / (2 * d)
                if te is not None:  # the gears' transmission error on the rotors (explicit)
                    fm = fm + te.motor_Nm(th, om, om_acc)
                om_new = om + h * (tau_m - ts - fm) / (ia + h * dm)
                om_acc, om = (om_new - om) / h, om_new
                th = th + h * om
                a_prev = (v_new - v) / h
                q, v = q_new, v_new
                self._time_s += h
            act = u
        self._act, self._a_prev, self._theta, self._omega, self._rotor_acc = act, a_prev, th, om, om_acc
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v)) and np.all(np.isfinite(th))):
            raise RecordingError(f"the {self.backend} simulation of {spec.name} diverged (non-finite state)")
        self._extras = {"q_motor_rad": qm_out, "q_loop_rad": qloop if self.loop.closed else None}
        return q_out, tau_m_out, tau_j_out
