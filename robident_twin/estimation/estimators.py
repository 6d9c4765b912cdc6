"""Estimators of the base parameters: OLS, WLS (per joint / per sample), IDIM-IV,
maximum likelihood (Swevers' errors-in-variables form) and TLS.

Rows of the stacked system are sample-major (row k*n + j is joint j of sample
k), as built by :meth:`robident_twin.model.regressor.Regressor.stack`.

OLS (Gautier): sigma^2 = ||y - W beta||^2 / (r - b), cov = sigma^2 (W'W)^-1.
WLS: each joint's rows are divided by that joint's noise standard deviation.
The per-joint variances come either from the spread between periods of a
periodic recording (``weights="period"``, Swevers; cov = (W' S^-1 W)^-1 is
then the Cramer-Rao bound for Gaussian torque noise) or from the per-joint
OLS residuals (``weights="residual"``, Gautier's two-step WLS).
The reduced chi-square of the weighted residuals is reported: near 1 the
noise model explains the residuals; well above 1 the model misses something.
"""
from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field

import numpy as np

from robident_twin.errors import ConfigError, IdentificationError


@dataclass(frozen=True)
class Estimate:
    """Result of an estimator. ``beta`` is in the base-parameter order of ``names``."""

    method: str
    names: tuple[str, ...]
    beta: np.ndarray
    cov: np.ndarray
    residuals_Nm: np.ndarray  # samples x joints
    sigma2_joint_Nm2: np.ndarray  # per-joint noise variance used for the covariance
    cond: float  # condition number of the column-normalised (weighted) regressor
    chi2_per_dof: float
    extra: dict = field(default_factory=dict)

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(np.diag(self.cov))

    @property
    def rsd_percent(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return 100.0 * self.std / np.abs(self.beta)

    @property
    def residual_rms_Nm(self) -> np.ndarray:
        return np.sqrt(np.mean(self.residuals_Nm**2, axis=0))

    @property
    def durbin_watson(self) -> np.ndarray:
        """Durbin-Watson statistic of the residuals per joint (about 2 when white)."""
        from robident_twin.processing.signal import durbin_watson

        return durbin_watson(self.residuals_Nm)


def check_rank(W: np.ndarray, names, tol: float = 1e-10) -> float:
    """Condition number of the column-normalised regressor; a clear error naming the
    parameters that the data do not excite when it is rank deficient."""
    return _rank_of(W, np.linalg.norm(W, axis=0), names, tol)


def _rank_of(A: np.ndarray, norms: np.ndarray, names, tol: float = 1e-10) -> float:
    """:func:`check_rank` of a regressor W with column norms ``norms``, from ``A`` = W or any matrix
    with the same singular values and right singular vectors (its triangular factor R, W = QR)."""
    dead = [names[i] for i in np.flatnonzero(norms <= tol * max(norms.max(), 1e-300))]
    if dead:
        raise IdentificationError(f"the regressor is rank deficient: the data do not excite "
                                  f"{', '.join(dead)} (zero columns)")
    Wn = A / norms
    s = np.linalg.svd(Wn, compute_uv=False)  # the singular vectors only for the error (half the CPU)
    if s[-1] <= tol * s[0]:
        _, s, Vt = np.linalg.svd(Wn, full_matrices=False)
        null = Vt[s <= tol * s[0]]
        involved = np.flatnonzero(np.max(np.abs(null), axis=0) > 0.1)
        raise IdentificationError(
            f"the regressor is rank deficient ({int(np.sum(s <= tol * s[0]))} direction(s) not "
            f"excited); parameters involved: {', '.join(names[i] for i in involved)}")
    return float(s[0] / s[-1])


def _solve(W: np.ndarray, y: np.ndarray):
    Q, R = np.linalg.qr(W)
    beta = np.linalg.solve(R, Q.T @ y)
    Rinv = np.linalg.inv(R)
    return beta, Rinv @ Rinv.T


def _checked_solve(W: np.ndarray, y: np.ndarray, names, tol: float = 1e-10):
    """:func:`check_rank` and :func:`_solve` from one factorisation, W = QR: the singular values
    (and right singular vectors) of R are those of W, so the condition number and the rank check
    come from the small n x n R instead of an SVD of the tall W. Returns (cond, beta, cov): beta and
    cov are :func:`_solve`'s bit for bit, cond equals :func:`check_rank`'s to rounding
    (tests/test_estimators.py). (A QR of [W | y] without Q would save the forming of Q too, but
    moves the smallest estimates by up to 8e-12 of their value: not taken.)"""
    norms = np.linalg.norm(W, axis=0)
    if W.shape[0] < W.shape[1]:  # not tall: R is not square
        return _rank_of(W, norms, names, tol), *_solve(W, y)
    Q, R = np.linalg.qr(W)
    cond = _rank_of(R, norms, names, tol)
    beta = np.linalg.solve(R, Q.T @ y)
    Rinv = np.linalg.inv(R)
    return cond, beta, Rinv @ Rinv.T


def ols(W: np.ndarray, tau_Nm: np.ndarray, names) -> Estimate:
    """Ordinary least squares. ``tau_Nm`` is samples x joints."""
    N, n = tau_Nm.shape
    y = tau_Nm.reshape(-1)
    cond, beta, inv = _checked_solve(W, y, names)
    r = (y - W @ beta).reshape(N, n)
    dof = y.size - beta.size
    if dof <= 0:
        raise IdentificationError(f"{y.size} equations for {beta.size} parameters: not enough samples")
    sigma2 = float(np.sum(r**2) / dof)
    return Estimate("ols", tuple(names), beta, sigma2 * inv, r, np.full(n, sigma2), cond, 1.0)


def wls(W: np.ndarray, tau_Nm: np.ndarray, names, sigma2_joint_Nm2: np.ndarray | None = None,
        weights: str = "period", sigma2_sample_Nm2: np.ndarray | None = None, var_window: int = 1) -> Estimate:
    """Weighted least squares with per-joint weights 1/sigma_j.

    ``weights="period"`` uses ``sigma2_joint_Nm2`` (variance of the averaged torque
    estimated from the periods); ``"residual"`` estimates it from OLS residuals;
    ``"sample"`` weights every sample and joint by 1/variance (ICMA 2020 eq. 7),
    ``sigma2_sample_Nm2`` (samples x joints) from the spread between repetitions."""
    N, n = tau_Nm.shape
    y = tau_Nm.reshape(-1)
    if weights == "sample":
        return wls_sample(W, tau_Nm, names, sigma2_sample_Nm2, var_window)
    if weights == "period":
        if sigma2_joint_Nm2 is None:
            raise ConfigError("estimator.weights=period needs the per-period noise variance; the data "
                              "have a single period: use estimator.weights=residual")
        s2 = np.asarray(sigma2_joint_Nm2, dtype=float)
    elif weights == "residual":
        first = ols(W, tau_Nm, names)
        dof_j = N - W.shape[1] / n
        s2 = np.sum(first.residuals_Nm**2, axis=0) / max(dof_j, 1.0)
    else:
        raise ConfigError(f"estimator.weights: expected 'period', 'residual' or 'sample', got '{weights}'")
    if s2.shape != (n,) or np.any(~np.isfinite(s2)) or np.any(s2 <= 0):
        raise IdentificationError(f"WLS needs a positive noise variance per joint, got {s2.tolist()} "
                                  "(noise-free data: use estimator=ols)")
    w = np.tile(1.0 / np.sqrt(s2), N)
    Ww = W * w[:, None]
    yw = y * w
    cond, beta, cov = _checked_solve(Ww, yw, names)
    r = (y - W @ beta).reshape(N, n)
    dof = y.size - beta.size
    chi2 = float(np.sum((r.reshape(-1) * w) ** 2) / dof)
    return Estimate(f"wls-{weights}", tuple(names), beta, cov, r, s2, cond, chi2)


def _dof(y: np.ndarray, b: int) -> int:
    dof = y.size - b
    if dof <= 0:
        raise IdentificationError(f"{y.size} equations for {b} parameters: not enough samples")
    return dof


def wls_sample(W: np.ndarray, tau_Nm: np.ndarray, names, sigma2_sample_Nm2: np.ndarray | None,
               var_window: int = 1) -> Estimate:
    """WLS with a weight 1/variance per sample and joint (ICMA 2020 eq. 7).

    ``sigma2_sample_Nm2`` (samples x joints) is the variance of each (averaged) torque
    sample, e.g. from the spread between repetitions. With that variance known,
    cov = (W' S^-1 W)^-1 and the reduced chi-square should be near 1.

    With few repetitions M the per-sample variance estimates are very noisy (chi-square
    with M-1 dof: E[sigma^2 / s^2] = (M-1)/(M-3), infinite for M <= 3), which makes the
    weights erratic and the covariance too optimistic. ``var_window`` > 1 smooths the
    variances with a circular moving average over that many samples (the noise level
    changes slowly along a trajectory); ICMA 2020 used 50 repetitions instead."""
    N, n = tau_Nm.shape
    if sigma2_sample_Nm2 is None:
        raise ConfigError("estimator.weights=sample needs the per-sample torque variance "
                          "(IdentificationData.tau_var_sample_Nm2), which needs >= 2 periods; "
                          "use estimator.weights=residual")
    s2 = np.asarray(sigma2_sample_Nm2, dtype=float)
    if s2.shape != (N, n):
        raise IdentificationError(f"per-sample variance has shape {s2.shape}, expected {(N, n)}")
    if np.any(~np.isfinite(s2)) or np.any(s2 <= 0):
        k, j = (int(v) for v in np.argwhere(~(np.isfinite(s2) & (s2 > 0)))[0])
        raise IdentificationError(f"per-sample WLS needs positive variances; sample {k}, joint {j + 1} "
                                  f"has {s2[k, j]} (noise-free or quantised data: use estimator=ols)")
    if int(var_window) > 1:
        from scipy.ndimage import uniform_filter1d

        s2 = uniform_filter1d(s2, size=int(var_window), axis=0, mode="wrap")
    y = tau_Nm.reshape(-1)
    w = 1.0 / np.sqrt(s2.reshape(-1))
    Ww = W * w[:, None]
    cond = check_rank(Ww, names)
    beta, cov = _solve(Ww, y * w)
    r = (y - W @ beta).reshape(N, n)
    chi2 = float(np.sum((r.reshape(-1) * w) ** 2) / _dof(y, beta.size))
    return Estimate("wls-sample", tuple(names), beta, cov, r, s2.mean(axis=0), cond, chi2)


def iv(W: np.ndarray, tau_Nm: np.ndarray, names, instruments, max_iter: int = 20, tol: float = 1e-9,
       sigma2_joint_Nm2: np.ndarray | None = None, beta0: np.ndarray | None = None) -> Estimate:
    """Instrumental variables, IDIM-IV (Gautier, Janot, Vandanjon 2013).

    ``instruments`` is the stacked base regressor Z built from the *simulated* model's
    (q, dq, ddq) -- noise free, hence uncorrelated with the measurement errors in W -- or a
    callable ``instruments(beta) -> Z`` that simulates the model with the current estimate.
    Starting from OLS (or ``beta0``), beta = (Z'W)^-1 Z'y is iterated until the relative change
    is below ``tol`` or ``max_iter`` steps (``extra``: iterations, last change, converged). Optional per-joint variances weight the rows (IV on the WLS system).
    Covariance: sigma^2 (Z'W)^-1 Z'Z (W'Z)^-1."""
    N, n = tau_Nm.shape
    y = tau_Nm.reshape(-1)
    w = np.ones(y.size) if sigma2_joint_Nm2 is None else np.tile(1.0 / np.sqrt(np.asarray(sigma2_joint_Nm2, float)), N)
    Ww, yw = W * w[:, None], y * w
    cond = check_rank(Ww, names)
    beta = _solve(Ww, yw)[0] if beta0 is None else np.asarray(beta0, dtype=float).copy()
    make_Z = instruments if callable(instruments) else (lambda _b: instruments)
    it, change = 0, np.inf
    for it in range(1, int(max_iter) + 1):
        Z = np.asarray(make_Z(beta), dtype=float)
        if Z.shape != W.shape:
            raise IdentificationError(f"IV instruments have shape {Z.shape}, the regressor {W.shape}")
        Zw = Z * w[:, None]
        check_rank(Zw, names)
        A = Zw.T @ Ww
        new = np.linalg.solve(A, Zw.T @ yw)
        change = float(np.linalg.norm(new - beta) / max(np.linalg.norm(new), 1e-300))
        beta = new
        if change < tol or not callable(instruments):
            break
    r = (y - W @ beta).reshape(N, n)
    dof = _dof(y, beta.size)
    sigma2 = float(np.sum((r.reshape(-1) * w) ** 2) / dof)
    Ainv = np.linalg.inv(A)
    cov = sigma2 * Ainv @ (Zw.T @ Zw) @ Ainv.T
    s2j = np.full(n, sigma2) if sigma2_joint_Nm2 is None else sigma2 * np.asarray(sigma2_joint_Nm2, float)
    return Estimate("iv", tuple(names), beta, cov, r, s2j, cond,
                    sigma2 if sigma2_joint_Nm2 is not None else 1.0,
                    extra={"iterations": it, "last_relative_change": change,
                           "converged": bool(change < tol) if callable(instruments) else True})


def _forward_dynamics_fn(regressor, base, beta: np.ndarray):
    """ddq = f(q, dq, tau) of the model with base parameters beta (pinocchio CRBA + RNEA on a
    model copy with a standard vector reproducing beta, plus drive inertia and friction)."""
    import pinocchio as pin

    from robident_twin.estimation.physical import pinocchio_model_with
    from robident_twin.model.dynamics import symmetric_from_upper

    spec = regressor.spec
    if regressor.n_channels != regressor.n_joints or spec.is_coupled or spec.spring_joints:
        raise ConfigError("closed-loop simulation: supported for one torque channel per joint, independent "
                          "drives and no springs")
    chi = _anchor_standard(regressor, base, beta)
    model = pinocchio_model_with(regressor, chi)
    data = model.createData()
    n = regressor.n_joints

    def per_joint(*prefixes):
        v = regressor.per_joint(chi, *prefixes)
        return np.zeros(n) if v is None else v

    ia, fv, fc = per_joint("Ia"), per_joint("Fv", "Fvm"), per_joint("Fc", "Fcm")
    off = per_joint("OFF", "OFFJ")
    eps = spec.coulomb_smoothing_rad_s
    z = np.zeros(n)

    def f(q, dq, tau):
        M = pin.crba(model, data, q)
        M = symmetric_from_upper(M) + np.diag(ia)
        h = pin.rnea(model, data, q, dq, z) + fv * dq + fc * np.tanh(dq / eps) + off
        return np.linalg.solve(M, tau - h)

    return f


def simulate_closed_loop(regressor, base, beta: np.ndarray, q_ref_rad: np.ndarray, dq_ref_rad_s: np.ndarray,
                         control_rate_hz: float, kp: np.ndarray, kd: np.ndarray,
                         tau_ff_Nm: np.ndarray | None = None, record_every: int = 1, substeps: int = 1):
    """Simulate the identified model (base parameters ``beta``) under the robot's joint PD
    controller running at ``control_rate_hz``: u_k = ff_k + kp (q_ref_k - q) + kd (dq_ref_k - dq),
    held over each control period, RK4 with ``substeps`` steps per period, starting on the
    reference. ``q_ref_rad``/``dq_ref_rad_s`` are sampled at the control rate;
    ``tau_ff_Nm`` is the controller's feed-forward at the same rate (None: pure PD).

    The simulated model must be the actuated plant (a motor-torque model, whose drive
    inertia makes the joint dynamics well conditioned). Returns (q, dq, ddq, u) at every
    ``record_every``-th control sample (samples x joints)."""
    from robident_twin.estimation.integrate import rk4_step

    N, n = q_ref_rad.shape
    f = _forward_dynamics_fn(regressor, base, beta)
    ff = np.zeros((N, n)) if tau_ff_Nm is None else np.asarray(tau_ff_Nm, dtype=float)
    q, v = np.array(q_ref_rad[0], dtype=float), np.array(dq_ref_rad_s[0], dtype=float)
    keep = np.arange(0, N, max(1, int(record_every)))
    Q, V, A, U = (np.empty((keep.size, n)) for _ in range(4))
    h = 1.0 / (float(control_rate_hz) * max(1, int(substeps)))
    r = 0
    for k in range(N):
        u = ff[k] + kp * (q_ref_rad[k] - q) + kd * (dq_ref_rad_s[k] - v)
        a1 = f(q, v, u)
        if r < keep.size and keep[r] == k:
            Q[r], V[r], A[r], U[r] = q, v, a1, u
            r += 1
        for s in range(max(1, int(substeps))):  # the torque held over the period
            q, v = rk4_step(f, q, v, h, u, u, u, None if s else a1)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))) or np.max(np.abs(q)) > 1e3:
            raise IdentificationError(f"closed-loop simulation of the model diverged at control sample {k} "
                                      "(raise control_rate_hz or substeps, or check that the estimate has a "
                                      "positive-definite mass matrix)")
    return Q, V, A, U


def closed_loop_instruments(regressor, base, q_ref_rad, dq_ref_rad_s, control_rate_hz, kp, kd,
                            tau_ff_Nm=None, record_every: int = 1, substeps: int = 1):
    """IDIM-IV instruments (Gautier, Janot, Vandanjon 2013): a callable beta -> base
    regressor built from the states of the model simulated in closed loop with the
    current estimate (see :func:`simulate_closed_loop`)."""
    def instruments(beta):
        q, dq, ddq, _ = simulate_closed_loop(regressor, base, beta, q_ref_rad, dq_ref_rad_s, control_rate_hz,
                                             kp, kd, tau_ff_Nm, record_every, substeps)
        return base.columns(regressor.stack(q, dq, ddq))

    return instruments


def tls(W: np.ndarray, tau_Nm: np.ndarray, names) -> Estimate:
    """Total least squares on the column-normalised system [W y] (for comparison).

    The TLS solution is the right singular vector of the smallest singular value of
    the normalised [W y]; the covariance reported is the OLS-form sigma^2 (W'W)^-1 with
    the TLS residuals (an approximation)."""
    N, n = tau_Nm.shape
    y = tau_Nm.reshape(-1)
    cond = check_rank(W, names)
    A = np.column_stack([W, y])
    s = np.linalg.norm(A, axis=0)
    _, _, Vt = np.linalg.svd(A / s, full_matrices=False)
    v = Vt[-1]
    if abs(v[-1]) < 1e-14:
        raise IdentificationError("TLS: the torque column is orthogonal to the smallest singular "
                                  "direction (no TLS solution); use estimator=ols")
    beta = -(v[:-1] / s[:-1]) / (v[-1] / s[-1])
    r = (y - W @ beta).reshape(N, n)
    sigma2 = float(np.sum(r**2) / _dof(y, beta.size))
    _, inv = _solve(W, y)
    return Estimate("tls", tuple(names), beta, sigma2 * inv, r, np.full(n, sigma2), cond, 1.0)


# --------------------------------------------------------------------------- maximum likelihood


def fourier_basis(t_s: np.ndarray, base_freq_hz: float, n_harmonics: int):
    """Basis of a finite Fourier series and its derivatives at times ``t_s``:
    q(t) = Phi c with c = [q0, s_1..s_H, c_1..c_H] (coefficients of sin(l w t), cos(l w t)).
    Returns (Phi, dPhi, ddPhi), each samples x (2H+1)."""
    t = np.asarray(t_s, dtype=float).reshape(-1, 1)
    wl = 2 * np.pi * float(base_freq_hz) * np.arange(1, int(n_harmonics) + 1)
    s, c = np.sin(t * wl), np.cos(t * wl)
    one = np.ones_like(t)
    Phi = np.hstack([one, s, c])
    dPhi = np.hstack([0 * one, c * wl, -s * wl])
    ddPhi = np.hstack([0 * one, -s * wl**2, -c * wl**2])
    return Phi, dPhi, ddPhi


def _anchor_standard(regressor, base, beta: np.ndarray) -> np.ndarray:
    """A standard vector with K chi = beta: masses 1 kg in the non-base entries (so the
    pinocchio model is well defined), base entries solved. Its dynamics are exactly those
    of beta (only K chi enters the torques)."""
    p = len(regressor.names)
    anchor = np.zeros(p)
    anchor[regressor.columns("M")] = 1.0
    chi = anchor.copy()
    chi[base.base_index] += beta - base.K @ anchor
    return chi


def _dynamics_derivatives(regressor, base, beta: np.ndarray, q, dq, ddq):
    """d tau / d(q, dq, ddq), each samples x channel x joints, of the measured channel at base
    parameters ``beta`` (:class:`~robident_twin.estimation.model_dynamics.ModelDynamics`: links,
    drives, couplings, springs, friction, offsets, an attached payload)."""
    from robident_twin.estimation.model_dynamics import ModelDynamics

    o = regressor.options
    if o.measurement not in ("joint_torque", "motor_torque"):
        raise ConfigError(f"ML: supported for measurement joint_torque or motor_torque (one torque channel per "
                          f"joint), got {o.measurement} on {regressor.spec.name}")
    return ModelDynamics(regressor, base, beta).derivatives(q, dq, ddq)


def _levenberg_marquardt(fun, jac, x0: np.ndarray, max_iter: int = 50, ftol: float = 1e-8,
                         lam0: float = 1e-3):
    """Small Levenberg-Marquardt loop (Marquardt's diagonal scaling) on residuals fun(x)
    with Jacobian jac(x). Stops when the relative cost decrease of an accepted step is
    below ``ftol``. Returns (x, n_function_evaluations, converged)."""
    x = np.array(x0, dtype=float)
    r = fun(x)
    cost = float(r @ r)
    lam, nfev = lam0, 1
    for _ in range(int(max_iter)):
        J = jac(x)
        g = J.T @ r
        A = J.T @ J
        d = np.maximum(np.diag(A), 1e-300)
        while True:
            try:
                step = -np.linalg.solve(A + lam * np.diag(d), g)
            except np.linalg.LinAlgError:
                lam *= 10.0
                continue
            r_new = fun(x + step)
            nfev += 1
            cost_new = float(r_new @ r_new)
            if cost_new <= cost:
                break
            lam *= 10.0
            if lam > 1e12 or nfev >= max_iter * 5:
                return x, nfev, False
        decrease = (cost - cost_new) / max(cost, 1e-300)
        x, r, cost = x + step, r_new, cost_new
        lam = max(lam / 10.0, 1e-12)
        if decrease < ftol:
            return x, nfev, True
    return x, nfev, False


def ml_errors_in_variables(regressor, base, t_s: np.ndarray, q_meas_rad: np.ndarray, tau_Nm: np.ndarray,
                           base_freq_hz: float, n_harmonics: int, sigma_q_rad, sigma_tau_Nm,
                           beta0: np.ndarray | None = None, max_nfev: int = 50, ftol: float = 1e-6) -> Estimate:
    """Maximum likelihood in Swevers' (1997) errors-in-variables form.

    Both the measured positions and the torques are noisy (independent Gaussian noise,
    per-joint standard deviations ``sigma_q_rad`` and ``sigma_tau_Nm``). The unknowns are
    the base parameters beta AND the Fourier coefficients of the true periodic trajectory
    (``n_harmonics`` harmonics of ``base_freq_hz`` per joint); the negative log-likelihood

        sum_kj (q_kj - Phi_k c_j)^2 / sigma_qj^2 + (tau_kj - [W_b(q(c), dq(c), ddq(c)) beta]_kj)^2 / sigma_tauj^2

    is minimised by Levenberg-Marquardt (:func:`_levenberg_marquardt`, exact Jacobian from
    pinocchio's RNEA derivatives). Starts from the Fourier fit of the measured
    q and OLS on it. The covariance is the beta block of (J'J)^-1 (Cramer-Rao bound when the
    noise levels are right; ``chi2_per_dof`` near 1 checks them)."""
    q_meas = np.asarray(q_meas_rad, dtype=float)
    tau = np.asarray(tau_Nm, dtype=float)
    N, n = q_meas.shape
    if tau.shape != (N, n):
        raise IdentificationError(f"ML: torque has shape {tau.shape}, positions {q_meas.shape}")
    sq = np.broadcast_to(np.asarray(sigma_q_rad, dtype=float), (n,)).copy()
    st = np.broadcast_to(np.asarray(sigma_tau_Nm, dtype=float), (n,)).copy()
    if np.any(~(sq > 0)) or np.any(~(st > 0)):
        raise IdentificationError(f"ML needs positive noise levels, got sigma_q_rad={sq.tolist()}, "
                                  f"sigma_tau_Nm={st.tolist()}")
    Phi, dPhi, ddPhi = fourier_basis(t_s, base_freq_hz, n_harmonics)
    m = Phi.shape[1]
    if N * n <= m * n + base.n_base:
        raise IdentificationError(f"ML: {N} samples are too few for {m * n} trajectory and {base.n_base} model parameters")
    C0, *_ = np.linalg.lstsq(Phi, q_meas, rcond=None)  # m x n
    names = base.names

    def states(C):
        return Phi @ C, dPhi @ C, ddPhi @ C

    def Wb(C):
        return base.columns(regressor.stack(*states(C)))

    if beta0 is None:
        beta0 = ols(Wb(C0), tau, names).beta
    b = base.n_base
    x0 = np.concatenate([beta0, C0.T.reshape(-1)])
    wq, wt = np.tile(1 / sq, N), np.tile(1 / st, N)
    cache = {}

    def unpack(x):
        return x[:b], x[b:].reshape(n, m).T

    def fun(x):
        beta, C = unpack(x)
        W = Wb(C)
        cache["W"] = (x.copy(), W)
        rq = (Phi @ C - q_meas).reshape(-1) * wq
        rt = (W @ beta - tau.reshape(-1)) * wt
        return np.concatenate([rq, rt])

    def jac(x):
        beta, C = unpack(x)
        if "W" in cache and np.array_equal(cache["W"][0], x):
            W = cache["W"][1]
        else:
            W = Wb(C)
        q, dq, ddq = states(C)
        Dq, Dv, Da = _dynamics_derivatives(regressor, base, beta, q, dq, ddq)
        # d tau[k, j] / d c[l, i] = Dq[k,j,i] Phi[k,l] + Dv[k,j,i] dPhi[k,l] + Da[k,j,i] ddPhi[k,l]
        Jc = (np.einsum("kji,kl->kjil", Dq, Phi) + np.einsum("kji,kl->kjil", Dv, dPhi)
              + np.einsum("kji,kl->kjil", Da, ddPhi)).reshape(N * n, n * m)
        Jq = np.zeros((N, n, n, m))
        Jq[:, np.arange(n), np.arange(n), :] = Phi[:, None, :]
        Jq = Jq.reshape(N * n, n * m)
        top = np.hstack([np.zeros((N * n, b)), Jq * wq[:, None]])
        bottom = np.hstack([W * wt[:, None], Jc * wt[:, None]])
        return np.vstack([top, bottom])

    cond = check_rank(Wb(C0) * wt[:, None], names)
    x, nfev, status = _levenberg_marquardt(fun, jac, x0, max_iter=max_nfev, ftol=ftol)
    beta, C = unpack(x)
    J = jac(x)
    r_all = fun(x)
    dof = 2 * N * n - x0.size
    chi2 = float(r_all @ r_all / dof)
    try:
        cov_all = np.linalg.inv(J.T @ J)
    except np.linalg.LinAlgError as exc:
        raise IdentificationError(f"ML: singular information matrix ({exc})") from None
    W = Wb(C)
    r = tau - (W @ beta).reshape(N, n)
    q_hat = Phi @ C
    return Estimate("ml", tuple(names), beta, cov_all[:b, :b], r, st**2, cond, chi2,
                    extra={"q_hat_rad": q_hat, "fourier_coefficients": C, "nfev": nfev,
                           "converged": status, "q_residual_rms_rad": np.sqrt(np.mean((q_meas - q_hat) ** 2, axis=0))})


# --------------------------------------------------------------------------- dispatch

ESTIMATORS = ("ols", "wls", "iv", "ml", "tls", "didim")


@dataclass(frozen=True)
class _EstimatorOptions:
    """The numeric knobs :func:`estimate` reads from the estimator's config."""
    var_window: int = 1
    max_iter: int = 20
    tol: float | None = None
    max_nfev: int = 50

    @classmethod
    def of(cls, options) -> "_EstimatorOptions":
        """From the typed estimator option (``robident_twin.estimation.config``; the knobs it has) or, on
        the Python API, a mapping of some of these knobs (the others keep this function's defaults)."""
        if options is None:
            return cls()
        if not dataclasses.is_dataclass(options):
            options = types.SimpleNamespace(**options)
        kw = {f.name: getattr(options, f.name) for f in dataclasses.fields(cls) if getattr(options, f.name, None) is not None}
        return cls(**kw)


def estimate(method: str, W: np.ndarray, tau_Nm: np.ndarray, names, sigma2_joint_Nm2=None,
             weights: str = "period", *, sigma2_sample_Nm2=None, context=None, options=None) -> Estimate:
    """Dispatch by estimator name (``ols``, ``wls``, ``iv``, ``ml`` or ``tls``).

    ``context`` carries what IV and ML need beyond (W, tau) (see :func:`estimator_context`):
    ``instruments`` for IV; ``regressor``, ``base``, ``t_s``, ``q_meas_rad``, ``tau_ml_Nm``,
    ``base_freq_hz``, ``n_harmonics``, ``sigma_q_rad``, ``sigma_tau_Nm`` for ML.
    ``options`` are the remaining estimator config keys (``max_iter``, ``max_nfev``, ``var_window``)."""
    context = dict(context or {})
    options = _EstimatorOptions.of(options)
    if method == "ols":
        return ols(W, tau_Nm, names)
    if method == "wls":
        return wls(W, tau_Nm, names, sigma2_joint_Nm2, weights, sigma2_sample_Nm2,
                   options.var_window)
    if method == "tls":
        return tls(W, tau_Nm, names)
    s2 = sigma2_joint_Nm2 if weights == "period" and sigma2_joint_Nm2 is not None else None
    if method in ("iv", "didim") and s2 is not None and not np.all(np.asarray(s2, float) > 0):
        raise IdentificationError(f"{method.upper()} weighted by the period variance needs a positive variance per "
                                  f"joint, got {np.asarray(s2).tolist()} (noise-free data: use estimator.weights=null)")
    max_iter, tol = options.max_iter, options.tol  # tol None: the function's own default (conf/estimator: 1e-6)
    beta0 = context.get("beta0")
    if method in ("iv", "didim") and beta0 is None and context.get("start_instruments") is not None:
        # start the closed-loop iterations from IV with the reference's regressor as instruments
        # (an OLS start from noisy states may not be a simulable model)
        beta0 = iv(W, tau_Nm, names, context["start_instruments"], sigma2_joint_Nm2=s2).beta
    if method == "iv":
        if context.get("instruments") is None:
            raise ConfigError("estimator=iv needs instruments from the simulated model (context['instruments'])")
        e = iv(W, tau_Nm, names, context["instruments"], max_iter, 1e-9 if tol is None else float(tol),
               sigma2_joint_Nm2=s2, beta0=beta0)
        e.extra["model_loop"] = context.get("model_loop")
        return e
    if method == "didim":
        sim = context.get("simulated_regressor") or context.get("instruments")
        if not callable(sim):
            raise ConfigError("estimator=didim needs the model simulated in closed loop "
                              "(context['simulated_regressor']: beta -> simulated base regressor, e.g. "
                              "robident_twin.estimation.closed_loop_sim.ModelLoop)")
        from robident_twin.estimation.didim import didim

        e = didim(W, tau_Nm, names, sim, max_iter, 1e-8 if tol is None else float(tol), sigma2_joint_Nm2=s2,
                  beta0=beta0)
        e.extra["model_loop"] = context.get("model_loop")
        return e
    if method == "ml":
        need = ("regressor", "base", "t_s", "q_meas_rad", "tau_ml_Nm", "base_freq_hz", "n_harmonics",
                "sigma_q_rad", "sigma_tau_Nm")
        missing = [k for k in need if context.get(k) is None]
        if missing:
            raise ConfigError(f"estimator=ml: missing context field(s) {missing} (a periodic Fourier "
                              "excitation with >= 2 periods is needed)")
        return ml_errors_in_variables(context["regressor"], context["base"], context["t_s"],
                                      context["q_meas_rad"], context["tau_ml_Nm"], context["base_freq_hz"],
                                      context["n_harmonics"], context["sigma_q_rad"], context["sigma_tau_Nm"],
                                      max_nfev=options.max_nfev)
    raise ConfigError(f"estimator.name: expected one of {ESTIMATORS}, got '{method}'")


def estimator_context(est_cfg, model, data, recording=None, trajectory=None, decimate: int = 1,
                      controller=None) -> dict:
    """What IV, DIDIM and ML need in the pipeline, built from the periodic recording.

    IV and DIDIM (``estimator.instruments: closed_loop``, the default): the model simulated in
    closed loop along the reference with the robot's controller (``controller``, a
    :class:`~robident_twin.estimation.closed_loop_sim.LoopController`) and the current estimate
    (:class:`~robident_twin.estimation.closed_loop_sim.ModelLoop`), started from IV with the
    reference's regressor as instruments. ``instruments: reference`` (IV only): the Fourier
    reference's regressor as fixed instruments, one step.
    ML: the period-averaged raw positions and torques (all of them by default; subsampled
    to at most ``estimator.max_samples`` when set), the noise std of the averages from the spread between
    periods, the design's base frequency and harmonics."""
    from robident_twin.processing.signal import average_periods

    from robident_twin.estimation.config import as_estimator

    est_cfg = as_estimator(est_cfg)  # the typed ``estimator`` option (a mapping is validated as one)
    name = est_cfg.name
    if name not in ("iv", "ml", "didim") or recording is None or trajectory is None:
        return {}
    P, M = recording.period_samples, recording.n_periods
    if P is None or M is None:
        raise ConfigError(f"estimator={name} in the pipeline needs a periodic recording")
    k = max(1, int(decimate))
    t = np.arange(P)[::k] / recording.sample_rate_hz
    if name in ("iv", "didim"):
        q, dq, ddq = trajectory.evaluate(t)
        Z_ref = model.base.columns(model.regressor.stack(q, dq, ddq))
        if name == "iv" and est_cfg.instruments == "reference":
            return {"instruments": Z_ref}
        if controller is None:
            raise ConfigError(f"estimator={name} simulates the model in closed loop with the robot's controller; "
                              "this backend has no controller model: give estimator.kp_Nm_rad and "
                              "estimator.kd_Nms_rad (per joint)")
        from robident_twin.estimation.closed_loop_sim import ModelLoop

        loop = ModelLoop(model.regressor, model.base, trajectory.evaluate, t, controller,
                         est_cfg.sim_rate_hz, est_cfg.lead_s)
        return {"instruments": loop, "simulated_regressor": loop, "start_instruments": Z_ref, "model_loop": loop}
    if M < 2:
        raise ConfigError("estimator=ml needs >= 2 periods to estimate the position and torque noise")
    q_mean, q_var = average_periods(recording.q_rad, P, M)
    tau_mean, tau_var = average_periods(recording.torque(data.measurement), P, M)
    max_samples = est_cfg.max_samples  # None (default): every period-averaged sample (the schema: >= 1)
    stride = 1 if max_samples is None else max(1, int(np.ceil(P / int(max_samples))))
    sl = slice(None, None, stride)
    res = model.spec.encoder_resolution_rad
    sq = np.sqrt(np.maximum(q_var.mean(axis=0), res**2 / 12.0 / M))
    st = np.sqrt(tau_var.mean(axis=0))
    return {"regressor": model.regressor, "base": model.base, "t_s": np.arange(P)[sl] / recording.sample_rate_hz,
            "q_meas_rad": q_mean[sl], "tau_ml_Nm": tau_mean[sl], "base_freq_hz": trajectory.base_freq_hz,
            "n_harmonics": trajectory.n_harmonics, "sigma_q_rad": sq, "sigma_tau_Nm": st}
