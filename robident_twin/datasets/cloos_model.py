"""Identification model of the CLOOS QRC 350 data: motor torques in motor coordinates.

With the wrist's differential gear, q_joint = C q_motor (``RobotSpec.coupling``). By virtual
work the motor torques are tau_m = C^T tau_links(q, dq, ddq) plus, per motor coordinate
qm = C^-1 q, the drive inertia Ia_j ddqm_j, viscous Fv_j dqm_j and Coulomb Fc_j s(dqm_j). So

    W_m = [C^T W_links(q, dq, ddq) | diag(ddqm) | diag(dqm) | diag(s(dqm))]

:func:`motor_regressor` is the project's ``Regressor(spec, ModelOptions(measurement=
"motor_torque"))``, which applies the coupling, restricted to these columns;
tests/test_cloos_robot.py checks it against an independent implementation of the equation.
"""
from __future__ import annotations

import numpy as np

from ..regressor import ModelOptions, Regressor
from ..robot import RobotSpec


class _ColumnSubset:
    """A standard regressor restricted to some of its columns (``index``), with the interface
    :func:`robident_twin.base.compute_base_parameters` needs."""

    def _select(self, reg, index) -> None:
        self.reg, self.spec, self.options = reg, reg.spec, reg.options
        self.index = np.asarray(index, dtype=int)
        self.names = [reg.names[i] for i in self.index]
        self.units = [reg.units[i] for i in self.index]

    @property
    def n_joints(self) -> int:
        return self.reg.n_joints

    @property
    def n_params(self) -> int:
        return len(self.names)

    def stack(self, q_rad, dq_rad_s, ddq_rad_s2) -> np.ndarray:
        return self.reg.stack(q_rad, dq_rad_s, ddq_rad_s2)[:, self.index]

    def random_states(self, n_samples: int, rng: np.random.Generator):
        return self.reg.random_states(n_samples, rng)


class MotorFrictionOnly(_ColumnSubset):
    """The project's motor-torque ``Regressor`` restricted to the columns of the authors' model:
    links, drive inertia, motor-side viscous and Coulomb friction (no link-side friction: on
    the CLOOS all friction is modelled per motor coordinate)."""

    def __init__(self, reg: Regressor):
        keep_prefix = ("Ia", "Fvm", "Fcm")
        n_in = 10 * reg.n_joints
        index = np.array([i for i, nm in enumerate(reg.names)
                          if i < n_in or nm.rstrip("0123456789") in keep_prefix])
        order = {"Ia": 0, "Fvm": 1, "Fcm": 2}
        extra = sorted((i for i in index if i >= n_in),
                       key=lambda i: (order[reg.names[i].rstrip("0123456789")], i))
        self._select(reg, np.concatenate([index[index < n_in], np.array(extra, dtype=int)]))


def motor_regressor(spec: RobotSpec) -> "MotorFrictionOnly":
    """The motor-coordinate regressor of the authors' model (links, Ia, motor friction): the
    project's coupled ``Regressor`` restricted to those columns (tests/test_cloos_robot.py
    checks it against an independent implementation of the virtual-work equation)."""
    return MotorFrictionOnly(Regressor(spec, ModelOptions(measurement="motor_torque")))


#: Standard parameters (link frames = the MDH frames of the robot file) that the authors'
#: Appendix I assumes zero ("some of the robot links possess symmetries"): products of inertia
#: and off-axis first moments of links 2, 4, 5 and 6. With them removed the numerical base set
#: has the paper's 23 rigid-body + 12 friction parameters.
PAPER_SYMMETRY_ZEROS = ("XY2", "YZ2", "MY2", "XY4", "XZ4", "YZ4", "MX4", "MY4",
                        "XY5", "XZ5", "YZ5", "MX5", "MZ5", "XY6", "XZ6", "YZ6", "MX6", "MY6")


class WithoutColumns(_ColumnSubset):
    """A regressor with some standard parameters fixed to zero (their columns dropped)."""

    def __init__(self, reg, zero_names):
        missing = sorted(set(zero_names) - set(reg.names))
        if missing:
            raise ValueError(f"unknown standard parameter(s) {missing}")
        zero = set(zero_names)
        self._select(reg, [i for i, nm in enumerate(reg.names) if nm not in zero])


# the authors' Coulomb model fc tanh(1000 dq) (ICMA 2020), used for their real data
AUTHORS_COULOMB_SMOOTHING_RAD_S = 0.001


def build_model(spec: RobotSpec | None = None, symmetric: bool = False, n_samples: int = 300,
                seed: int = 0, coulomb_smoothing_rad_s: float | None = AUTHORS_COULOMB_SMOOTHING_RAD_S):
    """(regressor, base parameters) of the CLOOS motor-torque model (numerical QR base set).

    symmetric: apply the authors' link-symmetry assumptions (:data:`PAPER_SYMMETRY_ZEROS`).
    coulomb_smoothing_rad_s: the Coulomb sign smoothing of the model; by default the authors'
    tanh(1000 dq) for their real data (the twin's robot file uses a wider band that its 1 kHz
    simulation can integrate accurately); None keeps the robot file's."""
    import dataclasses

    from ..base import compute_base_parameters
    from ..robot import load_robot

    spec = load_robot("cloos_qrc350") if spec is None else spec
    if coulomb_smoothing_rad_s is not None:
        spec = dataclasses.replace(spec, coulomb_smoothing_rad_s=float(coulomb_smoothing_rad_s), _cache={})
    reg = motor_regressor(spec)
    if symmetric:
        reg = WithoutColumns(reg, PAPER_SYMMETRY_ZEROS)
    return reg, compute_base_parameters(reg, n_samples=n_samples, seed=seed)


def design_matrix(reg, base, data) -> np.ndarray:
    """Stacked base regressor (N*6 x b) of an IdentificationData in joint coordinates."""
    return base.columns(reg.stack(data.q_rad, data.dq_rad_s, data.ddq_rad_s2))
