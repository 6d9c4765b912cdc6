"""Dataclass schemas of every config group and task key in conf/ (types, ranges, choices).

Groups whose options differ in shape are keyed by a discriminator (``backend.name``,
``estimator.name``, ``friction.kind``): see :data:`GROUPS`. A group added later (e.g.
``twin``) is registered with :func:`robident_twin.config.register_group`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from hal.sim.effects import EFFECTS as TWIN_EFFECTS

from ..model.config import (  # noqa: F401  (the model layer's own config types)
    FRICTIONS,
    MEASUREMENTS,
    SIDES,
    AsymmetricFriction,
    ModelConfig,
    NominalFriction,
    PayloadConfig,
    PayloadDesignConfig,
    RobotConfig,
    StribeckFriction,
)
from ..estimation.config import (  # noqa: F401  (the estimation stage's own config types)
    ESTIMATORS,
    PHYSICAL_METHODS,
    REDUCTION_BASES,
    REDUCTION_METHODS,
    SENSITIVITY_CRITERIA,
    WEIGHTS,
    DidimEstimator,
    IvEstimator,
    MlEstimator,
    NominalConfig,
    OlsEstimator,
    PhysicalConfig,
    ReductionConfig,
    TlsEstimator,
    WlsEstimator,
    XuConfig,
)
from .check import Errors, key, to_plain
from ..design.config import (  # noqa: F401  (the design stage's own config types)
    DESIGN_CRITERIA,
    DESIGN_METHODS,
    ITERATION_CRITERIA,
    TRAJECTORIES,
    CartesianConfig,
    ConstraintsConfig,
    DeConfig,
    DesignConfig,
    DryrunConfig,
    ExcitationTrajectory,
    GoalConfig,
    IterationConfig,
)

# choices (kept here as literals so that importing the schema imports no stage)
TASK_NAMES = ("identify", "design", "montecarlo", "aggregate", "dryrun", "report", "export", "import",
              "export_trajectory", "control", "robustness", "payload")
FILE_FORMATS = ("csv", "npz", "mat", "mcap", "krc4", "krl")
EXPORT_ENGINES = ("pinocchio", "mujoco", "pybullet")
MC_MODES = ("exact", "twin")
MC_ESTIMATORS = ("wls", "ols", "wls_residual", "ols_noisy_q", "iv", "ml", "tls")
MC_TWIN_ESTIMATORS = ("iv", "ml", "tls")  # twin mode only: they need the recording
MC_FRICTIONS = ("matched", "stribeck")
MC_SIM_PATHS = ("auto", "deterministic", "batch", "hal")


def per_joint(default=None, **bounds):
    """A number, a per-joint list of numbers, or null (``bounds`` apply to each)."""
    return key(default, **bounds, per_joint=True)


# ---------------------------------------------------------------------------- task keys
@dataclass(frozen=True)
class BaseConfig:
    n_samples: int = key(300, ge=1)
    seed: int = key(0, ge=0)


@dataclass(frozen=True)
class AcquisitionConfig:
    periods: int = key(5, ge=1)
    transient_periods: int = key(1, ge=0)
    save_recordings: bool = True


@dataclass(frozen=True)
class ProcessingConfig:
    n_harmonics: Optional[int] = key(None, ge=1)
    decimate: int = key(1, ge=1)
    # the non-periodic path (process and recorded trajectories; processing/signal.py)
    cutoff_hz: Optional[float] = key(None, gt=0)
    filter_order: int = key(4, ge=1)
    derivatives: str = key("auto", choices=("auto", "filtered", "recorded"))


@dataclass(frozen=True)
class OutputConfig:
    plots: bool = True
    report: bool = True


@dataclass(frozen=True)
class ExportConfig:
    run_dir: Optional[str] = None
    nominal: NominalConfig = NominalConfig()
    reg_weight: float = key(1e-3, ge=0)
    engines: tuple[str, ...] = key(EXPORT_ENGINES, choices=EXPORT_ENGINES)
    check_samples: int = key(400, ge=1)


@dataclass(frozen=True)
class ControlIdentified:
    run_dir: Optional[str] = None
    robot_file: Optional[str] = None


@dataclass(frozen=True)
class ControlSquare:
    centre_m: Optional[tuple[float, ...]] = None
    side_m: float = key(0.2, gt=0)
    speed_fraction: float = key(0.5, gt=0, le=1)
    points_per_edge: int = key(40, ge=2)


@dataclass(frozen=True)
class ControlConfig:
    """task=control (robident_twin/control_task.py): model-based feed-forward on the twin."""
    trajectory: str = key("validation", choices=("excitation", "validation", "square"))
    duration_s: Optional[float] = key(None, gt=0)
    periods: int = key(1, ge=1)
    feedforwards: tuple[str, ...] = key(("none", "nominal", "identified"), choices=("none", "nominal", "identified"))
    bandwidth_hz: float = key(5.0, gt=0)
    damping_ratio: float = key(1.0, gt=0)
    integral_hz: Optional[float] = key(None, ge=0)
    identified: ControlIdentified = ControlIdentified()
    nominal: NominalConfig = NominalConfig()
    square: Optional[ControlSquare] = None


@dataclass(frozen=True)
class KrlConfig:
    point_rate_hz: float = key(20.0, gt=0)
    periods: int = key(1, ge=1)
    approach_vel_percent: float = key(10.0, gt=0, le=100)


@dataclass(frozen=True)
class FilesConfig:
    input: Optional[str] = None
    input_format: Optional[str] = key(None, choices=FILE_FORMATS)
    options: dict[str, Any] = key({})
    output: Optional[str] = None
    output_format: str = key("csv", choices=("csv", "npz", "mat", "mcap", "krl"))
    trajectory: str = key("excitation", choices=("excitation", "validation"))
    rate_hz: Optional[float] = key(None, gt=0)
    krl: KrlConfig = KrlConfig()


@dataclass(frozen=True)
class ReportConfig:
    run_dir: Optional[str] = None


# ---------------------------------------------------------------------------- groups
@dataclass(frozen=True)
class StribeckMcConfig:
    ratio: float = key(1.5, ge=0)
    velocity_rad_s: float = key(0.05, gt=0)


@dataclass(frozen=True)
class MontecarloConfig:
    name: str = "default"
    mode: str = key("exact", choices=MC_MODES)
    runs: int = key(100, ge=2)
    seed: int = key(0, ge=0)
    estimator: Optional[str] = key(None, choices=MC_ESTIMATORS)
    design: Optional[str] = None
    sample_rate_hz: Optional[float] = key(100.0, gt=0)
    tau_std_Nm: Any = per_joint(gt=0)
    noise_scale: float = key(1.0, gt=0)
    friction: str = key("matched", choices=MC_FRICTIONS)
    stribeck: StribeckMcConfig = StribeckMcConfig()
    noisy_q_std_rad: float = key(1e-4, gt=0)
    periods: int = key(5, ge=1)
    transient_periods: int = key(1, ge=0)
    process_noise_Nm: Any = per_joint(ge=0)
    sim: str = key("auto", choices=MC_SIM_PATHS)
    batch_size: int = key(50, ge=1)
    workers: int = key(2, ge=1)
    alpha: float = key(0.01, gt=0, lt=1)
    progress: bool = True
    sweep_dir: Optional[str] = None

    def check(self, path: str, errors: Errors) -> None:
        pn = self.process_noise_Nm
        if pn is not None and self.mode != "twin" and any(v > 0 for v in ((pn,) if isinstance(pn, float) else pn)):
            errors.add(f"{path}.process_noise_Nm", pn, "null in exact mode (process noise needs montecarlo.mode=twin)")
        if self.mode == "exact" and self.estimator in MC_TWIN_ESTIMATORS:
            errors.add(f"{path}.estimator", self.estimator,
                       f"in exact mode one of {[e for e in MC_ESTIMATORS if e not in MC_TWIN_ESTIMATORS]} "
                       f"({list(MC_TWIN_ESTIMATORS)} need a twin recording: montecarlo.mode=twin)")


# backend (by name)
from .backend_schema import (  # noqa: E402,F401  (the backend group's options)
    ControllerConfig,
    MujocoBackend,
    PybulletBackend,
    FileBackend,
    FaultsConfig,
    RsiFaultsConfig,
    FriEmulatorConfig,
    SunriseEmulatorConfig,
    RsiEmulatorConfig,
    _RealCommon,
    LwrFriBackend,
    SunriseFriBackend,
    RsiChannel,
    RsiBackend,
    Ros2Backend,
    NoiseConfig,
    TwinConfig,
)


from hal.config import BACKENDS  # noqa: E402,F401  (the backend group's options, hal's own)




RB_ESTIMATORS = ("ols", "wls", "wls_residual", "wls_sample", "tls", "iv_ref", "iv_cl", "didim", "ml", "wls_sdp",
                 "wls_xu")  # validation/robustness.py


@dataclass(frozen=True)
class RobustnessConfig:
    """``task=robustness`` (robident_twin/validation/robustness.py): estimators x twin columns."""
    estimators: tuple[str, ...] = key(RB_ESTIMATORS, choices=RB_ESTIMATORS)
    effects: tuple[str, ...] = ("ideal",) + TWIN_EFFECTS + ("all",)
    runs: int = key(30, ge=3)
    seed: int = key(0, ge=0)
    periods: int = key(5, ge=2)
    transient_periods: int = key(1, ge=0)
    decimate: int = key(10, ge=1)
    q_noise_scale: float = key(1.0, gt=0)
    alpha: float = key(0.01, gt=0, lt=1)
    batch_size: int = key(50, ge=1)
    workers: int = key(2, ge=1)
    progress: bool = True

    def check(self, path: str, errors: Errors) -> None:
        if not self.estimators:
            errors.add(f"{path}.estimators", list(self.estimators), f"a non-empty list from {list(RB_ESTIMATORS)}")
        if not self.effects:
            errors.add(f"{path}.effects", list(self.effects), "a non-empty list of columns")
        for c in self.effects:
            if c not in ("ideal", "all") and not all(e in TWIN_EFFECTS for e in str(c).split("+")):
                errors.add(f"{path}.effects", c, f"'ideal', 'all', or effects from {list(TWIN_EFFECTS)} joined by '+'")


# ---------------------------------------------------------------------------- the whole run
@dataclass(frozen=True)
class RunConfig:
    """A validated run configuration (every group and task key of conf/config.yaml).

    ``backend``, ``estimator`` and ``friction`` hold the schema of their option (e.g.
    :class:`MujocoBackend`); groups registered later live in ``extra_groups``
    (``run.group("twin")``)."""
    robot: RobotConfig = key()
    backend: Any = key()
    estimator: Any = key()
    task: str = key("identify", choices=TASK_NAMES)
    seed: int = key(0, ge=0)
    noise: NoiseConfig = NoiseConfig()
    friction: Any = NominalFriction()
    montecarlo: MontecarloConfig = MontecarloConfig()
    model: ModelConfig = ModelConfig()
    base: BaseConfig = BaseConfig()
    acquisition: AcquisitionConfig = AcquisitionConfig()
    processing: ProcessingConfig = ProcessingConfig()
    design: DesignConfig = DesignConfig()
    reduction: ReductionConfig = ReductionConfig()
    physical: PhysicalConfig = PhysicalConfig()
    output: OutputConfig = OutputConfig()
    export: ExportConfig = ExportConfig()
    files: FilesConfig = FilesConfig()
    report: ReportConfig = ReportConfig()
    twin: TwinConfig = TwinConfig()
    control: ControlConfig = ControlConfig()
    robustness: RobustnessConfig = RobustnessConfig()
    payload: PayloadConfig = PayloadConfig()
    trajectory: Any = ExcitationTrajectory()
    extra_groups: dict[str, Any] = key({})

    def record(self) -> dict:
        """The plain form written as a run's ``config`` record (summary.json): output data, read back
        only as the record of a finished run, never parsed by a stage."""
        return to_plain(self)

    def group(self, name: str):
        """A group by name (a built-in field or a registered extra group)."""
        if name in self.extra_groups:
            return self.extra_groups[name]
        return getattr(self, name)

    def check(self, path: str, errors: Errors) -> None:
        """Checks across groups (each before any work)."""
        acquires = self.task in ("identify", "export") or (self.task == "design" and self.design.iterations > 0)
        if acquires and self.task == "export" and self.export.run_dir:
            acquires = False
        est = self.estimator
        if acquires and self.acquisition.periods < 2:
            if est.name == "wls" and est.weights in ("period", "sample"):
                errors.add("acquisition.periods", self.acquisition.periods,
                           f"an integer >= 2 with estimator=wls and estimator.weights={est.weights} (the weights "
                           "come from the spread between periods; use estimator.weights=residual or estimator=ols)")
            elif est.name == "ml":
                errors.add("acquisition.periods", self.acquisition.periods,
                           "an integer >= 2 with estimator=ml (the noise is estimated from the spread between periods)")
