"""Physically consistent standard parameters from identified base parameters.

Link parameters are in the regressor's Khalil order per link,
``XX XY XZ YY YZ ZZ MX MY MZ M`` (inertia about the link-frame origin, first
moments, mass), followed by the per-joint drive inertia / friction columns.

A link is physically consistent iff its pseudo-inertia matrix

    J = [[Sigma, h], [h', m]],   Sigma = tr(I)/2 * 1 - I   (second moment of the mass)

is positive (semi)definite (Wensing, Kim, Slotine 2017); this implies m > 0, a
positive-definite inertia and the triangle inequalities of its principal moments.

(a) :func:`sdp_consistent`: a semidefinite program (cvxpy + Clarabel): one PSD
    pseudo-inertia per link, drive inertia and friction >= 0, and K chi close to
    the identified beta in the covariance-weighted norm, plus a small regulariser
    toward a nominal (CAD) prior that fixes the unidentifiable directions.
(b) :func:`xu_retrieval`: Xu et al. 2020's framework: multistart constrained
    nonlinear optimisation (SLSQP) over physical parameters (mass, COM, and the
    Cholesky factor of the normalised second moment, which guarantees consistency
    including the triangle inequalities), bounds, a total-mass range, objective
    ||tau - Y_e pi_e(mu)||.
:func:`min_mass_matrix_eigenvalue` reports the smallest eigenvalue of M(q) over
data for any standard parameter set.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from robident_twin.errors import ConfigError, IdentificationError
from robident_twin.model.dynamics import symmetric_from_upper
from robident_twin.model.regressor import PIN_FROM_KHALIL

N_LINK = 10
#: standard parameters that must be non-negative (drive inertia, viscous and Coulomb friction)
NONNEG_KINDS = ("Ia", "Fv", "Fc", "Fvm", "Fcm")


# --------------------------------------------------------------------------- helpers


def link_blocks(chi: np.ndarray, n_bodies: int) -> np.ndarray:
    """The n_bodies x 10 link parameters (Khalil order) of a standard vector."""
    return np.asarray(chi, dtype=float)[: N_LINK * n_bodies].reshape(n_bodies, N_LINK)


def n_bodies(regressor) -> int:
    """Bodies with ten inertial parameters in the regressor (links, plus a payload)."""
    return regressor.n_bodies


def _require_links(regressor, what: str) -> None:
    if n_bodies(regressor) == 0:
        raise ConfigError(f"{what}: the model has no link parameters (model.measurement="
                          f"{regressor.options.measurement})")


def inertia_matrix(link: np.ndarray) -> np.ndarray:
    """3x3 inertia about the link-frame origin from Khalil link parameters."""
    XX, XY, XZ, YY, YZ, ZZ = link[:6]
    return np.array([[XX, XY, XZ], [XY, YY, YZ], [XZ, YZ, ZZ]])


def pseudo_inertia(link: np.ndarray) -> np.ndarray:
    """4x4 pseudo-inertia [[tr(I)/2 - I, h], [h', m]] of a link (Khalil parameters)."""
    I = inertia_matrix(link)
    J = np.zeros((4, 4))
    J[:3, :3] = 0.5 * np.trace(I) * np.eye(3) - I
    J[:3, 3] = J[3, :3] = link[6:9]
    J[3, 3] = link[9]
    return J


def link_physical(link: np.ndarray) -> dict:
    """Mass (kg), COM (m) and inertia about the COM (kg m^2) of Khalil link parameters."""
    m = float(link[9])
    c = link[6:9] / m if m != 0 else np.full(3, np.nan)
    Ic = inertia_matrix(link) - m * (np.dot(c, c) * np.eye(3) - np.outer(c, c))
    return {"mass_kg": m, "com_m": c, "inertia_com_kgm2": Ic}


def pinocchio_model_with(regressor, chi: np.ndarray):
    """A copy of the regressor's pinocchio model carrying the link parameters of ``chi``
    (any values with non-zero masses; physical consistency is not required)."""
    import pinocchio as pin

    from robident_twin.model.regressor import payload_transform

    _require_links(regressor, "pinocchio model")
    model = pin.Model(regressor.model)
    nb = n_bodies(regressor)
    links = link_blocks(chi, nb)[: regressor.n_joints].copy()
    if nb > regressor.n_joints and regressor.spec.payload_attached:
        links[-1] = links[-1] + payload_transform(regressor.spec) @ link_blocks(chi, nb)[-1]
    for i, link in enumerate(links):
        if link[9] == 0:
            raise IdentificationError(f"link {i + 1} has zero mass: it cannot be put into a pinocchio model")
        v = np.empty(N_LINK)
        v[PIN_FROM_KHALIL] = link
        model.inertias[i + 1] = pin.Inertia.FromDynamicParameters(v)
    return model


def _drive_inertia(regressor, chi: np.ndarray) -> np.ndarray:
    """Joint-side drive inertia per joint (independent drives only)."""
    ia = regressor.per_joint(chi, "Ia")
    return np.zeros(regressor.n_joints) if ia is None else ia


def mass_matrices(regressor, chi: np.ndarray, q_rad: np.ndarray) -> np.ndarray:
    """M(q) (samples x n x n) of standard parameters chi, drive inertia included.

    Pinocchio CRBA on a model copy carrying chi; if a link mass is zero (e.g. a base
    vector padded with zeros) M is built column by column from the regressor instead."""
    import pinocchio as pin

    q = np.atleast_2d(np.asarray(q_rad, dtype=float))
    N, n = q.shape
    out = np.empty((N, n, n))
    _require_links(regressor, "mass matrix")
    if regressor.n_channels != n:
        raise ConfigError(f"mass matrix: needs a model with one torque channel per joint, got "
                          f"measurement={regressor.options.measurement}")
    if np.all(link_blocks(chi, n_bodies(regressor))[:, 9] != 0) and not regressor.spec.is_coupled:
        model = pinocchio_model_with(regressor, chi)
        data = model.createData()
        for k in range(N):
            M = pin.crba(model, data, q[k])
            out[k] = symmetric_from_upper(M)
        out += np.diag(_drive_inertia(regressor, chi))
        return out
    z = np.zeros_like(q)
    tau0 = (regressor.stack(q, z, z) @ chi).reshape(N, n)
    for i in range(n):
        e = z.copy()
        e[:, i] = 1.0
        out[:, :, i] = (regressor.stack(q, z, e) @ chi).reshape(N, n) - tau0
    return 0.5 * (out + out.transpose(0, 2, 1))


def min_mass_matrix_eigenvalue(regressor, chi: np.ndarray, q_rad: np.ndarray) -> float:
    """Smallest eigenvalue of M(q) (kg m^2) over all samples of q_rad for standard parameters chi."""
    return float(np.min(np.linalg.eigvalsh(mass_matrices(regressor, chi, q_rad))))


def standard_from_base(base, beta: np.ndarray, anchor: np.ndarray | None = None) -> np.ndarray:
    """A standard vector with K chi = beta: ``anchor`` (default zeros) in the non-base entries."""
    chi = np.zeros(base.K.shape[1]) if anchor is None else np.array(anchor, dtype=float)
    chi[base.base_index] += beta - base.K @ chi
    return chi


def _param_kinds(regressor) -> dict[str, np.ndarray]:
    return {prefix: regressor.columns(prefix) for prefix in ("Ia", "Fv", "Fc", "Fvm", "Fcm", "OFF", "OFFJ", "KS")}


@dataclass
class ConsistencyReport:
    """Which physical constraints a standard vector satisfies (tolerance ``tol``)."""

    min_pseudo_inertia_eig: np.ndarray  # per link, kg m^2 (>= 0: consistent)
    masses_kg: np.ndarray
    triangle_ok: np.ndarray  # per link
    nonneg_drive_friction_ok: bool
    ok: bool


def check_consistency(regressor, chi: np.ndarray, tol: float = 1e-9) -> ConsistencyReport:
    """Pseudo-inertia PSD, positive masses, triangle inequalities of the central inertia,
    non-negative drive inertia and friction."""
    links = link_blocks(chi, n_bodies(regressor))
    eigs = np.array([np.linalg.eigvalsh(pseudo_inertia(l)).min() for l in links])
    tri = []
    for l in links:
        if l[9] <= 0:
            tri.append(False)
            continue
        ev = np.linalg.eigvalsh(link_physical(l)["inertia_com_kgm2"])
        tri.append(bool(ev.min() >= -tol and ev[0] + ev[1] >= ev[2] - tol))
    kinds = _param_kinds(regressor)
    idx = np.concatenate([kinds[k] for k in NONNEG_KINDS])
    nonneg = bool(np.all(chi[idx] >= -tol)) if idx.size else True
    ok = bool(np.all(eigs >= -tol) and np.all(links[:, 9] > 0) and all(tri) and nonneg)
    return ConsistencyReport(eigs, links[:, 9].copy(), np.array(tri), nonneg, ok)


# --------------------------------------------------------------------------- (a) SDP


def _pseudo_inertia_map() -> np.ndarray:
    """16 x 10 matrix T with vec(pseudo_inertia(link)) = T @ link (column-major vec)."""
    T = np.zeros((16, N_LINK))
    for k in range(N_LINK):
        e = np.zeros(N_LINK)
        e[k] = 1.0
        T[:, k] = pseudo_inertia(e).reshape(-1, order="F")
    return T


def _lift_pseudo_inertias(chi: np.ndarray, n: int, eps_pd: float) -> np.ndarray:
    """Make every link's pseudo-inertia >= eps_pd exactly (the interior-point solver meets the
    LMI only to its tolerance, ~1e-11): J + d I raises its smallest eigenvalue by d; in link
    parameters that is M += d and XX, YY, ZZ += 2 d (a change of the order of the tolerance)."""
    chi = chi.copy()
    for i in range(n):
        link = chi[N_LINK * i:N_LINK * (i + 1)]
        d = eps_pd * (1.0 + 1e-9) - float(np.linalg.eigvalsh(pseudo_inertia(link)).min())
        if d > 0:
            link[[0, 3, 5]] += 2.0 * d
            link[9] += d
    return chi


@dataclass
class PhysicalResult:
    """Standard parameters chi (regressor order) with how they were obtained."""

    method: str
    chi: np.ndarray
    objective: float
    solve_time_s: float
    base_mismatch: np.ndarray  # K chi - beta
    extra: dict = field(default_factory=dict)


def _whitener(cov: np.ndarray | None, b: int, beta: np.ndarray) -> np.ndarray:
    """L^-1 with cov = L L' (covariance-weighted norm); identity scaled by |beta| without cov."""
    if cov is None:
        return np.diag(1.0 / np.maximum(np.abs(beta), 1e-3 * max(np.abs(beta).max(), 1e-12)))
    import scipy.linalg

    cov = np.asarray(cov, dtype=float)
    if cov.shape != (b, b):
        raise ConfigError(f"covariance has shape {cov.shape}, expected {(b, b)}")
    cov = 0.5 * (cov + cov.T)
    d = np.sqrt(np.maximum(np.diag(cov), 1e-300))
    try:
        L = np.linalg.cholesky(cov / np.outer(d, d))
    except np.linalg.LinAlgError:
        raise IdentificationError("covariance of the base parameters is not positive definite") from None
    return scipy.linalg.solve_triangular(L, np.diag(1.0 / d), lower=True)


def _prior_scale(regressor, prior: np.ndarray) -> np.ndarray:
    """Per-parameter scale of the regulariser: |prior| with floors per unit."""
    floors = {"kg m^2": 1e-3, "kg m": 1e-2, "kg": 0.1, "N m s/rad": 1e-2, "N m": 1e-2}
    f = np.array([floors.get(u, 1e-2) for u in regressor.units])
    return np.maximum(np.abs(prior), f)


def sdp_consistent(regressor, base, beta: np.ndarray, cov: np.ndarray | None = None,
                   prior: np.ndarray | None = None, reg_weight: float = 1e-3, mode: str = "weighted",
                   eps_pd: float = 1e-6, mass_bounds_kg: tuple[np.ndarray, np.ndarray] | None = None,
                   verbose: bool = False) -> PhysicalResult:
    """Semidefinite program for physically consistent standard parameters (cvxpy + Clarabel).

    minimise   ||L^-1 (K chi - beta)||^2 + reg_weight * ||(chi - prior) / scale||^2
    subject to pseudo_inertia_i(chi) >= eps_pd * I (each link), Ia, Fv, Fc >= 0,
               optional per-link mass bounds,
    with cov = L L' (``mode="weighted"``), or K chi = beta exactly (``mode="equality"``,
    then only the regulariser is minimised). ``prior`` is a nominal (CAD) standard vector;
    without it the regulariser pulls toward zero (minimum norm). Returns the standard vector."""
    import cvxpy as cp

    _require_links(regressor, "SDP")
    n = n_bodies(regressor)
    p = len(regressor.names)
    b = base.n_base
    beta = np.asarray(beta, dtype=float)
    if beta.shape != (b,):
        raise ConfigError(f"beta has shape {beta.shape}, expected ({b},)")
    if mode not in ("weighted", "equality"):
        raise ConfigError(f"physical.mode: expected 'weighted' or 'equality', got '{mode}'")
    prior = np.zeros(p) if prior is None else np.asarray(prior, dtype=float)
    scale = _prior_scale(regressor, prior)
    t0 = time.perf_counter()
    chi = cp.Variable(p)
    cons = []
    T = _pseudo_inertia_map()  # 16 x 10: vec(J) (column-major) = T @ link
    for i in range(n):
        Ti = np.zeros((16, p))
        Ti[:, N_LINK * i:N_LINK * (i + 1)] = T
        J = cp.reshape(Ti @ chi, (4, 4), order="F")
        cons.append(J - eps_pd * np.eye(4) >> 0)
        if mass_bounds_kg is not None:
            cons += [chi[N_LINK * i + 9] >= mass_bounds_kg[0][i], chi[N_LINK * i + 9] <= mass_bounds_kg[1][i]]
    kinds = _param_kinds(regressor)
    nonneg = np.concatenate([kinds[k] for k in NONNEG_KINDS]).astype(int)
    if nonneg.size:
        cons.append(chi[nonneg] >= 0)
    reg = cp.sum_squares(cp.multiply(1.0 / scale, chi - prior))
    Linv = _whitener(cov, b, beta)
    if mode == "weighted":
        A = Linv @ base.K
        fit = cp.sum_squares(A @ chi - Linv @ beta)
        obj = fit + reg_weight * reg
    else:
        cons.append(base.K @ chi == beta)
        obj = reg
    prob = cp.Problem(cp.Minimize(obj), cons)
    try:
        prob.solve(solver=cp.CLARABEL, verbose=verbose)
    except cp.error.SolverError as exc:
        raise IdentificationError(f"SDP for physical consistency failed: {exc}") from None
    if prob.status not in ("optimal", "optimal_inaccurate") or chi.value is None:
        raise IdentificationError(f"SDP for physical consistency: solver status '{prob.status}'"
                                  + (" (K chi = beta is not reachable by consistent parameters: use "
                                     "mode='weighted')" if mode == "equality" else ""))
    x = _lift_pseudo_inertias(np.asarray(chi.value, dtype=float), n, eps_pd)
    dt = time.perf_counter() - t0
    fit_val = float(np.sum((Linv @ (base.K @ x - beta)) ** 2))
    return PhysicalResult("sdp", x, float(prob.value), dt, base.K @ x - beta,
                          extra={"status": prob.status, "fit_weighted": fit_val,
                                 "solver_time_s": float(prob.solver_stats.solve_time or np.nan)})


# --------------------------------------------------------------------------- (b) Xu 2020


@dataclass(frozen=True)
class XuBounds:
    """Bounds of Xu 2020's retrieval, per link (arrays of n) unless noted.

    mass_kg: (lo, hi); com_m: (lo, hi) each n x 3 (COM in the link frame);
    radius_m: upper bound of the entries of the Cholesky factor of the normalised
    second moment (about the gyration radius, m); total_mass_kg: (lo, hi) of the sum;
    fv/fc: (lo, hi) of the friction parameters; max_inertia_ratio: Xu's
    max(I)/min(I) <= 100 on the central principal moments (None: off)."""

    mass_kg: tuple[np.ndarray, np.ndarray]
    com_m: tuple[np.ndarray, np.ndarray]
    radius_m: np.ndarray
    total_mass_kg: tuple[float, float]
    fv: tuple[float, float] = (0.0, 5.0)
    fc: tuple[float, float] = (0.0, 5.0)
    ia: tuple[float, float] = (0.0, 5.0)
    offset_abs: float = 50.0
    max_inertia_ratio: float | None = 100.0

    @staticmethod
    def around(masses_kg: np.ndarray, com_m: np.ndarray, rel_mass: float = 0.5, com_box_m: float = 0.1,
               radius_m: float = 0.2, total_rel: float = 0.1) -> "XuBounds":
        """Bounds around nominal (e.g. CAD) masses and COMs: mass within +-rel_mass,
        COM within +-com_box_m, total mass within +-total_rel of the nominal sum."""
        m = np.asarray(masses_kg, dtype=float)
        c = np.asarray(com_m, dtype=float)
        tot = float(m.sum())
        return XuBounds(((1 - rel_mass) * m, (1 + rel_mass) * m), (c - com_box_m, c + com_box_m),
                        np.full(m.size, radius_m), ((1 - total_rel) * tot, (1 + total_rel) * tot))


def _chol_index():
    return np.array([0, 1, 1, 2, 2, 2]), np.array([0, 0, 1, 0, 1, 2])


def link_params_from_mu(mu: np.ndarray) -> np.ndarray:
    """Khalil link parameters (..., 10) of physical parameters mu (..., 10) =
    [m, cx, cy, cz, l11, l21, l22, l31, l32, l33]: mass, COM (m) and the lower Cholesky
    factor L (m) of the normalised central second moment S = L L' (so the central
    second moment is m S, and the central inertia m (tr(S) 1 - S) satisfies the triangle
    inequalities by construction). Vectorised over leading dimensions."""
    mu = np.asarray(mu, dtype=float)
    m = mu[..., 0]
    c = mu[..., 1:4]
    L = np.zeros(mu.shape[:-1] + (3, 3))
    r, col = _chol_index()
    L[..., r, col] = mu[..., 4:10]
    S = L @ np.swapaxes(L, -1, -2)
    trS = np.trace(S, axis1=-2, axis2=-1)
    eye = np.eye(3)
    Ic = m[..., None, None] * (trS[..., None, None] * eye - S)
    cc = np.einsum("...i,...j->...ij", c, c)
    Io = Ic + m[..., None, None] * (np.einsum("...ii->...", cc)[..., None, None] * eye - cc)
    out = np.empty(mu.shape[:-1] + (N_LINK,))
    out[..., 0], out[..., 1], out[..., 2] = Io[..., 0, 0], Io[..., 0, 1], Io[..., 0, 2]
    out[..., 3], out[..., 4], out[..., 5] = Io[..., 1, 1], Io[..., 1, 2], Io[..., 2, 2]
    out[..., 6:9] = m[..., None] * c
    out[..., 9] = m
    return out


@dataclass
class _XuProblem:
    regressor: object
    base: object
    R: np.ndarray  # upper-triangular factor of the (essential) base regressor
    qty: np.ndarray  # Q' tau
    const: float  # ||tau||^2 - ||Q' tau||^2
    keep: np.ndarray  # base parameters kept (essential)
    n: int
    extra_idx: np.ndarray  # standard indices of the non-link parameters (linear, after the links)
    scale: float = 1.0  # f and grad are divided by it (SLSQP stops early on a badly scaled objective)

    def chi(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        lead = x.shape[:-1]
        p = len(self.regressor.names)
        out = np.zeros(lead + (p,))
        links = link_params_from_mu(x[..., : N_LINK * self.n].reshape(lead + (self.n, N_LINK)))
        out[..., : N_LINK * self.n] = links.reshape(lead + (N_LINK * self.n,))
        out[..., self.extra_idx] = x[..., N_LINK * self.n:]
        return out

    def residual(self, x: np.ndarray) -> np.ndarray:
        pi_e = (self.chi(x) @ self.base.K.T)[..., self.keep]
        return pi_e @ self.R.T - self.qty

    def f(self, x: np.ndarray) -> float:
        r = self.residual(x)
        return float(r @ r) / self.scale

    def grad(self, x: np.ndarray, h: float = 1e-7) -> np.ndarray:
        r = self.residual(x)
        X = x[None, :] + h * np.eye(x.size)
        Jr = (self.residual(X) - r[None, :]) / h  # (n_mu, b)
        return 2.0 * Jr @ r / self.scale


def xu_retrieval(regressor, base, W_base: np.ndarray, tau_Nm: np.ndarray, bounds: XuBounds,
                 keep: np.ndarray | None = None, n_starts: int = 20, seed: int = 0,
                 maxiter: int = 300, time_limit_s: float | None = None,
                 sigma2_joint_Nm2: np.ndarray | None = None) -> PhysicalResult:
    """Xu et al. 2020 retrieval of physically consistent link parameters.

    minimise f(mu) = ||tau - Y_e pi_e(mu)|| over mu = per link [m, COM, Cholesky factor of
    the normalised second moment] plus drive inertia / friction, subject to the bounds,
    sum(m) in ``bounds.total_mass_kg`` (linear inequalities) and, if set, Xu's
    max/min principal-moment ratio; consistency and the triangle inequalities hold by the
    parametrisation. ``keep`` selects the essential base parameters (default all). SLSQP
    from ``n_starts`` uniform random starts in the bounds (seeded); the best is returned.
    The objective uses Y_e = Q R once (||tau - Y_e pi||^2 = ||Q'tau - R pi||^2 + const).

    ``sigma2_joint_Nm2`` (per-joint torque noise variance, as for WLS): weight every joint's
    residual by 1/sigma_j. Without it the norm is in Nm, so the wrist joints (torques of a
    few tenths of a Nm beside tens of Nm at the shoulder) hardly count and their small
    inertias are fitted poorly; with it the retrieval matches a WLS estimate joint by joint."""
    from scipy.optimize import minimize

    _require_links(regressor, "Xu retrieval")
    n = regressor.n_joints
    if n_bodies(regressor) != n:
        raise ConfigError("Xu retrieval: models with a payload body are not supported (identify without "
                          "model.payload)")
    tau = np.asarray(tau_Nm, dtype=float).reshape(-1)
    keep = np.arange(base.n_base) if keep is None else np.asarray(keep, dtype=int)
    Ye = np.asarray(W_base, dtype=float)[:, keep]
    if Ye.shape[0] != tau.size:
        raise ConfigError(f"Xu retrieval: regressor has {Ye.shape[0]} rows, torques {tau.size}")
    if sigma2_joint_Nm2 is not None:
        s2 = np.asarray(sigma2_joint_Nm2, dtype=float).reshape(-1)
        n_ch = np.asarray(tau_Nm).shape[-1] if np.ndim(tau_Nm) == 2 else s2.size
        if s2.size != n_ch or tau.size % n_ch or np.any(~np.isfinite(s2)) or np.any(s2 <= 0):
            raise ConfigError(f"Xu retrieval: sigma2_joint_Nm2 must hold one positive variance per torque "
                              f"channel ({n_ch}), got {s2.tolist()}")
        w = np.tile(1.0 / np.sqrt(s2), tau.size // n_ch)
        Ye, tau = Ye * w[:, None], tau * w
    Q, R = np.linalg.qr(Ye)
    qty = Q.T @ tau
    const = float(tau @ tau - qty @ qty)
    kinds = _param_kinds(regressor)
    extra_idx = np.arange(N_LINK * n, len(regressor.names))
    prob = _XuProblem(regressor, base, R, qty, const, keep, n, extra_idx, scale=max(float(qty @ qty), 1e-300))
    lo, hi = [], []
    for i in range(n):
        lo += [bounds.mass_kg[0][i], *bounds.com_m[0][i]]
        hi += [bounds.mass_kg[1][i], *bounds.com_m[1][i]]
        rad = float(bounds.radius_m[i])
        lo += [1e-4 * rad, -rad, 1e-4 * rad, -rad, -rad, 1e-4 * rad]
        hi += [rad, rad, rad, rad, rad, rad]
    kind_of = {int(i): k for k, idx in kinds.items() for i in idx}
    kb = {"Ia": bounds.ia, "Fv": bounds.fv, "Fvm": bounds.fv, "Fc": bounds.fc, "Fcm": bounds.fc}
    for i in extra_idx:
        bb = kb.get(kind_of.get(int(i), ""), (-bounds.offset_abs, bounds.offset_abs))
        lo.append(bb[0])
        hi.append(bb[1])
    lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
    if np.any(lo > hi):
        raise ConfigError("Xu retrieval: a lower bound exceeds its upper bound")
    mass_idx = np.arange(n) * N_LINK
    cons = [{"type": "ineq", "fun": lambda x: np.sum(x[mass_idx]) - bounds.total_mass_kg[0],
             "jac": lambda x: np.isin(np.arange(x.size), mass_idx).astype(float)},
            {"type": "ineq", "fun": lambda x: bounds.total_mass_kg[1] - np.sum(x[mass_idx]),
             "jac": lambda x: -np.isin(np.arange(x.size), mass_idx).astype(float)}]
    if bounds.max_inertia_ratio is not None:
        ratio = float(bounds.max_inertia_ratio)
        r_idx, c_idx = _chol_index()

        def inertia_ratio(x):
            """ratio * d_a - d_b >= 0 for all pairs: d = central moments / m about the link axes."""
            x = np.asarray(x, dtype=float)
            L = np.zeros(x.shape[:-1] + (n, 3, 3))
            L[..., r_idx, c_idx] = x[..., :N_LINK * n].reshape(x.shape[:-1] + (n, N_LINK))[..., 4:10]
            S = L @ np.swapaxes(L, -1, -2)
            d = np.trace(S, axis1=-2, axis2=-1)[..., None] - np.diagonal(S, axis1=-2, axis2=-1)
            out = np.concatenate([ratio * d - np.roll(d, 1, axis=-1), ratio * d - np.roll(d, 2, axis=-1)], axis=-1)
            return out.reshape(x.shape[:-1] + (-1,))

        def inertia_ratio_jac(x, h=1e-7):
            g0 = inertia_ratio(x)
            return ((inertia_ratio(x[None, :] + h * np.eye(x.size)) - g0[None, :]) / h).T

        cons.append({"type": "ineq", "fun": inertia_ratio, "jac": inertia_ratio_jac})
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    best, results = None, []
    for s in range(int(n_starts)):
        if time_limit_s is not None and time.perf_counter() - t0 > time_limit_s and best is not None:
            break
        x0 = rng.uniform(lo, hi)
        tot = x0[mass_idx].sum()
        target = np.clip(tot, *bounds.total_mass_kg)
        x0[mass_idx] = np.clip(x0[mass_idx] * target / tot, lo[mass_idx], hi[mass_idx])
        res = minimize(prob.f, x0, jac=prob.grad, method="SLSQP", bounds=list(zip(lo, hi)),
                       constraints=cons, options={"maxiter": int(maxiter), "ftol": 1e-12})
        feas = all(np.all(c["fun"](res.x) >= -1e-6) for c in cons) and np.all(res.x >= lo - 1e-9) \
            and np.all(res.x <= hi + 1e-9)
        results.append((res.fun * prob.scale, feas))
        if feas and (best is None or res.fun < best.fun):
            best = res
    if best is None:
        raise IdentificationError(f"Xu retrieval: none of {len(results)} starts reached a feasible point "
                                  "(check the bounds and the total-mass range)")
    dt = time.perf_counter() - t0
    chi = prob.chi(best.x)
    obj = float(np.sqrt(max(best.fun * prob.scale + const, 0.0)))
    return PhysicalResult("xu2020", chi, obj, dt, (base.K @ chi)[keep] - np.linalg.lstsq(Ye, tau, rcond=None)[0],
                          extra={"mu": best.x, "n_starts": len(results),
                                 "start_objectives": [float(np.sqrt(max(f + const, 0))) for f, _ in results],
                                 "feasible_starts": int(sum(ok for _, ok in results)),
                                 "ls_objective": float(np.sqrt(max(const, 0.0)))})
