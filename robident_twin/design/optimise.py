"""Full excitation designs: every criterion under every constraint, multistart SLSQP or differential
evolution with an SLSQP polish, and the dense re-check of the result.
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from robident_twin.design.constraints import (
    _KIND_UNITS,
    ConstraintSet,
    DesignConstraints,
    _n_channels,
    check_bandwidth,
    check_design,
    noise_std_Nm,
    nominal_torque_model,
    torque_limit_model,
)
from robident_twin.design.criteria import (
    CRITERIA,
    CRITERION_NAMES,
    GoalSettings,
    _criterion_and_grad,
    _gradient_through_states,
    covariance_log10_det,
    design_criterion,
)
from robident_twin.design.fourier import (
    DEFAULT_N_SAMPLES,
    DENSE_CHECK_FACTOR,
    FourierTrajectory,
)
from robident_twin.design.optimise_cond import (
    DesignResult,
    _LinearBasis,
    _max_feasible_scale,
    _Problem,
    _scaled,
    single_threaded_blas,
)
from robident_twin.errors import ConfigError, TrajectoryError
from robident_twin.model.robot import RobotSpec


class _DesignProblem(_Problem):
    """:class:`_Problem` with any criterion, noise weights and nonlinear constraints."""

    def __init__(self, spec, regressor, base, H, base_freq_hz, n_samples, constraints: DesignConstraints,
                 criterion: str, noise_std, torque_fn, goal: GoalSettings | None = None,
                 limit_fn=None):
        super().__init__(spec, regressor, base, H, base_freq_hz, n_samples, constraints.n_check,
                         constraints.margin, constraints.zero_start)
        self.kind = criterion
        self.row_w = np.tile(1.0 / np.asarray(noise_std, dtype=float), n_samples)
        self.torque_fn = torque_fn
        self.cons = constraints
        # limit_fn: the torques the limits bound (motor torques for coupled drives)
        self.cset = (ConstraintSet(spec, constraints, limit_fn if limit_fn is not None else torque_fn)
                     if constraints.nonlinear else None)
        period = 1.0 / self.f
        T = constraints.n_check_nonlinear
        self.nl = _LinearBasis(self.n, H, 2 * math.pi * self.f, np.arange(T) * (period / T))
        self._nl_cache: tuple[np.ndarray, tuple] | None = None
        self.goal = goal
        if criterion == "goal":
            if torque_fn is None:
                raise ConfigError("the goal-attainment criterion needs a nominal torque model")
            weak = goal.weak_joints if goal.weak_joints is not None else (self.n - 2, self.n - 1)
            self.weak = tuple(int(j) for j in weak)
            tmax = spec.tau_max_Nm[list(self.weak)]
            self.Lambda = np.concatenate([[goal.goal_cond], goal.k_tau * tmax])
            self.Psi = np.abs(self.Lambda)
            self._tmax_weak = tmax
        self.constraints = list(self.constraints)
        if self.cset is not None:
            self.constraints.append({"type": "ineq", "fun": self.nl_fun, "jac": self.nl_jac})

    # ---- per-sample functions and their gradients through the Fourier basis

    def _per_sample_jac(self, fn, states, basis: _LinearBasis, uses_rates: bool, g0=None,
                        flat: bool = True):
        """Jacobian d vec(g) / dz of per-sample g(q_k, dq_k, ddq_k) (T, m): one forward
        difference per state and joint, all samples at once."""
        if g0 is None:
            g0 = fn(*states)
        T, m = g0.shape
        n = self.n
        J = np.zeros((T, m, self.nx))
        mats = (basis.q, basis.dq, basis.ddq) if uses_rates else (basis.q,)
        for s_idx, M in enumerate(mats):
            for j in range(n):
                pert = [s.copy() for s in states]
                h = self.fd_step * max(1.0, float(np.max(np.abs(states[s_idx][:, j]))))
                pert[s_idx][:, j] += h
                dg = (fn(*pert) - g0) / h  # (T, m)
                Mj = M[j * T:(j + 1) * T]  # (T, nx)
                J += dg[:, :, None] * Mj[:, None, :]
        J *= self.x_scale
        return J.reshape(T * m, self.nx) if flat else J

    def _nl_eval(self, z):
        if self._nl_cache is not None and np.array_equal(z, self._nl_cache[0]):
            return self._nl_cache[1]
        states = self.nl.states(self.to_x(z))
        cs = self.cset
        parts_g, parts_J = [], []
        if cs.c.torque:
            g_t = cs.torque_part(*states)
            parts_g.append(g_t)
            parts_J.append(self._per_sample_jac(cs.torque_part, states, self.nl, True, g_t, flat=False))
        if cs.ee is not None or cs.coll is not None:
            geo = lambda q, dq, ddq: cs.geometric_part(q)  # noqa: E731
            g_g = geo(*states)
            parts_g.append(g_g)
            parts_J.append(self._per_sample_jac(geo, states, self.nl, False, g_g, flat=False))
        g = np.hstack(parts_g)
        J = np.concatenate(parts_J, axis=1).reshape(-1, self.nx)
        self._nl_cache = (z.copy(), (g.ravel(), J))
        return self._nl_cache[1]

    def nl_fun(self, z):
        return self._nl_eval(z[:self.nx])[0]

    def nl_jac(self, z):
        J = self._nl_eval(z[:self.nx])[1]
        return J if z.shape[0] == self.nx else np.hstack([J, np.zeros((J.shape[0], 1))])

    # ---- objective

    def _evaluate(self, z):
        if self._cache_z is not None and np.array_equal(z, self._cache_z):
            return self._cache
        self.n_evals += 1
        kind = self.goal.cond_criterion if self.kind == "goal" else self.kind
        states = self.crit.states(self.to_x(z))
        W = self._stack(*states)
        f, GW = _criterion_and_grad(kind, W, self.row_w)
        result = (f, _gradient_through_states(self._stack, self.crit, states, W, GW, self.fd_step) * self.x_scale)
        self._cache_z, self._cache = z.copy(), result
        return result

    # ---- goal attainment (extra variable gamma at the end)

    def goal_F(self, z):
        """F = [cond, tau_max_j - mean|tau_j| (weak joints)] and dF/dz."""
        logc, dlogc = self._evaluate(z)
        cond = math.exp(logc)
        states = self.crit.states(self.to_x(z))
        eps = 1e-3

        def mean_abs(q, dq, ddq):
            tau = self.torque_fn(q, dq, ddq)[:, list(self.weak)]
            return np.sqrt(tau ** 2 + eps ** 2)

        a0 = mean_abs(*states)
        J = self._per_sample_jac(mean_abs, states, self.crit, True, a0)  # (T*w, nx)
        T, w = a0.shape
        dmean = J.reshape(T, w, self.nx).mean(axis=0)
        F = np.concatenate([[cond], self._tmax_weak - a0.mean(axis=0)])
        dF = np.vstack([cond * dlogc, -dmean])
        return F, dF

    def goal_constraints(self):
        def fun(zg):
            F, _ = self.goal_F(zg[:self.nx])
            return self.Lambda + zg[-1] * self.Psi - F

        def jac(zg):
            _, dF = self.goal_F(zg[:self.nx])
            return np.hstack([-dF, self.Psi[:, None]])
        cons = [{"type": "ineq", "fun": fun, "jac": jac}]
        for c in self.constraints:
            f0, j0 = c["fun"], c["jac"]
            cons.append({"type": c["type"], "fun": (lambda zg, f0=f0: f0(zg[:self.nx])),
                         "jac": (lambda zg, j0=j0: _pad_column(j0(zg[:self.nx])))})
        return cons

    # ---- feasibility helpers

    def static_margin(self, q0: np.ndarray) -> float:
        """Smallest nonlinear margin (design tightening) of the constant trajectory at q0."""
        if self.cset is None:
            return math.inf
        z = np.zeros((1, self.n))
        g = self.cset.margins(q0[None, :], z, z)
        return float(g.min()) if g.size else math.inf

    def nl_min(self, z) -> float:
        if self.cset is None:
            return math.inf
        g = self.nl_fun(z)
        return float(g.min()) if g.size else math.inf


def _pad_column(J: np.ndarray) -> np.ndarray:
    J = np.atleast_2d(J)
    return np.hstack([J, np.zeros((J.shape[0], 1))])


def _feasible_q0(prob: _DesignProblem, rng: np.random.Generator, tries: int = 400) -> np.ndarray:
    """A random offset within 0.6 of the (margin) position range whose constant trajectory meets
    the nonlinear constraints; raises TrajectoryError naming the constraint when none does."""
    lo, hi = prob.lim["q_lo_rad"], prob.lim["q_hi_rad"]
    centre, half = 0.5 * (hi + lo), 0.5 * (hi - lo)
    best, best_m = None, -math.inf
    for _ in range(tries):
        q0 = centre + rng.uniform(-0.6, 0.6, prob.n) * half
        m = prob.static_margin(q0)
        if m > 0:
            return q0
        if m > best_m:
            best, best_m = q0, m
    worst = ""
    if prob.cset is not None and best is not None:
        z = np.zeros((1, prob.n))
        g = prob.cset.margins(best[None, :], z, z)[0]
        i = int(np.argmin(g))
        kind, what = prob.cset.labels[i]
        worst = f"; the best of {tries} random configurations still misses {kind} '{what}' by {-g[i]:.4g} " \
                f"{_KIND_UNITS[kind]}"
    raise TrajectoryError(
        f"excitation design for robot '{prob.spec.name}' is infeasible: no configuration within the "
        f"position limits meets the torque / Cartesian / collision constraints even at rest{worst}. "
        f"Relax the Cartesian bounds, obstacles or torque margin.")


def _start(prob: _DesignProblem, rng, fill: float) -> np.ndarray:
    """Random start that meets every constraint on the design grids."""
    z = prob.random_start(rng, fill)
    if prob.cset is None:
        return z
    q0 = _feasible_q0(prob, rng)
    x = prob.to_x(z)
    x[:prob.n] = q0
    z = prob.to_z(x)
    # re-scale the oscillation for the linear room about the new offset, then for the rest
    z0 = prob.to_z(np.concatenate([q0, np.zeros(prob.nx - prob.n)]))
    dz = z - z0
    room = prob.G @ z0 + prob.h
    use = -(prob.G @ dz)
    ratio = np.max(np.where(use > 0, use / np.maximum(room, 1e-300), 0.0))
    s = fill / ratio if ratio > 0 else 1.0
    for _ in range(40):
        zs = z0 + s * dz
        if prob.nl_min(zs) > 0:
            return zs
        s *= 0.7
    return z0 + s * dz


def _repair(traj: FourierTrajectory, spec, constraints, cset, n_dense) -> tuple[FourierTrajectory, float]:
    """Shrink the oscillation about q0 until the dense check passes; (traj, scale), scale 0 if none."""
    def ok(tr):
        return not check_design(tr, spec, constraints, n_grid=n_dense, cset=cset)
    if ok(traj):
        return traj, 1.0
    s = _max_feasible_scale(traj, spec, n_dense) * (1.0 - 1e-9)
    for _ in range(30):
        if s <= 1e-3:
            break
        tr = _scaled(traj, s)
        if ok(tr):
            return tr, s
        s *= 0.97
    return traj, 0.0


def _settings_text(spec, constraints: DesignConstraints, H, f) -> str:
    parts = [f"limits x {constraints.margin:g}"]
    if constraints.zero_start:
        parts.append("dq = ddq = 0 at start and end")
    if constraints.torque:
        parts.append(f"|tau| <= {constraints.torque_margin:g} tau_max")
    if constraints.cartesian is not None:
        parts.append("Cartesian: " + ", ".join(constraints.cartesian.names()))
    if constraints.collision is not None:
        cs = constraints.collision
        parts.append(f"collision clearance {cs.clearance_m:g} m (self: {cs.self_collision}, "
                     f"{len(cs.obstacles)} obstacle(s))")
    return f"{H} harmonic(s) at {f:g} Hz, " + "; ".join(parts)


def optimise_design(spec: RobotSpec, regressor, base, criterion: str = "cond",
                    constraints: DesignConstraints | None = None, n_harmonics: int = 5,
                    base_freq_hz: float = 0.1, n_starts: int = 4, seed: int = 0,
                    method: str = "slsqp", noise_std: np.ndarray | None = None,
                    torque_fn=None, beta=None, goal: GoalSettings | None = None,
                    n_samples: int = DEFAULT_N_SAMPLES, maxiter: int = 200, ftol: float = 1e-6,
                    max_cond: float = 1e4, de_maxiter: int = 30, de_popsize: int = 2,
                    initial: FourierTrajectory | None = None, progress: bool = False,
                    nominal: RobotSpec | None = None) -> DesignResult:
    """Optimal excitation design with any criterion, constraint set and optimiser.

    criterion: 'cond' (Swevers c1: noise-scaled, column-normalised base regressor), 'dopt'
    (Swevers c2: log det covariance), 'eopt', 'goal' (Kolyubin 2017 eq. 10, see
    :class:`GoalSettings`). noise_std: per-joint torque noise std (default: the robot file's
    for the regressor's measurement). torque_fn: nominal torque model for the torque limits and
    the goal criterion (default: the twin's truth, or ``W_base beta`` when ``beta`` is given; the
    limits then bound :func:`torque_limit_model`, i.e. the MOTOR torques of coupled drives). method: 'slsqp' (multistart) or 'de'
    (differential evolution over oscillations scaled into the kinematic limits, then SLSQP
    polish). ``initial``: an extra start (e.g. the previous design in Swevers' iteration).
    ``nominal``: the robot whose torques the default torque model gives (default ``spec``; on a
    built-in twin the CAD-like nominal, :func:`robident_twin.design.auto.design_nominal`, so that
    the design never reads the twin's truth).

    Every returned design passes :func:`check_design` on a grid DENSE_CHECK_FACTOR x denser than
    the design grid (infeasible optima are shrunk about q0). Raises TrajectoryError with the
    reason when no feasible design excites all base parameters (cond > max_cond), ConfigError for
    bad settings (e.g. the bandwidth bound)."""
    constraints = constraints or DesignConstraints()
    if criterion not in CRITERIA:
        raise ConfigError(f"criterion: expected one of {CRITERIA}, got {criterion!r}")
    if method not in ("slsqp", "de"):
        raise ConfigError(f"method: expected 'slsqp' or 'de', got {method!r}")
    for name, val, least in (("n_harmonics", n_harmonics, 1), ("n_starts", n_starts, 1),
                             ("n_samples", n_samples, 1), ("maxiter", maxiter, 0)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < least:
            raise ConfigError(f"{name}: expected an integer >= {least}, got {val!r}")
    if not (isinstance(base_freq_hz, (int, float)) and math.isfinite(base_freq_hz) and base_freq_hz > 0):
        raise ConfigError(f"base_freq_hz: expected a positive frequency in Hz, got {base_freq_hz!r}")
    check_bandwidth(n_harmonics, base_freq_hz, constraints.resonance_hz)
    if constraints.zero_start and n_harmonics < 2:
        raise ConfigError("zero_start: dq(0) = ddq(0) = 0 needs at least 2 harmonics per joint")
    if n_samples * spec.n_joints < base.n_base:
        raise ConfigError(f"n_samples: {n_samples} samples x {spec.n_joints} joints give fewer rows "
                          f"than the {base.n_base} base parameters")
    measurement = regressor.options.measurement
    noise_std = noise_std_Nm(spec, measurement) if noise_std is None else np.asarray(noise_std, float)
    if noise_std.shape != (_n_channels(regressor),) or np.any(noise_std <= 0):
        raise ConfigError(f"noise_std: expected {_n_channels(regressor)} positive values (N m, one per "
                          f"measured channel), got {noise_std}")
    limit_fn = torque_fn
    if torque_fn is None and (constraints.torque or criterion == "goal"):
        src = spec if nominal is None else nominal
        torque_fn = nominal_torque_model(src, regressor, base, beta)
        limit_fn = torque_limit_model(src, regressor, base, beta) if constraints.torque else None
    from scipy.optimize import differential_evolution, minimize

    t_start = time.perf_counter()
    if criterion == "goal":
        goal = goal or GoalSettings()
        if goal.goal_cond is None:
            first = optimise_design(spec, regressor, base, goal.cond_criterion, constraints, n_harmonics,
                                    base_freq_hz, max(1, n_starts // 2), seed, "slsqp", noise_std,
                                    limit_fn or torque_fn, None, None, n_samples, maxiter, ftol, max_cond)
            first_cond = design_criterion(first.trajectory, regressor, base, goal.cond_criterion,
                                          noise_std, n_samples)
            goal = GoalSettings(1.1 * first_cond, goal.k_tau, goal.weak_joints, goal.cond_criterion)
            initial = initial or first.trajectory
    prob = _DesignProblem(spec, regressor, base, int(n_harmonics), float(base_freq_hz), int(n_samples),
                          constraints, criterion, noise_std, torque_fn, goal, limit_fn)
    n_dense = DENSE_CHECK_FACTOR * constraints.n_check
    cset_dense = ConstraintSet(spec, constraints, limit_fn) if constraints.nonlinear else None
    rng = np.random.default_rng(seed)
    history: list[dict[str, Any]] = []
    best: tuple[float, float, FourierTrajectory] | None = None  # (objective, cond, traj)

    def design_feasible(z) -> bool:
        """Every constraint met (with the design tightening) on the design grids."""
        if np.min(prob.G @ z + prob.h) < -1e-9:
            return False
        if prob.E is not None and np.max(np.abs(prob.E @ z)) > 1e-9:
            return False
        return prob.nl_min(z) >= 0

    def project(z):
        """Exact dq(0) = ddq(0) = 0 (SLSQP meets equalities only to its tolerance)."""
        if prob.E is None:
            return z
        return z - np.linalg.pinv(prob.E) @ (prob.E @ z)

    def finish(z, i, t0, res, z_start, fallback):
        candidates = [project(z)] + ([fallback[1]] if fallback is not None else [])
        traj, repair = None, 0.0
        for zc in candidates:
            traj, repair = _repair(prob.trajectory(zc), spec, constraints, cset_dense, n_dense)
            if repair > 0:
                break
        feasible = repair > 0
        cond = design_criterion(traj, regressor, base, "cond", noise_std, n_samples) if feasible else math.inf
        obj = _objective_value(prob, traj) if feasible else math.inf
        entry = {"start": i, "objective_start": _objective_value(prob, prob.trajectory(z_start)),
                 "objective": obj, "cond": cond, "feasible": feasible, "repair_scale": repair,
                 "nit": int(res.get("nit", 0)) if res is not None else 0,
                 "success": bool(res.success) if res is not None else False,
                 "message": str(res.message) if res is not None else "", "time_s": time.perf_counter() - t0}
        history.append(entry)
        return traj, obj, cond, feasible

    def slsqp(z0):
        """SLSQP from z0; also returns the best iterate that met every constraint (fallback when
        the last iterate, e.g. at the iteration limit, does not)."""
        best_iter: list = [None]

        def callback(zk, *_):
            zk = np.asarray(zk)[:prob.nx]
            if design_feasible(zk):
                val = _objective_value(prob, prob.trajectory(zk)) if criterion == "goal" else prob.fun(zk)
                if best_iter[0] is None or val < best_iter[0][0]:
                    best_iter[0] = (val, zk.copy())
        if design_feasible(z0):
            callback(z0)
        with single_threaded_blas():
            if criterion == "goal":
                F0, _ = prob.goal_F(z0)
                g0 = float(np.max((F0 - prob.Lambda) / prob.Psi)) + 1e-3
                res = minimize(lambda zg: zg[-1], np.append(z0, g0),
                               jac=lambda zg: np.append(np.zeros(prob.nx), 1.0), method="SLSQP",
                               constraints=prob.goal_constraints(), callback=callback,
                               options={"maxiter": int(maxiter), "ftol": ftol})
                res.x = res.x[:prob.nx]
            else:
                res = minimize(prob.fun, z0, jac=prob.jac, method="SLSQP", constraints=prob.constraints,
                               callback=callback, options={"maxiter": int(maxiter), "ftol": ftol})
                # SLSQP may stop early on an incompatible linearisation (status 4) or a bad
                # quasi-Newton model (status 8): restart from the best feasible iterate with a
                # fresh Hessian while iterations remain
                used = int(res.get("nit", 0))
                for _ in range(3):
                    if res.status not in (4, 8) or best_iter[0] is None or used >= maxiter - 5:
                        break
                    before = best_iter[0][0]
                    res = minimize(prob.fun, best_iter[0][1], jac=prob.jac, method="SLSQP",
                                   constraints=prob.constraints, callback=callback,
                                   options={"maxiter": int(maxiter) - used, "ftol": ftol})
                    used += int(res.get("nit", 0))
                    if best_iter[0][0] >= before - 1e-9:
                        break
                res.nit = used
        return res, best_iter[0]

    starts: list[np.ndarray] = []
    if initial is not None:
        if initial.n_joints != spec.n_joints or initial.n_harmonics != n_harmonics:
            raise ConfigError("initial: the initial design must have the robot's joints and "
                              f"{n_harmonics} harmonics")
        starts.append(prob.from_trajectory(FourierTrajectory(base_freq_hz, initial.q0_rad, initial.a, initial.b)))
    if method == "de":
        starts.append(_de_start(prob, rng, spec, constraints, n_samples, de_maxiter, de_popsize,
                                differential_evolution, int(rng.integers(2**31))))
    while len(starts) < n_starts + (initial is not None):
        starts.append(_start(prob, rng, fill=rng.uniform(0.3, 0.6)))
    replacements = int(n_starts)  # a start on which SLSQP stalls at once is replaced (bounded)
    from robident_twin.progress import bar as _bar

    pbar = _bar(len(starts), f"design starts ({criterion}, {method})", progress, unit="start")
    i = -1
    while i + 1 < len(starts):
        i += 1
        pbar.total = len(starts)  # a stalled start is replaced: one more
        z0 = starts[i]
        t0 = time.perf_counter()
        res, fallback = slsqp(z0)
        traj, obj, cond, feasible = finish(res.x, i, t0, res, z0, fallback)
        stalled = res.status in (4, 8) and obj >= history[-1]["objective_start"] - 1e-6
        history[-1]["stalled"] = bool(stalled)
        if stalled and replacements > 0:
            replacements -= 1
            starts.append(_start(prob, rng, fill=rng.uniform(0.3, 0.6)))
        if feasible and math.isfinite(obj) and cond <= max_cond and (best is None or obj < best[0]):
            best = (obj, cond, traj)
        pbar.set_postfix_str(f"start {i}: cond {cond:.4g}, {'feasible' if feasible else 'infeasible'}; best "
                             + (f"{best[1]:.4g}" if best else "-"), refresh=False)
        pbar.update(1)
    pbar.close()
    elapsed = time.perf_counter() - t_start
    if best is None:
        summary = "; ".join(f"start {h['start']}: {'within the constraints' if h['feasible'] else 'VIOLATES CONSTRAINTS'}"
                            f", cond {h['cond']:.3g}" for h in history)
        if not any(h["feasible"] for h in history):
            reached = "no start gave a design within the constraints"
        else:
            reached = (f"the best design within the constraints has cond "
                       f"{min(h['cond'] for h in history if h['feasible']):.3g} > max_cond {max_cond:g}, "
                       f"i.e. it does not excite all {base.n_base} base parameters")
        raise TrajectoryError(
            f"excitation design ({criterion}) for robot '{spec.name}' failed: {reached} (checked at "
            f"the full limits on {n_dense} points per period). Settings: "
            f"{_settings_text(spec, constraints, n_harmonics, base_freq_hz)}; relax the constraints "
            f"or change the harmonics / base frequency. Per start: {summary}")
    traj = best[2].with_metadata(
        robot=spec.name, criterion=CRITERION_NAMES[criterion], criterion_key=criterion,
        objective=float(best[0]), cond=round(float(best[1]), 6),
        log10_det_cov=covariance_log10_det(best[2], regressor, base, noise_std, n_samples),
        method=method, seed=seed, harmonics=int(n_harmonics),
        constraints=_settings_text(spec, constraints, n_harmonics, base_freq_hz))
    return DesignResult(traj, float(best[1]),
                        len(starts), elapsed, history)


def _objective_value(prob: _DesignProblem, traj: FourierTrajectory) -> float:
    """The optimised objective of a trajectory (log cond, log det cov, -log lambda_min or gamma)."""
    z = prob.from_trajectory(traj)
    if prob.kind == "goal":
        F, _ = prob.goal_F(z)
        return float(np.max((F - prob.Lambda) / prob.Psi))
    return float(prob._evaluate(z)[0])


def _de_start(prob: _DesignProblem, rng, spec, constraints, n_samples, maxiter, popsize, de, de_seed):
    """Differential evolution over (q0, oscillation) with the oscillation scaled into the
    kinematic limits and a penalty on nonlinear violations; returns the best z."""
    nx, n = prob.nx, prob.n
    bounds = [(-constraints.margin * 0.9, constraints.margin * 0.9)] * n + [(-1.0, 1.0)] * (nx - n)
    decay = np.concatenate([np.ones(n), np.tile(1.0 / np.arange(1, prob.H + 1), 2 * n)])

    def decode(u):
        z = np.asarray(u) * decay
        if prob.E is not None:  # project onto dq(0) = ddq(0) = 0 (coefficients only)
            E = prob.E
            z = z - np.linalg.pinv(E) @ (E @ z)
        z0 = np.concatenate([z[:n], np.zeros(nx - n)])
        dz = z - z0
        room = prob.G @ z0 + prob.h
        if np.any(room < 0):
            return None
        use = -(prob.G @ dz)
        ratio = np.max(np.where(use > 0, use / np.maximum(room, 1e-300), 0.0))
        return z0 + (dz / ratio if ratio > 0 else dz)

    def fun(u):
        z = decode(u)
        if z is None:
            return 1e3
        f = prob.fun(z) if prob.kind != "goal" else math.log(max(math.exp(prob.fun(z)), 1.0))
        if prob.cset is not None:
            f += 1e2 * max(0.0, -prob.nl_min(z))
        return f

    with single_threaded_blas():
        res = de(fun, bounds, maxiter=int(maxiter), popsize=int(popsize), seed=de_seed, polish=False,
                 init="latinhypercube", tol=1e-6)
    z = decode(res.x)
    if z is None or (prob.cset is not None and prob.nl_min(z) <= 0):
        return _start(prob, rng, fill=0.5)
    return z
