"""The design stage's own config types: the ``trajectory`` group (conf/trajectory/), by ``kind``:
what ``task=identify`` acquires (the stored Fourier designs, ICMA 2020 process motions, or a
recorded file). :mod:`robident_twin.config` assembles the RunConfig with them; the design functions
take the typed objects (a mapping given to their Python API is validated once, :func:`as_trajectory`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..errors import ConfigError
from ..typed import Errors, coerce, key

FILE_FORMATS = ("csv", "npz", "mat", "mcap", "krc4", "krl")  # as schema.FILE_FORMATS
DESIGN_CRITERIA = ("cond", "dopt", "eopt", "goal", "cond_raw")
DESIGN_METHODS = ("slsqp", "de")
ITERATION_CRITERIA = ("cond", "dopt", "eopt")


@dataclass(frozen=True)
class AreaConfig:
    centre_m: tuple[float, float, float] = key()
    half_size_m: tuple[float, float, float] = key(ge=0)


@dataclass(frozen=True)
class ExcitationTrajectory:
    kind: str = key("excitation", choices=("excitation",))


@dataclass(frozen=True)
class PickAndPlaceTrajectory:
    kind: str = key("pick_and_place", choices=("pick_and_place",))
    pick: Optional[AreaConfig] = None
    place: Optional[AreaConfig] = None
    n_cycles: int = key(3, ge=1)
    seed: int = key(0, ge=0)
    validation_seed: int = key(1, ge=0)
    lift_m: float = key(0.1, ge=0)
    speed_fraction: float = key(0.5, gt=0, le=1)
    tool_down: Optional[bool] = None


@dataclass(frozen=True)
class SquareTrajectory:
    kind: str = key("square", choices=("square",))
    centre_m: Optional[tuple[float, float, float]] = None
    side_m: Optional[float] = key(None, gt=0)
    points_per_edge: int = key(40, ge=4)
    laps: int = key(1, ge=1)
    speed_fraction: float = key(0.5, gt=0, le=1)
    tool_down: Optional[bool] = None


@dataclass(frozen=True)
class RecordedTrajectory:
    kind: str = key("recorded", choices=("recorded",))
    path: Optional[str] = None
    validation_path: Optional[str] = None
    format: Optional[str] = key(None, choices=FILE_FORMATS)
    options: dict[str, Any] = key({})


TRAJECTORIES = {"excitation": ExcitationTrajectory, "pick_and_place": PickAndPlaceTrajectory,
                "square": SquareTrajectory, "recorded": RecordedTrajectory}


def as_trajectory(cfg: Any):
    """The typed ``trajectory`` option (picked by ``kind``; None: the stored excitation)."""
    if cfg is None:
        return ExcitationTrajectory()
    if isinstance(cfg, tuple(TRAJECTORIES.values())):
        return cfg
    kind = cfg.get("kind") if hasattr(cfg, "get") else None
    if kind not in TRAJECTORIES:
        raise ConfigError(f"trajectory.kind: expected one of {sorted(TRAJECTORIES)}, got {kind!r}")
    return coerce(TRAJECTORIES[kind], cfg, "trajectory")


# the ``design`` group (task=design, task=dryrun, the dry run of process trajectories)
@dataclass(frozen=True)
class GoalConfig:
    goal_cond: Optional[float] = key(35.0, gt=0)
    k_tau: float = key(0.9, gt=0)
    weak_joints: Optional[tuple[int, ...]] = key(None, ge=0)
    cond_criterion: str = key("cond", choices=("cond", "cond_raw"), optional_key=True)


@dataclass(frozen=True)
class DeConfig:
    maxiter: int = key(30, ge=1)
    popsize: int = key(2, ge=1)


@dataclass(frozen=True)
class IterationConfig:
    criterion: str = key("dopt", choices=ITERATION_CRITERIA)
    rel_tol: float = key(1e-3, gt=0)


@dataclass(frozen=True)
class CartesianConfig:
    z_min_m: Optional[float] = key(None, optional_key=True)
    z_max_m: Optional[float] = key(None, optional_key=True)
    r_min_m: Optional[float] = key(None, ge=0, optional_key=True)
    r_max_m: Optional[float] = key(None, gt=0, optional_key=True)
    box_lo_m: Optional[tuple[float, ...]] = key(None, optional_key=True)
    box_hi_m: Optional[tuple[float, ...]] = key(None, optional_key=True)
    preset: Optional[str] = key(None, choices=("kolyubin2017",), optional_key=True)

    def check(self, path: str, errors: Errors) -> None:
        for name in ("box_lo_m", "box_hi_m"):
            v = getattr(self, name)
            if v is not None and len(v) != 3:
                errors.add(f"{path}.{name}", list(v), "3 numbers (x, y, z in m)")


@dataclass(frozen=True)
class ConstraintsConfig:
    margin: float = key(0.95, gt=0, le=1)
    zero_start: bool = False
    torque: bool = True
    torque_margin: float = key(0.9, gt=0, le=1)
    cartesian: Optional[CartesianConfig] = None
    collision: Optional[dict[str, Any]] = None  # checked in depth by excitation.DesignConstraints.from_config
    resonance_hz: Optional[float] = key(None, gt=0)


@dataclass(frozen=True)
class DryrunConfig:
    simulate: bool = True
    tracking_tol_rad: float = key(0.01, gt=0)
    records_dir: Optional[str] = None
    rate_hz: float = key(1000.0, gt=0, optional_key=True)
    plot: Optional[bool] = key(None, optional_key=True)


@dataclass(frozen=True)
class DesignConfig:
    harmonics: int = key(5, ge=1)
    base_freq_hz: float = key(0.1, gt=0)
    starts: int = key(4, ge=1)
    seed: int = key(0, ge=0)
    install: bool = False
    criterion: str = key("cond", choices=DESIGN_CRITERIA)
    method: str = key("slsqp", choices=DESIGN_METHODS)
    maxiter: int = key(200, ge=1)
    samples: int = key(80, ge=2)
    max_cond: float = key(1e4, ge=1)
    goal: GoalConfig = GoalConfig()
    de: DeConfig = DeConfig()
    iterations: int = key(0, ge=0)
    iteration: IterationConfig = IterationConfig()
    trajectory: Optional[str] = None
    constraints: ConstraintsConfig = ConstraintsConfig()
    dryrun: DryrunConfig = DryrunConfig()


def as_design(cfg: Any) -> DesignConfig:
    """The typed ``design`` group (None: the defaults); a mapping is validated once, errors name ``design.<key>``."""
    if isinstance(cfg, DesignConfig):
        return cfg
    return coerce(DesignConfig, {} if cfg is None else cfg, "design")
