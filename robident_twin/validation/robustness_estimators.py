"""The robustness table's estimators beyond the linear fits (robident_twin/validation/robustness.py).

``iv_cl``  IDIM-IV with closed-loop instruments (Gautier, Janot, Vandanjon, IEEE TCST 2013): the
           instruments are the base regressor of the *identified model simulated in closed loop*
           (:func:`model_loop_hook`) along the reference, :data:`IV_CL_ITERATIONS` simulation(s) per run starting from the
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

The closed-loop simulation (:func:`model_loop_hook`) is the one the CLI's IV and DIDIM use
(:class:`robident_twin.estimation.closed_loop_sim.ModelLoop`): a callable ``beta -> W_s`` giving
the identification model's base regressor of the model with ``beta`` simulated in closed loop
along the reference, recorded at the processed samples, under the loop the column's twin runs
(:func:`twin_loop_controller`: the twin's gains, rate and feed-forward switch, read from the HAL twin
as ``task=identify`` reads them; the twin's feed-forward model and plant are never read: the model's
feed-forward is the current estimate's). DIDIM fits the measured torque with the simulated loop's
torque, so the simulated loop must be the twin's: the table's earlier hook ran it at 200 Hz (one RK4
step per processed sample, held feed-forward) for cost, and DIDIM failed the bias test on the ideal
twin (24 of 57 iiwa parameters, max |bias|/std 7.4); ``tests/test_robustness.py`` shows the same
loop at 200 Hz failing where the twin's rate passes. ``iv_cl`` only needs instruments correlated
with the regressor and free of the noise, so the loop's rate does not bias it.
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


def model_loop_hook(model, traj, rate_hz: float, decimate: int, controller, sim_rate_hz: float | None = None,
                    lead_s: float = 1.0):
    """``beta -> W_s``: the closed-loop simulation of the identification model the CLI's IV and
    DIDIM use (:class:`robident_twin.estimation.closed_loop_sim.ModelLoop`) along one period of
    ``traj``, recorded at the processed samples (every ``decimate``-th sample at ``rate_hz``), under
    ``controller`` (a :class:`~robident_twin.estimation.closed_loop_sim.LoopController`: the twin's
    gains and rate, :func:`twin_loop_controller`). ``sim_rate_hz``: the model loop's rate (None:
    the controller's; a slower one is not the twin's loop and biases DIDIM, see the module docstring)."""
    from robident_twin.estimation.closed_loop_sim import ModelLoop

    if model.regressor.n_channels != model.spec.n_joints:
        raise ConfigError(f"robustness: iv_cl/didim need one torque channel per joint (model.measurement="
                          f"{model.regressor.options.measurement})")
    P = round(traj.period_s * float(rate_hz))
    t = np.arange(P)[::max(1, int(decimate))] / float(rate_hz)
    return ModelLoop(model.regressor, model.base, traj.evaluate, t, controller, sim_rate_hz, lead_s)


def twin_loop_controller(spec, backend_cfg: Mapping[str, Any], noise_cfg, twin_cfg):
    """The controller of the column's twin as the CLI's DIDIM reads it
    (:func:`robident_twin.estimation.closed_loop_sim.loop_controller` on the HAL twin the batched
    runs equal): its gains, rate, feed-forward and integral (numbers of the controller, not of the
    plant; the twin's feed-forward model is never read)."""
    from hal.factory import make_robot
    from robident_twin.estimation.closed_loop_sim import loop_controller

    robot = make_robot(spec, backend_cfg, noise_cfg, seed=0, twin_cfg=twin_cfg)
    backend = robot.info.backend
    try:
        controller = loop_controller(robot, {})
    finally:
        robot.close()
    if controller is None:
        raise ConfigError(f"robustness: iv_cl/didim need the twin's controller gains (backend "
                          f"{backend!r} has none)")
    return controller


def closed_loop_hook(model, traj, rate_hz: float, decimate: int, controller_cfg: Mapping[str, Any] | None,
                     nominal, rotor_kgm2: np.ndarray | None, sim_rate_hz: float | None = None):
    """:func:`model_loop_hook` under a PD controller designed like the twin's (``controller_cfg``
    bandwidth and damping) on the CAD-like ``nominal`` mass matrix at the reference start plus the
    rotor inertia ``rotor_kgm2`` (:func:`rotor_inertia_kgm2`), for when the twin's own gains are not
    at hand; the table uses the twin's (:func:`twin_loop_controller`)."""
    import pinocchio as pin

    from robident_twin.estimation.closed_loop_sim import LoopController
    from robident_twin.model.builders import pinocchio_model

    c = dict(controller_cfg or {})
    bw, zeta = float(c.get("bandwidth_hz", 5.0)), float(c.get("damping_ratio", 1.0))
    pm = pinocchio_model(nominal)
    q0 = traj.evaluate(np.zeros(1))[0][0]
    J = np.diag(pin.crba(pm, pm.createData(), np.asarray(q0, float)))
    if rotor_kgm2 is not None:
        J = J + np.asarray(rotor_kgm2, float)
    w = 2 * np.pi * bw
    controller = LoopController(J * w**2, 2 * zeta * J * w, None, bool(c.get("feedforward", True)), float(rate_hz),
                                zeta)
    return model_loop_hook(model, traj, rate_hz, decimate, controller, sim_rate_hz)


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
