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
(:class:`CollisionSettings`, MuJoCo capsules from ``builders.to_collision_mjcf``). Gradients are
analytic through the linear Fourier basis (one forward difference per joint and state for the
regressor and the per-sample constraints). Optimisers: multistart SLSQP or differential
evolution + SLSQP polish; :func:`swevers_iteration` redesigns at each new estimate (on the twin:
``robident-twin task=design design.iterations=k``, :mod:`robident_twin.design_task`).
:func:`check_design` re-checks everything on a grid DENSE_CHECK_FACTOR x denser.

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



def _gradient_through_states(stack, crit, states, W: np.ndarray, G_W: np.ndarray, fd_step: float) -> np.ndarray:
    """Gradient with respect to the design vector x of a criterion whose gradient with respect
    to the regressor W is ``G_W``: the chain rule through every state (q, dq, ddq) of every
    joint, one forward difference each, perturbing all samples at once (the rows of sample k
    depend only on sample k). ``crit.q``, ``crit.dq``, ``crit.ddq`` map x to the stacked states."""
    T, n = states[0].shape
    nb = W.shape[1]
    c = W.shape[0] // T  # channels per sample
    G3 = G_W.reshape(T, c, nb)
    grad_x = np.zeros(crit.q.shape[1])
    for s_idx, M in enumerate((crit.q, crit.dq, crit.ddq)):
        g_s = np.empty((T, n))
        for j in range(n):
            pert = [s.copy() for s in states]
            h = fd_step * max(1.0, float(np.max(np.abs(states[s_idx][:, j]))))
            pert[s_idx][:, j] += h
            dW = (stack(*pert) - W).reshape(T, c, nb) / h
            g_s[:, j] = np.einsum("kic,kic->k", G3, dW)
        grad_x += M.T @ g_s.T.ravel()
    return grad_x

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
            result = (f, _gradient_through_states(self._stack, self.crit, states, W, Gw, self.fd_step)
                      * self.x_scale)
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


# =========================================================================== full designs (issue 4)
#
# Criteria (Swevers 1997 c1/c2, E-optimality, Kolyubin 2017 goal attainment), constraints beyond
# the kinematic limits (nominal-model torque, Cartesian bounds, self-collision and obstacles with
# the MuJoCo capsule geometry), options (zero velocity and acceleration at start and end, Xu 2020
# eq. 10; bandwidth bound n_f f0 below the lowest resonance, Kolyubin 2017), optimisers (multistart
# SLSQP with analytic gradients through the linear Fourier basis, differential evolution with SLSQP
# polish) and Swevers' iteration (estimate, then redesign with the bound at the new estimate).

CRITERIA = ("cond", "dopt", "eopt", "goal", "cond_raw")
CRITERION_NAMES = {
    "cond": "cond(noise-scaled, column-normalised base regressor) (Swevers c1)",
    "cond_raw": "cond of the plain base regressor, unscaled and unnormalised (Kolyubin 2017 cond(Omega_B))",
    "dopt": "log det of the base-parameter covariance (D-optimality, Swevers c2)",
    "eopt": "-log lambda_min of the Fisher information (E-optimality)",
    "goal": "goal attainment: cond and mean |tau| of the weak joints (Kolyubin 2017 eq. 10)",
}
_SOFTMIN_M = 0.005  # smoothing length of the soft-min over collision pairs during design, m
CONSTRAINT_KINDS = ("position", "velocity", "acceleration", "torque", "cartesian", "collision")
_KIND_UNITS = {"position": "rad", "velocity": "rad/s", "acceleration": "rad/s^2", "torque": "N m",
               "cartesian": "m", "collision": "m"}


def _opt_float(d: Mapping[str, Any], key: str, where: str, default=None, positive=False):
    v = d.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where}.{key}: expected a finite number, got {v!r}")
    if positive and v <= 0:
        raise ConfigError(f"{where}.{key}: expected a positive number, got {v!r}")
    return float(v)


def _vec3(v: Any, where: str) -> tuple[float, float, float] | None:
    if v is None:
        return None
    try:
        arr = np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        arr = np.zeros(0)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ConfigError(f"{where}: expected a list of 3 finite numbers (m), got {v!r}")
    return tuple(float(x) for x in arr)


@dataclass(frozen=True)
class CartesianBounds:
    """Bounds on the end-effector position (the flange origin, base frame, m).

    Swevers 1997: height bounds ``z_min_m <= z <= z_max_m`` and a minimum distance from the base
    axis ``r = sqrt(x^2 + y^2) >= r_min_m`` (closer, the robot touches its base); Kolyubin 2017
    eq. 10: ``d_xy >= 0.3``, ``z >= -0.2`` (see :meth:`kolyubin2017`); plus an optional
    axis-aligned box ``box_lo_m <= p <= box_hi_m`` and a maximum reach ``r_max_m``.
    """

    z_min_m: float | None = None
    z_max_m: float | None = None
    r_min_m: float | None = None
    r_max_m: float | None = None
    box_lo_m: tuple[float, float, float] | None = None
    box_hi_m: tuple[float, float, float] | None = None

    def __post_init__(self):
        for lo, hi in (("z_min_m", "z_max_m"), ("r_min_m", "r_max_m")):
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and not a < b:
                raise ConfigError(f"cartesian: {lo} = {a} must be below {hi} = {b}")
        if (self.box_lo_m is None) != (self.box_hi_m is None):
            raise ConfigError("cartesian: give both box_lo_m and box_hi_m, or neither")
        if self.box_lo_m is not None and not all(a < b for a, b in zip(self.box_lo_m, self.box_hi_m)):
            raise ConfigError(f"cartesian: box_lo_m {self.box_lo_m} must be below box_hi_m "
                              f"{self.box_hi_m} on every axis")

    @classmethod
    def kolyubin2017(cls) -> "CartesianBounds":
        """The workspace bounds of Kolyubin 2017 eq. 10: d_xy >= 0.3 m, z >= -0.2 m."""
        return cls(z_min_m=-0.2, r_min_m=0.3)

    @classmethod
    def from_config(cls, d: Mapping[str, Any] | None, where: str = "design.cartesian"):
        if d is None:
            return None
        if not isinstance(d, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {d!r}")
        allowed = {"z_min_m", "z_max_m", "r_min_m", "r_max_m", "box_lo_m", "box_hi_m", "preset"}
        unknown = set(d) - allowed
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
        if d.get("preset") is not None:
            if d["preset"] != "kolyubin2017":
                raise ConfigError(f"{where}.preset: expected 'kolyubin2017', got {d['preset']!r}")
            return cls.kolyubin2017()
        vals = {k: _opt_float(d, k, where) for k in ("z_min_m", "z_max_m", "r_min_m", "r_max_m")}
        if all(v is None for v in vals.values()) and d.get("box_lo_m") is None:
            return None
        return cls(**vals, box_lo_m=_vec3(d.get("box_lo_m"), f"{where}.box_lo_m"),
                   box_hi_m=_vec3(d.get("box_hi_m"), f"{where}.box_hi_m"))

    def names(self) -> list[str]:
        out = []
        if self.z_min_m is not None:
            out.append(f"height z >= {self.z_min_m:g} m")
        if self.z_max_m is not None:
            out.append(f"height z <= {self.z_max_m:g} m")
        if self.r_min_m is not None:
            out.append(f"distance from base axis >= {self.r_min_m:g} m")
        if self.r_max_m is not None:
            out.append(f"distance from base axis <= {self.r_max_m:g} m")
        if self.box_lo_m is not None:
            out += [f"box {ax} >= {v:g} m" for ax, v in zip("xyz", self.box_lo_m)]
            out += [f"box {ax} <= {v:g} m" for ax, v in zip("xyz", self.box_hi_m)]
        return out

    def values_and_limits(self, p_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(T, m) bounded quantities (z, r or a coordinate, m) and their (m,) bounds, in the
        order of :meth:`names`."""
        p = np.atleast_2d(p_m)
        r = np.hypot(p[:, 0], p[:, 1])
        vals, lims = [], []
        for key, q in (("z_min_m", p[:, 2]), ("z_max_m", p[:, 2]), ("r_min_m", r), ("r_max_m", r)):
            if getattr(self, key) is not None:
                vals.append(q)
                lims.append(getattr(self, key))
        if self.box_lo_m is not None:
            for bound in (self.box_lo_m, self.box_hi_m):
                for i in range(3):
                    vals.append(p[:, i])
                    lims.append(bound[i])
        return (np.stack(vals, axis=1) if vals else np.zeros((p.shape[0], 0))), np.array(lims)

    def margins(self, p_m: np.ndarray) -> np.ndarray:
        """(T, m) signed margins (>= 0 inside) for end-effector positions p_m (T, 3)."""
        p = np.atleast_2d(p_m)
        cols = []
        r = np.hypot(p[:, 0], p[:, 1])
        if self.z_min_m is not None:
            cols.append(p[:, 2] - self.z_min_m)
        if self.z_max_m is not None:
            cols.append(self.z_max_m - p[:, 2])
        if self.r_min_m is not None:
            cols.append(r - self.r_min_m)
        if self.r_max_m is not None:
            cols.append(self.r_max_m - r)
        if self.box_lo_m is not None:
            cols += [p[:, i] - self.box_lo_m[i] for i in range(3)]
            cols += [self.box_hi_m[i] - p[:, i] for i in range(3)]
        return np.stack(cols, axis=1) if cols else np.zeros((p.shape[0], 0))


@dataclass(frozen=True)
class Obstacle:
    """A static obstacle in the base frame: ``shape`` sphere (size [r]), box (half sizes
    [hx, hy, hz]) or capsule (size [r, half_length] along z), centre ``pos_m``."""

    name: str
    shape: str
    pos_m: tuple[float, float, float]
    size_m: tuple[float, ...]

    def __post_init__(self):
        n_size = {"sphere": 1, "box": 3, "capsule": 2}
        if self.shape not in n_size:
            raise ConfigError(f"obstacle '{self.name}': shape: expected one of {sorted(n_size)}, "
                              f"got {self.shape!r}")
        if len(self.size_m) != n_size[self.shape] or not all(s > 0 for s in self.size_m):
            raise ConfigError(f"obstacle '{self.name}': size_m: expected {n_size[self.shape]} positive "
                              f"number(s) for a {self.shape}, got {list(self.size_m)}")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.shape, "pos_m": list(self.pos_m),
                "size_m": list(self.size_m)}


@dataclass(frozen=True)
class CollisionSettings:
    """Self-collision (link capsules at least ``min_link_gap`` apart in the chain) and
    collision with ``obstacles`` (every moving link). Distances must stay above
    ``clearance_m``. Capsules of radius ``radius_m`` join successive joint origins."""

    self_collision: bool = True
    obstacles: tuple[Obstacle, ...] = ()
    radius_m: float = 0.06
    clearance_m: float = 0.01
    min_link_gap: int = 2

    @classmethod
    def from_config(cls, d: Mapping[str, Any] | None, where: str = "design.collision"):
        if d is None or d is False:
            return None
        if d is True:
            return cls()
        if not isinstance(d, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {d!r}")
        allowed = {"self_collision", "obstacles", "radius_m", "clearance_m", "min_link_gap"}
        unknown = set(d) - allowed
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
        obstacles = []
        for i, ob in enumerate(d.get("obstacles") or []):
            w = f"{where}.obstacles[{i}]"
            if not isinstance(ob, Mapping) or "pos_m" not in ob or "size_m" not in ob:
                raise ConfigError(f"{w}: expected a mapping with name, shape, pos_m, size_m; got {ob!r}")
            obstacles.append(Obstacle(str(ob.get("name", f"ob{i}")), str(ob.get("shape", "box")),
                                      _vec3(ob["pos_m"], f"{w}.pos_m"),
                                      tuple(float(x) for x in ob["size_m"])))
        radius = _opt_float(d, "radius_m", where, 0.06, positive=True)
        clearance = _opt_float(d, "clearance_m", where, 0.01)
        gap = d.get("min_link_gap", 2)
        if not isinstance(gap, int) or gap < 2:
            raise ConfigError(f"{where}.min_link_gap: expected an integer >= 2, got {gap!r}")
        return cls(bool(d.get("self_collision", True)), tuple(obstacles), radius, clearance, gap)


class CollisionChecker:
    """Signed distances between the link capsules and obstacles of the MuJoCo collision model
    (:func:`robident_twin.builders.to_collision_mjcf`), evaluated with ``mj_geomDistance``."""

    def __init__(self, spec: RobotSpec, settings: CollisionSettings):
        import mujoco

        from .builders import to_collision_mjcf

        self.spec, self.settings = spec, settings
        xml = to_collision_mjcf(spec, settings.radius_m, [o.as_dict() for o in settings.obstacles])
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(self.model)
        gid = {self.model.geom(i).name: i for i in range(self.model.ngeom)}
        n = spec.n_joints
        pairs: list[tuple[int, int]] = []
        names: list[str] = []
        if settings.self_collision:
            for a in range(0, n + 1):
                for b in range(a + settings.min_link_gap, n + 1):
                    pairs.append((gid[f"link{a}"], gid[f"link{b}"]))
                    names.append(f"link{a}-link{b}")
        for ob in settings.obstacles:
            for b in range(1, n + 1):
                pairs.append((gid[f"obstacle_{ob.name}"], gid[f"link{b}"]))
                names.append(f"{ob.name}-link{b}")
        self.pairs, self.pair_names = pairs, names
        self._mj = mujoco
        # self pairs already within the clearance at home (joined through a short link) can never
        # separate: they are not checked (listed in ``skipped_pairs``)
        d_home = self.distances(spec.home_rad[None, :])[0]
        keep = [i for i, nm in enumerate(names)
                if nm.startswith("obstacle") or not nm.startswith("link") or d_home[i] > settings.clearance_m]
        self.skipped_pairs = [names[i] for i in range(len(names)) if i not in keep]
        self.pairs = [pairs[i] for i in keep]
        self.pair_names = [names[i] for i in keep]

    def distances(self, q_rad: np.ndarray) -> np.ndarray:
        """(T, P) signed distances (m, negative = penetration) for configurations (T, n)."""
        q = np.atleast_2d(q_rad)
        out = np.empty((q.shape[0], len(self.pairs)))
        m, d, mj = self.model, self.data, self._mj
        for k in range(q.shape[0]):
            d.qpos[:] = q[k]
            mj.mj_kinematics(m, d)
            for p, (g1, g2) in enumerate(self.pairs):
                out[k, p] = mj.mj_geomDistance(m, d, g1, g2, 10.0, None)
        return out


def _frame_id(model, name: str = "flange") -> int:
    fid = model.getFrameId(name)
    if fid >= model.nframes:
        raise ConfigError(f"frame '{name}' not found in the pinocchio model")
    return fid


class EndEffector:
    """Flange position by pinocchio forward kinematics."""

    def __init__(self, spec: RobotSpec):
        from .builders import pinocchio_model

        self.model = pinocchio_model(spec)
        self.data = self.model.createData()
        self.fid = _frame_id(self.model, "flange")

    def positions(self, q_rad: np.ndarray) -> np.ndarray:
        import pinocchio as pin

        q = np.atleast_2d(q_rad)
        out = np.empty((q.shape[0], 3))
        for k in range(q.shape[0]):
            pin.framesForwardKinematics(self.model, self.data, q[k])
            out[k] = self.data.oMf[self.fid].translation
        return out


def nominal_torque_model(spec: RobotSpec, regressor=None, base=None, beta=None,
                         measurement: str | None = None):
    """Callable ``(q, dq, ddq) -> tau_Nm`` (samples x joints) of the nominal model.

    With ``beta`` (an estimate of the base parameters): ``W_base(q, dq, ddq) beta``; otherwise
    the twin's ground truth (:class:`robident_twin.dynamics.TruthModel`), joint or motor torque
    as ``measurement`` (default: the regressor's, else joint torque)."""
    if beta is not None:
        if regressor is None or base is None:
            raise ConfigError("nominal torque from an estimate needs the regressor and the base set")
        beta = np.asarray(beta, dtype=float)
        if beta.shape != (base.n_base,):
            raise ConfigError(f"beta: expected {base.n_base} base parameters, got shape {beta.shape}")

        def from_estimate(q, dq, ddq):
            q = np.atleast_2d(q)
            tau = base.columns(regressor.stack(q, np.atleast_2d(dq), np.atleast_2d(ddq))) @ beta
            return tau.reshape(q.shape[0], -1)[:, -q.shape[1]:]  # 'both': the motor channels
        return from_estimate
    from .dynamics import TruthModel

    truth = TruthModel(spec)
    if measurement is None:
        measurement = regressor.options.measurement if regressor is not None else "joint_torque"
    idx = 0 if measurement == "joint_torque" else 1  # the drive torque when motors are measured

    def from_truth(q, dq, ddq):
        return truth.torques(q, dq, ddq)[idx]
    return from_truth


class LimitedTorque:
    """The torques the robot file's limits bound, as a callable ``(q, dq, ddq) -> (T, n)`` N m.

    side: 'joint' (link-side joint torques, or the drive torque of an independent drive) or
    'motor' (motor torques in motor coordinates, C^T tau_joint + Ia ddq_m + f_m(dq_m), for a
    robot with coupled drives, e.g. the CLOOS differential wrist gear)."""

    def __init__(self, fn, side: str):
        self.fn, self.side = fn, side

    def __call__(self, q, dq, ddq) -> np.ndarray:
        return self.fn(q, dq, ddq)


def torque_limit_model(spec: RobotSpec, regressor=None, base=None, beta=None,
                       measurement: str | None = None) -> LimitedTorque:
    """Nominal torques to compare with ``spec.tau_max_Nm``.

    With coupled drives (``coupling_matrix``: q_joint = C q_motor) the limits are on the motors,
    so the motor torques C^T tau_joint + Ia ddq_m + f_m(dq_m) are returned whatever the
    measurement: a motor can exceed its limit through the coupling while every joint torque is
    within its own (the wrist motor of a differential gear also turns, and works, when only the
    other wrist joint moves). From an estimate ``beta`` this needs a regressor with motor
    channels (motor_torque or both). Independent drives: :func:`nominal_torque_model` of
    ``measurement`` (joint torque by default, the drive torque for motor_torque)."""
    if not spec.is_coupled:
        return LimitedTorque(nominal_torque_model(spec, regressor, base, beta, measurement), "joint")
    if beta is not None:
        meas = regressor.options.measurement if regressor is not None else None
        if meas not in ("motor_torque", "both"):
            raise ConfigError(
                f"torque limits of robot '{spec.name}' are on its coupled motors: the motor torques "
                f"from an estimate need a motor_torque or both regressor, got measurement {meas!r}")
        return LimitedTorque(nominal_torque_model(spec, regressor, base, beta), "motor")
    return LimitedTorque(nominal_torque_model(spec, measurement="motor_torque"), "motor")


def noise_std_Nm(spec: RobotSpec, measurement: str = "joint_torque") -> np.ndarray:
    """Torque noise std (N m) per measured channel from the robot file: per joint for
    joint_torque / motor_torque, joint then motor channels for both, the root sum of squares
    for difference. Unit weights when the file gives no (positive) noise."""
    j = np.asarray(spec.tau_joint_std_Nm, dtype=float)
    m = np.asarray(spec.tau_motor_std_Nm, dtype=float)
    std = {"motor_torque": m, "joint_torque": j, "both": np.concatenate([j, m]),
           "difference": np.hypot(j, m)}.get(measurement, j)
    if np.any(std <= 0):
        return np.ones_like(std)
    return std


def _n_channels(regressor) -> int:
    return int(getattr(regressor, "n_channels", regressor.n_joints))


@dataclass(frozen=True)
class DesignConstraints:
    """Every constraint and option of a design.

    margin: fraction of the position/velocity/acceleration limits used while optimising;
    zero_start: dq = ddq = 0 at the start and, by periodicity, at the end (Xu 2020 eq. 10);
    resonance_hz: lowest resonance; designs need n_f f0 < resonance_hz (Kolyubin 2017);
    torque: |tau_nominal| <= torque_margin x tau_max; cartesian: :class:`CartesianBounds`,
    tightened by cartesian_margin_m while optimising; collision: :class:`CollisionSettings`;
    n_check / n_check_nonlinear: grid points per period of the linear / nonlinear
    constraints while optimising (the final check uses a grid DENSE_CHECK_FACTOR x denser).
    """

    margin: float = 0.95
    zero_start: bool = False
    resonance_hz: float | None = None
    torque: bool = False
    torque_margin: float = 0.9
    cartesian: CartesianBounds | None = None
    cartesian_margin_m: float = 0.01
    collision: CollisionSettings | None = None
    n_check: int = DEFAULT_N_CONSTRAINT
    n_check_nonlinear: int = 100

    def __post_init__(self):
        _check_margin(self.margin)
        if not 0 < self.torque_margin <= 1:
            raise ConfigError(f"torque_margin: expected a fraction in (0, 1], got {self.torque_margin!r}")
        if self.resonance_hz is not None and not self.resonance_hz > 0:
            raise ConfigError(f"resonance_hz: expected a positive frequency in Hz, got {self.resonance_hz!r}")
        for name in ("n_check", "n_check_nonlinear"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 2:
                raise ConfigError(f"{name}: expected an integer >= 2, got {v!r}")

    @property
    def nonlinear(self) -> bool:
        return self.torque or self.cartesian is not None or self.collision is not None

    @classmethod
    def from_config(cls, d: Mapping[str, Any] | None, where: str = "design") -> "DesignConstraints":
        """From a config mapping (the ``design.constraints`` block); errors name the key."""
        d = dict(d or {})
        allowed = {"margin", "zero_start", "resonance_hz", "torque", "torque_margin", "cartesian",
                   "cartesian_margin_m", "collision", "n_check", "n_check_nonlinear"}
        unknown = set(d) - allowed
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
        kw: dict[str, Any] = {}
        for k in ("margin", "torque_margin", "cartesian_margin_m"):
            if d.get(k) is not None:
                kw[k] = _opt_float(d, k, where)
        if d.get("resonance_hz") is not None:
            kw["resonance_hz"] = _opt_float(d, "resonance_hz", where, positive=True)
        for k in ("zero_start", "torque"):
            if d.get(k) is not None:
                kw[k] = bool(d[k])
        for k in ("n_check", "n_check_nonlinear"):
            if d.get(k) is not None:
                kw[k] = d[k]
        kw["cartesian"] = CartesianBounds.from_config(d.get("cartesian"), f"{where}.cartesian")
        kw["collision"] = CollisionSettings.from_config(d.get("collision"), f"{where}.collision")
        return cls(**kw)


@dataclass(frozen=True)
class ConstraintViolation:
    """The worst violation of one constraint (kind, joint or what) on a check grid.

    ``margin`` is signed: limit minus value (negative = violated by that much), in ``unit``."""

    kind: str
    what: str
    time_s: float
    value: float
    limit: float
    margin: float

    @property
    def unit(self) -> str:
        return _KIND_UNITS[self.kind]

    def describe(self) -> str:
        return (f"{self.kind}: {self.what} at t = {self.time_s:.4f} s: value {self.value:.6g} "
                f"{self.unit}, limit {self.limit:.6g} {self.unit}, margin {self.margin:.4g} {self.unit}")


class ConstraintSet:
    """Evaluates the nonlinear constraints (torque, Cartesian, collision) of a design on states.

    ``margins(q, dq, ddq, design=True)`` returns (T, m) signed margins (>= 0 satisfied); with
    ``design=True`` the design-time tightening (torque_margin, cartesian_margin_m, clearance)
    applies, with ``design=False`` the true limits (plus the configured clearance)."""

    def __init__(self, spec: RobotSpec, constraints: DesignConstraints, torque_fn=None):
        self.spec, self.c = spec, constraints
        if constraints.torque and torque_fn is None:
            torque_fn = torque_limit_model(spec)  # the twin's truth; motors for coupled drives
        self.torque_fn = torque_fn
        # 'motor' when the limits bound motor torques (coupled drives), else 'joint'
        self.torque_side = getattr(torque_fn, "side", "joint")
        self.ee = EndEffector(spec) if constraints.cartesian is not None else None
        self.coll = CollisionChecker(spec, constraints.collision) if constraints.collision else None
        self.labels: list[tuple[str, str]] = []  # (kind, what) per column
        if constraints.torque:
            for j in spec.joint_names:
                self.labels += [("torque", f"{self.torque_side} {j} upper"),
                                ("torque", f"{self.torque_side} {j} lower")]
        if constraints.cartesian is not None:
            self.labels += [("cartesian", s) for s in constraints.cartesian.names()]
        if self.coll is not None:
            self.labels.append(("collision", "closest pair"))
        self.uses_rates = constraints.torque  # the others depend on q only

    @property
    def m(self) -> int:
        return len(self.labels)

    def torque_part(self, q, dq, ddq, design: bool = True) -> np.ndarray:
        """(T, 2n) torque margins: lim - tau and lim + tau per joint (empty without torque)."""
        if not self.c.torque:
            return np.zeros((np.atleast_2d(q).shape[0], 0))
        tau = self.torque_fn(q, dq, ddq)
        lim = self.spec.tau_max_Nm * (self.c.torque_margin if design else 1.0)
        return np.stack([lim - tau, lim + tau], axis=2).reshape(tau.shape[0], -1)

    def geometric_part(self, q, design: bool = True, detail: bool = False):
        """(T, m) Cartesian and collision margins, functions of q only."""
        c = self.c
        cols = []
        extra: dict[str, Any] = {}
        if self.ee is not None:
            p = self.ee.positions(q)
            cols.append(c.cartesian.margins(p) - (c.cartesian_margin_m if design else 0.0))
            extra["p_m"] = p
        if self.coll is not None:
            dist = self.coll.distances(q)
            k = np.argmin(dist, axis=1)
            dmin = dist[np.arange(dist.shape[0]), k]
            if design:
                # smooth soft-min over the pairs (a lower bound of the min, no kinks for SLSQP)
                kappa = _SOFTMIN_M
                dsoft = dmin - kappa * np.log(np.sum(np.exp(-(dist - dmin[:, None]) / kappa), axis=1))
                cols.append((dsoft - self.c.collision.clearance_m - c.cartesian_margin_m)[:, None])
            else:
                cols.append((dmin - self.c.collision.clearance_m)[:, None])
            extra["distance_m"], extra["closest_pair"] = dmin, k
        g = np.hstack(cols) if cols else np.zeros((np.atleast_2d(q).shape[0], 0))
        return (g, extra) if detail else g

    def margins(self, q, dq, ddq, design: bool = True, detail: bool = False):
        g_geo, extra = self.geometric_part(q, design, detail=True)
        g = np.hstack([self.torque_part(q, dq, ddq, design), g_geo])
        if detail and self.c.torque:
            extra["tau_Nm"] = self.torque_fn(q, dq, ddq)
        return (g, extra) if detail else g

    def violations(self, t_s, q, dq, ddq) -> list[ConstraintViolation]:
        """Worst violation per constraint column at the true limits."""
        g, extra = self.margins(q, dq, ddq, design=False, detail=True)
        out = []
        tau_lim = self.spec.tau_max_Nm
        for col, (kind, what) in enumerate(self.labels):
            k = int(np.argmin(g[:, col]))
            if g[k, col] >= 0:
                continue
            if kind == "torque":
                j = col // 2
                value, limit = float(extra["tau_Nm"][k, j]), float(tau_lim[j]) * (1 if col % 2 == 0 else -1)
            elif kind == "collision":
                value = float(extra["distance_m"][k])
                limit = float(self.c.collision.clearance_m)
                what = f"closest pair {self.coll.pair_names[int(extra['closest_pair'][k])]}"
            else:
                vals, lims = self.c.cartesian.values_and_limits(extra["p_m"][k:k + 1])
                i = col - (2 * self.spec.n_joints if self.c.torque else 0)
                value, limit = float(vals[0, i]), float(lims[i])
                what = f"end effector {what} (p = {np.round(extra['p_m'][k], 4).tolist()} m)"
            out.append(ConstraintViolation(kind, what, float(t_s[k]), value, limit, float(g[k, col])))
        return out


def check_design(traj: FourierTrajectory, spec: RobotSpec, constraints: DesignConstraints,
                 torque_fn=None, n_grid: int | None = None,
                 cset: ConstraintSet | None = None) -> list[ConstraintViolation]:
    """Every violated constraint of a design at the FULL limits on ``n_grid`` points per period
    (default DENSE_CHECK_FACTOR x the design grid), worst per joint and kind, plus the
    zero-start and bandwidth options. Empty when the design satisfies everything."""
    _check_joints(traj, spec)
    n_grid = DENSE_CHECK_FACTOR * constraints.n_check if n_grid is None else int(n_grid)
    out = []
    for v in check_limits(traj, spec, n_grid=n_grid):
        margin = -v.excess
        limit = v.limit
        out.append(ConstraintViolation(v.kind, f"joint {v.joint}", v.time_s, v.value, limit, margin))
    if constraints.zero_start:
        _, dq0, ddq0 = traj.evaluate(0.0)
        for j, name in enumerate(spec.joint_names):
            if abs(dq0[0, j]) > 1e-6:
                out.append(ConstraintViolation("velocity", f"joint {name} at rest at start/end", 0.0,
                                               float(dq0[0, j]), 0.0, -abs(float(dq0[0, j]))))
            if abs(ddq0[0, j]) > 1e-6:
                out.append(ConstraintViolation("acceleration", f"joint {name} at rest at start/end",
                                               0.0, float(ddq0[0, j]), 0.0, -abs(float(ddq0[0, j]))))
    if constraints.nonlinear:
        cset = cset or ConstraintSet(spec, constraints, torque_fn)
        t = traj.time_grid(n_grid)
        out += cset.violations(t, *traj.evaluate(t))
    return out


def check_bandwidth(n_harmonics: int, base_freq_hz: float, resonance_hz: float | None) -> None:
    """Kolyubin 2017: the highest excited frequency n_f f0 must stay below the lowest resonance."""
    if resonance_hz is not None and n_harmonics * base_freq_hz >= resonance_hz:
        raise ConfigError(
            f"bandwidth: {n_harmonics} harmonics x {base_freq_hz:g} Hz = "
            f"{n_harmonics * base_freq_hz:g} Hz is not below the lowest resonance {resonance_hz:g} Hz; "
            f"use fewer harmonics or a lower base frequency (n_f f0 < f_r)")


# --------------------------------------------------------------------------- criteria on W


def _criterion_and_grad(kind: str, W: np.ndarray, row_w: np.ndarray) -> tuple[float, np.ndarray]:
    """Criterion value and its gradient with respect to the (unweighted) base regressor W.

    Rows are scaled by ``row_w`` (1 / noise std of the row's joint). cond: log cond of the
    column-normalised weighted regressor; dopt: -log det(Ws^T Ws) = log det(covariance);
    eopt: -log lambda_min(Ws^T Ws); cond_raw: log cond of W itself (no row or column scaling)."""
    if kind == "cond_raw":
        lam, V = np.linalg.eigh(W.T @ W)
        lam_max = float(lam[-1])
        lam_min = max(float(lam[0]), _LAM_RATIO_FLOOR * lam_max)
        v_max, v_min = V[:, -1], V[:, 0]
        G = np.outer(W @ v_max, v_max) / lam_max - np.outer(W @ v_min, v_min) / lam_min
        return 0.5 * float(np.log(lam_max / lam_min)), G
    Ws = W * row_w[:, None]
    if kind == "cond":
        norms = np.linalg.norm(Ws, axis=0)
        if np.any(norms <= 1e-12 * max(norms.max(), 1.0)):
            return _LOG_COND_DEGENERATE, np.zeros_like(W)
        Wn = Ws / norms
        lam, V = np.linalg.eigh(Wn.T @ Wn)
        lam_max = float(lam[-1])
        lam_min = max(float(lam[0]), _LAM_RATIO_FLOOR * lam_max)
        f = 0.5 * float(np.log(lam_max / lam_min))
        v_max, v_min = V[:, -1], V[:, 0]
        Gn = np.outer(Wn @ v_max, v_max) / lam_max - np.outer(Wn @ v_min, v_min) / lam_min
        Gs = (Gn - Wn * np.sum(Wn * Gn, axis=0)) / norms
    else:
        # thin SVD of the tall weighted regressor (more accurate than the Gram matrix here,
        # where the unnormalised columns span many orders of magnitude)
        U, sv, Vt = np.linalg.svd(Ws, full_matrices=False)
        floor = math.sqrt(_LAM_RATIO_FLOOR) * max(float(sv[0]), 1e-300)
        sv_c = np.maximum(sv, floor)
        if kind == "dopt":  # -log det(Ws^T Ws) = -2 sum log sigma_i
            f = -2.0 * float(np.sum(np.log(sv_c)))
            Gs = -2.0 * (U / sv_c) @ Vt
        elif kind == "eopt":  # -log lambda_min = -2 log sigma_min
            f = -2.0 * math.log(float(sv_c[-1]))
            Gs = -2.0 * np.outer(U[:, -1], Vt[-1]) / float(sv_c[-1])
        else:
            raise ConfigError(f"criterion: expected one of {CRITERIA}, got {kind!r}")
    return f, Gs * row_w[:, None]


def design_criterion(traj: FourierTrajectory, regressor, base, criterion: str = "cond",
                     noise_std: np.ndarray | None = None, n_samples: int = DEFAULT_N_SAMPLES) -> float:
    """Value of a criterion for a trajectory on ``n_samples`` points per period.

    cond: condition number (not its log) of the noise-scaled, column-normalised base regressor
    (Swevers c1; ``noise_std=None`` gives unit weights, i.e. :func:`condition_number`);
    dopt: log10 det of the covariance ``(W^T Sigma^-1 W)^-1`` (Swevers c2) for one sample per grid
    point; eopt: -log10 lambda_min of the information matrix."""
    W = base.columns(regressor.stack(*traj.evaluate(traj.time_grid(n_samples))))
    c = W.shape[0] // n_samples
    sd = np.ones(c) if noise_std is None else np.asarray(noise_std, dtype=float)
    if sd.shape != (c,):
        raise ConfigError(f"noise_std: expected {c} values (one per measured channel), got shape {sd.shape}")
    row_w = np.tile(1.0 / sd, n_samples)
    if criterion == "cond_raw":
        return float(np.linalg.cond(W))
    if criterion == "cond":
        Ws = W * row_w[:, None]
        norms = np.linalg.norm(Ws, axis=0)
        if np.any(norms <= 1e-12 * max(norms.max(), 1.0)):
            return math.inf
        return float(np.linalg.cond(Ws / norms))
    if criterion in ("dopt", "eopt"):
        Ws = W * row_w[:, None]
        lam = np.linalg.eigvalsh(Ws.T @ Ws)
        if lam[0] <= 0:
            return math.inf
        if criterion == "dopt":
            return -float(np.sum(np.log10(lam)))
        return -math.log10(lam[0])
    raise ConfigError(f"criterion: expected one of cond, cond_raw, dopt, eopt, got {criterion!r}")


def covariance_log10_det(traj, regressor, base, noise_std=None, n_samples=DEFAULT_N_SAMPLES) -> float:
    """log10 det of the base-parameter covariance (Cramer-Rao bound) on ``n_samples`` points."""
    return design_criterion(traj, regressor, base, "dopt", noise_std, n_samples)


# --------------------------------------------------------------------------- the design problem


@dataclass(frozen=True)
class GoalSettings:
    """Kolyubin 2017 eq. 10 goal attainment: goals cond <= goal_cond and, for every weak joint
    j, tau_max_j - mean|tau_j| <= k_j tau_max_j (Lambda), weights Psi = |Lambda|; minimise gamma
    subject to F - gamma Psi <= Lambda. ``goal_cond=None``: 1.1 x the cond of a cond-only
    design run first (the paper's Remark 4). weak_joints are 0-based (default: last two).
    cond_criterion: which cond the goal bounds ('cond' = Swevers c1, 'cond_raw' = the paper's
    plain cond(Omega_B))."""

    goal_cond: float | None = 35.0
    k_tau: float = 0.9
    weak_joints: tuple[int, ...] | None = None
    cond_criterion: str = "cond"


class _DesignProblem(_Problem):
    """:class:`_Problem` with any criterion, noise weights and nonlinear constraints."""

    def __init__(self, spec, regressor, base, H, base_freq_hz, n_samples, constraints: DesignConstraints,
                 criterion: str, noise_std, torque_fn, goal: GoalSettings | None = None,
                 limit_fn=None):
        super().__init__(spec, regressor, base, H, base_freq_hz, n_samples, constraints.n_check,
                         constraints.margin, constraints.zero_start)
        self.kind = criterion
        self.row_w = np.tile(1.0 / np.asarray(noise_std, dtype=float), n_samples)
        self.torque_fn = torque_fn
        self.cons = constraints
        # limit_fn: the torques the limits bound (motor torques for coupled drives)
        self.cset = (ConstraintSet(spec, constraints, limit_fn if limit_fn is not None else torque_fn)
                     if constraints.nonlinear else None)
        period = 1.0 / self.f
        T = constraints.n_check_nonlinear
        self.nl = _LinearBasis(self.n, H, 2 * math.pi * self.f, np.arange(T) * (period / T))
        self._nl_cache: tuple[np.ndarray, tuple] | None = None
        self.goal = goal
        if criterion == "goal":
            if torque_fn is None:
                raise ConfigError("the goal-attainment criterion needs a nominal torque model")
            weak = goal.weak_joints if goal.weak_joints is not None else (self.n - 2, self.n - 1)
            self.weak = tuple(int(j) for j in weak)
            tmax = spec.tau_max_Nm[list(self.weak)]
            self.Lambda = np.concatenate([[goal.goal_cond], goal.k_tau * tmax])
            self.Psi = np.abs(self.Lambda)
            self._tmax_weak = tmax
        self.constraints = list(self.constraints)
        if self.cset is not None:
            self.constraints.append({"type": "ineq", "fun": self.nl_fun, "jac": self.nl_jac})

    # ---- per-sample functions and their gradients through the Fourier basis

    def _per_sample_jac(self, fn, states, basis: _LinearBasis, uses_rates: bool, g0=None,
                        flat: bool = True):
        """Jacobian d vec(g) / dz of per-sample g(q_k, dq_k, ddq_k) (T, m): one forward
        difference per state and joint, all samples at once."""
        if g0 is None:
            g0 = fn(*states)
        T, m = g0.shape
        n = self.n
        J = np.zeros((T, m, self.nx))
        mats = (basis.q, basis.dq, basis.ddq) if uses_rates else (basis.q,)
        for s_idx, M in enumerate(mats):
            for j in range(n):
                pert = [s.copy() for s in states]
                h = self.fd_step * max(1.0, float(np.max(np.abs(states[s_idx][:, j]))))
                pert[s_idx][:, j] += h
                dg = (fn(*pert) - g0) / h  # (T, m)
                Mj = M[j * T:(j + 1) * T]  # (T, nx)
                J += dg[:, :, None] * Mj[:, None, :]
        J *= self.x_scale
        return J.reshape(T * m, self.nx) if flat else J

    def _nl_eval(self, z):
        if self._nl_cache is not None and np.array_equal(z, self._nl_cache[0]):
            return self._nl_cache[1]
        states = self.nl.states(self.to_x(z))
        cs = self.cset
        parts_g, parts_J = [], []
        if cs.c.torque:
            g_t = cs.torque_part(*states)
            parts_g.append(g_t)
            parts_J.append(self._per_sample_jac(cs.torque_part, states, self.nl, True, g_t, flat=False))
        if cs.ee is not None or cs.coll is not None:
            geo = lambda q, dq, ddq: cs.geometric_part(q)  # noqa: E731
            g_g = geo(*states)
            parts_g.append(g_g)
            parts_J.append(self._per_sample_jac(geo, states, self.nl, False, g_g, flat=False))
        g = np.hstack(parts_g)
        J = np.concatenate(parts_J, axis=1).reshape(-1, self.nx)
        self._nl_cache = (z.copy(), (g.ravel(), J))
        return self._nl_cache[1]

    def nl_fun(self, z):
        return self._nl_eval(z[:self.nx])[0]

    def nl_jac(self, z):
        J = self._nl_eval(z[:self.nx])[1]
        return J if z.shape[0] == self.nx else np.hstack([J, np.zeros((J.shape[0], 1))])

    # ---- objective

    def _evaluate(self, z):
        if self._cache_z is not None and np.array_equal(z, self._cache_z):
            return self._cache
        self.n_evals += 1
        kind = self.goal.cond_criterion if self.kind == "goal" else self.kind
        states = self.crit.states(self.to_x(z))
        W = self._stack(*states)
        f, GW = _criterion_and_grad(kind, W, self.row_w)
        result = (f, _gradient_through_states(self._stack, self.crit, states, W, GW, self.fd_step) * self.x_scale)
        self._cache_z, self._cache = z.copy(), result
        return result

    # ---- goal attainment (extra variable gamma at the end)

    def goal_F(self, z):
        """F = [cond, tau_max_j - mean|tau_j| (weak joints)] and dF/dz."""
        logc, dlogc = self._evaluate(z)
        cond = math.exp(logc)
        states = self.crit.states(self.to_x(z))
        eps = 1e-3

        def mean_abs(q, dq, ddq):
            tau = self.torque_fn(q, dq, ddq)[:, list(self.weak)]
            return np.sqrt(tau ** 2 + eps ** 2)

        a0 = mean_abs(*states)
        J = self._per_sample_jac(mean_abs, states, self.crit, True, a0)  # (T*w, nx)
        T, w = a0.shape
        dmean = J.reshape(T, w, self.nx).mean(axis=0)
        F = np.concatenate([[cond], self._tmax_weak - a0.mean(axis=0)])
        dF = np.vstack([cond * dlogc, -dmean])
        return F, dF

    def goal_constraints(self):
        def fun(zg):
            F, _ = self.goal_F(zg[:self.nx])
            return self.Lambda + zg[-1] * self.Psi - F

        def jac(zg):
            _, dF = self.goal_F(zg[:self.nx])
            return np.hstack([-dF, self.Psi[:, None]])
        cons = [{"type": "ineq", "fun": fun, "jac": jac}]
        for c in self.constraints:
            f0, j0 = c["fun"], c["jac"]
            cons.append({"type": c["type"], "fun": (lambda zg, f0=f0: f0(zg[:self.nx])),
                         "jac": (lambda zg, j0=j0: _pad_column(j0(zg[:self.nx])))})
        return cons

    # ---- feasibility helpers

    def static_margin(self, q0: np.ndarray) -> float:
        """Smallest nonlinear margin (design tightening) of the constant trajectory at q0."""
        if self.cset is None:
            return math.inf
        z = np.zeros((1, self.n))
        g = self.cset.margins(q0[None, :], z, z)
        return float(g.min()) if g.size else math.inf

    def nl_min(self, z) -> float:
        if self.cset is None:
            return math.inf
        g = self.nl_fun(z)
        return float(g.min()) if g.size else math.inf


def _pad_column(J: np.ndarray) -> np.ndarray:
    J = np.atleast_2d(J)
    return np.hstack([J, np.zeros((J.shape[0], 1))])


def _feasible_q0(prob: _DesignProblem, rng: np.random.Generator, tries: int = 400) -> np.ndarray:
    """A random offset within 0.6 of the (margin) position range whose constant trajectory meets
    the nonlinear constraints; raises TrajectoryError naming the constraint when none does."""
    lo, hi = prob.lim["q_lo_rad"], prob.lim["q_hi_rad"]
    centre, half = 0.5 * (hi + lo), 0.5 * (hi - lo)
    best, best_m = None, -math.inf
    for _ in range(tries):
        q0 = centre + rng.uniform(-0.6, 0.6, prob.n) * half
        m = prob.static_margin(q0)
        if m > 0:
            return q0
        if m > best_m:
            best, best_m = q0, m
    worst = ""
    if prob.cset is not None and best is not None:
        z = np.zeros((1, prob.n))
        g = prob.cset.margins(best[None, :], z, z)[0]
        i = int(np.argmin(g))
        kind, what = prob.cset.labels[i]
        worst = f"; the best of {tries} random configurations still misses {kind} '{what}' by {-g[i]:.4g} " \
                f"{_KIND_UNITS[kind]}"
    raise TrajectoryError(
        f"excitation design for robot '{prob.spec.name}' is infeasible: no configuration within the "
        f"position limits meets the torque / Cartesian / collision constraints even at rest{worst}. "
        f"Relax the Cartesian bounds, obstacles or torque margin.")


def _start(prob: _DesignProblem, rng, fill: float) -> np.ndarray:
    """Random start that meets every constraint on the design grids."""
    z = prob.random_start(rng, fill)
    if prob.cset is None:
        return z
    q0 = _feasible_q0(prob, rng)
    x = prob.to_x(z)
    x[:prob.n] = q0
    z = prob.to_z(x)
    # re-scale the oscillation for the linear room about the new offset, then for the rest
    z0 = prob.to_z(np.concatenate([q0, np.zeros(prob.nx - prob.n)]))
    dz = z - z0
    room = prob.G @ z0 + prob.h
    use = -(prob.G @ dz)
    ratio = np.max(np.where(use > 0, use / np.maximum(room, 1e-300), 0.0))
    s = fill / ratio if ratio > 0 else 1.0
    for _ in range(40):
        zs = z0 + s * dz
        if prob.nl_min(zs) > 0:
            return zs
        s *= 0.7
    return z0 + s * dz


def _repair(traj: FourierTrajectory, spec, constraints, cset, n_dense) -> tuple[FourierTrajectory, float]:
    """Shrink the oscillation about q0 until the dense check passes; (traj, scale), scale 0 if none."""
    def ok(tr):
        return not check_design(tr, spec, constraints, n_grid=n_dense, cset=cset)
    if ok(traj):
        return traj, 1.0
    s = _max_feasible_scale(traj, spec, n_dense) * (1.0 - 1e-9)
    for _ in range(30):
        if s <= 1e-3:
            break
        tr = _scaled(traj, s)
        if ok(tr):
            return tr, s
        s *= 0.97
    return traj, 0.0


def _settings_text(spec, constraints: DesignConstraints, H, f) -> str:
    parts = [f"limits x {constraints.margin:g}"]
    if constraints.zero_start:
        parts.append("dq = ddq = 0 at start and end")
    if constraints.torque:
        parts.append(f"|tau| <= {constraints.torque_margin:g} tau_max")
    if constraints.cartesian is not None:
        parts.append("Cartesian: " + ", ".join(constraints.cartesian.names()))
    if constraints.collision is not None:
        cs = constraints.collision
        parts.append(f"collision clearance {cs.clearance_m:g} m (self: {cs.self_collision}, "
                     f"{len(cs.obstacles)} obstacle(s))")
    return f"{H} harmonic(s) at {f:g} Hz, " + "; ".join(parts)


def optimise_design(spec: RobotSpec, regressor, base, criterion: str = "cond",
                    constraints: DesignConstraints | None = None, n_harmonics: int = 5,
                    base_freq_hz: float = 0.1, n_starts: int = 4, seed: int = 0,
                    method: str = "slsqp", noise_std: np.ndarray | None = None,
                    torque_fn=None, beta=None, goal: GoalSettings | None = None,
                    n_samples: int = DEFAULT_N_SAMPLES, maxiter: int = 200, ftol: float = 1e-6,
                    max_cond: float = 1e4, de_maxiter: int = 30, de_popsize: int = 2,
                    initial: FourierTrajectory | None = None, progress: bool = False) -> DesignResult:
    """Optimal excitation design with any criterion, constraint set and optimiser.

    criterion: 'cond' (Swevers c1: noise-scaled, column-normalised base regressor), 'dopt'
    (Swevers c2: log det covariance), 'eopt', 'goal' (Kolyubin 2017 eq. 10, see
    :class:`GoalSettings`). noise_std: per-joint torque noise std (default: the robot file's
    for the regressor's measurement). torque_fn: nominal torque model for the torque limits and
    the goal criterion (default: the twin's truth, or ``W_base beta`` when ``beta`` is given; the
    limits then bound :func:`torque_limit_model`, i.e. the MOTOR torques of coupled drives). method: 'slsqp' (multistart) or 'de'
    (differential evolution over oscillations scaled into the kinematic limits, then SLSQP
    polish). ``initial``: an extra start (e.g. the previous design in Swevers' iteration).

    Every returned design passes :func:`check_design` on a grid DENSE_CHECK_FACTOR x denser than
    the design grid (infeasible optima are shrunk about q0). Raises TrajectoryError with the
    reason when no feasible design excites all base parameters (cond > max_cond), ConfigError for
    bad settings (e.g. the bandwidth bound)."""
    constraints = constraints or DesignConstraints()
    if criterion not in CRITERIA:
        raise ConfigError(f"criterion: expected one of {CRITERIA}, got {criterion!r}")
    if method not in ("slsqp", "de"):
        raise ConfigError(f"method: expected 'slsqp' or 'de', got {method!r}")
    for name, val, least in (("n_harmonics", n_harmonics, 1), ("n_starts", n_starts, 1),
                             ("n_samples", n_samples, 1), ("maxiter", maxiter, 0)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < least:
            raise ConfigError(f"{name}: expected an integer >= {least}, got {val!r}")
    if not (isinstance(base_freq_hz, (int, float)) and math.isfinite(base_freq_hz) and base_freq_hz > 0):
        raise ConfigError(f"base_freq_hz: expected a positive frequency in Hz, got {base_freq_hz!r}")
    check_bandwidth(n_harmonics, base_freq_hz, constraints.resonance_hz)
    if constraints.zero_start and n_harmonics < 2:
        raise ConfigError("zero_start: dq(0) = ddq(0) = 0 needs at least 2 harmonics per joint")
    if n_samples * spec.n_joints < base.n_base:
        raise ConfigError(f"n_samples: {n_samples} samples x {spec.n_joints} joints give fewer rows "
                          f"than the {base.n_base} base parameters")
    measurement = regressor.options.measurement
    noise_std = noise_std_Nm(spec, measurement) if noise_std is None else np.asarray(noise_std, float)
    if noise_std.shape != (_n_channels(regressor),) or np.any(noise_std <= 0):
        raise ConfigError(f"noise_std: expected {_n_channels(regressor)} positive values (N m, one per "
                          f"measured channel), got {noise_std}")
    limit_fn = torque_fn
    if torque_fn is None and (constraints.torque or criterion == "goal"):
        torque_fn = nominal_torque_model(spec, regressor, base, beta)
        limit_fn = torque_limit_model(spec, regressor, base, beta) if constraints.torque else None
    from scipy.optimize import differential_evolution, minimize

    t_start = time.perf_counter()
    if criterion == "goal":
        goal = goal or GoalSettings()
        if goal.goal_cond is None:
            first = optimise_design(spec, regressor, base, goal.cond_criterion, constraints, n_harmonics,
                                    base_freq_hz, max(1, n_starts // 2), seed, "slsqp", noise_std,
                                    limit_fn or torque_fn, None, None, n_samples, maxiter, ftol, max_cond)
            first_cond = design_criterion(first.trajectory, regressor, base, goal.cond_criterion,
                                          noise_std, n_samples)
            goal = GoalSettings(1.1 * first_cond, goal.k_tau, goal.weak_joints, goal.cond_criterion)
            initial = initial or first.trajectory
    prob = _DesignProblem(spec, regressor, base, int(n_harmonics), float(base_freq_hz), int(n_samples),
                          constraints, criterion, noise_std, torque_fn, goal, limit_fn)
    n_dense = DENSE_CHECK_FACTOR * constraints.n_check
    cset_dense = ConstraintSet(spec, constraints, limit_fn) if constraints.nonlinear else None
    rng = np.random.default_rng(seed)
    history: list[dict[str, Any]] = []
    best: tuple[float, float, FourierTrajectory] | None = None  # (objective, cond, traj)

    def design_feasible(z) -> bool:
        """Every constraint met (with the design tightening) on the design grids."""
        if np.min(prob.G @ z + prob.h) < -1e-9:
            return False
        if prob.E is not None and np.max(np.abs(prob.E @ z)) > 1e-9:
            return False
        return prob.nl_min(z) >= 0

    def project(z):
        """Exact dq(0) = ddq(0) = 0 (SLSQP meets equalities only to its tolerance)."""
        if prob.E is None:
            return z
        return z - np.linalg.pinv(prob.E) @ (prob.E @ z)

    def finish(z, i, t0, res, z_start, fallback):
        candidates = [project(z)] + ([fallback[1]] if fallback is not None else [])
        traj, repair = None, 0.0
        for zc in candidates:
            traj, repair = _repair(prob.trajectory(zc), spec, constraints, cset_dense, n_dense)
            if repair > 0:
                break
        feasible = repair > 0
        cond = design_criterion(traj, regressor, base, "cond", noise_std, n_samples) if feasible else math.inf
        obj = _objective_value(prob, traj) if feasible else math.inf
        entry = {"start": i, "objective_start": _objective_value(prob, prob.trajectory(z_start)),
                 "objective": obj, "cond": cond, "feasible": feasible, "repair_scale": repair,
                 "nit": int(res.get("nit", 0)) if res is not None else 0,
                 "success": bool(res.success) if res is not None else False,
                 "message": str(res.message) if res is not None else "", "time_s": time.perf_counter() - t0}
        history.append(entry)
        return traj, obj, cond, feasible

    def slsqp(z0):
        """SLSQP from z0; also returns the best iterate that met every constraint (fallback when
        the last iterate, e.g. at the iteration limit, does not)."""
        best_iter: list = [None]

        def callback(zk, *_):
            zk = np.asarray(zk)[:prob.nx]
            if design_feasible(zk):
                val = _objective_value(prob, prob.trajectory(zk)) if criterion == "goal" else prob.fun(zk)
                if best_iter[0] is None or val < best_iter[0][0]:
                    best_iter[0] = (val, zk.copy())
        if design_feasible(z0):
            callback(z0)
        with single_threaded_blas():
            if criterion == "goal":
                F0, _ = prob.goal_F(z0)
                g0 = float(np.max((F0 - prob.Lambda) / prob.Psi)) + 1e-3
                res = minimize(lambda zg: zg[-1], np.append(z0, g0),
                               jac=lambda zg: np.append(np.zeros(prob.nx), 1.0), method="SLSQP",
                               constraints=prob.goal_constraints(), callback=callback,
                               options={"maxiter": int(maxiter), "ftol": ftol})
                res.x = res.x[:prob.nx]
            else:
                res = minimize(prob.fun, z0, jac=prob.jac, method="SLSQP", constraints=prob.constraints,
                               callback=callback, options={"maxiter": int(maxiter), "ftol": ftol})
                # SLSQP may stop early on an incompatible linearisation (status 4) or a bad
                # quasi-Newton model (status 8): restart from the best feasible iterate with a
                # fresh Hessian while iterations remain
                used = int(res.get("nit", 0))
                for _ in range(3):
                    if res.status not in (4, 8) or best_iter[0] is None or used >= maxiter - 5:
                        break
                    before = best_iter[0][0]
                    res = minimize(prob.fun, best_iter[0][1], jac=prob.jac, method="SLSQP",
                                   constraints=prob.constraints, callback=callback,
                                   options={"maxiter": int(maxiter) - used, "ftol": ftol})
                    used += int(res.get("nit", 0))
                    if best_iter[0][0] >= before - 1e-9:
                        break
                res.nit = used
        return res, best_iter[0]

    starts: list[np.ndarray] = []
    if initial is not None:
        if initial.n_joints != spec.n_joints or initial.n_harmonics != n_harmonics:
            raise ConfigError("initial: the initial design must have the robot's joints and "
                              f"{n_harmonics} harmonics")
        starts.append(prob.from_trajectory(FourierTrajectory(base_freq_hz, initial.q0_rad, initial.a, initial.b)))
    if method == "de":
        starts.append(_de_start(prob, rng, spec, constraints, n_samples, de_maxiter, de_popsize,
                                differential_evolution, int(rng.integers(2**31))))
    while len(starts) < n_starts + (initial is not None):
        starts.append(_start(prob, rng, fill=rng.uniform(0.3, 0.6)))
    replacements = int(n_starts)  # a start on which SLSQP stalls at once is replaced (bounded)
    i = -1
    while i + 1 < len(starts):
        i += 1
        z0 = starts[i]
        t0 = time.perf_counter()
        res, fallback = slsqp(z0)
        traj, obj, cond, feasible = finish(res.x, i, t0, res, z0, fallback)
        stalled = res.status in (4, 8) and obj >= history[-1]["objective_start"] - 1e-6
        history[-1]["stalled"] = bool(stalled)
        if stalled and replacements > 0:
            replacements -= 1
            starts.append(_start(prob, rng, fill=rng.uniform(0.3, 0.6)))
        if progress:
            print(f"  start {i}: objective {history[-1]['objective_start']:.4g} -> {obj:.4g}, cond "
                  f"{cond:.4g}, {'feasible' if feasible else 'infeasible'}, "
                  f"{history[-1]['time_s']:.1f} s", file=sys.stderr)
        if feasible and math.isfinite(obj) and cond <= max_cond and (best is None or obj < best[0]):
            best = (obj, cond, traj)
    elapsed = time.perf_counter() - t_start
    if best is None:
        summary = "; ".join(f"start {h['start']}: {'within the constraints' if h['feasible'] else 'VIOLATES CONSTRAINTS'}"
                            f", cond {h['cond']:.3g}" for h in history)
        if not any(h["feasible"] for h in history):
            reached = "no start gave a design within the constraints"
        else:
            reached = (f"the best design within the constraints has cond "
                       f"{min(h['cond'] for h in history if h['feasible']):.3g} > max_cond {max_cond:g}, "
                       f"i.e. it does not excite all {base.n_base} base parameters")
        raise TrajectoryError(
            f"excitation design ({criterion}) for robot '{spec.name}' failed: {reached} (checked at "
            f"the full limits on {n_dense} points per period). Settings: "
            f"{_settings_text(spec, constraints, n_harmonics, base_freq_hz)}; relax the constraints "
            f"or change the harmonics / base frequency. Per start: {summary}")
    traj = best[2].with_metadata(
        robot=spec.name, criterion=CRITERION_NAMES[criterion], criterion_key=criterion,
        objective=float(best[0]), cond=round(float(best[1]), 6),
        log10_det_cov=covariance_log10_det(best[2], regressor, base, noise_std, n_samples),
        method=method, seed=seed, harmonics=int(n_harmonics),
        constraints=_settings_text(spec, constraints, n_harmonics, base_freq_hz))
    return DesignResult(traj, float(best[1]),
                        len(starts), elapsed, history)


def _objective_value(prob: _DesignProblem, traj: FourierTrajectory) -> float:
    """The optimised objective of a trajectory (log cond, log det cov, -log lambda_min or gamma)."""
    z = prob.from_trajectory(traj)
    if prob.kind == "goal":
        F, _ = prob.goal_F(z)
        return float(np.max((F - prob.Lambda) / prob.Psi))
    return float(prob._evaluate(z)[0])


def _de_start(prob: _DesignProblem, rng, spec, constraints, n_samples, maxiter, popsize, de, de_seed):
    """Differential evolution over (q0, oscillation) with the oscillation scaled into the
    kinematic limits and a penalty on nonlinear violations; returns the best z."""
    nx, n = prob.nx, prob.n
    bounds = [(-constraints.margin * 0.9, constraints.margin * 0.9)] * n + [(-1.0, 1.0)] * (nx - n)
    decay = np.concatenate([np.ones(n), np.tile(1.0 / np.arange(1, prob.H + 1), 2 * n)])

    def decode(u):
        z = np.asarray(u) * decay
        if prob.E is not None:  # project onto dq(0) = ddq(0) = 0 (coefficients only)
            E = prob.E
            z = z - np.linalg.pinv(E) @ (E @ z)
        z0 = np.concatenate([z[:n], np.zeros(nx - n)])
        dz = z - z0
        room = prob.G @ z0 + prob.h
        if np.any(room < 0):
            return None
        use = -(prob.G @ dz)
        ratio = np.max(np.where(use > 0, use / np.maximum(room, 1e-300), 0.0))
        return z0 + (dz / ratio if ratio > 0 else dz)

    def fun(u):
        z = decode(u)
        if z is None:
            return 1e3
        f = prob.fun(z) if prob.kind != "goal" else math.log(max(math.exp(prob.fun(z)), 1.0))
        if prob.cset is not None:
            f += 1e2 * max(0.0, -prob.nl_min(z))
        return f

    with single_threaded_blas():
        res = de(fun, bounds, maxiter=int(maxiter), popsize=int(popsize), seed=de_seed, polish=False,
                 init="latinhypercube", tol=1e-6)
    z = decode(res.x)
    if z is None or (prob.cset is not None and prob.nl_min(z) <= 0):
        return _start(prob, rng, fill=0.5)
    return z


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
    :func:`robident_twin.design_task.twin_estimator`). A redesign starts from the previous design
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
    p.add_argument("--criterion", choices=CRITERIA, default=None,
                   help="optimise_design criterion (cond = Swevers c1 noise-scaled, dopt = c2, eopt, "
                        "goal); default: the unweighted cond of optimise_condition")
    p.add_argument("--method", choices=("slsqp", "de"), default="slsqp")
    p.add_argument("--torque", action="store_true", help="nominal torques within 0.9 x the limits")
    p.add_argument("--z-min", type=float, default=None, help="end-effector height bound, m")
    p.add_argument("--z-max", type=float, default=None)
    p.add_argument("--r-min", type=float, default=None, help="distance from the base axis, m")
    p.add_argument("--collision", action="store_true", help="self-collision (link capsules)")
    p.add_argument("--resonance-hz", type=float, default=None, help="lowest resonance (bandwidth bound)")
    args = p.parse_args(argv)
    try:
        from .base import compute_base_parameters
        from .regressor import ModelOptions, Regressor
        from .robot import load_robot

        spec = load_robot(args.robot)
        regressor = Regressor(spec, ModelOptions(measurement=args.measurement))
        base = compute_base_parameters(regressor)
        if args.criterion is not None:
            cart = None
            if any(v is not None for v in (args.z_min, args.z_max, args.r_min)):
                cart = CartesianBounds(z_min_m=args.z_min, z_max_m=args.z_max, r_min_m=args.r_min)
            cons = DesignConstraints(margin=args.margin, zero_start=args.zero_start,
                                     resonance_hz=args.resonance_hz, torque=args.torque, cartesian=cart,
                                     collision=CollisionSettings() if args.collision else None,
                                     n_check=args.check_points)
            result = optimise_design(spec, regressor, base, args.criterion, cons,
                                     n_harmonics=args.harmonics, base_freq_hz=args.base_freq,
                                     n_starts=args.starts, seed=args.seed, method=args.method,
                                     n_samples=args.samples, maxiter=args.maxiter, max_cond=args.max_cond,
                                     progress=not args.no_progress)
            save_design(result.trajectory, args.out, {"measurement": args.measurement,
                                                      "design_time_s": round(result.time_s, 2)})
            print(f"saved {args.out}: {args.criterion} design, cond {result.cond:.4g} "
                  f"({base.n_base} base parameters), {result.n_starts} starts in {result.time_s:.1f} s")
            return 0
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
