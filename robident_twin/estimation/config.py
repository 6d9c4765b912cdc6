"""The estimation stage's own config types: the ``estimator`` group's options (by ``name``), the
``reduction`` and ``physical`` post-processing and the CAD-like ``nominal`` model's perturbation.
:mod:`robident_twin.config` assembles the RunConfig from them and validates it at the CLI edge; the
estimation functions take these typed objects and read attributes (a mapping given to their
Python API is validated once at entry, :func:`as_estimator`, :func:`as_reduction`, ...)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..errors import ConfigError
from ..typed import Errors, coerce, key

REDUCTION_METHODS = ("none", "essential", "ftest", "sensitivity")
SENSITIVITY_CRITERIA = ("mean_ratio", "ratio", "difference")  # estimation/process_reduction.CRITERIA
REDUCTION_BASES = ("numeric", "icma2020")
PHYSICAL_METHODS = ("none", "sdp", "xu")
WEIGHTS = ("period", "sample", "residual")


@dataclass(frozen=True)
class ReductionConfig:
    method: str = key("none", choices=REDUCTION_METHODS)
    rsd_max_percent: float = key(40.0, gt=0)
    abs_max: Optional[float] = key(0.01, gt=0)
    alpha: float = key(0.05, gt=0, lt=1)
    ks_alpha: float = key(0.05, gt=0, lt=1)
    on_non_normal: str = key("error", choices=("error", "warn"))
    # sensitivity (ICMA 2020 Algorithm 1, estimation/process_reduction.py)
    e_tol: float = key(0.05, ge=0, lt=10)
    criterion: str = key("mean_ratio", choices=SENSITIVITY_CRITERIA)
    essential: Any = None  # null | friction | a list of parameter names
    basis: str = key("numeric", choices=REDUCTION_BASES)

    def check(self, path: str, errors: Errors) -> None:
        e = self.essential
        if not (e is None or e == "friction" or (isinstance(e, (list, tuple)) and all(isinstance(x, str) for x in e))):
            errors.add(f"{path}.essential", e, "null, 'friction' or a list of parameter names")


@dataclass(frozen=True)
class XuConfig:
    n_starts: int = key(10, ge=1)
    seed: int = key(0, ge=0)
    maxiter: int = key(300, ge=1)
    time_limit_s: Optional[float] = key(60.0, gt=0)
    rel_mass: float = key(0.5, ge=0)
    com_box_m: float = key(0.1, ge=0)
    radius_m: float = key(0.2, gt=0)
    total_rel: float = key(0.1, ge=0)
    bounds: str = key("nominal", choices=("nominal", "robot_file"))


@dataclass(frozen=True)
class PhysicalConfig:
    method: str = key("none", choices=PHYSICAL_METHODS)
    reg_weight: float = key(1e-3, ge=0)
    prior: str = key("none", choices=("none", "nominal", "robot_file"))
    eps_pd: float = key(1e-6, ge=0)
    xu: XuConfig = XuConfig()


@dataclass(frozen=True)
class NominalConfig:
    seed: int = key(0, ge=0)
    mass_rel: float = key(0.1, ge=0)
    com_m: float = key(0.01, ge=0)
    inertia_rel: float = key(0.2, ge=0)


# estimator (by name)
@dataclass(frozen=True)
class WlsEstimator:
    name: str = key("wls", choices=("wls",))
    weights: Optional[str] = key("period", choices=WEIGHTS)
    var_window: Optional[int] = key(None, ge=1, optional_key=True)


@dataclass(frozen=True)
class OlsEstimator:
    name: str = key("ols", choices=("ols",))
    weights: Optional[str] = key(None, choices=WEIGHTS)


@dataclass(frozen=True)
class TlsEstimator:
    name: str = key("tls", choices=("tls",))
    weights: Optional[str] = key(None, choices=WEIGHTS)


@dataclass(frozen=True)
class ClosedLoopOptions:
    """Options IV and DIDIM share: their iteration and the closed-loop simulation of the model
    (robident_twin/estimation/closed_loop_sim.py; the controller's gains when the robot has none)."""
    max_iter: int = key(20, ge=1)
    tol: float = key(1e-6, gt=0)
    sim_rate_hz: Optional[float] = key(None, gt=0)
    lead_s: float = key(1.0, ge=0)
    kp_Nm_rad: Optional[tuple[float, ...]] = key(None, gt=0)
    kd_Nms_rad: Optional[tuple[float, ...]] = key(None, gt=0)
    ki_Nm_rad: Optional[tuple[float, ...]] = key(None, ge=0)
    feedforward: Optional[bool] = None


@dataclass(frozen=True)
class IvEstimator(ClosedLoopOptions):
    name: str = key("iv", choices=("iv",))
    weights: Optional[str] = key("period", choices=("period",))
    instruments: str = key("closed_loop", choices=("closed_loop", "reference"))


@dataclass(frozen=True)
class MlEstimator:
    name: str = key("ml", choices=("ml",))
    weights: Optional[str] = key(None, choices=WEIGHTS)
    max_nfev: int = key(50, ge=1)
    max_samples: Optional[int] = key(None, ge=1)  # null: every period-averaged sample


@dataclass(frozen=True)
class DidimEstimator(ClosedLoopOptions):
    name: str = key("didim", choices=("didim",))
    weights: Optional[str] = key("period", choices=("period",))


ESTIMATORS = {"wls": WlsEstimator, "ols": OlsEstimator, "tls": TlsEstimator, "iv": IvEstimator, "ml": MlEstimator,
              "didim": DidimEstimator}


def as_estimator(cfg: Any, name: str | None = None):
    """The typed ``estimator`` option (picked by ``name``; a mapping without one takes ``name``)."""
    if isinstance(cfg, tuple(ESTIMATORS.values())):
        return cfg
    cfg = dict(cfg or {})
    which = cfg.setdefault("name", name)
    if which not in ESTIMATORS:
        raise ConfigError(f"estimator.name: expected one of {sorted(ESTIMATORS)}, got {which!r}")
    return coerce(ESTIMATORS[which], cfg, "estimator")


def as_reduction(cfg: Any) -> ReductionConfig:
    return ReductionConfig() if cfg is None else coerce(ReductionConfig, cfg, "reduction")


def as_physical(cfg: Any) -> PhysicalConfig:
    return PhysicalConfig() if cfg is None else coerce(PhysicalConfig, cfg, "physical")


def as_nominal(cfg: Any) -> NominalConfig:
    return NominalConfig() if cfg is None else coerce(NominalConfig, cfg, "nominal")
