"""The design stage's own config types: the ``trajectory`` group (conf/trajectory/), by ``kind``:
what ``task=identify`` acquires (the stored Fourier designs, ICMA 2020 process motions, or a
recorded file). :mod:`robident_twin.config` assembles the RunConfig with them; the design functions
take the typed objects (a mapping given to their Python API is validated once, :func:`as_trajectory`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..errors import ConfigError
from ..typed import coerce, key

FILE_FORMATS = ("csv", "npz", "mat", "mcap", "krc4", "krl")  # as schema.FILE_FORMATS


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
