"""Excitation trajectories: finite Fourier series, limit checks and optimal design.

Swevers' periodic excitation (Swevers, Ganseman, Tukel, De Schutter, Van
Brussel 1997) gives every joint j a finite Fourier series with ``H`` harmonics
of one base pulsation ``w_f = 2 pi f``::

    q_j(t)   = q0_j + sum_l [ a_jl/(w_f l) sin(w_f l t) - b_jl/(w_f l) cos(w_f l t) ]
    dq_j(t)  =        sum_l [ a_jl cos(w_f l t) + b_jl sin(w_f l t) ]
    ddq_j(t) =        sum_l [ -a_jl w_f l sin(w_f l t) + b_jl w_f l cos(w_f l t) ]

so ``a`` and ``b`` are velocity amplitudes (rad/s). The trajectory is periodic
with period ``1/f``, which allows averaging periods and exact, analytic
velocities and accelerations.

Position, velocity and acceleration are LINEAR in the decision variables
``(q0, a, b)``, so limit constraints on a time grid are one constant matrix.
The design criterion is the condition number of the column-normalised base
regressor over one period, minimised with SLSQP from several random feasible
starts. The gradient is analytic in the extreme singular vectors (eigenvectors
of the small Gram matrix) and needs one forward difference of the regressor per
joint and per state (q, dq, ddq), perturbing all samples at once, instead of
one per decision variable (3n = 21 instead of n(2H+1) = 77 for the iiwa14).

Full designs (:func:`optimise_design`, issue 4) add criteria -- Swevers' c1 (cond of the
noise-scaled, column-normalised regressor), c2 (log det of the covariance, D-optimality),
E-optimality, the plain cond(Omega_B) of Kolyubin 2017 (``cond_raw``) and Kolyubin's goal
attainment (:class:`GoalSettings`) -- and constraints
(:class:`DesignConstraints`): zero velocity and acceleration at start and end (Xu 2020 eq. 10),
the bandwidth bound n_f f0 < lowest resonance, nominal-model torques (motor torques for coupled
drives, :func:`torque_limit_model`), Cartesian bounds
(:class:`CartesianBounds`, pinocchio forward kinematics) and self-collision / obstacles
(:class:`CollisionSettings`, MuJoCo capsules from ``builders.collision_mjspec``). Gradients are
analytic through the linear Fourier basis (one forward difference per joint and state for the
regressor and the per-sample constraints). Optimisers: multistart SLSQP or differential
evolution + SLSQP polish; :func:`swevers_iteration` redesigns at each new estimate (on the twin:
``robident-twin task=design design.iterations=k``, :mod:`robident_twin.design.task`).
:func:`check_design` re-checks everything on a grid DENSE_CHECK_FACTOR x denser.

Stored designs are YAML files (``conf/excitation/*.yaml``)::

    base_freq_hz: 0.1
    q0_rad: [...]          # n
    a: [[...], ...]        # n x H, rad/s
    b: [[...], ...]        # n x H, rad/s
    robot: iiwa14          # optional metadata (robot, cond, criterion, seed, ...)

Command line: :mod:`robident_twin.design.excitation_cli`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from robident_twin.atomic import write_text_atomic
from robident_twin.errors import TrajectoryError

#: Keys of a design file that define the trajectory; every other key is metadata.
TRAJECTORY_KEYS = ("base_freq_hz", "q0_rad", "a", "b")

DEFAULT_N_SAMPLES = 80  # criterion samples per period
DEFAULT_N_CONSTRAINT = 150  # constraint grid points per period during optimisation
DENSE_CHECK_FACTOR = 10  # final check grid = this x the constraint grid


# --------------------------------------------------------------------------- trajectory


def _finite_array(value: Any, shape_desc: str, ndim: int, source: str, name: str) -> np.ndarray:
    """Convert ``value`` to a float array of ``ndim`` dimensions or raise naming the field."""
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TrajectoryError(f"{source}: field '{name}': expected {shape_desc} of numbers, "
                              f"got {value!r} ({exc})") from None
    if arr.ndim != ndim:
        raise TrajectoryError(f"{source}: field '{name}': expected {shape_desc}, "
                              f"got an array of shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise TrajectoryError(f"{source}: field '{name}': expected finite numbers, got {value!r}")
    return arr


@dataclass(frozen=True, eq=False)
class FourierTrajectory:
    """Swevers' finite Fourier series, one per joint (see the module docstring).

    base_freq_hz: base frequency f (the period is 1/f), Hz.
    q0_rad: (n,) position offsets, rad.
    a, b: (n, H) velocity amplitudes of the cosine and sine terms of dq, rad/s.
    metadata: free-form information stored with a design (robot, cond, seed ...).
    """

    base_freq_hz: float
    q0_rad: np.ndarray
    a: np.ndarray
    b: np.ndarray
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        src = "FourierTrajectory"
        f = self.base_freq_hz
        if isinstance(f, bool) or not isinstance(f, (int, float, np.floating, np.integer)) \
                or not math.isfinite(float(f)) or float(f) <= 0:
            raise TrajectoryError(f"{src}: field 'base_freq_hz': expected a positive finite "
                                  f"number, got {f!r}")
        q0 = _finite_array(self.q0_rad, "a list of n numbers", 1, src, "q0_rad")
        a = _finite_array(self.a, "an n x H list of lists", 2, src, "a")
        b = _finite_array(self.b, "an n x H list of lists", 2, src, "b")
        if a.shape[0] != q0.shape[0] or a.shape[1] < 1:
            raise TrajectoryError(f"{src}: field 'a': expected shape ({q0.shape[0]}, H>=1) to match "
                                  f"q0_rad with {q0.shape[0]} joints, got {a.shape}")
        if b.shape != a.shape:
            raise TrajectoryError(f"{src}: field 'b': expected shape {a.shape} (same as 'a'), "
                                  f"got {b.shape}")
        for name, arr in (("q0_rad", q0), ("a", a), ("b", b)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "base_freq_hz", float(f))
        object.__setattr__(self, "metadata", dict(self.metadata))

    # ---- shape and timing

    @property
    def n_joints(self) -> int:
        return int(self.q0_rad.shape[0])

    @property
    def n_harmonics(self) -> int:
        return int(self.a.shape[1])

    @property
    def period_s(self) -> float:
        return 1.0 / self.base_freq_hz

    @property
    def base_pulsation_rad_s(self) -> float:
        """w_f = 2 pi f, rad/s."""
        return 2.0 * math.pi * self.base_freq_hz

    # ---- evaluation

    def evaluate(self, t_s: np.ndarray | float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q_rad, dq_rad_s, ddq_rad_s2), each of shape (len(t_s), n), analytic derivatives."""
        t = np.atleast_1d(np.asarray(t_s, dtype=float)).reshape(-1)
        wl = self.base_pulsation_rad_s * np.arange(1, self.n_harmonics + 1)  # (H,)
        phase = np.outer(t, wl)  # (T, H)
        s, c = np.sin(phase), np.cos(phase)
        q = self.q0_rad + (s / wl) @ self.a.T - (c / wl) @ self.b.T
        dq = c @ self.a.T + s @ self.b.T
        ddq = -(s * wl) @ self.a.T + (c * wl) @ self.b.T
        return q, dq, ddq

    def sample(self, rate_hz: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(t_s, q, dq, ddq) over exactly one period: t = k / rate_hz, k = 0 .. N-1.

        ``rate_hz`` must give an integer number N = period_s * rate_hz of samples per period.
        """
        if not (isinstance(rate_hz, (int, float, np.floating, np.integer)) and math.isfinite(rate_hz)
                and rate_hz > 0):
            raise TrajectoryError(f"sample: rate_hz must be a positive finite number, got {rate_hz!r}")
        n_exact = self.period_s * float(rate_hz)
        n = int(round(n_exact))
        if n < 1 or abs(n_exact - n) > 1e-9 * max(1.0, n_exact):
            raise TrajectoryError(
                f"sample: rate {rate_hz} Hz does not give an integer number of samples per period "
                f"({self.period_s:g} s x {rate_hz} Hz = {n_exact:.9g}); choose a rate that is a "
                f"multiple of the base frequency {self.base_freq_hz:g} Hz")
        t = np.arange(n) / float(rate_hz)
        return (t, *self.evaluate(t))

    def time_grid(self, n_points: int) -> np.ndarray:
        """``n_points`` evenly spaced times over one period, end excluded."""
        return np.arange(int(n_points)) * (self.period_s / int(n_points))

    # ---- (de)serialisation

    def with_metadata(self, **metadata: Any) -> "FourierTrajectory":
        """A copy with ``metadata`` merged into the stored metadata."""
        return FourierTrajectory(self.base_freq_hz, self.q0_rad, self.a, self.b,
                                 {**self.metadata, **metadata})

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python mapping for YAML: the trajectory keys, then the metadata."""
        d: dict[str, Any] = {
            "base_freq_hz": float(self.base_freq_hz),
            "q0_rad": [float(x) for x in self.q0_rad],
            "a": [[float(x) for x in row] for row in self.a],
            "b": [[float(x) for x in row] for row in self.b],
        }
        for k, v in self.metadata.items():
            if k not in d:
                d[k] = _plain(v)
        return d

    @classmethod
    def from_dict(cls, d: Any, source: str = "<dict>") -> "FourierTrajectory":
        """Validate a mapping (e.g. parsed YAML); errors name ``source`` and the field."""
        if not isinstance(d, Mapping):
            raise TrajectoryError(f"{source}: expected a mapping with keys {list(TRAJECTORY_KEYS)}, "
                                  f"got {type(d).__name__}")
        for key in TRAJECTORY_KEYS:
            if key not in d or d[key] is None:
                raise TrajectoryError(f"{source}: field '{key}': missing (required)")
        f = d["base_freq_hz"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f <= 0:
            raise TrajectoryError(f"{source}: field 'base_freq_hz': expected a positive finite number "
                                  f"in Hz, got {f!r}")
        q0 = _finite_array(d["q0_rad"], "a list of n numbers", 1, source, "q0_rad")
        n = q0.shape[0]
        if n < 1:
            raise TrajectoryError(f"{source}: field 'q0_rad': expected at least one joint, got []")
        arrays = {}
        for key in ("a", "b"):
            arr = _finite_array(d[key], f"a {n} x H list of lists", 2, source, key)
            if arr.shape[0] != n or arr.shape[1] < 1:
                raise TrajectoryError(f"{source}: field '{key}': expected {n} rows (one per joint in "
                                      f"q0_rad) of H >= 1 harmonics, got shape {arr.shape}")
            arrays[key] = arr
        if arrays["b"].shape != arrays["a"].shape:
            raise TrajectoryError(f"{source}: field 'b': expected shape {arrays['a'].shape} (same as "
                                  f"'a'), got {arrays['b'].shape}")
        metadata = {k: v for k, v in d.items() if k not in TRAJECTORY_KEYS}
        return cls(float(f), q0, arrays["a"], arrays["b"], metadata)

def _plain(v: Any) -> Any:
    """Numpy scalars/arrays to plain Python for yaml.safe_dump."""
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, Path):
        return str(v)
    return v


def load_design(path: str | Path) -> FourierTrajectory:
    """Load a stored design (YAML); metadata ends up in ``trajectory.metadata``."""
    path = Path(path)
    if not path.is_file():
        raise TrajectoryError(f"excitation design {path} does not exist")
    try:
        raw = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml when there
    except yaml.YAMLError as exc:
        raise TrajectoryError(f"{path}: not valid YAML: {exc}") from exc
    return FourierTrajectory.from_dict(raw, source=str(path))


def save_design(traj: FourierTrajectory, path: str | Path,
                metadata: Mapping[str, Any] | None = None) -> Path:
    """Write a design as YAML atomically (temporary file in the same folder + os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    d = traj.with_metadata(**(metadata or {})).to_dict()
    text = ("# Swevers finite Fourier excitation: q_j = q0_j + sum_l a_jl/(w l) sin(w l t)"
            " - b_jl/(w l) cos(w l t), w = 2 pi base_freq_hz\n"
            "# written by robident_twin.design.excitation_cli\n"
            + yaml.safe_dump(d, sort_keys=False, default_flow_style=None, width=120))
    write_text_atomic(path, text, fsync=True)
    return path
