"""The batched MuJoCo twin with elastic joints (the realistic twin's ``elasticity`` effect).

:class:`hal.sim.batch.BatchTwin` builds an :class:`ElasticBatchTwin` when its twin has
``elasticity`` (``BatchTwin(spec, n, ..., twin=setup)`` is unchanged for its callers). The
physics is the HAL twin's (:class:`hal.sim.mujoco_backend.MujocoTwin` with
:func:`hal.sim.mujoco_backend.elastic_mjcf`), vectorised over the robots:

- each robot is the elastic MJCF: the links without drive inertia, one rotor hinge per motor
  (armature = drive inertia, motor coordinates) driven by the first-order-hold actuator, and per
  motor a fixed tendon ``theta_m - C^-1 q`` carrying the gear's stiffness, damping and backlash
  dead band (MuJoCo evaluates it in every integrator stage); robot ``i`` owns dofs
  ``2 n i .. 2 n i + n - 1`` (links) and ``2 n i + n .. 2 n (i + 1) - 1`` (rotors);
- :func:`hal.sim.effects.elastic_substeps` engine steps per control period, RK4;
- the passive forces: the ideal twin's link friction and springs on the links, its motor-side
  friction and offsets on the rotors, the unmodelled friction (``friction_unmodelled``) on the
  links, as the HAL twin's ``_realistic_passive``;
- the position loop closes on the motor encoder ``C theta_m`` (ideal: quantised, true motor
  velocity; ``closed_loop``: measured, filtered, delayed, as :class:`hal.sim.effects.LoopController`),
  its gains tuned on the rotor inertia;
- the sample: link position, applied motor torque, and the joint-torque sensor reading
  ``C^-T (K dz(theta_m - C^-1 q) + D (dtheta_m - C^-1 dq))``, the gear's spring torque
  (computed from the state, equal to MuJoCo's tendon force, no ``mj_forward`` needed).

``tests/test_robustness.py`` checks that every robot of a batch records what the HAL twin with
its seed records, to 1e-9.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from robident_twin.errors import ConfigError, RecordingError
from robident_twin.model.dynamics import link_friction_Nm, motor_side_friction_Nm, spring_torque_Nm

from ..protocol import JointTrajectory, Recording
from . import effects as fx
from .batch import NOISE_BLOCK, PROGRESS_EVERY, BatchTwin, replicated_model, _frozen, _shared_empty, disturbance_rngs


def elastic_batch_model(spec, n_robots: int, timestep_s: float, integrator: str, elasticity):
    """One MjModel holding ``n_robots`` copies of the elastic twin's MJCF, robot ``i`` prefixed
    ``r<i>_``: links then rotors (``2 n`` dofs), ``n`` actuators and ``n`` gear tendons each."""

    from .mujoco_backend import elastic_mjcf

    if not isinstance(n_robots, int) or n_robots < 1:
        raise ConfigError(f"batch: n_robots must be a positive integer, got {n_robots!r}")
    m = replicated_model(elastic_mjcf(spec, timestep_s, integrator, elasticity), n_robots)
    n = spec.n_joints
    if (m.nq, m.nv, m.nu, m.na, m.ntendon) != (2 * n * n_robots,) * 2 + (n * n_robots,) * 3:
        raise RuntimeError(f"elastic batch model of {spec.name}: expected {2 * n * n_robots} dofs and "
                           f"{n * n_robots} actuators, activations and tendons, got nq={m.nq} nv={m.nv} "
                           f"nu={m.nu} na={m.na} ntendon={m.ntendon}")
    for i in (0, n_robots - 1):  # the layout the vectorised code relies on
        for j, jt in enumerate(spec.joints):
            ok = (m.joint(2 * n * i + j).name == f"r{i}_{jt.name}"
                  and m.joint(2 * n * i + n + j).name == f"r{i}_{jt.name}_rotor"
                  and m.actuator_trnid[n * i + j, 0] == 2 * n * i + n + j
                  and m.tendon(n * i + j).name == f"r{i}_{jt.name}_gear")
            if not ok:
                raise RuntimeError(f"elastic batch model of {spec.name}: unexpected layout at robot {i}, joint {j}")
    return m


def _elastic_passive(spec, twin: fx.TwinSetup):
    """Passive forces of all robots (the HAL twin's ``_realistic_passive`` with elasticity): the
    gear spring is MuJoCo's (tendons); links: friction, springs, unmodelled friction; rotors:
    motor-side friction and offsets."""
    n = spec.n_joints
    springs = bool(spec.spring_joints)
    fs = _frozen(spec)
    motor_fr = bool(np.any(fs.fv_motor_Nms_rad) or np.any(fs.fc_motor_Nm) or np.any(fs.offset_motor_Nm))
    fe = fx.FrictionEffect(spec, twin.params.friction_unmodelled) if twin.has("friction_unmodelled") else None

    def passive(m, d):
        pos, vel = d.qpos.reshape(-1, 2 * n), d.qvel.reshape(-1, 2 * n)
        frc = d.qfrc_passive.reshape(-1, 2 * n)
        v = vel[:, :n]
        f = link_friction_Nm(fs, v)
        if springs:
            f = f - spring_torque_Nm(fs, pos[:, :n])
        if fe is not None:
            f = f + fe.joint_Nm(v, d.time, d.act.reshape(-1, n))
        frc[:, :n] -= f
        if motor_fr:
            frc[:, n:] -= motor_side_friction_Nm(fs, vel[:, n:])

    return passive


class ElasticBatchTwin(BatchTwin):
    """``n_robots`` elastic-joint MuJoCo twins simulated together (see the module docstring)."""

    def __init__(self, spec, n_robots: int, noise=None, control_rate_hz: float = 1000.0, controller=None,
                 integrator: str = "RK4", workers: int = 1, parallel: str | None = None,
                 twin: fx.TwinSetup = fx.IDEAL):
        import pinocchio as pin

        from .mujoco_backend import ControllerConfig, elastic_rest_motor_rad

        if not twin.has("elasticity"):
            raise ConfigError("ElasticBatchTwin: the twin has no elasticity (use BatchTwin)")
        self.elasticity = twin.params.elasticity
        self.integrator = integrator
        if control_rate_hz > 0:
            pm_diag = np.diag(pin.crba(*_pin_model_data(spec), np.asarray(spec.home_rad, float)))
            self.substeps = fx.elastic_substeps(spec, self.elasticity, pm_diag, control_rate_hz)
        super().__init__(spec, n_robots, noise, control_rate_hz, controller or ControllerConfig(), integrator,
                         workers, parallel, twin)
        # the rotors hold the links at rest at home; the loop is tuned on the rotor inertia
        self.theta0 = elastic_rest_motor_rad(spec, self.elasticity, self.q0, self.act0)
        w = fx.loop_bandwidth_rad_s(twin, self.controller.bandwidth_hz, self.controller.damping_ratio, control_rate_hz)
        J = spec.drive_inertia_kgm2
        self.kp = J * w**2
        self.kd = 2 * self.controller.damping_ratio * J * w

    def _group_model(self, n_robots: int, control_rate_hz: float, integrator: str):
        return elastic_batch_model(self.spec, n_robots, 1.0 / (control_rate_hz * self.substeps), integrator,
                                   self.twin.params.elasticity)

    def reset(self) -> None:
        import mujoco

        n = self.spec.n_joints
        for (a, b), m, d in zip(self.groups, self.models, self.datas):
            mujoco.mj_resetData(m, d)
            pos = d.qpos.reshape(b - a, 2 * n)
            pos[:, :n] = self.q0
            pos[:, n:] = self.theta0
            d.act[:] = np.tile(self.act0, b - a)
            mujoco.mj_forward(m, d)

    def simulate(self, ref: JointTrajectory, record_from: int, record_to: int | None = None,
                 disturbance: Callable[[int, int, int, int], np.ndarray] | None = None,
                 progress: Callable[[int], None] | None = None,
                 loop_noise: Callable[[int, int, int, int], np.ndarray] | None = None):
        """As :meth:`BatchTwin.simulate`; returns true link q, motor and joint torques, the
        position the closed loop measured (None without ``closed_loop``) and the true motor
        positions, each (n_robots, record_to - record_from, n)."""

        from .playback import feedforward_Nm

        R, n = self.n_robots, self.spec.n_joints
        N = ref.q_rad.shape[0]
        record_to = N if record_to is None else record_to
        if not 0 <= record_from <= record_to <= N:
            raise ConfigError(f"batch: recorded window [{record_from}, {record_to}) outside 0..{N}")
        self.reset()
        ff = feedforward_Nm(self.truth, ref, self.controller.feedforward)
        n_rec = record_to - record_from
        forked = len(self.groups) > 1 and self.parallel == "fork"
        alloc = _shared_empty if forked else np.empty
        out = tuple(alloc((R, n_rec, n)) for _ in range(5))
        args = (ref, ff, record_from, record_to, disturbance, loop_noise)
        self._run_groups(_elastic_passive(self.spec, self.twin), args, progress, out)
        q, tm, tj, qloop, qmot = out
        return q, tm, tj, (qloop if self.twin.has("closed_loop") else None), qmot

    def _simulate_group(self, g: int, ref: JointTrajectory, ff, record_from: int, record_to: int,
                        disturbance, loop_noise, progress, out) -> None:
        """The control loop of robot group ``g`` on the motor encoders (writes its rows of ``out``)."""
        import mujoco

        spec = self.spec
        m, d = self.models[g], self.datas[g]
        lo, hi = self.groups[g]
        R, n = hi - lo, spec.n_joints
        N = ref.q_rad.shape[0]
        q_out, tm_out, tj_out, qloop_out, qmot_out = (x[lo:hi] for x in out)
        pos, vel = d.qpos.reshape(R, 2 * n), d.qvel.reshape(R, 2 * n)
        act = d.act.reshape(R, n)
        ctrl = d.ctrl.reshape(R, n)
        coupled = spec.is_coupled
        C, cinv = spec.coupling, spec.coupling_inv
        el = self.elasticity
        rate = self.info.control_rate_hz
        kp, kd = self.kp, self.kd
        closed = self.twin.has("closed_loop")
        if closed:
            cl = self.twin.params.closed_loop
            alpha = 1.0 - np.exp(-2 * np.pi * cl.velocity_filter_hz / rate)
            queue = [np.tile(self.act0, (R, 1)) for _ in range(cl.delay_cycles)]
            q_prev, v_f = None, np.zeros((R, n))
            qstd = self.noise.q_std_rad
            nblock, k_nblock = None, 0
        block, k_block = None, 0
        qref, dqref = ref.q_rad, ref.dq_rad_s
        for k in range(N):
            theta, dtheta = pos[:, n:], vel[:, n:]
            if record_from <= k < record_to:  # the sample instant (state after the last period)
                i = k - record_from
                q, dq = pos[:, :n], vel[:, :n]
                q_out[:, i] = q
                tm_out[:, i] = act
                qmot_out[:, i] = theta
                dz = theta - (q @ cinv.T if coupled else q)
                ddz = dtheta - (dq @ cinv.T if coupled else dq)
                ts = fx.spring_torque_Nm(el, dz, ddz)
                tj_out[:, i] = ts @ cinv if coupled else ts
            qc = theta @ C.T if coupled else theta.copy()
            vc = dtheta @ C.T if coupled else dtheta.copy()
            if closed:
                if nblock is None or k >= k_nblock + nblock.shape[1]:
                    k_nblock = k
                    nblock = loop_noise(k, min(N, k + NOISE_BLOCK), lo, hi)
                qmeas = self.noise.quantise(qc) + nblock[:, k - k_nblock] * qstd
                if q_prev is not None:
                    v_f = v_f + alpha * ((qmeas - q_prev) * rate - v_f)
                q_prev = qmeas
                if record_from <= k < record_to:
                    qloop_out[:, k - record_from] = qmeas
                fb = kp * (qref[k] - qmeas) + kd * (dqref[k] - v_f)
            else:
                fb = kp * (qref[k] - self.noise.quantise(qc)) + kd * (dqref[k] - vc)
            u = ff[k] + (fb @ C if coupled else fb)
            if closed and queue:
                queue.append(u)
                u = queue.pop(0)
            if disturbance is not None:
                if block is None or k >= k_block + block.shape[1]:
                    k_block = k
                    block = disturbance(k, min(N, k + NOISE_BLOCK), lo, hi)
                u = u + block[:, k - k_block]
            ctrl[:] = (u - act) * rate  # the torque ramps to u over the next control period
            for _ in range(self.substeps):
                mujoco.mj_step(m, d)
            if progress is not None and (k + 1) % PROGRESS_EVERY == 0:
                progress(PROGRESS_EVERY)
        if progress is not None and N % PROGRESS_EVERY:
            progress(N % PROGRESS_EVERY)
        if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
            raise RecordingError(f"the batched elastic mujoco simulation of {spec.name} diverged (non-finite state)")

    def run(self, trajectory: JointTrajectory, seeds, periods: int = 1, transient_periods: int = 0,
            process_noise_Nm=None, progress: Callable[[int], None] | None = None) -> list[Recording]:
        """One recording per seed, as the HAL elastic twin with that seed records it (the sensor
        effects from a settled history, the cogging ripple on the true motor positions)."""
        seeds = [int(s) for s in seeds]
        if len(seeds) != self.n_robots:
            raise ConfigError(f"batch: {len(seeds)} seeds for {self.n_robots} robots")
        n = self.spec.n_joints
        plan = self.plan(trajectory, periods, transient_periods)
        disturbance, std = None, None
        if process_noise_Nm is not None:
            std = np.broadcast_to(np.asarray(process_noise_Nm, float), (n,)).copy()
            if np.any(~np.isfinite(std)) or np.any(std < 0):
                raise ConfigError(f"montecarlo.process_noise_Nm: expected non-negative numbers, got {std.tolist()}")
            if np.any(std > 0):
                rngs = disturbance_rngs(seeds)

                def disturbance(k0: int, k1: int, lo: int, hi: int) -> np.ndarray:
                    return np.stack([g.standard_normal((k1 - k0, n)) for g in rngs[lo:hi]]) * std
            else:
                std = None
        loop_noise = None
        if self.twin.has("closed_loop"):
            lrngs = [fx.loop_rng(s) for s in seeds]

            def loop_noise(k0: int, k1: int, lo: int, hi: int) -> np.ndarray:
                return np.stack([g.standard_normal((k1 - k0, n)) for g in lrngs[lo:hi]])

        twin = self.twin
        pad = min(fx.SENSOR_PAD_SAMPLES, plan.start) if twin.has("sensor") else 0
        q, tm, tj, qloop, qmot = self.simulate(plan.reference, plan.start - pad, plan.stop, disturbance, progress,
                                               loop_noise)
        recs = []
        for i, s in enumerate(seeds):
            tmi, tji = tm[i], tj[i]
            if twin.has("sensor"):
                tmi, tji = fx.apply_sensor_effects(twin.params.sensor, self.info.control_rate_hz, tmi, tji, pad)
            rec = self.recording(plan, q[i, pad:], tmi, tji, s, std, None if qloop is None else qloop[i, pad:],
                                 q_motor_rad=qmot[i, pad:])
            rec.metadata["true_q_motor_rad"] = qmot[i, pad:].copy()
            rec.metadata["substeps"] = self.substeps
            recs.append(rec)
        return recs


def _pin_model_data(spec):
    from robident_twin.model.builders import pinocchio_model

    pm = pinocchio_model(spec)
    return pm, pm.createData()
