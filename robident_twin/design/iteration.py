"""Swevers' iteration: redesign the excitation at each new parameter estimate.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from robident_twin.design.constraints import (
    DesignConstraints,
    check_design,
    torque_limit_model,
)
from robident_twin.design.criteria import covariance_log10_det, design_criterion
from robident_twin.design.fourier import DEFAULT_N_SAMPLES, FourierTrajectory
from robident_twin.design.optimise import optimise_design
from robident_twin.model.robot import RobotSpec

# --------------------------------------------------------------------------- Swevers' iteration


@dataclass
class IterationStep:
    """One step of :func:`swevers_iteration`: the design, the estimate it produced and the
    criterion (log10 det covariance with the noise then assumed). ``log10_det_cov_prior``: the
    design's log10 det covariance at the PREVIOUS estimate (the one it was designed for; None for
    the first design); ``kept_previous``: the redesign was not better there, so the previous
    design was kept."""

    design: FourierTrajectory
    beta: np.ndarray
    noise_std_Nm: np.ndarray
    log10_det_cov: float
    log10_det_cov_prior: float | None = None
    kept_previous: bool = False
    time_s: float = 0.0


def swevers_iteration(spec: RobotSpec, regressor, base, estimate, n_iterations: int = 2,
                      criterion: str = "dopt", constraints: DesignConstraints | None = None,
                      rel_tol: float = 1e-3, first_criterion: str = "cond",
                      **design_kw) -> list[IterationStep]:
    """Swevers 1997: design by ``first_criterion`` (the condition number), estimate, then redesign
    with the bound (covariance criterion, noise weights and nominal torques) at the new estimate;
    repeat until the criterion changes by less than ``rel_tol`` or ``n_iterations`` redesigns.

    ``estimate(traj) -> (beta_hat, noise_std_hat_Nm)`` runs an experiment with the design and
    estimates the base parameters and per-channel noise std (e.g. on the twin,
    :func:`robident_twin.design.task.twin_estimator`). A redesign starts from the previous design
    too; when it is not better than the previous design at the estimate (and the previous design
    meets every constraint under the new nominal model), the previous design is kept."""
    constraints = constraints or DesignConstraints()
    n_samples = design_kw.get("n_samples", DEFAULT_N_SAMPLES)
    t0 = time.perf_counter()
    res = optimise_design(spec, regressor, base, first_criterion, constraints, **design_kw)
    steps: list[IterationStep] = []
    traj, prior, kept = res.trajectory, None, False
    previous = None
    for _ in range(int(n_iterations) + 1):
        beta, sd = estimate(traj)
        sd = np.asarray(sd, dtype=float)
        crit = covariance_log10_det(traj, regressor, base, sd, n_samples)
        steps.append(IterationStep(traj, np.asarray(beta, dtype=float), sd, crit, prior, kept,
                                   time.perf_counter() - t0))
        t0 = time.perf_counter()
        if previous is not None and abs(crit - previous) <= rel_tol * max(1.0, abs(previous)):
            break
        if len(steps) > n_iterations:
            break
        previous = crit
        kw = dict(design_kw)
        kw.pop("initial", None)
        beta_c = beta if constraints.torque else None
        res = optimise_design(spec, regressor, base, criterion, constraints, noise_std=sd,
                              beta=beta_c, initial=traj, **kw)
        new = res.trajectory
        kept = False
        if criterion in ("dopt", "eopt", "cond"):
            f_new = design_criterion(new, regressor, base, criterion, sd, n_samples)
            f_old = design_criterion(traj, regressor, base, criterion, sd, n_samples)
            if f_old < f_new:
                limit_fn = torque_limit_model(spec, regressor, base, beta_c) if constraints.torque else None
                kept = not check_design(traj, spec, constraints, torque_fn=limit_fn)
        prior_traj = traj if kept else new
        prior = covariance_log10_det(prior_traj, regressor, base, sd, n_samples)
        traj = prior_traj
    return steps
