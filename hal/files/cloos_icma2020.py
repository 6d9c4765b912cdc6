"""Reader of the real CLOOS QRC 350 measurement files of the ICMA 2020 paper (the HAL owns the file format;
:mod:`robident_twin.datasets.cloos_icma2020` turns them into identification data).

Data: supplemental material of Volkmann, Kaczor, Tantau, Schappler, Ortmaier, "Sensitivity-based
Model Reduction for In-Process Identification of Industrial Robots Inverse Dynamics", ICMA 2020
(doi 10.1109/ICMA49215.2020.9233709), published under the MIT licence (copyright the authors;
the licence text is ``LICENSE.txt`` in the dataset folder). The data are read in place and never
copied into this project.

Where the data are: the argument ``root`` if given, else the environment variable
``ROBIDENT_CLOOS_DATA``, else ``robident_twin.paths.shared_dir()/datasets/cloos_qrc350_icma2020``.

Coordinates. The recorded positions are the motor-side coordinates scaled to the joint side
(motor angle / gear ratio). The wrist has a differential gear: the link angle of axis 6 is
``qm6 - kDG qm5`` with ``kDG = 227/1200``. The importer returns q, dq, ddq in JOINT coordinates
``q_joint = C q_motor`` (:func:`coupling_matrix`) and the torque as recorded: motor torques in
motor coordinates, scaled to the joint side (``tau_m = C^T tau_joint`` + drive and friction terms
in motor coordinates).

Joint directions. The joint coordinates are those of the authors' modified DH table (the
project's ``sim_assets/cloos_qrc350/robot.yaml``). Fitting the real data shows that the recorded
axis-4 coordinate turns about -z4 of that table: with the table's sign the WLS fit of trajectory
A leaves joints 4 and 5 with about twice the paper's prediction errors (mean absolute error on
trajectory C 2.3 and 3.7 Nm instead of 1.15 and 1.08 Nm), with q4 = -qm4 it matches the paper.
Axis 6 is taken as q6 = -(qm6 - kDG qm5): of the four sign choices for axis 6 it gives the
smallest weighted residual on both trajectories A and B (the difference is small; see
experiments/icma2020_cloos/README.md). Hence C = identity except C[3,3] = -1, C[5,5] = -1 and
C[5,4] = +kDG; ``joint_signs`` and ``k_dg`` of :func:`coupling_matrix` make other choices.

Per-sample noise. Each identification file holds, per sample and joint, the mean over the
N_r = 50 repetitions and the sample variance over them (paper eq. 7). The returned
identification data (:mod:`robident_twin.datasets.cloos_icma2020`) follow the project's convention:
``tau_var_sample_Nm2`` is the variance of the averaged torque (sample variance / N_r) and
``n_periods`` = N_r. WLS weights 1/variance (paper eq. 8-9) are proportional to it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robident_twin.errors import RecordingError
from robident_twin.paths import shared_dir

ENV_VAR = "ROBIDENT_CLOOS_DATA"
#: Differential-gear ratio of the wrist (empirical value of the authors).
K_DG = 227.0 / 1200.0
#: Number of repetitions averaged in the identification files.
N_REPETITIONS = 50
N_JOINTS = 6

#: Name -> (relative file, kind). "averaged": structs with average/variance; "plain": deg_* arrays.
FILES: dict[str, tuple[str, str]] = {
    "A": ("Optimal_Excitation/Trajectory_A.mat", "averaged"),
    "B": ("Optimal_Excitation/Trajectory_B.mat", "averaged"),
    "C": ("Optimal_Excitation/Trajectory_C.mat", "averaged"),
    "process1": ("Process/Identification_Data_Process1.mat", "averaged"),
    "process2": ("Process/Identification_Data_Process2.mat", "averaged"),
    "process1_validation": ("Process/Validation_Data_Process1.mat", "plain"),
    "process2_validation": ("Process/Validation_Data_Process2.mat", "plain"),
}


class DatasetError(RecordingError):
    """A dataset file is missing, unreadable or lacks a field (the message names file and field)."""


def default_root() -> Path:
    """The dataset folder from config: ``ROBIDENT_CLOOS_DATA`` or the shared folder."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return shared_dir() / "datasets" / "cloos_qrc350_icma2020"


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The dataset folder: ``root`` if given, else :func:`default_root`."""
    return Path(root) if root is not None else default_root()


def dataset_available(root: str | os.PathLike | None = None) -> bool:
    """True when every file of :data:`FILES` exists under the dataset folder."""
    r = data_root(root)
    return all((r / rel).is_file() for rel, _ in FILES.values())


#: Direction of each MDH joint coordinate relative to the recorded motor coordinate.
JOINT_SIGNS = (1.0, 1.0, 1.0, -1.0, 1.0, -1.0)


def coupling_matrix(k_dg: float = K_DG, joint_signs=JOINT_SIGNS) -> np.ndarray:
    """C with q_joint = C @ q_motor: q_j = s_j qm_j for j = 1..5 and q6 = s6 (qm6 - kDG qm5).

    With the default signs: identity except C[3,3] = -1, C[5,5] = -1, C[5,4] = +kDG."""
    s = np.asarray(joint_signs, dtype=float)
    if s.shape != (N_JOINTS,) or not np.all(np.abs(s) == 1.0):
        raise DatasetError(f"joint_signs: expected {N_JOINTS} values of +1 or -1, got {joint_signs!r}")
    C = np.diag(s)
    C[5, 4] = -k_dg * s[5]
    return C


def joint_from_motor(x_motor: np.ndarray, k_dg: float = K_DG, joint_signs=JOINT_SIGNS) -> np.ndarray:
    """Joint coordinates (or their derivatives) from motor coordinates, samples x 6."""
    return np.asarray(x_motor, dtype=float) @ coupling_matrix(k_dg, joint_signs).T


def motor_from_joint(x_joint: np.ndarray, k_dg: float = K_DG, joint_signs=JOINT_SIGNS) -> np.ndarray:
    """Motor coordinates (scaled to the joint side) from joint coordinates, samples x 6."""
    return np.asarray(x_joint, dtype=float) @ np.linalg.inv(coupling_matrix(k_dg, joint_signs)).T


@dataclass(frozen=True)
class CloosArrays:
    """One file as read: times, joint-coordinate positions and derivatives, motor torques and the
    per-sample variance over the repetitions (None for the validation files)."""

    name: str
    path: Path
    time_s: np.ndarray  # (N,)
    q_rad: np.ndarray  # (N, 6) joint coordinates
    dq_rad_s: np.ndarray
    ddq_rad_s2: np.ndarray
    tau_Nm: np.ndarray  # (N, 6) motor torques in motor coordinates, scaled to the joint side
    tau_sample_variance_Nm2: np.ndarray | None  # (N, 6) variance over the repetitions (eq. 7)
    n_repetitions: int
    desired: bool  # True for the validation files (desired positions, measured torque)


def _load_mat(path: Path):
    import scipy.io

    if not path.is_file():
        raise DatasetError(f"{path}: dataset file not found (set {ENV_VAR} or pass root=)")
    try:
        return scipy.io.loadmat(str(path), squeeze_me=True, struct_as_record=False)
    except Exception as exc:  # scipy raises several types for corrupt files
        raise DatasetError(f"{path}: not a readable MATLAB .mat file: {exc}") from exc


def _array(path: Path, name: str, value, n_samples: int | None) -> np.ndarray:
    a = np.asarray(value, dtype=float)
    if a.ndim != 2 or a.shape[1] != N_JOINTS or (n_samples is not None and a.shape[0] != n_samples):
        want = f"({n_samples if n_samples is not None else 'N'}, {N_JOINTS})"
        raise DatasetError(f"{path}: field '{name}': expected an array of shape {want}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise DatasetError(f"{path}: field '{name}': contains NaN or infinite values")
    return a


def _top(path: Path, mat: dict, key: str):
    if key not in mat:
        present = sorted(k for k in mat if not k.startswith("__"))
        raise DatasetError(f"{path}: missing field '{key}' (file has {present})")
    return mat[key]


def _struct_field(path: Path, mat: dict, key: str, field: str, n_samples: int | None):
    s = _top(path, mat, key)
    names = getattr(s, "_fieldnames", None)
    if names is None:
        raise DatasetError(f"{path}: field '{key}': expected a struct with field '{field}', "
                           f"got {type(s).__name__}")
    if field not in names:
        raise DatasetError(f"{path}: missing field '{key}.{field}' (struct has {list(names)})")
    return _array(path, f"{key}.{field}", getattr(s, field), n_samples)


def read_arrays(name: str, root: str | os.PathLike | None = None, rect: bool = True,
         k_dg: float = K_DG, joint_signs=JOINT_SIGNS) -> CloosArrays:
    """Read one dataset file by name (see :data:`FILES`: ``A``, ``B``, ``C``, ``process1``,
    ``process2``, ``process1_validation``, ``process2_validation``).

    k_dg, joint_signs: the coupling q_joint = C q_motor (:func:`coupling_matrix`); k_dg=0 with
    all signs +1 returns the recorded motor coordinates unchanged.
    rect: for the excitation files use ``average_rect`` positions and derivatives (only the
    excited Fourier lines kept, as the authors did); the process files have none and use
    ``average``.
    """
    if name not in FILES:
        raise DatasetError(f"unknown CLOOS dataset '{name}'; expected one of {sorted(FILES)}")
    rel, kind = FILES[name]
    path = data_root(root) / rel
    mat = _load_mat(path)
    t = np.asarray(_top(path, mat, "time_vec_save"), dtype=float).reshape(-1)
    if t.size < 2 or not np.all(np.diff(t) > 0):
        raise DatasetError(f"{path}: field 'time_vec_save': expected increasing times, got {t.size} values")
    N = t.size
    if kind == "averaged":
        def pick(key):
            s = _top(path, mat, key)
            use = "average_rect" if rect and "average_rect" in getattr(s, "_fieldnames", ()) else "average"
            return _struct_field(path, mat, key, use, N)

        qm, dqm, ddqm = pick("q_meas"), pick("dq_meas"), pick("ddq_meas")
        tau = _struct_field(path, mat, "tau_meas", "average", N)
        var = _struct_field(path, mat, "tau_meas", "variance", N)
        if np.any(var < 0):
            raise DatasetError(f"{path}: field 'tau_meas.variance': negative variances")
        n_periods, desired = N_REPETITIONS, False
    else:
        qm, dqm, ddqm = (np.radians(_array(path, k, _top(path, mat, k), N))
                         for k in ("deg_q", "deg_dq", "deg_ddq"))
        tau = _array(path, "tau", _top(path, mat, "tau"), N)
        var, n_periods, desired = None, 1, True
    C = coupling_matrix(k_dg, joint_signs)
    return CloosArrays(name=name, path=path, time_s=t, q_rad=qm @ C.T, dq_rad_s=dqm @ C.T, ddq_rad_s2=ddqm @ C.T,
                       tau_Nm=tau, tau_sample_variance_Nm2=var, n_repetitions=n_periods, desired=desired)
