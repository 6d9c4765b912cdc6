"""Monte-Carlo validation of an estimator against the twin's ground truth (Swevers 1997, Sec. IV).

Two modes:

- ``exact`` (Swevers): the regressor is built from the designed trajectory, the
  "measured" torque is the true torque plus zero-mean Gaussian noise of known
  per-joint variance, so WLS with those variances is the maximum-likelihood
  estimator and its covariance ``(W' Sigma^-1 W)^-1`` is exactly the
  Cramer-Rao lower bound (CRLB).
- ``twin``: every run simulates the robot (the MuJoCo twin of the HAL) with its
  sensor noise, processes the periodic recording
  (:func:`robident_twin.processing.signal.process_periodic`) and estimates. The CRLB is that
  of the processed data: the designed trajectory's regressor with the true
  torque-noise variance divided by the number of averaged periods.

Twin-mode simulation paths (:func:`twin_sim_path`, chosen automatically, recorded
in ``meta["sim_path"]``):

- ``deterministic``: the twin's motion does not depend on the seed when the only
  randomness is sensor noise (the controller sees the quantised, noise-free
  encoder position; the noise is drawn afterwards from the run's seed), so one
  simulation serves every run and each run draws its own sensor noise: the
  recordings are those of N separate HAL runs (``tests/test_batch_twin.py``).
- ``batch``: with process noise (``process_noise_Nm``: a motor-torque disturbance
  per control period and run) every run needs its own simulation; the runs are
  simulated ``batch_size`` at a time side by side in one MuJoCo model
  (:class:`hal.sim.batch.BatchTwin`).
- ``hal``: one :func:`hal.factory.make_robot` twin per run (any backend, e.g.
  PyBullet); slow (about 4.6 x a raw ``mujoco.rollout`` on the iiwa 14).

Statistics per parameter: mean, bias, bias over the standard error of the mean,
empirical std, CRLB std, efficiency ratio var/CRLB with its chi-square 90 %
interval, 68 % confidence-interval coverage, RMSE against the truth; overall:
log-determinant ratio of the empirical covariance to the CRLB, torque NRMS.

Bias test (:func:`bias_test`, used for twin mode, where the estimator need not
reach the CRLB): per-parameter t statistics ``bias / (s / sqrt(N))`` against the
Bonferroni-corrected two-sided Student-t quantile at ``alpha / p``, so an unbiased
estimator with Gaussian estimates fails with probability <= ``alpha`` whatever its
covariance; the number of parameters with a bias above 3 standard errors is
reported beside it.

Statistical tests with a controlled false-alarm rate ``alpha`` (default 1 %,
shared equally between the two tests, so a correct efficient estimator fails
with probability at most ``alpha`` whatever the seed):

- mean consistency: ``N d' CRLB^-1 d ~ chi2(p)`` with ``d`` the bias of the mean;
- efficiency: each ``(N-1) s_i^2 / sigma_i^2 ~ chi2(N-1)`` inside its
  Bonferroni-corrected two-sided interval (level ``alpha / 2 / p`` per side pair).

Estimators: ``wls`` (weights from the known noise variance in exact mode, from the
spread between periods in twin mode), ``ols``, ``wls_residual`` and the
deliberately biased ``ols_noisy_q``: OLS on a regressor built from noisy positions
differentiated by central differences (errors in variables), which must fail.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from robident_twin.errors import ConfigError, IdentificationError
from robident_twin.estimation.estimators import ols, wls
from robident_twin.validation.statistics import (
    MonteCarloResult,
    TestOutcome,
    bias_test,
    consistency_tests,
    crlb,
    nrms_percent,
    summarise,
)

MODES = ("exact", "twin")
ESTIMATORS = ("wls", "ols", "wls_residual", "ols_noisy_q")
#: twin mode only: estimators that need the recording (ML: raw periods; IV: the reference as instruments)
TWIN_ESTIMATORS = ("iv", "ml", "tls")
FRICTIONS = ("matched", "stribeck")
SIM_PATHS = ("auto", "deterministic", "batch", "hal")


# ----------------------------------------------------------------------------- results

# ----------------------------------------------------------------------------- helpers

def run_seeds(seed: int, n_runs: int) -> np.ndarray:
    """Independent per-run seeds spawned from one master seed."""
    ss = np.random.SeedSequence(int(seed)).spawn(int(n_runs))
    return np.array([int(s.generate_state(1, dtype=np.uint32)[0]) for s in ss], dtype=np.int64)


def central_derivatives(q_rad: np.ndarray, rate_hz: float):
    """Velocity and acceleration of one period of q by periodic central differences."""
    dt = 1.0 / rate_hz
    qp, qm = np.roll(q_rad, -1, axis=0), np.roll(q_rad, 1, axis=0)
    return (qp - qm) / (2 * dt), (qp - 2 * q_rad + qm) / dt**2


def with_stribeck(spec, ratio: float, velocity_rad_s: float):
    """The robot with a Stribeck term on the link-side friction of every joint
    (static level ``ratio`` x Coulomb), for friction-mismatch studies."""
    from robident_twin.model.robot import FrictionVariant

    if not ratio > 0 or not velocity_rad_s > 0:
        raise ConfigError(f"montecarlo.stribeck: ratio and velocity_rad_s must be positive, got "
                          f"{ratio}, {velocity_rad_s}")
    joints = tuple(dataclasses.replace(j, friction_link_variant=FrictionVariant(
        "stribeck", stribeck_Nm=ratio * j.fc_link_Nm, stribeck_velocity_rad_s=velocity_rad_s))
        for j in spec.joints)
    return dataclasses.replace(spec, joints=joints, _cache={})


@dataclass(frozen=True)
class _Fit:
    beta: np.ndarray
    std: np.ndarray
    residuals_Nm: np.ndarray


def _gram_solve(W: np.ndarray, y: np.ndarray, names):
    """Least squares through the column-normalised normal equations (Cholesky): the
    same solution and covariance as :func:`robident_twin.estimation.estimators._solve` (QR) to ~cond^2 eps,
    an order of magnitude faster for the tall regressors of a twin run. Returns
    (beta, (W'W)^-1), or None when the conditioning is too poor for normal equations."""
    from scipy.linalg import cho_factor, cho_solve

    norms = np.linalg.norm(W, axis=0)
    if np.any(norms <= 0):
        return None
    Wn = W / norms
    G = Wn.T @ Wn
    ev = np.linalg.eigvalsh(G)
    if ev[0] <= 1e-12 * ev[-1]:  # cond(Wn) > 1e6: leave it to the QR path (and its rank errors)
        return None
    c = cho_factor(G)
    beta = cho_solve(c, Wn.T @ y) / norms
    inv = cho_solve(c, np.eye(G.shape[0])) / np.outer(norms, norms)
    return beta, inv


def _fast_estimate(name: str, W, tau, names, sigma2):
    """OLS / WLS as :mod:`robident_twin.estimation.estimators` computes them (same weights, same reported
    covariance), solved through normal equations; falls back to the QR estimators."""
    N, n = tau.shape
    y = tau.reshape(-1)
    if name in ("ols", "ols_noisy_q", "wls_residual"):
        sol = _gram_solve(W, y, names)
        if sol is None:
            return _estimate(name, W, tau, names, sigma2)
        beta, inv = sol
        r = y - W @ beta
        dof = y.size - beta.size
        if dof <= 0:
            raise IdentificationError(f"{y.size} equations for {beta.size} parameters: not enough samples")
        if name != "wls_residual":
            return _Fit(beta, np.sqrt(np.diag(inv) * float(r @ r) / dof), r.reshape(N, n))
        s2 = np.sum(r.reshape(N, n) ** 2, axis=0) / max(N - W.shape[1] / n, 1.0)
    elif name == "wls":
        if sigma2 is None:
            return _estimate(name, W, tau, names, sigma2)
        s2 = np.asarray(sigma2, float)
    else:
        return _estimate(name, W, tau, names, sigma2)
    if s2.shape != (n,) or np.any(~np.isfinite(s2)) or np.any(s2 <= 0):
        return _estimate(name, W, tau, names, sigma2)
    w = np.tile(1.0 / np.sqrt(s2), N)
    sol = _gram_solve(W * w[:, None], y * w, names)
    if sol is None:
        return _estimate(name, W, tau, names, sigma2)
    beta, cov = sol
    return _Fit(beta, np.sqrt(np.diag(cov)), (y - W @ beta).reshape(N, n))


def _fixed_regressor_estimator(name: str, W, names, sigma2):
    """For OLS and period-weighted WLS on one regressor shared by every run (exact mode): the
    rank check and the QR of :func:`robident_twin.estimation.estimators.ols` / ``wls`` done once,
    returning ``tau -> _Fit`` with the same estimate, std and residuals as those functions
    (the same factorisation of the same matrix, so the same numbers). None for other estimators."""
    from robident_twin.estimation.estimators import check_rank

    if name not in ("wls", "ols"):
        return None
    n = len(sigma2)
    w = np.tile(1.0 / np.sqrt(sigma2), W.shape[0] // n) if name == "wls" else None
    Ww = W if w is None else W * w[:, None]
    check_rank(Ww, names)
    Q, R = np.linalg.qr(Ww)
    Rinv = np.linalg.inv(R)
    inv = Rinv @ Rinv.T

    def fit(tau):
        N = tau.shape[0]
        y = tau.reshape(-1)
        beta = np.linalg.solve(R, Q.T @ (y if w is None else y * w))
        r = (y - W @ beta).reshape(N, n)
        if w is not None:
            return _Fit(beta, np.sqrt(np.diag(inv)), r)
        dof = y.size - beta.size
        if dof <= 0:
            raise IdentificationError(f"{y.size} equations for {beta.size} parameters: not enough samples")
        return _Fit(beta, np.sqrt(np.diag(float(np.sum(r**2) / dof) * inv)), r)

    return fit


def _estimate(name: str, W, tau, names, sigma2):
    if name == "wls":
        return wls(W, tau, names, sigma2, "period")
    if name == "wls_residual":
        return wls(W, tau, names, None, "residual")
    if name in ("ols", "ols_noisy_q"):
        return ols(W, tau, names)
    raise ConfigError(f"montecarlo.estimator: expected one of {ESTIMATORS}, got '{name}'")


def _progress(n: int, desc: str, enabled: bool):
    from robident_twin.progress import bar

    return bar(n, desc, enabled, unit="run")  # on a terminal only


# ----------------------------------------------------------------------------- exact mode

def run_exact(model, traj, rate_hz: float, tau_std_Nm: np.ndarray, n_runs: int, seed: int,
              estimator: str = "wls", noisy_q_std_rad: float = 1e-4, truth_spec=None,
              progress: bool = False, callback: Callable[[int], None] | None = None) -> MonteCarloResult:
    """Swevers' simulation: torque noise only, regressor from the designed trajectory.

    ``model``: :class:`robident_twin.model.build.IdentificationModel`; ``traj``: the
    Fourier design, sampled at ``rate_hz`` over one period; ``tau_std_Nm``: per-joint
    torque-noise std. ``truth_spec`` (optional) simulates the torque with another
    robot (e.g. :func:`with_stribeck`) while the regressor keeps the model's.
    ``ols_noisy_q`` builds each run's regressor from positions with Gaussian noise
    of std ``noisy_q_std_rad`` differentiated by central differences."""
    if estimator not in ESTIMATORS:
        raise ConfigError(f"montecarlo.estimator: expected one of {ESTIMATORS}, got '{estimator}'")
    _, q, dq, ddq = traj.sample(rate_hz)
    W = model.base.columns(model.regressor.stack(q, dq, ddq))
    truth = model.true_base()
    n = q.shape[1]
    std = np.broadcast_to(np.asarray(tau_std_Nm, float), (n,)).copy()
    if np.any(~np.isfinite(std)) or np.any(std <= 0):
        raise ConfigError(f"montecarlo: torque noise std must be positive per joint, got {std.tolist()}")
    if truth_spec is None:
        tau_true = (W @ truth).reshape(q.shape)
    else:
        from robident_twin.model.dynamics import TruthModel

        tj, tm = TruthModel(truth_spec).torques(q, dq, ddq)
        tau_true = tj if model.regressor.options.measurement == "joint_torque" else tm
    sigma2 = std**2
    bound = crlb(W, sigma2)
    seeds = run_seeds(seed, n_runs)
    p = W.shape[1]
    est = np.empty((n_runs, p))
    rstd = np.empty((n_runs, p))
    nrms = np.empty(n_runs)
    names = model.base.names
    fixed = _fixed_regressor_estimator(estimator, W, names, sigma2)  # one factorisation for every run
    with _progress(n_runs, f"exact {estimator}", progress) as bar:
        for r, s in enumerate(seeds):
            rng = np.random.default_rng(int(s))
            tau = tau_true + rng.standard_normal(tau_true.shape) * std
            Wr = W
            if estimator == "ols_noisy_q":
                qn = q + rng.standard_normal(q.shape) * noisy_q_std_rad
                dqn, ddqn = central_derivatives(qn, rate_hz)
                Wr = model.base.columns(model.regressor.stack(qn, dqn, ddqn))
            e = fixed(tau) if fixed is not None else _estimate(estimator, Wr, tau, names, sigma2)
            est[r], rstd[r] = e.beta, e.std
            nrms[r] = nrms_percent(e.residuals_Nm, tau)
            bar.update(1)
            if callback is not None:
                callback(r)
    return MonteCarloResult("exact", estimator, tuple(names), tuple(model.base.units), truth, bound, est, rstd,
                            nrms, seeds, {"n_samples": int(q.shape[0]), "rate_hz": float(rate_hz),
                                          "tau_std_Nm": std.tolist(), "cond": float(np.linalg.cond(
                                              W / np.linalg.norm(W, axis=0)))})


# ----------------------------------------------------------------------------- twin mode

def twin_sim_path(backend_cfg, process_noise_Nm=None, sim: str = "auto") -> str:
    """The fastest exact simulation path the configuration allows (see the module docstring):
    ``deterministic`` (no process noise, MuJoCo), ``batch`` (process noise, MuJoCo) or ``hal``
    (any other backend). ``sim`` forces a path; an impossible choice is a ConfigError."""
    if sim not in SIM_PATHS:
        raise ConfigError(f"montecarlo.sim: expected one of {SIM_PATHS}, got {sim!r}")
    from hal.config import as_backend

    backend = as_backend(backend_cfg)  # typed (hal.config); a mapping is validated here once
    noisy = process_noise_Nm is not None and bool(np.any(np.asarray(process_noise_Nm, float) > 0))
    mujoco = backend.name == "mujoco"
    if sim == "auto":
        return ("batch" if noisy else "deterministic") if mujoco else "hal"
    if sim in ("deterministic", "batch") and not mujoco:
        raise ConfigError(f"montecarlo.sim={sim}: the batched simulator is MuJoCo's; backend.name is "
                          f"'{backend.name}' (use montecarlo.sim=hal or auto)")
    if sim == "deterministic" and noisy:
        raise ConfigError("montecarlo.sim=deterministic: with process noise every run moves differently; "
                          "use montecarlo.sim=batch (or auto)")
    if sim == "hal" and noisy:
        raise ConfigError("montecarlo.process_noise_Nm: the HAL twins have no process noise; use "
                          "montecarlo.sim=batch (or auto) with backend=mujoco")
    return sim


def _twin_recordings(path: str, spec, backend_cfg, noise_cfg, ref, seeds, periods: int, transient_periods: int,
                     process_noise_Nm, batch_size: int, sim_bar, workers: int = 1, twin_cfg=None):
    """Yield (run index, Recording) for every seed along the chosen simulation path."""
    from hal.factory import make_noise, make_robot

    if path == "hal":
        for r, s in enumerate(seeds):
            robot = make_robot(spec, backend_cfg, noise_cfg, seed=int(s), twin_cfg=twin_cfg)
            try:
                rec = robot.run(ref, periods=periods, transient_periods=transient_periods)
            finally:
                robot.close()
            sim_bar.update(rec.q_rad.shape[0])
            yield r, rec
        return
    from hal.config import as_backend
    from hal.sim.batch import BatchTwin
    from hal.sim.mujoco_backend import controller_of

    backend = as_backend(backend_cfg)
    controller = controller_of(backend.controller)
    from hal.factory import make_twin_setup
    from hal.sim.effects import realistic_noise

    setup = make_twin_setup(spec, twin_cfg)
    noise = realistic_noise(setup, make_noise(spec, noise_cfg), noise_cfg)
    rate = float(backend.control_rate_hz or 1000.0)
    if path == "deterministic":
        twin = BatchTwin(spec, 1, noise, rate, controller)
        plan = twin.plan(ref, periods, transient_periods)
        sim_bar.reset(total=plan.reference.n_samples)
        q, tm, tj = twin.simulate(plan.reference, plan.start, plan.stop, progress=sim_bar.update)
        for r, s in enumerate(seeds):
            yield r, twin.recording(plan, q[0], tm[0], tj[0], int(s))
        return
    twins: dict[int, BatchTwin] = {}
    r = 0
    n_chunks = -(-len(seeds) // batch_size)  # near-equal chunks: 100 runs at 50 -> 50 + 50, at 32 -> 4 x 25
    bounds = np.linspace(0, len(seeds), n_chunks + 1).round().astype(int)
    for k0, k1 in zip(bounds[:-1], bounds[1:]):
        chunk = [int(s) for s in seeds[k0:k1]]
        if len(chunk) not in twins:
            twins[len(chunk)] = BatchTwin(spec, len(chunk), noise, rate, controller, workers=workers, twin=setup)
        twin = twins[len(chunk)]
        if sim_bar.total is None:
            steps = twin.plan(ref, periods, transient_periods).reference.n_samples
            sim_bar.reset(total=steps * len(seeds))
        recs = twin.run(ref, chunk, periods, transient_periods, process_noise_Nm,
                        progress=lambda n, c=len(chunk): sim_bar.update(n * c))
        for rec in recs:
            yield r, rec
            r += 1


def run_twin(model, traj, backend_cfg, noise_cfg, n_runs: int,
             seed: int, estimator: str = "wls", periods: int = 5, transient_periods: int = 1,
             n_harmonics: int | None = None, progress: bool = False,
             callback: Callable[[int], None] | None = None, truth_spec=None, process_noise_Nm=None,
             sim: str = "auto", batch_size: int = 50, decimate: int = 1, workers: int = 1,
             twin_cfg=None) -> MonteCarloResult:
    """Full twin: simulate every run (sensor noise, optional process noise), process, estimate.

    ``truth_spec`` (optional) is the robot the twin simulates (e.g. :func:`with_stribeck` for a
    friction mismatch); the identification model and its ground truth stay ``model``'s.
    ``process_noise_Nm``: per-joint std of a motor-torque disturbance drawn every control
    period (see :mod:`hal.sim.batch`). ``sim``: simulation path (:func:`twin_sim_path`);
    ``batch_size``: robots per batched MuJoCo model, stepped in ``workers`` parallel groups
    (forked processes, :class:`hal.sim.batch.BatchTwin`); ``decimate``: keep every k-th processed
    sample (``processing.decimate``; the CRLB is that of the decimated design). ``twin_cfg``: the
    ``twin`` group (None: ideal); a realistic twin runs on the batched path (elasticity:
    :class:`hal.sim.batch_elastic.ElasticBatchTwin`), or one HAL twin per run on other backends
    (the deterministic path simulates the ideal twin only)."""
    from robident_twin.design.stored import reference
    from robident_twin.processing.signal import process_periodic

    if estimator not in ESTIMATORS + TWIN_ESTIMATORS or estimator == "ols_noisy_q":
        raise ConfigError(f"montecarlo.estimator: twin mode expects one of "
                          f"{[e for e in ESTIMATORS + TWIN_ESTIMATORS if e != 'ols_noisy_q']}, got '{estimator}' "
                          "(the twin's positions are already measured with noise)")
    if periods < 2 and estimator == "wls":
        raise ConfigError(f"montecarlo.periods: wls needs at least 2 periods, got {periods}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"montecarlo.batch_size: expected a positive integer, got {batch_size!r}")
    if not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"montecarlo.workers: expected a positive integer, got {workers!r}")
    from hal.config import as_backend
    from hal.factory import make_noise

    backend = as_backend(backend_cfg)  # the typed backend option (hal.config); a mapping is validated once here
    spec = model.spec
    sim_spec = spec if truth_spec is None else truth_spec
    path = twin_sim_path(backend, process_noise_Nm, sim)
    from hal.factory import make_twin_setup

    twin = make_twin_setup(sim_spec, twin_cfg)
    if not twin.ideal:  # every run moves differently: batch (MuJoCo, hal/sim/batch*.py) or one HAL twin per run
        if sim == "deterministic":
            raise ConfigError(f"montecarlo.sim=deterministic: the realistic twin ({list(twin.effects)}) moves "
                              "differently in every run; use montecarlo.sim=auto, batch or hal")
        te = twin.has("transmission_error") and twin.params.transmission_error is not None
        if te or path == "hal":
            if sim == "batch":
                raise ConfigError("montecarlo.sim=batch: the batched twin has no transmission_error yet; use "
                                  "montecarlo.sim=auto or hal, or drop it from twin.effects")
            if process_noise_Nm is not None and np.any(np.asarray(process_noise_Nm, float) > 0):
                raise ConfigError("montecarlo.process_noise_Nm: the HAL twins have no process noise; use "
                                  "backend=mujoco with montecarlo.sim=auto or batch (batched twin)")
            path = "hal"
        else:
            path = "batch"
    measurement = model.regressor.options.measurement
    noise = make_noise(spec, noise_cfg)
    std = noise.tau_joint_std_Nm if measurement == "joint_torque" else noise.tau_motor_std_Nm
    if np.any(std <= 0):
        raise ConfigError(f"montecarlo: twin mode needs torque noise on every joint for the CRLB, got "
                          f"{std.tolist()}")
    rate = float(getattr(backend, "control_rate_hz", None) or 1000.0)
    decimate = int(decimate)
    if decimate < 1:
        raise ConfigError(f"processing.decimate: expected a positive integer, got {decimate}")
    _, q, dq, ddq = traj.sample(rate / decimate)
    W_design = model.base.columns(model.regressor.stack(q, dq, ddq))
    bound = crlb(W_design, std**2 / periods)
    truth = model.true_base()
    names = model.base.names
    H = int(n_harmonics or traj.n_harmonics)
    ref = reference(traj, rate)
    seeds = run_seeds(seed, n_runs)
    p = len(names)
    est = np.empty((n_runs, p))
    rstd = np.empty((n_runs, p))
    nrms = np.empty(n_runs)
    t_sim = t_est = 0.0
    ctx: dict = {}
    from robident_twin.progress import bar as _bar

    with _bar(None, f"twin simulate ({path})", progress, unit="step", unit_scale=True) as sim_bar, _progress(n_runs, f"twin {estimator}", progress) as bar:
        t0 = time.perf_counter()
        for r, rec in _twin_recordings(path, sim_spec, backend, noise_cfg, ref, seeds, periods,
                                       transient_periods, process_noise_Nm, batch_size, sim_bar, workers,
                                       twin_cfg if not twin.ideal else None):
            t1 = time.perf_counter()
            t_sim += t1 - t0
            data = process_periodic(rec, measurement, H, decimate)
            W = model.base_regressor(data)
            if estimator in TWIN_ESTIMATORS:
                from robident_twin.estimation.estimators import estimate, estimator_context

                if estimator != "iv" or not ctx:  # IV's instruments (the reference) are the same every run
                    from robident_twin.estimation.config import IvEstimator, as_estimator

                    est_cfg = IvEstimator(instruments="reference") if estimator == "iv" else as_estimator(
                        {"name": estimator})  # IV: the reference's regressor as instruments
                    ctx = estimator_context(est_cfg, model, data, rec, traj, decimate)
                e = estimate(estimator, W, data.tau_Nm, names, data.tau_var_Nm2, context=ctx)
            else:
                e = _fast_estimate(estimator, W, data.tau_Nm, names, data.tau_var_Nm2)
            est[r], rstd[r] = e.beta, e.std
            nrms[r] = nrms_percent(e.residuals_Nm, data.tau_Nm)
            bar.update(1)
            if callback is not None:
                callback(r)
            t0 = time.perf_counter()
            t_est += t0 - t1
    pn = None if process_noise_Nm is None else np.broadcast_to(np.asarray(process_noise_Nm, float),
                                                                (spec.n_joints,)).tolist()
    return MonteCarloResult("twin", estimator, tuple(names), tuple(model.base.units), truth, bound, est, rstd,
                            nrms, seeds, {"n_samples": int(q.shape[0]), "rate_hz": rate, "periods": periods,
                                          "decimate": decimate, "tau_std_Nm": std.tolist(), "sim_path": path,
                                          "workers": workers,
                                          "process_noise_Nm": pn, "simulated_robot": sim_spec.name,
                                          "friction_mismatch": truth_spec is not None,
                                          "simulate_s": t_sim, "estimate_s": t_est, "twin": twin.as_dict()})


# ----------------------------------------------------------------------------- config-driven entry

def validate_config(mc):
    """The typed ``montecarlo`` group (:class:`robident_twin.config.schema.MontecarloConfig`): a
    mapping given to the Python API is checked here once, by the schema the CLI edge uses (the
    error names the offending key); a typed one passes untouched."""
    from robident_twin.config.schema import MontecarloConfig
    from robident_twin.typed import coerce

    return coerce(MontecarloConfig, mc, "montecarlo")


def run_from_config(cfg, progress: bool | None = None,
                    callback: Callable[[int], None] | None = None) -> tuple[MonteCarloResult, dict, TestOutcome]:
    """Run the Monte-Carlo that a run config describes (a :class:`robident_twin.config.RunConfig`;
    a mapping, e.g. a resolved Hydra config, is validated once here); returns the raw
    result, its summary and the consistency tests. ``callback(r)`` after run ``r`` finished."""
    from robident_twin.config import validate
    from robident_twin.design.stored import resolve_design
    from robident_twin.model.build import build_model, model_options, resolve_robot

    run = validate(cfg)
    mc = run.montecarlo
    spec = resolve_robot(run.robot)
    options = model_options(run.model, run.robot)
    model = build_model(spec, options, int(run.base.n_samples), int(run.base.seed))
    from robident_twin.design.auto import excitation_path

    traj = resolve_design(mc.design or excitation_path(spec, run.robot), spec)
    est_name = mc.estimator or run.estimator.name
    if est_name == "wls" and (getattr(run.estimator, "weights", None) or "period") == "residual" and not mc.estimator:
        est_name = "wls_residual"
    show = bool(mc.progress) if progress is None else progress
    scale = float(mc.noise_scale)
    t0 = time.perf_counter()
    truth_spec = None
    if mc.friction == "stribeck":
        truth_spec = with_stribeck(spec, float(mc.stribeck.ratio), float(mc.stribeck.velocity_rad_s))
    if mc.mode == "exact":
        if mc.tau_std_Nm is not None:
            std = np.asarray(mc.tau_std_Nm, float)
        else:
            std = spec.tau_joint_std_Nm if options.measurement == "joint_torque" else spec.tau_motor_std_Nm
        rate = float(mc.sample_rate_hz or getattr(run.backend, "control_rate_hz", None) or 1000.0)
        res = run_exact(model, traj, rate, np.asarray(std, float) * scale, int(mc.runs), int(mc.seed),
                        est_name, float(mc.noisy_q_std_rad), truth_spec, show, callback)
    else:
        field = "torque_std_Nm" if options.measurement == "joint_torque" else "motor_torque_std_Nm"
        base_std = getattr(run.noise, field)
        if base_std is None:
            base_std = spec.tau_joint_std_Nm if options.measurement == "joint_torque" else spec.tau_motor_std_Nm
        noise = dataclasses.replace(run.noise, **{field: (np.asarray(base_std, float) * scale).tolist()})
        if truth_spec is None:
            from robident_twin.model.build import twin_spec

            truth_spec = twin_spec(spec, run.friction)
            truth_spec = None if truth_spec is spec else truth_spec
        res = run_twin(model, traj, run.backend, noise, int(mc.runs), int(mc.seed), est_name,
                       int(mc.periods), int(mc.transient_periods), run.processing.n_harmonics, show,
                       callback=callback, truth_spec=truth_spec, process_noise_Nm=mc.process_noise_Nm,
                       sim=str(mc.sim), batch_size=int(mc.batch_size), workers=int(mc.workers),
                       decimate=int(run.processing.decimate or 1), twin_cfg=run.twin)
    res.meta["wall_s"] = time.perf_counter() - t0
    res.meta["robot"] = spec.name
    res.meta["measurement"] = model.regressor.options.measurement
    summary = summarise(res)
    tests = consistency_tests(res, float(mc.alpha))
    bt = bias_test(res, float(mc.alpha))
    summary["bias_test"] = {"alpha": bt.alpha, "threshold": bt.threshold, "max_abs_t": bt.max_abs_t,
                            "failing": list(bt.failing), "n_over_3_sem": bt.n_over_3, "passed": bt.passed}
    summary["overall"]["sim_path"] = res.meta.get("sim_path", "exact")
    summary["twin"] = res.meta.get("twin") or {"name": "none (exact mode: no simulation)", "effects": []}
    return res, summary, tests


# ----------------------------------------------------------------------------- report

def format_table(summary: Mapping[str, Any], tests: TestOutcome | None = None, max_rows: int | None = None) -> str:
    """A text table in the form of Swevers' Table II plus the summary figures."""
    rows = summary["parameters"]
    o = summary["overall"]
    lo, hi = o["chi2_90_interval"]
    head = (f"{'#':>3} {'name':<10} {'true':>11} {'mean':>11} {'bias/SEM':>9} {'crlb std':>10} "
            f"{'emp std':>10} {'var/CRLB':>9} {'cov68':>6}")
    lines = [head, "-" * len(head)]
    for i, r in enumerate(rows[:max_rows] if max_rows else rows):
        flag = (" " if r["mean_in_68"] else "m") + (" " if r["ratio_in_chi2_90"] else "v")
        lines.append(f"{i + 1:>3} {r['name']:<10} {r['true']:>11.4g} {r['mean']:>11.4g} {r['bias_over_sem']:>9.2f} "
                     f"{r['crlb_std']:>10.3g} {r['emp_std']:>10.3g} {r['efficiency_ratio']:>9.3f} "
                     f"{r['coverage68']:>6.2f} {flag}")
    lines.append(f"runs {o['n_runs']}, parameters {o['n_params']}; means inside their 68 % interval: "
                 f"{100 * o['share_means_in_68']:.0f} %; variance ratios inside the chi-square 90 % interval "
                 f"[{lo:.3f}, {hi:.3f}]: {100 * o['share_ratios_in_chi2_90']:.0f} %")
    import math

    if math.isfinite(o["log10_det_ratio"]):
        det = (f"log10 det(emp cov)/det(CRLB) {o['log10_det_ratio']:.3f} "
               f"(efficient: {o['log10_det_ratio_expected']:.3f})")
    else:  # the empirical covariance of N <= p runs is singular: no determinant to compare
        det = (f"log10 det(emp cov)/det(CRLB) not computed ({o['n_runs']} runs for "
               f"{o['n_params']} parameters: needs more runs than parameters)")
    lines.append(f"log10 det(CRLB) {o['log10_det_crlb']:.3f}; {det}; "
                 f"torque NRMS {o['torque_nrms_percent']:.3f} %; mean 68 % coverage {o['mean_coverage68']:.3f}")
    bt = summary.get("bias_test")
    if bt is not None:
        lines.append(f"bias test (Bonferroni t, false alarm <= {bt['alpha']:g}): max |bias|/SEM "
                     f"{bt['max_abs_t']:.2f} (limit {bt['threshold']:.2f}) "
                     f"{'ok' if bt['passed'] else 'FAIL ' + ','.join(bt['failing'][:8])}; "
                     f"parameters with |bias| > 3 SEM: {bt['n_over_3_sem']}")
    if tests is not None:
        lines.append(f"tests (false alarm <= {tests.alpha:g}): mean N d'C^-1 d = {tests.mean_statistic:.1f} "
                     f"(limit {tests.mean_threshold:.1f}, p = {tests.mean_p_value:.3g}) "
                     f"{'ok' if tests.mean_ok else 'FAIL'}; variance ratios in [{tests.ratio_interval[0]:.3f}, "
                     f"{tests.ratio_interval[1]:.3f}]: {'ok' if tests.variance_ok else 'FAIL ' + ','.join(tests.ratios_outside[:8])}")
    return "\n".join(lines)
