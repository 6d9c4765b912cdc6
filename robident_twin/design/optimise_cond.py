"""The condition-number design (multistart SLSQP under the kinematic limits) and the shared optimiser
machinery (linear Fourier basis, limit rows, single-threaded BLAS).
"""
from __future__ import annotations

import contextlib
import ctypes
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robident_twin.design.criteria import (
    _LOG_COND_DEGENERATE,
    _gradient_through_states,
    condition_number,
    log_cond_and_grad,
)
from robident_twin.design.fourier import (
    DEFAULT_N_CONSTRAINT,
    DEFAULT_N_SAMPLES,
    DENSE_CHECK_FACTOR,
    FourierTrajectory,
)
from robident_twin.design.limits import _check_margin, check_limits, scaled_limits
from robident_twin.errors import ConfigError, TrajectoryError
from robident_twin.model.robot import RobotSpec

#: Name stored in the ``criterion`` metadata of designs made by :func:`optimise_condition`.
CRITERION = "cond(column-normalised base regressor)"


# --------------------------------------------------------------------------- BLAS threads

_OPENBLAS_THREAD_FUNCS = (
    ("openblas_get_num_threads", "openblas_set_num_threads"),
    ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
)


@contextlib.contextmanager
def single_threaded_blas():
    """Run BLAS/LAPACK single-threaded inside the block (best effort, restored after).

    The design loop makes thousands of tiny LAPACK calls (57 x 57 eigendecompositions);
    OpenBLAS worker threads make each of them one to two orders of magnitude slower on a
    small, busy machine. Uses ``threadpoolctl`` when installed, else the thread setters
    of the OpenBLAS libraries loaded in this process (Linux); otherwise does nothing.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
        return
    restore = []
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "/" in line}
        libs = sorted(p for p in paths
                      if "openblas" in os.path.basename(p).lower() and ".so" in os.path.basename(p))
    except OSError:
        libs = []
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get_name, set_name in _OPENBLAS_THREAD_FUNCS:
            if hasattr(lib, get_name) and hasattr(lib, set_name):
                getter, setter = getattr(lib, get_name), getattr(lib, set_name)
                getter.restype = ctypes.c_int
                try:
                    previous = int(getter())
                    setter(ctypes.c_int(1))
                except Exception:  # noqa: BLE001 - best effort only
                    break
                restore.append((setter, previous))
                break
    try:
        yield
    finally:
        for setter, previous in restore:
            setter(ctypes.c_int(previous))


# --------------------------------------------------------------------------- optimiser


@dataclass
class DesignResult:
    """Outcome of :func:`optimise_condition`.

    trajectory: the best feasible design; cond: its criterion value; n_starts: starts run;
    time_s: wall time; history: one dict per start (cond at start and end, feasibility,
    iterations, SLSQP message, repair factor, time).
    """

    trajectory: FourierTrajectory
    cond: float
    n_starts: int
    time_s: float
    history: list[dict[str, Any]] = field(default_factory=list)


class _LinearBasis:
    """q, dq, ddq on a time grid as constant matrices acting on the physical variables.

    Variables x = [q0 (n), a (n*H, joint-major), b (n*H)]; rows of each matrix are
    ordered joint-major (row j*T + k is joint j at time k).
    """

    def __init__(self, n: int, H: int, w_rad_s: float, t_s: np.ndarray):
        wl = w_rad_s * np.arange(1, H + 1)
        phase = np.outer(t_s, wl)
        s, c = np.sin(phase), np.cos(phase)
        T = len(t_s)
        eye = np.eye(n)
        ones = np.ones((T, 1))
        zeros = np.zeros((T * n, n))
        self.q = np.hstack([np.kron(eye, ones), np.kron(eye, s / wl), np.kron(eye, -c / wl)])
        self.dq = np.hstack([zeros, np.kron(eye, c), np.kron(eye, s)])
        self.ddq = np.hstack([zeros, np.kron(eye, -s * wl), np.kron(eye, c * wl)])
        self.n, self.T = n, T

    def states(self, x: np.ndarray):
        """(q, dq, ddq), each (T, n)."""
        return tuple((M @ x).reshape(self.n, self.T).T for M in (self.q, self.dq, self.ddq))


class _Problem:
    """Scaled decision variables, objective log(cond) with gradient, linear constraints."""

    def __init__(self, spec: RobotSpec, regressor, base, H: int, base_freq_hz: float,
                 n_samples: int, n_constraint: int, margin: float, zero_start: bool,
                 fd_step: float = 1e-6):
        self.spec, self.regressor, self.base = spec, regressor, base
        n = spec.n_joints
        self.n, self.H, self.f = n, H, float(base_freq_hz)
        w = 2 * math.pi * self.f
        period = 1.0 / self.f
        self.fd_step = fd_step
        lim = scaled_limits(spec, margin)
        self.lim = lim
        # variable scaling: q0 by the half range, a and b by the velocity limit
        centre = 0.5 * (spec.q_max_rad + spec.q_min_rad)
        half = 0.5 * (spec.q_max_rad - spec.q_min_rad)
        self.x_offset = np.concatenate([centre, np.zeros(2 * n * H)])
        vel = np.repeat(spec.dq_max_rad_s, H)
        self.x_scale = np.concatenate([half, vel, vel])
        self.nx = n + 2 * n * H
        # criterion grid
        t_c = np.arange(n_samples) * (period / n_samples)
        self.crit = _LinearBasis(n, H, w, t_c)
        # constraint grid: lo <= A x <= hi as G z + h >= 0
        t_g = np.arange(n_constraint) * (period / n_constraint)
        g = _LinearBasis(n, H, w, t_g)
        T = n_constraint
        q_lo, q_hi = np.repeat(lim["q_lo_rad"], T), np.repeat(lim["q_hi_rad"], T)
        v, acc = np.repeat(lim["dq_max_rad_s"], T), np.repeat(lim["ddq_max_rad_s2"], T)
        A = np.vstack([-g.q, g.q, -g.dq, g.dq, -g.ddq, g.ddq])
        ub = np.concatenate([-q_lo, q_hi, v, v, acc, acc])
        # A x <= ub with x = offset + scale * z  ->  (ub - A offset) - (A scale) z >= 0
        self.G = -A * self.x_scale
        self.h = ub - A @ self.x_offset
        self.constraints = [{"type": "ineq", "fun": lambda z: self.G @ z + self.h,
                             "jac": lambda z: self.G}]
        if zero_start:
            # dq_j(0) = sum_l a_jl = 0 and ddq_j(0) = w sum_l l b_jl = 0
            E = np.zeros((2 * n, self.nx))
            ls = np.arange(1, H + 1)
            for j in range(n):
                E[j, n + j * H: n + (j + 1) * H] = 1.0
                E[n + j, n + n * H + j * H: n + n * H + (j + 1) * H] = ls
            Ez = E * self.x_scale
            self.E = Ez
            self.constraints.append({"type": "eq", "fun": lambda z: Ez @ z, "jac": lambda z: Ez})
        else:
            self.E = None
        self._cache_z: np.ndarray | None = None
        self._cache: tuple[float, np.ndarray] | None = None
        self.n_evals = 0

    # ---- variables

    def to_x(self, z: np.ndarray) -> np.ndarray:
        return self.x_offset + self.x_scale * z

    def to_z(self, x: np.ndarray) -> np.ndarray:
        return (x - self.x_offset) / self.x_scale

    def trajectory(self, z: np.ndarray) -> FourierTrajectory:
        x = self.to_x(z)
        n, H = self.n, self.H
        return FourierTrajectory(self.f, x[:n], x[n:n + n * H].reshape(n, H),
                                 x[n + n * H:].reshape(n, H))

    def from_trajectory(self, traj: FourierTrajectory) -> np.ndarray:
        return self.to_z(np.concatenate([traj.q0_rad, traj.a.ravel(), traj.b.ravel()]))

    # ---- objective

    def _stack(self, q, dq, ddq) -> np.ndarray:
        return self.base.columns(self.regressor.stack(q, dq, ddq))

    def _evaluate(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        """log(cond) and its gradient with respect to z."""
        if self._cache_z is not None and np.array_equal(z, self._cache_z):
            return self._cache
        self.n_evals += 1
        x = self.to_x(z)
        states = self.crit.states(x)
        W = self._stack(*states)
        fg = log_cond_and_grad(W)
        if fg is None:  # a base column vanishes (not excited): worse than any clamped value below
            result = (_LOG_COND_DEGENERATE, np.zeros_like(z))
        else:
            f, Gw = fg
            result = (f, _gradient_through_states(self._stack, self.crit, states, W, Gw, self.fd_step)
                      * self.x_scale)
        self._cache_z, self._cache = z.copy(), result
        return result

    def fun(self, z: np.ndarray) -> float:
        return self._evaluate(z)[0]

    def jac(self, z: np.ndarray) -> np.ndarray:
        return self._evaluate(z)[1]

    # ---- starts

    def random_start(self, rng: np.random.Generator, fill: float) -> np.ndarray:
        """Small random coefficients using about ``fill`` of the (margin) limits on the grid."""
        n, H = self.n, self.H
        x = np.zeros(self.nx)
        lo, hi = self.lim["q_lo_rad"], self.lim["q_hi_rad"]
        centre, half = 0.5 * (hi + lo), 0.5 * (hi - lo)
        x[:n] = centre + rng.uniform(-0.3, 0.3, n) * half
        decay = 1.0 / np.arange(1, H + 1)  # favour low harmonics at the start
        ab = rng.standard_normal((2, n, H)) * decay * self.spec.dq_max_rad_s[:, None]
        if self.E is not None:  # project onto dq(0) = ddq(0) = 0
            xz = np.concatenate([np.zeros(n), ab[0].ravel(), ab[1].ravel()])
            E = self.E / self.x_scale
            xz -= np.linalg.pinv(E) @ (E @ xz)
            ab = np.stack([xz[n:n + n * H].reshape(n, H), xz[n + n * H:].reshape(n, H)])
        x[n:] = ab.reshape(-1)
        # scale the oscillation so the worst constraint uses ``fill`` of its room
        z0 = self.to_z(np.concatenate([x[:n], np.zeros(2 * n * H)]))
        dz = self.to_z(x) - z0
        room = self.G @ z0 + self.h  # >= 0 at the constant trajectory
        use = -(self.G @ dz)
        ratio = np.max(np.where(use > 0, use / np.maximum(room, 1e-300), 0.0))
        scale = fill / ratio if ratio > 0 else 1.0
        return z0 + scale * dz


def _max_feasible_scale(traj: FourierTrajectory, spec: RobotSpec, n_grid: int) -> float:
    """Largest s <= 1 such that q0 + s * oscillation is within the full limits on the grid."""
    t = traj.time_grid(n_grid)
    q, dq, ddq = traj.evaluate(t)
    osc = q - traj.q0_rad
    if np.any(traj.q0_rad < spec.q_min_rad) or np.any(traj.q0_rad > spec.q_max_rad):
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        s_hi = np.where(osc > 0, (spec.q_max_rad - traj.q0_rad) / osc, np.inf)
        s_lo = np.where(osc < 0, (spec.q_min_rad - traj.q0_rad) / osc, np.inf)
        s_v = spec.dq_max_rad_s / np.abs(dq)
        s_a = spec.ddq_max_rad_s2 / np.abs(ddq)
    return float(min(1.0, s_hi.min(), s_lo.min(), s_v.min(), s_a.min()))


def _scaled(traj: FourierTrajectory, s: float) -> FourierTrajectory:
    return FourierTrajectory(traj.base_freq_hz, traj.q0_rad, s * traj.a, s * traj.b, traj.metadata)


def optimise_condition(spec: RobotSpec, regressor, base, n_harmonics: int = 5,
                       base_freq_hz: float = 0.1, n_starts: int = 4, seed: int = 0,
                       n_samples: int = DEFAULT_N_SAMPLES, n_check: int = DEFAULT_N_CONSTRAINT,
                       margin: float = 0.95, maxiter: int = 300, zero_start: bool = False,
                       max_cond: float = 1e4, ftol: float = 1e-6,
                       progress: bool = True) -> DesignResult:
    """Minimise the condition number of the base regressor over Fourier excitations.

    Decision variables: q0 and the coefficients a, b of every joint (scaled by the half
    position range and the velocity limit). The objective is log(cond) of the
    column-normalised base regressor on ``n_samples`` times per period; position,
    velocity and acceleration limits (times ``margin``) are linear constraints on
    ``n_check`` times per period. ``zero_start`` adds dq(0) = ddq(0) = 0 for every joint.

    Every optimised design is re-checked at the FULL limits on a grid
    ``DENSE_CHECK_FACTOR`` x denser; an infeasible one is repaired by shrinking its
    oscillation about q0. Raises :class:`TrajectoryError` when no start gives a feasible
    design with a finite condition number below ``max_cond`` (limits too tight to excite
    the base parameters).
    """
    margin = _check_margin(margin)
    for name, val, least in (("n_harmonics", n_harmonics, 1), ("n_starts", n_starts, 1),
                             ("n_samples", n_samples, 1), ("n_check", n_check, 2),
                             ("maxiter", maxiter, 0)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < least:
            raise ConfigError(f"{name}: expected an integer >= {least}, got {val!r}")
    if not (isinstance(base_freq_hz, (int, float)) and math.isfinite(base_freq_hz) and base_freq_hz > 0):
        raise ConfigError(f"base_freq_hz: expected a positive frequency in Hz, got {base_freq_hz!r}")
    if n_samples * spec.n_joints < base.n_base:
        raise ConfigError(f"n_samples: {n_samples} samples x {spec.n_joints} joints give fewer rows "
                          f"than the {base.n_base} base parameters")
    from scipy.optimize import minimize

    t_start = time.perf_counter()
    prob = _Problem(spec, regressor, base, int(n_harmonics), float(base_freq_hz), int(n_samples),
                    int(n_check), margin, zero_start)
    n_dense = DENSE_CHECK_FACTOR * int(n_check)
    rng = np.random.default_rng(seed)
    history: list[dict[str, Any]] = []
    best: tuple[float, FourierTrajectory] | None = None

    starts = range(int(n_starts))
    bar = None
    if progress:
        from robident_twin.progress import bar as _bar
        bar = _bar(len(starts), f"excitation design ({spec.name}, H={n_harmonics})", progress, unit="start",
                   iterable=starts)
        starts = bar
    for i in starts:
        t0 = time.perf_counter()
        z0 = prob.random_start(rng, fill=rng.uniform(0.3, 0.6))
        cond_start = condition_number(prob.trajectory(z0), regressor, base, n_samples)
        with single_threaded_blas():
            res = minimize(prob.fun, z0, jac=prob.jac, method="SLSQP", constraints=prob.constraints,
                           options={"maxiter": int(maxiter), "ftol": ftol})
        traj = prob.trajectory(res.x)
        repair = 1.0
        if check_limits(traj, spec, n_grid=n_dense):
            repair = _max_feasible_scale(traj, spec, n_dense) * (1.0 - 1e-9)
            traj = _scaled(traj, repair)
        feasible = repair > 0 and not check_limits(traj, spec, n_grid=n_dense)
        if zero_start and feasible:
            _, dq0, ddq0 = traj.evaluate(0.0)
            feasible = bool(np.all(np.abs(dq0) < 1e-6) and np.all(np.abs(ddq0) < 1e-6))
        cond = condition_number(traj, regressor, base, n_samples) if feasible else math.inf
        entry = {"start": i, "cond_start": cond_start, "cond": cond, "feasible": feasible,
                 "repair_scale": repair, "nit": int(res.get("nit", 0)), "success": bool(res.success),
                 "message": str(res.message), "time_s": time.perf_counter() - t0}
        history.append(entry)
        if feasible and math.isfinite(cond) and (best is None or cond < best[0]):
            best = (cond, traj)
        if bar is not None:
            bar.set_postfix(cond=f"{cond:.4g}", best=f"{best[0]:.4g}" if best else "-")
    if bar is not None:
        bar.close()

    elapsed = time.perf_counter() - t_start
    if best is None or best[0] > max_cond:
        summary = "; ".join(
            f"start {h['start']}: {'within limits' if h['feasible'] else 'VIOLATES LIMITS'}, "
            f"cond {h['cond']:.3g}" for h in history)
        if not any(h["feasible"] for h in history):
            reached = "no start gave a design within the limits"
        else:
            best_cond = min(h["cond"] for h in history if h["feasible"])
            reached = (f"the best design within the limits has cond {best_cond:.3g} > max_cond "
                       f"{max_cond:g}, i.e. it does not excite all base parameters")
        raise TrajectoryError(
            f"excitation design for robot '{spec.name}' failed: {reached} (checked at the full "
            f"limits on {n_dense} points per period). The position, velocity and acceleration "
            f"limits (x margin {margin:g}{', with dq(0) = ddq(0) = 0' if zero_start else ''}) are "
            f"too tight for {n_harmonics} harmonic(s) at {base_freq_hz:g} Hz to excite the "
            f"{base.n_base} base parameters; relax the limits or the margin, or change the "
            f"harmonics / base frequency. Per start: {summary}")
    return DesignResult(best[1], best[0], int(n_starts), elapsed, history)
