"""The real CLOOS QRC 350 measurements of the ICMA 2020 paper as identification data.

Data: supplemental material of Volkmann, Kaczor, Tantau, Schappler, Ortmaier, "Sensitivity-based
Model Reduction for In-Process Identification of Industrial Robots Inverse Dynamics", ICMA 2020
(doi 10.1109/ICMA49215.2020.9233709), published under the MIT licence (copyright the authors;
the licence text is ``LICENSE.txt`` in the dataset folder). The data are read in place and never
copied into this project.

The file format (where the data are, coordinates, joint directions, the wrist's differential
gear) is read by the HAL, :mod:`hal.files.cloos_icma2020`; its public names are available here too.
This module turns a file into :class:`~robident_twin.processing.signal.IdentificationData`:
``tau_var_sample_Nm2`` is the variance of the averaged torque (sample variance over the
N_r = 50 repetitions / N_r, paper eq. 7) and ``n_periods`` = N_r, so WLS weights 1/variance (paper
eq. 8-9) are proportional to it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hal.files.cloos_icma2020 import (  # noqa: F401  (the dataset's public names)
    ENV_VAR,
    FILES,
    JOINT_SIGNS,
    K_DG,
    N_JOINTS,
    N_REPETITIONS,
    DatasetError,
    coupling_matrix,
    data_root,
    dataset_available,
    default_root,
    joint_from_motor,
    motor_from_joint,
    read_arrays,
)
from robident_twin.processing.signal import IdentificationData


@dataclass(frozen=True)
class CloosRecording:
    """One imported file: the identification data plus where it came from."""

    name: str
    path: Path
    time_s: np.ndarray  # (N,)
    data: IdentificationData  # q/dq/ddq joint coordinates, tau motor torques (motor coordinates)
    tau_sample_variance_Nm2: np.ndarray | None  # (N, 6) variance over the repetitions (eq. 7), None if absent
    desired: bool  # True for the validation files (desired positions, measured torque)

    @property
    def sample_time_s(self) -> float:
        return float(np.median(np.diff(self.time_s)))


def load(name: str, root: str | os.PathLike | None = None, rect: bool = True,
         k_dg: float = K_DG, joint_signs=JOINT_SIGNS) -> CloosRecording:
    """Load one dataset file by name (see :data:`FILES`) as identification data; the arguments are
    those of :func:`hal.files.cloos_icma2020.read_arrays`."""
    a = read_arrays(name, root=root, rect=rect, k_dg=k_dg, joint_signs=joint_signs)
    var = a.tau_sample_variance_Nm2
    var_mean = None if var is None else var / N_REPETITIONS
    data = IdentificationData(
        q_rad=a.q_rad, dq_rad_s=a.dq_rad_s, ddq_rad_s2=a.ddq_rad_s2, tau_Nm=a.tau_Nm,
        sample_rate_hz=1.0 / float(np.median(np.diff(a.time_s))), measurement="motor_torque",
        n_periods=a.n_repetitions,
        tau_var_Nm2=None if var_mean is None else var_mean.mean(axis=0),
        tau_var_sample_Nm2=var_mean)
    return CloosRecording(name=name, path=a.path, time_s=a.time_s, data=data,
                          tau_sample_variance_Nm2=var, desired=a.desired)
