"""The MuJoCo twin's engine loop without per-step Python overhead (what ``MujocoTwin.run`` uses).

The per-cycle methods of :class:`hal.sim.mujoco_backend.MujocoTwin` (``sample``,
``control_step``, ``_sample_realistic``, ``_control_step_realistic``) and its passive-force
callbacks stay the reference: the controller emulators' stepper uses them, and
``MujocoTwin(reference_loop=True)`` runs them. This loop performs the same floating-point
operations in the same order, so a run gives bit-identical data (``tests/test_fast_twin.py``
compares both on the ideal and the realistic twin) with the numpy passive callbacks
(``ROBIDENT_NATIVE=0``); by default the common laws run compiled (:mod:`hal.sim.native`), equal to
numpy's to rounding. What it saves:

- the closed loop's encoder noise for the whole run in one draw (a numpy Generator fills an
  ``(N, n)`` draw in the order of ``N`` draws of ``n``);
- the passive-force callback, which runs in each of the four RK4 stages, specialised for the
  common cases (uncoupled robot, viscous + Coulomb friction, no springs) with preallocated
  buffers, views of the MjData arrays and ufuncs writing in place (the general callbacks of
  the twin serve every other robot);
- the sample's ``mj_forward`` is the first RK4 stage: ``mj_step`` is ``mj_forward`` followed
  by ``mj_RungeKutta``, so a recorded step calls the two and the state is evaluated once;
  the engine substeps of a control period go in one ``mj_step(m, d, nstep)``;
- the sensor arithmetic (joint torque from the acceleration or the gear spring, motor
  positions) once over the recorded window after the loop, on the recorded raw values;
- no per-step property look-ups (``RobotSpec.coupling`` rebuilds its matrix on each access);
- with the compiled passive callback installed, the control periods of an uncoupled PD twin (the
  ideal and realistic iiwa 14 / LWR4+, the default run's) in C (:mod:`hal.sim.native_loop`), in
  chunks of ``TICK_EVERY`` periods: the same operations, so bit-identical to this loop with that
  callback (``tests/test_native_loop.py``); every other case runs the Python loop below.
"""
from __future__ import annotations

import numpy as np

from robident_twin import progress as prog
from robident_twin.errors import RecordingError
from robident_twin.model.dynamics import motor_side_friction_Nm, to_motor

from . import effects as fx
from . import native, native_loop
from .playback import feedforward_Nm


#: control periods between two progress reports (:func:`robident_twin.progress.ticker`)
TICK_EVERY = 2000


def _quantiser(res: np.ndarray):
    """``SensorNoise.quantise(q)`` written into ``out`` (the same operations per element;
    ``np.round`` with 0 decimals is ``np.rint``)."""
    mask = res > 0
    div, rint, mul = np.divide, np.rint, np.multiply
    if not mask.any():
        return lambda q, out: np.copyto(out, q)
    if mask.all():
        def quant(q, out):
            div(q, res, out)
            rint(out, out)
            mul(out, res, out)

        return quant
    resq = np.where(mask, res, 1.0)

    def quant_some(q, out):
        out[:] = np.where(mask, np.round(q / resq) * resq, q)

    return quant_some


def lean_passive(twin):
    """The twin's passive-force callback with no per-call allocation, for the common cases,
    or None (then the twin's own callback runs). Bit-identical to
    ``MujocoTwin._passive_callback`` / ``_realistic_passive`` where it applies. Its ``native``
    attribute: the same law compiled (:func:`hal.sim.native.installed` installs it), or None.
    The other cases (coupled joints, springs, the transmission error, other sets of effects) get
    the twin's own callback compiled when :mod:`hal.sim.native` can (:func:`_native_general`)."""
    from .mujoco_backend import MujocoTwin

    if (type(twin)._passive_callback is not MujocoTwin._passive_callback
            or type(twin)._realistic_passive is not MujocoTwin._realistic_passive):
        return None  # a subclass adds to the passive forces (e.g. a collision's wrench): keep its callback
    slow = twin._passive
    if twin._te is not None:
        return _native_general(twin, slow)  # the transmission error's torque: compiled, else the twin's callback
    spec, d = twin.spec, twin.data
    n = spec.n_joints
    plain = (not spec.is_coupled and not spec.spring_joints
             and all(j.friction_link_variant.kind == j.friction_motor_variant.kind == "viscous_coulomb"
                     for j in spec.joints))
    if not plain:
        return _native_general(twin, slow)
    if twin.twin.ideal:
        fv = spec.fv_link_Nms_rad + spec.fv_motor_Nms_rad
        fcs = spec.fc_link_Nm + spec.fc_motor_Nm
        off = spec.offset_motor_Nm
        eps = spec.coulomb_smoothing_rad_s
        qv, qf = d.qvel, d.qfrc_passive
        k = qv.size
        # one buffer, so that one call does two products: B = (v / eps -> tanh, v), B * (fcs, fv)
        den = np.vstack([np.full(k, float(eps)), np.ones(k)])
        coef = np.vstack([fcs, fv])
        B = np.empty((2, k))
        B0, B1 = B[0], B[1]
        div, tanh, mul, add, sub = np.divide, np.tanh, np.multiply, np.add, np.subtract

        def passive(m, dd):  # qfrc_passive -= fv v + (fcl + fcm) tanh(v / eps) + off
            if dd is not d:
                return slow(m, dd)
            div(qv, den, B)  # v / eps, v / 1 = v
            tanh(B0, B0)
            mul(B, coef, B)  # (fcl + fcm) tanh(v / eps), fv v
            add(B1, B0, B1)
            add(B1, off, B1)
            sub(qf, B1, qf)

        passive.native = native.ideal(d, passive, fv=fv, fc=fcs, off=off, eps_rad_s=eps) if native.enabled() else None
        return passive
    tw = twin.twin
    if not tw.has("friction_unmodelled"):
        return _native_general(twin, slow)
    fe = fx.FrictionEffect(spec, tw.params.friction_unmodelled)
    motor_fr = bool(np.any(spec.fv_motor_Nms_rad) or np.any(spec.fc_motor_Nm) or np.any(spec.offset_motor_Nm))
    if (twin.elastic and motor_fr and len(fe.sides) == 2 and not fe.sides[0][0] and fe.sides[1][0]
            and native.enabled()):
        return _native_elastic_motor(twin, fe, slow)
    if len(fe.sides) != 1 or fe.sides[0][0] or motor_fr:
        return _native_general(twin, slow)  # motor-side friction: the general callback
    _, fc, fv, sa, lc = fe.sides[0]
    p = fe.p
    df, dts = p.drift_fraction, p.drift_time_s
    qv, qf, act = d.qvel[:n], d.qfrc_passive[:n], d.act
    # the rows of one buffer, so that one ufunc call does three products:
    # P = (x, -x -> exp(-x x), |act|, v), R = (sa exp(-x x), lc |act|, fv v)
    inv_vs = np.broadcast_to(np.asarray(fe.inv_vs, float), (n,))
    K = np.vstack([inv_vs, -inv_vs, np.zeros(n), np.ones(n)])
    W = np.vstack([sa, lc, fv])
    P, R, sg = np.empty((4, n)), np.empty((3, n)), np.empty(n)
    sc, zero = np.empty(()), np.zeros(())  # 0-d operands: a Python float costs a conversion per call
    P0, P1, P2, Q = P[0], P[1], P[2], P[1:4]
    R0, R1, R2, R01 = R[0], R[1], R[2], R[0:2]
    mul, add, sub, exp, absolute, sign = np.multiply, np.add, np.subtract, np.exp, np.abs, np.sign

    def passive(m, dd):  # FrictionEffect.link_total_Nm (+ 0.0, the motor part), subtracted
        if dd is not d:
            return slow(m, dd)
        sc[()] = 1.0 + df * min(max(dd.time, 0.0) / dts, 1.0)  # the drift's scale
        mul(qv, K, P)  # x = v / vs, -x, 0, v (v x 1 is v)
        mul(P1, P0, P1)  # -x * x
        exp(P1, P1)
        absolute(act, P2)
        mul(Q, W, R)  # sa exp(-x x), lc |act|, fv v
        add(R0, fc, R0)  # fc + sa exp(-x x)
        sign(qv, sg)
        mul(R01, sg, R01)  # (fc + sa exp(-x x)) sign v, lc |act| sign v
        add(R2, R0, R2)  # fv v + (fc + ...) sign v
        mul(R2, sc, R2)
        add(R2, R1, R2)  # + lc |act| sign v
        add(R2, zero, R2)
        sub(qf, R2, qf)

    passive.native = native.link(d, n, passive, fv=fv, fc=fc, inv_vs=inv_vs, sa=sa, lc=lc, drift_fraction=df,
                                 drift_time_s=dts) if native.enabled() else None
    return passive


def _native_elastic_motor(twin, fe, slow):
    """Elastic joints with friction on both sides (uncoupled, no springs): the general callback
    (``MujocoTwin._realistic_passive``), compiled; None (then that callback runs) without it."""
    spec, d = twin.spec, twin.data

    def passive(m, dd):  # what runs for another MjData (native.installed), or never
        return slow(m, dd)

    (_, fc, fv, sa, lc), (_, fcm, fvm, sam, lcm) = fe.sides
    p = fe.p
    passive.native = native.elastic_motor(
        d, spec.n_joints, passive, link=dict(fv=fv, fc=fc, sa=sa, lc=lc),
        motor=dict(fvm=fvm, fcm=fcm, offm=spec.offset_motor_Nm, sam=sam, lcm=lcm), inv_vs=fe.inv_vs,
        drift_fraction=p.drift_fraction, drift_time_s=p.drift_time_s, eps_rad_s=spec.coulomb_smoothing_rad_s)
    return passive if passive.native is not None else None


def _native_general(twin, slow):
    """The twin's general callback (``MujocoTwin._passive_callback`` / ``_realistic_passive``,
    with the transmission error) compiled, for viscous + Coulomb friction: coupled joints,
    springs, any realistic effects; None (then the twin's numpy callback runs) without it."""
    spec, d = twin.spec, twin.data
    if not native.enabled() or not all(j.friction_link_variant.kind == j.friction_motor_variant.kind
                                       == "viscous_coulomb" for j in spec.joints):
        return None

    def passive(m, dd):  # what runs for another MjData (native.installed), or without the trampoline
        return slow(m, dd)

    if twin.twin.ideal:
        passive.native = native.general_ideal(d, spec, passive)
    else:
        tw, n = twin.twin, spec.n_joints
        fe = fx.FrictionEffect(spec, tw.params.friction_unmodelled) if tw.has("friction_unmodelled") else None
        fused = fe is not None and fe.link_total_Nm(np.zeros(n), 0.0, np.zeros(n)) is not None
        passive.native = native.general(d, spec, passive, twin.elastic, fe, fused, twin._te)
    return passive if passive.native is not None else None


def inertia_holder(te, held: np.ndarray | None = None):
    """``te.hold_inertia`` (:meth:`hal.sim.effects.TransmissionErrorEffect.inertia_kgm2`) with
    fewer numpy calls, bit-identical: ``triu(M) + triu(M, 1).T`` is ``M_ij + 0.0`` on and above
    the diagonal and ``0.0 + M_ji`` below it, so the mirrored ``M + 0.0``; then the same
    ``diag(C^T M C) + Ia`` (diag(M) + Ia uncoupled). Sets ``te.J`` and copies it into ``held``
    (the compiled law's context), if given."""
    import pinocchio as pin

    model, data = te.truth.model, te.truth.data
    lower = np.tril_indices(te.ia.size, -1)
    C, CT, ia, coupled = te.C, te.C.T, te.ia, te.coupled

    def hold(q_rad):
        M = pin.crba(model, data, np.asarray(q_rad, float)) + 0.0
        if coupled:
            M[lower] = M.T[lower]
            J = np.diag(CT @ M @ C) + ia
        else:
            J = np.diag(M) + ia
        te.J = J
        if held is not None:
            held[:] = J

    return hold


def _per_row(fn, x: np.ndarray) -> np.ndarray:
    """``fn`` applied to each row as the per-step code did (matrix-vector products keep their
    summation order)."""
    return np.array([fn(r) for r in x]).reshape(x.shape) if len(x) else x.copy()


def simulate(twin, ref, record_from: int, record_to: int | None = None):
    """``MujocoTwin._simulate`` (ideal or realistic), bit-identical, without per-step overhead.
    Returns true q, motor and joint torques over [record_from, record_to); a realistic twin
    also leaves ``twin._extras`` (motor positions, the closed loop's measured positions)."""
    import mujoco

    spec, m, d = twin.spec, twin.model, twin.data
    N, n = ref.q_rad.shape
    ff = feedforward_Nm(twin.truth, ref, twin.controller.feedforward, twin.feedforward_source)
    record_to = N if record_to is None else record_to
    n_rec = max(record_to - record_from, 0)
    realistic, elastic = not twin.twin.ideal, twin.elastic
    rate = twin.info.control_rate_hz
    ff_rows = ff
    qref, dqref, ff = list(ref.q_rad), list(ref.dq_rad_s), list(ff)  # row views: a list index is cheaper
    coupled = twin._coupled
    ct = twin._ct if coupled else None
    C = spec.coupling
    C = None if np.array_equal(C, np.eye(n)) else C
    quant = _quantiser(np.asarray(twin.noise.encoder_resolution_rad, float))
    qpos, qvel, act, ctrl, qacc = d.qpos, d.qvel, d.act, d.ctrl, d.qacc
    ql, vl = qpos[:n], qvel[:n]
    qmv, vmv = qpos[n:], qvel[n:]
    tlen, tvel = d.ten_length[:n], d.ten_velocity[:n]
    substeps = twin.substeps
    rk4 = m.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4
    q_out, act_out = np.empty((n_rec, n)), np.empty((n_rec, n))
    a_out, b_out = np.empty((n_rec, n)), np.empty((n_rec, n))  # tendon length/velocity or qacc/qvel
    qm_out = np.empty((n_rec, n)) if elastic else None
    # an uncoupled elastic twin's sample needs no mj_forward: its gear tendons are theta_m - q
    # (the transmission error reads the engine's last acceleration, which the per-cycle sample's
    # mj_forward sets: not with it)
    te = twin._te if realistic else None  # the gears' transmission error (drive side)
    direct = elastic and not coupled and C is None and np.array_equal(spec.coupling_inv, np.eye(n)) and te is None
    if direct:
        pos_out, vel_out = np.empty((n_rec, 2 * n)), np.empty((n_rec, 2 * n))
    closed = realistic and twin.loop.closed
    qloop = np.empty((n_rec, n)) if closed else None
    te_out = np.zeros((n_rec, n)) if te is not None and not elastic else None
    if realistic:
        lp = twin.loop
        kp, kd = lp.kp, lp.kd
        delay, queue = lp.delay, list(lp.queue)
        lki, integ = lp.ki, lp.integral  # the PI velocity loop (None: PD)
        if lki is not None:
            kpkd, lrate = lp.kp / lp.kd, lp.rate_hz
        if closed:
            noise_rows = lp.rng.standard_normal((N, n)) * lp.noise.q_std_rad
            noise_q = list(noise_rows)
            q_prev, v_f, alpha = lp.q_prev, lp.v_f, lp.alpha
    else:
        kp, kd, ki = twin.kp, twin.kd, twin.ki
        pi = twin.controller.integral_hz > 0
        integ = twin._integral
    if realistic and closed:
        v_f = np.array(v_f, dtype=float)  # updated in place below
        alpha = np.asarray(alpha, dtype=float)  # 0-d arrays, not scalars: no conversion per call
    rate_a = np.array(float(rate))
    qbuf = (np.empty(n), np.empty(n))
    add, sub, mul = np.add, np.subtract, np.multiply
    qq, t1, t2, t3 = (np.empty(n) for _ in range(4))
    fast_cb = lean_passive(twin)
    # the compiled transmission error reads the held inertia from its context: kept equal to te.J
    held = getattr(getattr(fast_cb, "native", None), "arrays", {}).get("te_J") if te is not None else None
    hold_j = inertia_holder(te, held) if te is not None else None
    tick = prog.ticker()  # live progress of the caller (the identify bar), if any
    with twin.physics(fast_cb), native.installed(getattr(fast_cb, "native", None)):
        start = 0  # the first control period of the Python loop below: N when the C loop ran them all
        cl = None
        if ct is None and C is None and te is None and (direct or not elastic) and (
                lki is None if realistic else not pi):  # the compiled loop's cases (hal/sim/native_loop.py)
            cb = getattr(fast_cb, "native", None)
            cl = native_loop.prepare(
                twin, n=n, N=N, qref=ref.q_rad, dqref=ref.dq_rad_s, ff=ff_rows, res=twin.noise.encoder_resolution_rad,
                kp=kp, kd=kd, realistic=realistic, elastic=elastic, direct=direct, closed=closed,
                delay=delay if realistic else 0, queue=queue if realistic else (),
                alpha=alpha if closed else 0.0, noise=noise_rows if closed else None,
                q_prev=q_prev if closed else None, v_f=v_f if closed else None,
                record_from=record_from, record_to=record_to, rk4=rk4, substeps=substeps, rate_hz=rate,
                outputs=dict(pos_out=pos_out if direct else None, vel_out=vel_out if direct else None,
                             act_out=act_out, q_out=None if direct else q_out, a_out=None if direct else a_out,
                             b_out=None if direct else b_out, qloop=qloop),
                passive_installed=cb is not None and mujoco.get_mjcb_passive() is cb.fn)
        if cl is not None:
            for k0 in range(0, N, TICK_EVERY):
                if tick is not None:
                    tick(k0, N)
                cl.run(k0, min(k0 + TICK_EVERY, N))
            start = N
            if realistic:
                queue = cl.queue_rows()
                if closed:
                    q_prev = cl.keep["q_prev"] if cl.has_prev else None
        for k in range(start, N):
            if tick is not None and not k % TICK_EVERY:
                tick(k, N)
            rec = record_from <= k < record_to
            if realistic:  # LoopController.command on the state at instant k
                if elastic:
                    qc = qmv if C is None else C @ qmv
                    vc = vmv if C is None else C @ vmv
                else:
                    qc, vc = ql, vl
                quant(qc, qq)
                if closed:  # the measured position, the drive's filtered velocity
                    q = add(qq, noise_q[k], qbuf[k & 1])  # two buffers: q_prev is the other one
                    if q_prev is not None:  # v_f + alpha ((q - q_prev) rate - v_f)
                        sub(q, q_prev, t1)
                        mul(t1, rate_a, t1)
                        sub(t1, v_f, t1)
                        mul(alpha, t1, t1)
                        add(v_f, t1, v_f)
                    q_prev = q
                    v = v_f
                    if rec:
                        qloop[k - record_from] = q
                else:
                    q, v = qq, vc
                sub(qref[k], q, t1)  # kp (qref - q) + kd (dqref - v)
                sub(dqref[k], v, t2)
                if lki is not None:  # LoopController.command's PI velocity loop
                    if integ is None:
                        hold = lp.u0 - ff[k]
                        integ = (np.linalg.solve(lp.ct, hold) if lp.ct is not None else hold) / lki
                    integ += (t2 + kpkd * t1) / lrate
                mul(kp, t1, t1)
                mul(kd, t2, t2)
                add(t1, t2, t1)
                fb = t1 if lki is None else t1 + lki * integ
                u = add(ff[k], fb) if ct is None else ff[k] + ct @ fb
                if delay:
                    queue.append(u)
                    u = queue.pop(0)
                if te is not None and not rec:
                    hold_j(ql)  # te.hold_inertia (a sample below runs with the last one, as the per-cycle sample)
            else:  # MujocoTwin.control_step
                quant(qpos, qq)
                e_q = sub(qref[k], qq, qq)
                e_v = sub(dqref[k], qvel, t2)
                mul(kp, e_q, t1)
                fb = add(t1, mul(kd, e_v, t3), t1)
                if pi:
                    integ += (e_v + kp / kd * e_q) / rate
                    fb = fb + ki * integ
                u = ff[k] + (ct @ fb if coupled else fb)
            sub(u, act, ctrl)  # the torque ramps to u over the period
            mul(ctrl, rate_a, ctrl)
            if rec and direct:  # uncoupled elastic twin: the sample is the state itself
                i = k - record_from
                pos_out[i] = qpos
                vel_out[i] = qvel
                act_out[i] = act
                mujoco.mj_step(m, d, substeps)
            elif rec:  # the sample at instant k (the state before the step), from one mj_forward
                i = k - record_from
                mujoco.mj_forward(m, d)
                q_out[i] = ql
                act_out[i] = act
                if elastic:
                    a_out[i], b_out[i], qm_out[i] = tlen, tvel, qmv
                else:
                    a_out[i], b_out[i] = qacc, vl
                if te is not None:  # the joint side does not feel it (MujocoTwin._sample_realistic),
                    if te_out is not None:
                        te_out[i] = te.joint_Nm(ql.copy(), vl, qacc[:n])
                    hold_j(ql)  # then the step's inertia and its own forward (the passive
                    mujoco.mj_step(m, d, substeps)  # force reads the acceleration just computed)
                elif rk4:
                    mujoco.mj_RungeKutta(m, d, 4)  # = mj_step after the mj_forward just done
                    if substeps > 1:
                        mujoco.mj_step(m, d, substeps - 1)
                else:
                    mujoco.mj_step(m, d, substeps)
            else:
                mujoco.mj_step(m, d, substeps)
    if realistic:
        lp.queue, lp.integral = queue, integ
        if closed:
            q_prev = None if q_prev is None else q_prev.copy()
            lp.q_prev, lp.v_f, lp.last_q_meas = q_prev, v_f, q_prev
    if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
        raise RecordingError(f"the {twin.backend} simulation of {spec.name} diverged (non-finite state)")
    # the sensors over the window, as the per-step sample did
    if direct:  # MuJoCo's tendon length and velocity: 1 theta_m + (-1) q, 1 dtheta_m + (-1) dq
        q_out, qm_out = np.ascontiguousarray(pos_out[:, :n]), np.ascontiguousarray(pos_out[:, n:])
        a_out = qm_out + (-1.0 * q_out)
        b_out = vel_out[:, n:] + (-1.0 * vel_out[:, :n])
    if elastic:  # the gear's spring torque (the tendon lengths are theta_m - C^-1 q)
        ts = fx.spring_torque_Nm(twin.twin.params.elasticity, a_out, b_out)
        tau_j = _per_row(lambda r: twin._cinv_t @ r, ts) if coupled else ts
    else:
        if coupled:
            drive = _per_row(lambda r: r, act_out)
            for i in range(n_rec):
                drive[i] = act_out[i] - spec.drive_inertia_kgm2 * to_motor(spec, a_out[i]) \
                    - motor_side_friction_Nm(spec, to_motor(spec, b_out[i]))
            tau_j = _per_row(lambda r: twin._cinv_t @ r, drive)
        else:
            tau_j = act_out - spec.drive_inertia_kgm2 * a_out - motor_side_friction_Nm(spec, b_out)
        if te_out is not None:
            tau_j = tau_j - te_out
    if realistic:
        if not elastic:
            qm_out = _per_row(lambda r: to_motor(spec, r), q_out) if coupled else q_out.copy()
        twin._extras = {"q_motor_rad": qm_out, "q_loop_rad": qloop}
    return q_out, act_out, tau_j
