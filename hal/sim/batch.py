"""Batched MuJoCo twin: many independent copies of the robot stepped together in one MjModel.

The Monte-Carlo runner (:mod:`robident_twin.validation.montecarlo`) simulates many runs of the same
twin. Stepping each run through :class:`hal.sim.mujoco_backend.MujocoTwin` costs a Python
controller evaluation per control period and a Python passive-force callback (the smoothed
Coulomb friction ``Fc tanh(dq / eps)``) in each of the four RK4 stages, for every run: about
5-7 times the wall time of a raw two-thread ``mujoco.rollout`` of the same steps. Here the N
runs' robots sit side by side in one model (``N x n`` degrees of freedom, block-diagonal mass
matrix), so one MuJoCo call integrates all of them, and one vectorised numpy evaluation of
the controller and of the friction serves all N robots per step and per RK4 stage. The
per-step Python overhead is shared by N robots, and MuJoCo's own per-call overhead too
(measured on the iiwa 14: 100 runs with process noise, two chunks of 50 robots, each in two
forked groups, simulated, processed and estimated in 1.1 times the wall time of a two-thread
raw ``mujoco.rollout`` of the same steps; see ``benchmarks/bench_montecarlo.py``).

The physics and the controller are those of :class:`MujocoTwin`, vectorised and otherwise
unchanged (``tests/test_batch_twin.py`` checks that every copy reproduces the HAL twin):
PD + feed-forward position control at the control rate on the quantised encoder position,
first-order-hold motor torque (integrator actuators), RK4, friction / springs / offsets of
:mod:`robident_twin.model.dynamics` in every RK4 stage, drive inertia as armature, the
joint-torque sensor reading the drive torque minus the drive inertia and motor-side
friction. The continuous-time model therefore still holds exactly at every sample, and
noise-free identification stays exact.

Process noise (optional): a Gaussian torque disturbance per control period and joint,
``process_noise_Nm`` std, added to the motor torque command of each robot (a current-loop
disturbance). The motor applies it through the same first-order hold and the torque
channels measure the torque actually applied, so the identification model stays exact; the
runs' motions differ, so every run needs its own simulation.

Parallel groups (``workers``): the robots split into groups, one MuJoCo model per group, each
stepped by its own forked process writing into shared memory (``parallel="fork"``, the default
where the OS forks) or by its own thread (``"thread"``: MuJoCo's stepping functions release the
GIL, but the controller and the friction callback of both groups need it, so threads gain
little). The result does not depend on the split (``tests/test_batch_twin.py``).
"""
from __future__ import annotations

import os
import threading
import traceback
from typing import Callable

import numpy as np

from robident_twin.model.builders import pinocchio_model, to_mjcf
from robident_twin.model.dynamics import (
    TruthModel,
    link_friction_Nm,
    motor_side_friction_Nm,
    spring_torque_Nm,
)
from robident_twin.errors import ConfigError, RecordingError
from robident_twin.model.robot import RobotSpec

from ..protocol import JointTrajectory, Recording
from . import mujoco_backend
from .mujoco_backend import ControllerConfig, robot_info
from . import effects as fx
from .drive_loop import tuned_on_axis
from .playback import RunPlan, feedforward_Nm, make_recording, plan_run
from .sensors import SensorNoise

#: The HAL twin's lock around its process-global passive-force callback, shared so that a
#: batch and a twin (or stepper) in another thread take turns.
_PASSIVE_LOCK = getattr(mujoco_backend, "_PASSIVE_LOCK", None) or threading.RLock()
#: Steps between two calls of the progress hook of :meth:`BatchTwin.simulate`.
PROGRESS_EVERY = 1000
#: Steps of process noise drawn at once per robot (part of the noise's definition, so a
#: run's disturbance depends only on its seed, not on the batch it runs in).
NOISE_BLOCK = 1000


def replicated_model(xml: str, n_robots: int):
    """One MjModel of ``n_robots`` copies of the MJCF ``xml`` (robot ``i`` prefixed ``r<i>_``),
    with the options (time step, integrator, gravity, flags) of ``xml``."""
    import mujoco

    parent = mujoco.MjSpec.from_string(xml)
    for b in list(parent.worldbody.bodies):
        parent.delete(b)
    for a in list(parent.actuators):
        parent.delete(a)
    for t in list(parent.tendons):
        parent.delete(t)
    for i in range(n_robots):
        parent.attach(mujoco.MjSpec.from_string(xml), frame=parent.worldbody.add_frame(), prefix=f"r{i}_")
    return parent.compile()


def batch_model(spec: RobotSpec, n_robots: int, timestep_s: float = 1e-3, integrator: str = "RK4"):
    """One MjModel holding ``n_robots`` copies of the twin's MJCF (first-order-hold
    actuators), robot ``i`` with prefix ``r<i>_``: its joints are dofs ``i n .. i n + n - 1``
    and its actuators (and activations) likewise."""

    if not isinstance(n_robots, int) or n_robots < 1:
        raise ConfigError(f"batch: n_robots must be a positive integer, got {n_robots!r}")
    m = replicated_model(to_mjcf(spec, timestep_s, integrator, actuator="ramp"), n_robots)
    n = spec.n_joints
    if (m.nq, m.nv, m.nu, m.na) != (n * n_robots,) * 4:
        raise RuntimeError(f"batch model of {spec.name}: expected {n * n_robots} dofs, actuators and "
                           f"activations, got nq={m.nq} nv={m.nv} nu={m.nu} na={m.na}")
    for i in (0, n_robots - 1):  # the layout the vectorised code relies on
        for j, jt in enumerate(spec.joints):
            if m.joint(i * n + j).name != f"r{i}_{jt.name}" or not m.actuator(i * n + j).name.startswith(f"r{i}_"):
                raise RuntimeError(f"batch model of {spec.name}: unexpected dof order at robot {i}, joint {j}")
    return m


def _frozen(spec: RobotSpec):
    """The attributes the friction and spring functions of :mod:`robident_twin.model.dynamics` read,
    computed once (the RobotSpec properties rebuild their arrays on every access, which
    would dominate a callback evaluated four times per step)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        joints=spec.joints, spring_joints=tuple(spec.spring_joints), is_coupled=spec.is_coupled,
        coulomb_smoothing_rad_s=spec.coulomb_smoothing_rad_s, fv_link_Nms_rad=spec.fv_link_Nms_rad,
        fc_link_Nm=spec.fc_link_Nm, fv_motor_Nms_rad=spec.fv_motor_Nms_rad, fc_motor_Nm=spec.fc_motor_Nm,
        offset_motor_Nm=spec.offset_motor_Nm)


def _passive(spec: RobotSpec, n_robots: int):
    """Passive-force callback for all robots at once: friction, springs and offsets of
    :mod:`robident_twin.model.dynamics` (the same terms as the HAL twin's callback)."""
    n = spec.n_joints
    simple = (not spec.is_coupled and not spec.spring_joints
              and all(j.friction_link_variant.kind == j.friction_motor_variant.kind == "viscous_coulomb"
                      for j in spec.joints))
    if simple:  # works for any number of robots up to n_robots (thread groups of one batch)
        fv = np.tile(spec.fv_link_Nms_rad + spec.fv_motor_Nms_rad, n_robots)
        fc = np.tile(spec.fc_link_Nm + spec.fc_motor_Nm, n_robots)
        off = np.tile(spec.offset_motor_Nm, n_robots)
        eps = spec.coulomb_smoothing_rad_s

        def passive(m, d):
            v = d.qvel
            k = v.size
            d.qfrc_passive -= fv[:k] * v + fc[:k] * np.tanh(v / eps) + off[:k]

        return passive
    cinv = spec.coupling_inv
    coupled = spec.is_coupled
    spec = _frozen(spec)

    def passive(m, d):
        v = d.qvel.reshape(-1, n)
        f = link_friction_Nm(spec, v)
        if spec.spring_joints:
            f = f - spring_torque_Nm(spec, d.qpos.reshape(-1, n))
        fm = motor_side_friction_Nm(spec, v @ cinv.T if coupled else v)
        f = f + (fm @ cinv if coupled else fm)
        d.qfrc_passive -= f.reshape(-1)

    return passive


def _realistic_passive(spec: RobotSpec, n_robots: int, twin: fx.TwinSetup):
    """The ideal passive forces of :func:`_passive` plus the unmodelled friction of the realistic
    twin (:class:`hal.sim.effects.FrictionEffect`, the HAL twin's law), for all robots."""
    n = spec.n_joints
    base = _passive(spec, n_robots)
    fe = fx.FrictionEffect(spec, twin.params.friction_unmodelled)

    def passive(m, d):
        base(m, d)
        v = d.qvel.reshape(-1, n)
        d.qfrc_passive -= fe.joint_Nm(v, d.time, d.act.reshape(-1, n)).reshape(-1)

    return passive


def _shared_empty(shape) -> np.ndarray:
    """An uninitialised float array in anonymous shared memory (visible to forked children)."""
    import mmap

    count = int(np.prod(shape))
    return np.frombuffer(mmap.mmap(-1, max(8 * count, 8)), dtype=float, count=count).reshape(shape)


def disturbance_rngs(seeds) -> list[np.random.Generator]:
    """The process-noise generator of each run: independent of its sensor-noise generator
    (``default_rng(seed)``, as the HAL twin's), so adding process noise leaves the sensor
    noise draws of a seed unchanged."""
    return [np.random.default_rng([int(s), 0x5EED]) for s in seeds]


class BatchTwin:
    """``n_robots`` MuJoCo twins of ``spec`` (same controller, same sensor model) simulated
    together; :meth:`run` returns one HAL :class:`Recording` per seed, as
    ``MujocoTwin(spec, noise, seed).run(...)`` would from its initial state."""

    backend = "mujoco"

    def __new__(cls, *args, **kwargs):
        """A twin with ``elasticity`` is an :class:`hal.sim.batch_elastic.ElasticBatchTwin` (same call)."""
        twin = kwargs.get("twin", args[8] if len(args) > 8 else fx.IDEAL)
        if cls is BatchTwin and twin.has("elasticity"):
            from .batch_elastic import ElasticBatchTwin

            return super().__new__(ElasticBatchTwin)
        return super().__new__(cls)

    def __init__(self, spec: RobotSpec, n_robots: int, noise: SensorNoise | None = None,
                 control_rate_hz: float = 1000.0, controller: ControllerConfig = ControllerConfig(),
                 integrator: str = "RK4", workers: int = 1, parallel: str | None = None,
                 twin: fx.TwinSetup = fx.IDEAL):
        import mujoco
        import pinocchio as pin

        if twin.has("transmission_error") and twin.params.transmission_error is not None:
            raise ConfigError(f"twin.effects: transmission_error ({twin.params.path}) is not available on the batched "
                              "twin (montecarlo runs it on one HAL twin per run: montecarlo.sim=hal or auto)")
        if tuned_on_axis(twin):
            raise ConfigError(f"twin.effects: closed_loop with the robot's own drive loop ({twin.params.path} "
                              "drive_loop, a PI velocity loop) is not available on the batched twin (PD only; "
                              "montecarlo.sim=hal)")
        self.twin = twin

        if not control_rate_hz > 0:
            raise ConfigError(f"backend.control_rate_hz must be positive, got {control_rate_hz}")
        if controller.integral_hz > 0:
            raise ConfigError("backend.controller.integral_hz: the batch twin has the PD controller only (0)")
        self.spec = spec
        self.n_robots = int(n_robots)
        self.noise = noise if noise is not None else SensorNoise.from_config(spec)
        self.controller = controller
        self.info = robot_info(spec, self.backend, control_rate_hz)
        if not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"batch: workers must be a positive integer, got {workers!r}")
        self.parallel = parallel or ("fork" if hasattr(os, "fork") else "thread")
        if self.parallel not in ("fork", "thread"):
            raise ConfigError(f"batch: parallel must be 'fork' or 'thread', got {parallel!r}")
        # the robots split into near-equal groups, one MuJoCo model and one thread each (MuJoCo's
        # stepping functions release the GIL; the shared callback takes it only for numpy)
        k = min(workers, self.n_robots)
        bounds = np.linspace(0, self.n_robots, k + 1).round().astype(int)
        self.groups = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
        models: dict[int, object] = {}
        for a, b in self.groups:
            if b - a not in models:
                models[b - a] = self._group_model(b - a, control_rate_hz, integrator)
        self.models = [models[b - a] for a, b in self.groups]
        self.datas = [mujoco.MjData(m) for m in self.models]
        self.model, self.data = self.models[0], self.datas[0]
        self.truth = TruthModel(spec)
        n = spec.n_joints
        z = np.zeros(n)
        self.q0 = np.asarray(spec.home_rad, float)
        self.act0 = self.truth.torques(self.q0, z, z)[1][0]  # holding torque at rest
        pm = pinocchio_model(spec)
        J = np.diag(pin.crba(pm, pm.createData(), self.q0)) + spec.drive_inertia_kgm2
        # capped for the closed loop's dead time, as the HAL twin's (hal/sim/effects.py)
        w = fx.loop_bandwidth_rad_s(twin, controller.bandwidth_hz, controller.damping_ratio, control_rate_hz)
        self.kp = J * w**2
        self.kd = 2 * controller.damping_ratio * J * w

    def _group_model(self, n_robots: int, control_rate_hz: float, integrator: str):
        """The MjModel of one group of ``n_robots`` robots (a subclass may build another one)."""
        return batch_model(self.spec, n_robots, 1.0 / control_rate_hz, integrator)

    def reset(self) -> None:
        """All robots at home, at rest, holding their weight (the HAL twin's initial state)."""
        import mujoco

        for (a, b), m, d in zip(self.groups, self.models, self.datas):
            mujoco.mj_resetData(m, d)
            d.qpos[:] = np.tile(self.q0, b - a)
            d.act[:] = np.tile(self.act0, b - a)
            mujoco.mj_forward(m, d)

    def plan(self, trajectory: JointTrajectory, periods: int, transient_periods: int) -> RunPlan:
        z = np.zeros(self.spec.n_joints)
        return plan_run(self.info, self.backend, trajectory, self.q0, z, periods, transient_periods)

    def simulate(self, ref: JointTrajectory, record_from: int, record_to: int | None = None,
                 disturbance: Callable[[int, int, int, int], np.ndarray] | None = None,
                 progress: Callable[[int], None] | None = None,
                 loop_noise: Callable[[int, int, int, int], np.ndarray] | None = None):
        """Run all robots from :meth:`reset` along ``ref``. ``disturbance(k0, k1, lo, hi)``
        (optional) returns the motor-torque disturbances of robots lo..hi-1 over steps k0..k1-1,
        shape (hi - lo, k1 - k0, n). ``progress(steps)`` is called every :data:`PROGRESS_EVERY`
        steps (of the first robot group) with the steps done.
        Returns true q, motor and joint torques, each (n_robots, record_to - record_from, n)."""

        spec = self.spec
        R, n = self.n_robots, spec.n_joints
        N = ref.q_rad.shape[0]
        record_to = N if record_to is None else record_to
        if not 0 <= record_from <= record_to <= N:
            raise ConfigError(f"batch: recorded window [{record_from}, {record_to}) outside 0..{N}")
        self.reset()
        ff = feedforward_Nm(self.truth, ref, self.controller.feedforward)
        n_rec = record_to - record_from
        forked = len(self.groups) > 1 and self.parallel == "fork"
        alloc = _shared_empty if forked else np.empty
        closed = self.twin.has("closed_loop")
        out = (alloc((R, n_rec, n)), alloc((R, n_rec, n)), alloc((R, n_rec, n))) + \
            ((alloc((R, n_rec, n)),) if closed else ())
        args = (ref, ff, record_from, record_to, disturbance, loop_noise)
        self._run_groups(_passive(spec, R) if not self.twin.has("friction_unmodelled")
                         else _realistic_passive(spec, R, self.twin), args, progress, out)
        return out

    def _run_groups(self, passive, args, progress, out) -> None:
        """Every robot group's control loop with the passive-force callback ``passive`` installed:
        one group here, the others forked (``parallel="fork"``) or in threads."""
        import mujoco

        with _PASSIVE_LOCK:
            previous = mujoco.get_mjcb_passive()
            mujoco.set_mjcb_passive(passive)
            try:
                if len(self.groups) == 1:
                    self._simulate_group(0, *args, progress, out)
                elif len(self.groups) > 1 and self.parallel == "fork":
                    self._simulate_forked(args, progress, out)
                else:
                    from concurrent.futures import ThreadPoolExecutor

                    with ThreadPoolExecutor(len(self.groups)) as ex:
                        futures = [ex.submit(self._simulate_group, g, *args, progress if g == 0 else None, out)
                                   for g in range(len(self.groups))]
                        for f in futures:
                            f.result()  # re-raises a group's error
            finally:
                mujoco.set_mjcb_passive(previous)

    def _simulate_forked(self, args, progress, out) -> None:
        """Groups 1.. in forked child processes (writing into the shared ``out``), group 0 here:
        no GIL between the groups."""
        pids = []
        try:
            for g in range(1, len(self.groups)):
                pid = os.fork()
                if pid == 0:  # child: simulate one group, never return into the caller's code
                    code = 0
                    try:
                        self._simulate_group(g, *args, None, out)
                    except BaseException:  # noqa: BLE001 - reported through the exit code
                        traceback.print_exc()
                        code = 1
                    finally:
                        os._exit(code)
                pids.append(pid)
            self._simulate_group(0, *args, progress, out)
        finally:
            failed = [g + 1 for g, pid in enumerate(pids) if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0]
        if failed:
            raise RecordingError(f"the batched mujoco simulation of {self.spec.name} failed in robot group(s) "
                                 f"{failed} (forked worker; its error is printed above)")

    def _simulate_group(self, g: int, ref: JointTrajectory, ff, record_from: int, record_to: int,
                        disturbance, loop_noise, progress, out) -> None:
        """The control loop of robot group ``g`` (its own model and data; writes its rows of ``out``)."""
        import mujoco

        spec = self.spec
        m, d = self.models[g], self.datas[g]
        lo, hi = self.groups[g]
        R, n = hi - lo, spec.n_joints
        N = ref.q_rad.shape[0]
        q_out, tau_m_out, tau_j_out = (x[lo:hi] for x in out[:3])
        closed = self.twin.has("closed_loop")
        if closed:  # the drive's loop on the measured position (hal/sim/effects.py, vectorised)
            qloop_out = out[3][lo:hi]
            cl = self.twin.params.closed_loop
            alpha = 1.0 - np.exp(-2 * np.pi * cl.velocity_filter_hz / self.info.control_rate_hz)
            queue = [np.tile(self.act0, (R, 1)) for _ in range(cl.delay_cycles)]
            q_prev, v_f = None, np.zeros((R, n))
            qstd = self.noise.q_std_rad
            nblock, k_nblock = None, 0
        qref, dqref = ref.q_rad, ref.dq_rad_s
        kp, kd, ia = self.kp, self.kd, spec.drive_inertia_kgm2
        coupled = spec.is_coupled
        C, cinv = spec.coupling, spec.coupling_inv
        fs = _frozen(spec)
        rate = self.info.control_rate_hz
        res = self.noise.encoder_resolution_rad
        qmask = res > 0
        quantised = bool(qmask.any())
        resq = np.where(qmask, res, 1.0)
        qpos, qvel, qacc = d.qpos.reshape(R, n), d.qvel.reshape(R, n), d.qacc.reshape(R, n)
        ctrl, act = d.ctrl.reshape(R, n), d.act.reshape(R, n)
        qq = np.empty((R, n))
        block = None
        k_block = 0
        rk4 = m.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4
        motor_friction = bool(np.any(fs.fv_motor_Nms_rad) or np.any(fs.fc_motor_Nm) or np.any(fs.offset_motor_Nm)
                              or any(j.friction_motor_variant.kind != "viscous_coulomb" for j in spec.joints))
        tmp = np.empty((R, n))
        for k in range(N):
            if quantised:  # the encoder position the controller sees (HAL: SensorNoise.quantise)
                np.divide(qpos, resq, out=qq)
                np.round(qq, out=qq)
                qq *= resq
                qm = np.where(qmask, qq, qpos)
            else:
                qm = qpos
            if closed:
                if nblock is None or k >= k_nblock + nblock.shape[1]:
                    k_nblock = k
                    nblock = loop_noise(k, min(N, k + NOISE_BLOCK), lo, hi)
                qmeas = qm + nblock[:, k - k_nblock] * qstd
                if q_prev is not None:
                    v_f = v_f + alpha * ((qmeas - q_prev) * rate - v_f)
                q_prev = qmeas
                if record_from <= k < record_to:
                    qloop_out[:, k - record_from] = qmeas
                fb = kp * (qref[k] - qmeas) + kd * (dqref[k] - v_f)
            else:
                fb = kp * (qref[k] - qm) + kd * (dqref[k] - qvel)
            u = ff[k] + (fb @ C if coupled else fb)
            if closed and queue:
                queue.append(u)
                u = queue.pop(0)
            if disturbance is not None:
                if block is None or k >= k_block + block.shape[1]:
                    k_block = k
                    block = disturbance(k, min(N, k + NOISE_BLOCK), lo, hi)
                u = u + block[:, k - k_block]
            ctrl[:] = (u - act) * rate  # the torque ramps to u over the next period
            if record_from <= k < record_to:
                mujoco.mj_forward(m, d)  # acceleration at the sample instant (ctrl does not change it)
                i = k - record_from
                q_out[:, i] = qpos
                tau_m_out[:, i] = act
                if coupled:
                    drive = act - ia * (qacc @ cinv.T) - motor_side_friction_Nm(fs, qvel @ cinv.T)
                    tau_j_out[:, i] = drive @ cinv
                elif motor_friction:
                    tau_j_out[:, i] = act - ia * qacc - motor_side_friction_Nm(fs, qvel)
                else:  # the common case (iiwa 14, LWR4+): no motor-side friction, two numpy calls
                    np.multiply(qacc, ia, out=tmp)
                    np.subtract(act, tmp, out=tau_j_out[:, i])
                if rk4:
                    mujoco.mj_RungeKutta(m, d, 4)  # = mj_step after the mj_forward just done
                else:
                    mujoco.mj_step(m, d)
            else:
                mujoco.mj_step(m, d)
            if progress is not None and (k + 1) % PROGRESS_EVERY == 0:
                progress(PROGRESS_EVERY)
        if progress is not None and N % PROGRESS_EVERY:
            progress(N % PROGRESS_EVERY)
        if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
            raise RecordingError(f"the batched mujoco simulation of {spec.name} diverged (non-finite state)")

    def run(self, trajectory: JointTrajectory, seeds, periods: int = 1, transient_periods: int = 0,
            process_noise_Nm=None, progress: Callable[[int], None] | None = None) -> list[Recording]:
        """One recording per seed (``len(seeds) == n_robots``): robot i's sensor noise is drawn
        from ``default_rng(seeds[i])`` exactly as the HAL twin does, its process noise (if any)
        from :func:`disturbance_rngs`."""
        seeds = [int(s) for s in seeds]
        if len(seeds) != self.n_robots:
            raise ConfigError(f"batch: {len(seeds)} seeds for {self.n_robots} robots")
        plan = self.plan(trajectory, periods, transient_periods)
        disturbance = None
        std = None
        if process_noise_Nm is not None:
            std = np.broadcast_to(np.asarray(process_noise_Nm, float), (self.spec.n_joints,)).copy()
            if np.any(~np.isfinite(std)) or np.any(std < 0):
                raise ConfigError(f"montecarlo.process_noise_Nm: expected non-negative numbers, got {std.tolist()}")
            if np.any(std > 0):
                rngs = disturbance_rngs(seeds)

                def disturbance(k0: int, k1: int, lo: int, hi: int) -> np.ndarray:
                    return np.stack([g.standard_normal((k1 - k0, self.spec.n_joints)) for g in rngs[lo:hi]]) * std

        if self.twin.ideal:
            q, tm, tj = self.simulate(plan.reference, plan.start, plan.stop, disturbance, progress)
            return [self.recording(plan, q[i], tm[i], tj[i], s, std) for i, s in enumerate(seeds)]
        # the realistic twin (hal/sim/effects.py; the HAL twin's run, vectorised): the loop's encoder
        # noise from each run's own generator, the sensor effects from a settled history
        twin = self.twin
        loop_noise = None
        if twin.has("closed_loop"):
            lrngs = [fx.loop_rng(s) for s in seeds]

            def loop_noise(k0: int, k1: int, lo: int, hi: int) -> np.ndarray:
                return np.stack([g.standard_normal((k1 - k0, self.spec.n_joints)) for g in lrngs[lo:hi]])

        pad = min(fx.SENSOR_PAD_SAMPLES, plan.start) if twin.has("sensor") else 0
        out = self.simulate(plan.reference, plan.start - pad, plan.stop, disturbance, progress, loop_noise)
        recs = []
        for i, s in enumerate(seeds):
            q, tm, tj = out[0][i, pad:], out[1][i], out[2][i]
            if twin.has("sensor"):
                tm, tj = fx.apply_sensor_effects(twin.params.sensor, self.info.control_rate_hz, tm, tj, pad)
            recs.append(self.recording(plan, q, tm, tj, s, std, None if len(out) < 4 else out[3][i, pad:]))
        return recs

    def recording(self, plan: RunPlan, q_true, tau_motor, tau_joint, seed: int, process_noise_Nm=None,
                  q_loop=None, q_motor_rad=None) -> Recording:
        """The HAL recording of one robot's true signals with the sensor noise of ``seed``
        (``q_loop``: the position the closed loop measured, recorded as such; ``q_motor_rad``: the
        true motor positions where they are not C^-1 q, as with elastic joints)."""
        rng = np.random.default_rng(int(seed))
        if q_motor_rad is None and not self.twin.ideal:
            q_motor_rad = q_true @ self.spec.coupling_inv.T if self.spec.is_coupled else q_true
        q_meas, tm_meas, tj_meas = self.noise.measure(
            rng, q_true, tau_motor, tau_joint if self.spec.has_joint_torque_sensors else None,
            q_motor_rad=q_motor_rad)
        if q_loop is not None:
            q_meas = q_loop
        md = {"source": f"batched {self.backend} twin of {self.spec.name}", "robot": self.spec.name,
              "backend": self.backend, "seed": int(seed), "noise": self.noise.as_dict(),
              "controller": dict(vars(self.controller)),
              "process_noise_Nm": None if process_noise_Nm is None else np.asarray(process_noise_Nm).tolist()}
        if not self.twin.ideal:
            md["twin"] = self.twin.as_dict()
        return make_recording(plan, self.info, q_meas, tm_meas, tj_meas, q_true, md)
