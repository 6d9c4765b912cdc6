"""The robustness table's estimators beyond the linear fits (robident_twin/validation/robustness.py).

``iv_cl``  IDIM-IV with closed-loop instruments (Gautier, Janot, Vandanjon, IEEE TCST 2013): the
           instruments are the base regressor of the *identified model simulated in closed loop*
           (:func:`robident_twin.estimation.estimators.simulate_closed_loop`, the library function)
           along the reference, :data:`IV_CL_ITERATIONS` simulation(s) per run starting from the
           ``iv_ref`` estimate of the run when the table has it (else from WLS: at 1500 harmonics
           the WLS estimate is so biased that its closed-loop simulation diverges);
``didim``  DIDIM (:func:`robident_twin.estimation.didim.didim`) on the same closed-loop simulation,
           started from the ``iv_cl`` estimate (or WLS), :data:`DIDIM_ITERATIONS` at most;
``ml``     Swevers' errors-in-variables maximum likelihood
           (:func:`robident_twin.estimation.estimators.ml_errors_in_variables`) on the period-averaged
           raw positions and torques at the processed samples (``estimator_context``);
``wls_sdp`` / ``wls_xu``  the physically consistent variants: WLS post-processed by the SDP
           (:func:`robident_twin.estimation.physical.sdp_consistent`, prior = the CAD-like nominal) or
           by Xu's retrieval (bounds around the CAD-like nominal), mapped back to base parameters.

The closed-loop simulation (:func:`closed_loop_hook`) is the hook the pipeline's own closed-loop
simulation can replace (``run_column(..., closed_loop=...)``): a callable ``beta -> W_s`` giving
the identification model's base regressor of the simulated states at the processed samples.
Here it is built from library functions and nothing of the truth:

- the simulated plant is the identification model with ``beta`` plus the drive's rotor inertia
  (a joint-torque model has none, and without it the link-only wrist is too stiff for an explicit
  integrator): the rotor inertia is estimated from the column's validation recording, least
  squares of ``tau_motor - tau_joint`` on ``ddq, dq, tanh(dq / eps), 1`` per joint;
- the controller is the twin's PD law (``backend.controller`` bandwidth and damping, gains on the
  diagonal of the CAD-like nominal mass matrix at the reference start plus that rotor inertia)
  with the model-based feed-forward of the simulated model along the reference (its mid-period
  value, held); to keep the cost near 0.3 s of CPU per simulation it runs at the slowest rate of
  at least :data:`SIM_MIN_RATE_HZ` that contains the processed samples (200 Hz on the iiwa table,
  one RK4 step per period), not at the twin's 1 kHz (with the true parameters the simulated motion
  stays within 1e-5 rad of the reference at 200 Hz; at 100 Hz the held feed-forward is off by 0.6 rad);
- one period, starting on the reference, recorded at the processed samples.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from robident_twin.errors import ConfigError, IdentificationError

IV_CL_ITERATIONS = 1
DIDIM_ITERATIONS = 3
ML_MAX_NFEV = 20
XU_STARTS = 2
XU_MAXITER = 200
SIM_MIN_RATE_HZ = 200.0
CLOSED_LOOP = ("iv_cl", "didim")
CLOSED_LOOP_AND_PHYSICAL = CLOSED_LOOP + ("wls_sdp", "wls_xu")


@dataclass
class RunInputs:
    """What one run gives every estimator: the processed data, its base regressor, the raw
    recording (ML), the design (reference instruments) and the closed-loop hook."""

    model: Any
    data: Any
    W: np.ndarray
    recording: Any = None
    trajectory: Any = None
    decimate: int = 1
    Z_ref: np.ndarray | None = None
    closed_loop: Callable[[np.ndarray], np.ndarray] | None = None
    nominal: Any = None
    done: dict | None = None  # estimates of this run already computed (DIDIM starts from iv_cl)
    ml_context: dict | None = None  # :func:`ml_context` (then the recording is not needed)


def ml_context(model, data, recording, trajectory, decimate: int) -> dict:
    """What ML needs from a run's raw recording: the period-averaged positions and torques at the
    processed samples and their noise levels (``estimators.estimator_context``)."""
    from robident_twin.estimation.estimators import estimator_context

    P = recording.period_samples
    if P is None:
        raise ConfigError("robustness: ml needs a periodic recording")
    from robident_twin.estimation.config import MlEstimator

    return estimator_context(MlEstimator(max_samples=-(-P // max(1, int(decimate)))), model, data,
                             recording, trajectory)


def rotor_inertia_kgm2(val_joint, val_motor, eps_rad_s: float) -> np.ndarray:
    """Per-joint rotor inertia from the two torque channels of processed data: least squares of
    ``tau_motor - tau_joint`` on ``[ddq, dq, tanh(dq / eps), 1]``."""
    d = val_motor.tau_Nm - val_joint.tau_Nm
    n = d.shape[1]
    out = np.empty(n)
    for j in range(n):
        dq = val_joint.dq_rad_s[:, j]
        A = np.column_stack([val_joint.ddq_rad_s2[:, j], dq, np.tanh(dq / eps_rad_s), np.ones_like(dq)])
        out[j] = np.linalg.lstsq(A, d[:, j], rcond=None)[0][0]
    if not np.all(out > 0):
        raise IdentificationError(f"robustness: the rotor inertia estimated from the two torque channels is not "
                                  f"positive on every joint ({out.tolist()}); iv_cl/didim need it")
    return out


def closed_loop_hook(model, traj, rate_hz: float, decimate: int, controller_cfg: Mapping[str, Any] | None,
                     nominal, rotor_kgm2: np.ndarray | None) -> Callable[[np.ndarray], np.ndarray]:
    """``beta -> W_s``: the identification model's base regressor of the states of the model with
    ``beta`` simulated in closed loop along one period of ``traj`` (see the module docstring)."""
    import pinocchio as pin

    from robident_twin.estimation.estimators import simulate_closed_loop
    from robident_twin.estimation.physical import standard_from_base
    from robident_twin.model.base_params import compute_base_parameters
    from robident_twin.model.builders import pinocchio_model
    from robident_twin.model.regressor import ModelOptions, Regressor

    reg, base = model.regressor, model.base
    spec = model.spec
    n = spec.n_joints
    opts = reg.options
    if reg.n_channels != n:
        raise ConfigError(f"robustness: iv_cl/didim need one torque channel per joint (model.measurement="
                          f"{opts.measurement})")
    has_ia = any(nm.startswith("Ia") for nm in reg.names)
    if has_ia:  # a motor-torque model is the actuated plant itself
        reg_s, base_s = reg, base
        ia = np.zeros(n)
    else:
        if rotor_kgm2 is None:
            raise ConfigError("robustness: iv_cl/didim on a joint-torque model need the rotor inertia")
        reg_s = Regressor(spec, ModelOptions(measurement="motor_torque", drive_inertia=True, viscous=opts.viscous,
                                             coulomb=opts.coulomb, offsets=False, payload=opts.payload))
        base_s = compute_base_parameters(reg_s)
        ia = np.asarray(rotor_kgm2, float)
    where = {nm: i for i, nm in enumerate(reg_s.names)}
    missing = [nm for nm in reg.names if nm not in where]
    if missing:
        raise ConfigError(f"robustness: the closed-loop plant has no parameter(s) {missing}")
    idx = np.array([where[nm] for nm in reg.names])
    ia_idx = np.array([where[f"Ia{j + 1}"] for j in range(n)])

    def to_sim(beta):
        chi = np.zeros(len(reg_s.names))
        chi[idx] = standard_from_base(base, beta)
        if not has_ia:
            chi[ia_idx] = ia
        return base_s.K @ chi

    k = max(1, int(decimate))
    # the loop is simulated at the slowest rate >= SIM_MIN_RATE_HZ that contains the processed samples
    step = max([d for d in range(1, k + 1) if k % d == 0 and rate_hz / d >= SIM_MIN_RATE_HZ] or [1])
    sim_rate, every = rate_hz / step, k // step
    t, q, dq, _ = traj.sample(sim_rate)
    # the feed-forward of the simulated model (linear in beta), held over each period: its mid-period value
    W_ff = base_s.columns(reg_s.stack(*traj.evaluate(t + 0.5 / sim_rate)))
    c = dict(controller_cfg or {})
    bw, zeta = float(c.get("bandwidth_hz", 5.0)), float(c.get("damping_ratio", 1.0))
    pm = pinocchio_model(nominal)
    J = np.diag(pin.crba(pm, pm.createData(), np.asarray(q[0], float))) + ia
    w = 2 * np.pi * bw
    kp, kd = J * w**2, 2 * zeta * J * w
    N = q.shape[0]

    def simulated_regressor(beta):
        bs = to_sim(np.asarray(beta, float))
        ff = (W_ff @ bs).reshape(N, n)
        Q, V, A, _ = simulate_closed_loop(reg_s, base_s, bs, q, dq, sim_rate, kp, kd, ff, record_every=every)
        return base.columns(reg.stack(Q, V, A))

    return simulated_regressor


def nominal_standard(model, nominal) -> np.ndarray:
    """The CAD-like nominal robot's standard vector in the identification regressor's layout
    (no drive, friction or offset terms: those stay zero)."""
    from robident_twin.model.regressor import Regressor

    nreg = Regressor(nominal, model.regressor.options)
    values = dict(zip(nreg.names, nreg.true_parameters()))
    return np.array([values.get(name, 0.0) for name in model.regressor.names])


def estimate_extra(name: str, run: RunInputs) -> np.ndarray:
    """Base-parameter estimate of one of the estimators of this module on one run."""
    from robident_twin.estimation import estimators as E

    model, data, W = run.model, run.data, run.W
    names = model.base.names
    var = data.tau_var_Nm2
    if name == "iv_cl":
        if run.closed_loop is None:
            raise ConfigError("robustness: iv_cl needs the closed-loop simulation hook")
        start = (run.done or {}).get("iv_ref")
        if start is None:  # IDIM-IV from the WLS start, IV_CL_ITERATIONS closed-loop simulations
            return E.iv(W, data.tau_Nm, names, run.closed_loop, max_iter=IV_CL_ITERATIONS, sigma2_joint_Nm2=var).beta
        # from the reference-IV estimate (consistent where WLS is not): its closed-loop simulation as instruments
        beta = start
        for _ in range(IV_CL_ITERATIONS):
            beta = E.iv(W, data.tau_Nm, names, run.closed_loop(beta), sigma2_joint_Nm2=var).beta
        return beta
    if name == "didim":
        from robident_twin.estimation.didim import didim

        if run.closed_loop is None:
            raise ConfigError("robustness: didim needs the closed-loop simulation hook")
        beta0 = (run.done or {}).get("iv_cl")
        return didim(W, data.tau_Nm, names, run.closed_loop, max_iter=DIDIM_ITERATIONS, tol=1e-6,
                     sigma2_joint_Nm2=var, beta0=beta0).beta
    if name == "ml":
        ctx = run.ml_context
        if ctx is None:
            if run.recording is None or run.trajectory is None:
                raise ConfigError("robustness: ml needs the raw periodic recording and the design")
            ctx = ml_context(model, data, run.recording, run.trajectory, run.decimate)
        return E.ml_errors_in_variables(ctx["regressor"], ctx["base"], ctx["t_s"], ctx["q_meas_rad"],
                                        ctx["tau_ml_Nm"], ctx["base_freq_hz"], ctx["n_harmonics"],
                                        ctx["sigma_q_rad"], ctx["sigma_tau_Nm"], max_nfev=ML_MAX_NFEV).beta
    if name in ("wls_sdp", "wls_xu"):
        from robident_twin.estimation.physical import sdp_consistent, xu_retrieval
        from robident_twin.estimation.postprocess import _xu_bounds

        if run.nominal is None:
            raise ConfigError(f"robustness: {name} needs the CAD-like nominal robot")
        est = E.wls(W, data.tau_Nm, names, var, "period")
        if name == "wls_sdp":
            res = sdp_consistent(model.regressor, model.base, est.beta, est.cov,
                                 prior=nominal_standard(model, run.nominal), reg_weight=1e-3)
        else:
            res = xu_retrieval(model.regressor, model.base, W, data.tau_Nm, _xu_bounds({}, run.nominal),
                               n_starts=XU_STARTS, seed=0, maxiter=XU_MAXITER, sigma2_joint_Nm2=var)
        return model.base.K @ res.chi
    raise ConfigError(f"robustness: '{name}' is not an estimator of robustness_estimators")
