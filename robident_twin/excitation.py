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

Stored designs are YAML files (``conf/excitation/*.yaml``)::

    base_freq_hz: 0.1
    q0_rad: [...]          # n
    a: [[...], ...]        # n x H, rad/s
    b: [[...], ...]        # n x H, rad/s
    robot: iiwa14          # optional metadata (robot, cond, criterion, seed, ...)

Command line::

    python -m robident_twin.excitation --robot iiwa14 --out conf/excitation/iiwa14_default.yaml \
        --seed 0 --harmonics 5 --base-freq 0.1 --starts 4
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from .errors import ConfigError, RobidentError, TrajectoryError
from .robot import RobotSpec

#: Name stored in the ``criterion`` metadata of designs made by :func:`optimise_condition`.
CRITERION = "cond(column-normalised base regressor)"
#: Keys of a design file that define the trajectory; every other key is metadata.
TRAJECTORY_KEYS = ("base_freq_hz", "q0_rad", "a", "b")
LIMIT_KINDS = ("position", "velocity", "acceleration")
_UNITS = {"position": "rad", "velocity": "rad/s", "acceleration": "rad/s^2"}

DEFAULT_N_SAMPLES = 80  # criterion samples per period
DEFAULT_N_CONSTRAINT = 150  # constraint grid points per period during optimisation
DENSE_CHECK_FACTOR = 10  # final check grid = this x the constraint grid
_LAM_RATIO_FLOOR = 1e-24  # clamp of lambda_min / lambda_max (cond <= 1e12) in the objective
_LOG_COND_DEGENERATE = 0.5 * math.log(1.0 / _LAM_RATIO_FLOOR) + 1.0


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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def load_design(path: str | Path) -> FourierTrajectory:
    """Load a stored design (YAML); metadata ends up in ``trajectory.metadata``."""
    path = Path(path)
    if not path.is_file():
        raise TrajectoryError(f"excitation design {path} does not exist")
    try:
        raw = yaml.safe_load(path.read_text())
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
            "# written by robident_twin.excitation\n"
            + yaml.safe_dump(d, sort_keys=False, default_flow_style=None, width=120))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; use the usual file mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


# --------------------------------------------------------------------------- limits


@dataclass(frozen=True)
class LimitViolation:
    """The worst violation of one limit of one joint on the check grid.

    kind: 'position', 'velocity' or 'acceleration'; value and limit in rad, rad/s or rad/s^2
    (for position the violated bound, lower or upper). ``margin`` is the fraction of the
    robot's limits that was checked (1.0 = the full limits).
    """

    kind: str
    joint: str
    time_s: float
    value: float
    limit: float
    margin: float

    @property
    def unit(self) -> str:
        return _UNITS[self.kind]

    @property
    def excess(self) -> float:
        """How far beyond the limit the value is (positive)."""
        if self.kind == "position":
            return abs(self.value - self.limit)
        return abs(self.value) - self.limit

    def describe(self) -> str:
        lim = f"{self.margin:g} x limit" if self.margin != 1.0 else "limit"
        if self.kind == "position":
            side = "above upper" if self.value > self.limit else "below lower"
            return (f"joint {self.joint} position {self.value:.6g} rad is {side} {lim} "
                    f"{self.limit:.6g} rad at t = {self.time_s:.4f} s")
        return (f"joint {self.joint} {self.kind} |{self.value:.6g}| {self.unit} exceeds {lim} "
                f"{self.limit:.6g} {self.unit} at t = {self.time_s:.4f} s")


def _check_margin(margin: float) -> float:
    if not (isinstance(margin, (int, float)) and 0 < margin <= 1):
        raise ConfigError(f"margin: expected a fraction of the limits in (0, 1], got {margin!r}")
    return float(margin)


def scaled_limits(spec: RobotSpec, margin: float = 1.0) -> dict[str, np.ndarray]:
    """Limits shrunk by ``margin``: position range about its centre, |dq| and |ddq| bounds."""
    margin = _check_margin(margin)
    centre = 0.5 * (spec.q_max_rad + spec.q_min_rad)
    half = 0.5 * (spec.q_max_rad - spec.q_min_rad)
    return {"q_lo_rad": centre - margin * half, "q_hi_rad": centre + margin * half,
            "dq_max_rad_s": margin * spec.dq_max_rad_s, "ddq_max_rad_s2": margin * spec.ddq_max_rad_s2}


def default_check_points(traj: FourierTrajectory) -> int:
    """Default check grid: 20 points per period per harmonic, at least 2000."""
    return max(2000, 20 * traj.n_harmonics)


def _check_joints(traj: FourierTrajectory, spec: RobotSpec) -> None:
    if traj.n_joints != spec.n_joints:
        raise TrajectoryError(f"trajectory has {traj.n_joints} joints but robot '{spec.name}' has "
                              f"{spec.n_joints}")


def check_limits(traj: FourierTrajectory, spec: RobotSpec, n_grid: int | None = None,
                 margin: float = 1.0) -> list[LimitViolation]:
    """Worst violation per joint and limit kind on ``n_grid`` points over one period.

    Returns an empty list when the trajectory is within ``margin`` x the limits everywhere on
    the grid. ``n_grid`` defaults to :func:`default_check_points`.
    """
    _check_joints(traj, spec)
    lim = scaled_limits(spec, margin)
    n_grid = default_check_points(traj) if n_grid is None else int(n_grid)
    if n_grid < 1:
        raise ConfigError(f"n_grid: expected a positive number of grid points, got {n_grid}")
    t = traj.time_grid(n_grid)
    q, dq, ddq = traj.evaluate(t)
    out: list[LimitViolation] = []
    for j, name in enumerate(spec.joint_names):
        hi = np.argmax(q[:, j])
        if q[hi, j] > lim["q_hi_rad"][j]:
            out.append(LimitViolation("position", name, float(t[hi]), float(q[hi, j]),
                                      float(lim["q_hi_rad"][j]), margin))
        lo = np.argmin(q[:, j])
        if q[lo, j] < lim["q_lo_rad"][j]:
            out.append(LimitViolation("position", name, float(t[lo]), float(q[lo, j]),
                                      float(lim["q_lo_rad"][j]), margin))
        for kind, x, bound in (("velocity", dq, lim["dq_max_rad_s"]),
                               ("acceleration", ddq, lim["ddq_max_rad_s2"])):
            k = np.argmax(np.abs(x[:, j]))
            if abs(x[k, j]) > bound[j]:
                out.append(LimitViolation(kind, name, float(t[k]), float(x[k, j]), float(bound[j]),
                                          margin))
    return out


def assert_within_limits(traj: FourierTrajectory, spec: RobotSpec, n_grid: int | None = None,
                         margin: float = 1.0, name: str = "trajectory") -> None:
    """Raise :class:`TrajectoryError` listing every violated limit (joint, kind, time, value)."""
    violations = check_limits(traj, spec, n_grid=n_grid, margin=margin)
    if violations:
        lines = "\n  ".join(v.describe() for v in violations)
        raise TrajectoryError(f"{name} violates the limits of robot '{spec.name}' "
                              f"({len(violations)} violation(s)):\n  {lines}")


# --------------------------------------------------------------------------- criterion


def _normalised_base(traj: FourierTrajectory, regressor, base, n_samples: int):
    t = traj.time_grid(n_samples)
    states = traj.evaluate(t)
    W = base.columns(regressor.stack(*states))
    norms = np.linalg.norm(W, axis=0)
    return W, norms, states


def condition_number(traj: FourierTrajectory, regressor, base,
                     n_samples: int = DEFAULT_N_SAMPLES) -> float:
    """cond of the column-normalised base regressor on ``n_samples`` times over one period.

    Returns ``inf`` when a base column vanishes (the trajectory does not excite it).
    """
    W, norms, _ = _normalised_base(traj, regressor, base, n_samples)
    if np.any(norms <= 1e-12 * max(norms.max(), 1.0)):
        return math.inf
    return float(np.linalg.cond(W / norms))


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
        norms = np.linalg.norm(W, axis=0)
        if np.any(norms <= 1e-12 * max(norms.max(), 1.0)):
            # a base column vanishes (not excited): worse than any clamped value below
            result = (_LOG_COND_DEGENERATE, np.zeros_like(z))
        else:
            Wn = W / norms
            # extreme singular values from the small Gram matrix (much cheaper than a thin
            # SVD of the tall regressor, and accurate for the cond values met here)
            lam, V = np.linalg.eigh(Wn.T @ Wn)
            lam_max = float(lam[-1])
            lam_min = max(float(lam[0]), _LAM_RATIO_FLOOR * lam_max)
            f = 0.5 * float(np.log(lam_max / lam_min))
            # d log cond / d Wn = Wn v v^T / lambda (max) - Wn v v^T / lambda (min)
            v_max, v_min = V[:, -1], V[:, 0]
            Gn = np.outer(Wn @ v_max, v_max) / lam_max - np.outer(Wn @ v_min, v_min) / lam_min
            # through the column normalisation: (I - wn wn^T) g / ||w|| per column
            Gw = (Gn - Wn * np.sum(Wn * Gn, axis=0)) / norms
            # chain rule through every state of every joint: one forward difference each,
            # perturbing all samples at once (row block k depends only on sample k)
            T, n = states[0].shape
            nb = W.shape[1]
            Gw3 = Gw.reshape(T, n, nb)
            grad_x = np.zeros(self.nx)
            for s_idx, M in enumerate((self.crit.q, self.crit.dq, self.crit.ddq)):
                g_s = np.empty((T, n))
                for j in range(n):
                    pert = [s.copy() for s in states]
                    h = self.fd_step * max(1.0, float(np.max(np.abs(states[s_idx][:, j]))))
                    pert[s_idx][:, j] += h
                    dW = (self._stack(*pert) - W).reshape(T, n, nb) / h
                    g_s[:, j] = np.einsum("kic,kic->k", Gw3, dW)
                grad_x += M.T @ g_s.T.ravel()
            result = (f, grad_x * self.x_scale)
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
        from tqdm import tqdm
        bar = tqdm(starts, desc=f"excitation design ({spec.name}, H={n_harmonics})", unit="start",
                   file=sys.stderr)
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


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """``python -m robident_twin.excitation``: optimise and save a design."""
    p = argparse.ArgumentParser(prog="python -m robident_twin.excitation",
                                description="Optimise a Fourier excitation trajectory (min cond of "
                                            "the base regressor) and save it as YAML.")
    p.add_argument("--robot", default="iiwa14", help="robot name or path of its robot.yaml")
    p.add_argument("--out", required=True, type=Path, help="output YAML file")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--harmonics", type=int, default=5)
    p.add_argument("--base-freq", type=float, default=0.1, help="base frequency, Hz")
    p.add_argument("--starts", type=int, default=4)
    p.add_argument("--maxiter", type=int, default=300, help="SLSQP iterations per start")
    p.add_argument("--margin", type=float, default=0.95, help="fraction of the limits used in design")
    p.add_argument("--samples", type=int, default=DEFAULT_N_SAMPLES,
                   help="criterion samples per period")
    p.add_argument("--check-points", type=int, default=DEFAULT_N_CONSTRAINT,
                   help="constraint grid points per period")
    p.add_argument("--measurement", default="joint_torque", choices=("joint_torque", "motor_torque"))
    p.add_argument("--zero-start", action="store_true", help="add dq(0) = ddq(0) = 0")
    p.add_argument("--max-cond", type=float, default=1e4,
                   help="fail when no feasible design reaches this condition number")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    try:
        from .base import compute_base_parameters
        from .regressor import ModelOptions, Regressor
        from .robot import load_robot

        spec = load_robot(args.robot)
        regressor = Regressor(spec, ModelOptions(measurement=args.measurement))
        base = compute_base_parameters(regressor)
        result = optimise_condition(
            spec, regressor, base, n_harmonics=args.harmonics, base_freq_hz=args.base_freq,
            n_starts=args.starts, seed=args.seed, n_samples=args.samples, n_check=args.check_points,
            margin=args.margin, maxiter=args.maxiter, zero_start=args.zero_start,
            max_cond=args.max_cond, progress=not args.no_progress)
        meta = {"robot": spec.name, "cond": round(float(result.cond), 6), "criterion": CRITERION,
                "measurement": args.measurement, "n_base": int(base.n_base), "seed": args.seed,
                "harmonics": args.harmonics, "n_starts": args.starts, "margin": args.margin,
                "n_samples": args.samples, "n_check": args.check_points,
                "zero_start": bool(args.zero_start), "design_time_s": round(result.time_s, 2)}
        save_design(result.trajectory, args.out, meta)
    except RobidentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"saved {args.out}: cond {result.cond:.4g} ({base.n_base} base parameters), "
          f"{args.starts} starts in {result.time_s:.1f} s")
    for h in result.history:
        print(f"  start {h['start']}: cond {h['cond_start']:.4g} -> {h['cond']:.4g}, "
              f"{'feasible' if h['feasible'] else 'infeasible'}, repair x{h['repair_scale']:.4f}, "
              f"{h['nit']} it, {h['time_s']:.1f} s, {h['message']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
