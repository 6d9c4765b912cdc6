"""Optional stages after the estimation of ``task=identify``: model reduction and physically
consistent standard parameters, configured by ``reduction`` and ``physical`` (conf/config.yaml).

    robident-twin reduction.method=essential          # Xu 2020: RSD > 40 % and |value| < 0.01 removed
    robident-twin reduction.method=ftest              # Jubien 2014: F-test with a KS normality check
    robident-twin physical.method=sdp                 # SDP (pseudo-inertia PSD, friction >= 0)
    robident-twin physical.method=xu                  # Xu 2020 multistart retrieval (bounds around the robot file)

Both work in the weighted system of the estimate (rows divided by each joint's noise std when
the estimate has per-joint variances, as WLS), and both are validated on the held-out
trajectory against the full base-parameter model, per joint. The results go into
``summary.json`` under ``reduction`` and ``physical``.
"""
from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.estimation.config import XuConfig, as_nominal, as_physical, as_reduction
from robident_twin.typed import coerce

REDUCTION_METHODS = ("none", "essential", "ftest")
PHYSICAL_METHODS = ("none", "sdp", "xu")


def _weights(est, n_channels: int) -> np.ndarray | None:
    """Per-channel 1/sigma of the estimate (None: unweighted)."""
    s2 = np.asarray(est.sigma2_joint_Nm2, dtype=float).reshape(-1)
    if s2.size != n_channels or np.any(~np.isfinite(s2)) or np.any(s2 <= 0):
        return None
    return 1.0 / np.sqrt(s2)


def _per_joint(tau_ref_Nm: np.ndarray, tau_Nm: np.ndarray) -> list[float]:
    """RMS of the difference per joint over the RMS of the reference (a fraction)."""
    rms = np.sqrt(np.mean(tau_ref_Nm**2, axis=0))
    return (np.sqrt(np.mean((tau_Nm - tau_ref_Nm) ** 2, axis=0)) / np.where(rms > 0, rms, 1.0)).tolist()


def _nrmse_percent(tau_meas_Nm: np.ndarray, tau_pred_Nm: np.ndarray) -> list[float]:
    rms = np.sqrt(np.mean(tau_meas_Nm**2, axis=0))
    return (100 * np.sqrt(np.mean((tau_meas_Nm - tau_pred_Nm) ** 2, axis=0)) / np.where(rms > 0, rms, 1.0)).tolist()


def run_reduction(cfg, model, est, W: np.ndarray, tau_Nm: np.ndarray, W_val: np.ndarray,
                  tau_val_Nm: np.ndarray) -> dict[str, Any] | None:
    """``reduction.method``: none | essential | ftest (``cfg``: the typed ``reduction`` group,
    :class:`~robident_twin.estimation.config.ReductionConfig`, or a mapping validated as one).
    Returns the summary entry (None for none)."""
    from robident_twin.estimation.estimators import ols
    from robident_twin.estimation.reduction import essential_parameters, f_test_reduction

    cfg = as_reduction(cfg)
    method = cfg.method
    if method not in REDUCTION_METHODS:
        raise ConfigError(f"reduction.method: expected one of {', '.join(REDUCTION_METHODS)}, got '{method}'")
    if method == "none":
        return None
    n = tau_Nm.shape[1]
    w = _weights(est, n)
    Ww, tw = (W, tau_Nm) if w is None else (W * np.tile(w, tau_Nm.shape[0])[:, None], tau_Nm * w)
    names = list(est.names)
    t0 = time.perf_counter()
    if method == "essential":
        red = essential_parameters(Ww, tw, names, rsd_max_percent=cfg.rsd_max_percent, abs_max=cfg.abs_max,
                                   estimator=ols)
    else:
        red = f_test_reduction(Ww, tw, names, alpha=cfg.alpha, ks_alpha=cfg.ks_alpha,
                               on_non_normal=cfg.on_non_normal, estimator=ols)
    dt = time.perf_counter() - t0
    e = red.estimate
    tau_red = (W_val[:, red.keep] @ e.beta).reshape(tau_val_Nm.shape)
    tau_full = (W_val @ est.beta).reshape(tau_val_Nm.shape)
    rsd = e.rsd_percent
    return {
        "method": red.method,
        "weighted": w is not None,
        "n_before": len(names),
        "n_after": int(red.keep.size),
        "removed": list(red.removed),
        "cond_before": float(red.cond_before),
        "cond_after": float(red.cond_after),
        "parameters": [{"name": nm, "estimate": float(b), "std": float(s),
                        "rsd_percent": float(r) if np.isfinite(r) else None}
                       for nm, b, s, r in zip(e.names, e.beta, e.std, rsd)],
        "validation": {"torque_nrmse_percent": _nrmse_percent(tau_val_Nm, tau_red),
                       "base_torque_nrmse_percent": _nrmse_percent(tau_val_Nm, tau_full),
                       "difference_to_base_per_joint": _per_joint(tau_full, tau_red)},
        "settings": {k: (v if not isinstance(v, float) or np.isfinite(v) else None) for k, v in red.extra.items()},
        "time_s": round(dt, 4),
    }


def _xu_bounds(cfg, spec):
    """Bounds around ``spec``'s masses and COMs: the CAD-like nominal model on a twin (whose robot
    file is the truth, :func:`nominal_model`), or the robot file the user names
    (``physical.xu.bounds: robot_file``)."""
    from robident_twin.estimation.physical import XuBounds

    masses = np.array([j.link.mass_kg for j in spec.joints], dtype=float)
    coms = np.array([j.link.com_m for j in spec.joints], dtype=float)
    cfg = cfg if isinstance(cfg, XuConfig) else coerce(XuConfig, cfg or {}, "physical.xu")
    b = XuBounds.around(masses, coms, rel_mass=cfg.rel_mass, com_box_m=cfg.com_box_m, radius_m=cfg.radius_m,
                        total_rel=cfg.total_rel)
    return b


def nominal_model(spec, nominal_cfg=None):
    """The CAD-like nominal robot the estimators may use (priors, bounds): the robot file
    perturbed as :func:`robident_twin.model.nominal.cad_nominal` does (``export.nominal``).
    Built with the model, before any twin runs: on a twin the robot file is the truth, which
    only the ground-truth comparison reads afterwards."""
    from robident_twin.model.nominal import cad_nominal

    c = as_nominal(nominal_cfg)  # ``export.nominal`` (NominalConfig)
    try:
        return cad_nominal(spec, seed=c.seed, mass_rel=c.mass_rel, com_m=c.com_m, inertia_rel=c.inertia_rel)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"export.nominal: {exc}") from exc


def _true_links(reg, nb: int):
    """The truth's link blocks, for the ground-truth comparison only."""
    from robident_twin.estimation.physical import link_blocks

    return link_blocks(reg.true_parameters(), nb)


def run_physical(cfg, model, est, W: np.ndarray, tau_Nm: np.ndarray, W_val: np.ndarray,
                 tau_val_Nm: np.ndarray, q_all_rad: np.ndarray, is_simulation: bool,
                 nominal=None, reduction: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """``physical.method``: none | sdp | xu. Returns the summary entry (None for none).

    sdp: :func:`robident_twin.estimation.physical.sdp_consistent` with the estimate's covariance
    (``physical.reg_weight``, ``physical.prior``: none, nominal (the CAD-like ``nominal`` robot)
    or robot_file (the robot file named by the user; on a twin that is the truth)). xu:
    :func:`robident_twin.estimation.physical.xu_retrieval`, bounds around the nominal robot's masses and
    COMs (``physical.xu.bounds: nominal | robot_file``), residuals weighted per joint like the
    estimate. ``nominal``: the CAD-like robot (:func:`nominal_model`; None: built here from the
    robot file with the default perturbation). ``reduction``: the summary entry of
    :func:`run_reduction`; when it is Xu's essential set (``reduction.method=essential``), the Xu
    retrieval fits the torques with the essential parameters' regressor only (Xu 2020: Y_e pi_e),
    as the paper does; its summary entry then names the set (``essential_set``)."""
    from robident_twin.estimation.physical import (
        check_consistency,
        link_blocks,
        link_physical,
        min_mass_matrix_eigenvalue,
        n_bodies,
        sdp_consistent,
        xu_retrieval,
    )

    cfg = as_physical(cfg)  # the typed ``physical`` group (PhysicalConfig; a mapping is validated as one)
    method = cfg.method
    if method not in PHYSICAL_METHODS:
        raise ConfigError(f"physical.method: expected one of {', '.join(PHYSICAL_METHODS)}, got '{method}'")
    if method == "none":
        return None
    reg, base = model.regressor, model.base
    if method == "sdp":
        prior_kind = cfg.prior
        if prior_kind not in ("none", "nominal", "robot_file"):
            raise ConfigError(f"physical.prior: expected none, nominal or robot_file, got '{prior_kind}'")
        prior = None
        if prior_kind == "robot_file":
            prior = reg.true_parameters()
        elif prior_kind == "nominal":
            prior = _nominal_parameters(reg, model.spec if nominal is None else None, nominal)
        res = sdp_consistent(reg, base, est.beta, est.cov, prior=prior,
                             reg_weight=cfg.reg_weight, eps_pd=cfg.eps_pd)
    else:
        xcfg = cfg.xu
        w = _weights(est, tau_Nm.shape[1])
        where = xcfg.bounds
        if where not in ("nominal", "robot_file"):
            raise ConfigError(f"physical.xu.bounds: expected nominal or robot_file, got '{where}'")
        around = model.spec if where == "robot_file" else (nominal or nominal_model(model.spec))
        keep = None
        if reduction and reduction.get("method") == "essential":
            removed = set(reduction["removed"])
            keep = np.array([i for i, nm in enumerate(est.names) if nm not in removed], dtype=int)
        res = xu_retrieval(reg, base, W, tau_Nm, _xu_bounds(xcfg, around), keep=keep,
                           n_starts=xcfg.n_starts, seed=xcfg.seed, maxiter=xcfg.maxiter,
                           time_limit_s=xcfg.time_limit_s,
                           sigma2_joint_Nm2=None if w is None else 1.0 / w**2)
    chi = res.chi
    rep = check_consistency(reg, chi)
    nb = n_bodies(reg)
    true_links = _true_links(reg, nb) if is_simulation else None
    links = []
    for i, link in enumerate(link_blocks(chi, nb)):
        ph = link_physical(link)
        entry = {"link": i + 1, "mass_kg": ph["mass_kg"], "com_m": np.asarray(ph["com_m"]).tolist(),
                 "inertia_com_kgm2": np.asarray(ph["inertia_com_kgm2"]).tolist(),
                 "min_pseudo_inertia_eig": float(rep.min_pseudo_inertia_eig[i]),
                 "triangle_ok": bool(rep.triangle_ok[i])}
        if true_links is not None:
            tp = link_physical(true_links[i])
            entry["true"] = {"mass_kg": tp["mass_kg"], "com_m": np.asarray(tp["com_m"]).tolist(),
                             "inertia_com_kgm2": np.asarray(tp["inertia_com_kgm2"]).tolist()}
        links.append(entry)
    other = {nm: float(chi[k]) for k, nm in enumerate(reg.names) if k >= 10 * nb}
    try:
        lam = min_mass_matrix_eigenvalue(reg, chi, q_all_rad)
    except ConfigError as exc:  # e.g. measurement=both: no single mass matrix
        lam, lam_note = None, str(exc)
    else:
        lam_note = None
    tau_phys = (W_val @ (base.K @ chi)).reshape(tau_val_Nm.shape)
    tau_base = (W_val @ est.beta).reshape(tau_val_Nm.shape)
    out = {
        "method": res.method,
        "objective": float(res.objective),
        "solve_time_s": round(float(res.solve_time_s), 4),
        "consistent": bool(rep.ok),
        "nonneg_drive_friction_ok": bool(rep.nonneg_drive_friction_ok),
        "min_mass_matrix_eigenvalue_kgm2": lam,
        "links": links,
        "drive_friction": other,
        "max_abs_base_mismatch": float(np.max(np.abs(res.base_mismatch))),
        # the retrieved set mapped back to the base parameters against the estimate, in its std
        "max_base_difference_over_std": float(np.max(np.abs(base.K @ chi - est.beta) / np.sqrt(np.diag(est.cov)))),
        "validation": {
            "measure": "difference_to_base_per_joint = RMS(tau_physical - tau_base) / RMS(tau_base) per joint "
                       "on the validation trajectory",
            "difference_to_base_per_joint": _per_joint(tau_base, tau_phys),
            "difference_to_base_overall": float(np.linalg.norm(tau_phys - tau_base) / np.linalg.norm(tau_base)),
            "torque_nrmse_percent": _nrmse_percent(tau_val_Nm, tau_phys),
            "base_torque_nrmse_percent": _nrmse_percent(tau_val_Nm, tau_base),
        },
        "extra": {k: v for k, v in res.extra.items() if isinstance(v, (int, float, str))},
    }
    if lam_note:
        out["min_mass_matrix_eigenvalue_note"] = lam_note
    if method == "xu":
        out["essential_set"] = None if keep is None else {
            "n_fitted": int(keep.size), "n_base": int(base.n_base),
            "removed": list(reduction["removed"])}
    return out


def _nominal_parameters(reg, spec=None, nominal=None) -> np.ndarray:
    """The nominal robot's standard vector in the identification regressor's layout."""
    from robident_twin.model.regressor import Regressor

    nom = nominal if nominal is not None else nominal_model(spec)
    nreg = Regressor(nom, reg.options)
    values = dict(zip(nreg.names, nreg.true_parameters()))  # the nominal has no drive / friction terms:
    return np.array([values.get(name, 0.0) for name in reg.names])  # those stay zero
