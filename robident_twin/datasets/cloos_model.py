"""Identification model of the CLOOS QRC 350 data: motor torques in motor coordinates.

With the wrist's differential gear, q_joint = C q_motor (``RobotSpec.coupling``). By virtual
work the motor torques are tau_m = C^T tau_links(q, dq, ddq) plus, per motor coordinate
qm = C^-1 q, the drive inertia Ia_j ddqm_j, viscous Fv_j dqm_j and Coulomb Fc_j s(dqm_j). So

    W_m = [C^T W_links(q, dq, ddq) | diag(ddqm) | diag(dqm) | diag(s(dqm))]

:func:`motor_regressor` returns the project's ``Regressor(spec, ModelOptions(measurement=
"motor_torque"))`` when it supports the coupling, else :class:`CoupledMotorRegressor`, a local
implementation of the same equation built on the joint-torque regressor (same names, units,
``stack`` and ``random_states``, so :func:`robident_twin.base.compute_base_parameters` works on
it). tests/test_cloos_robot.py checks that the two agree when both exist.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..dynamics import coulomb_sign
from ..regressor import ModelOptions, Regressor
from ..robot import RobotSpec


class CoupledMotorRegressor:
    """Standard regressor of motor torques in motor coordinates from joint-coordinate states."""

    def __init__(self, spec: RobotSpec, viscous: bool = True, coulomb: bool = True):
        self.spec = spec
        self.options = ModelOptions(measurement="motor_torque")
        # the rigid-body link rows in joint coordinates (a robot without joint-torque sensors
        # still has them: only the measurement differs)
        links_spec = dataclasses.replace(spec, has_joint_torque_sensors=True, _cache={}) \
            if hasattr(spec, "has_joint_torque_sensors") else spec
        self.links = Regressor(links_spec, ModelOptions(measurement="joint_torque", drive_inertia=False,
                                                        viscous=False, coulomb=False))
        n = spec.n_joints
        self.C = np.asarray(spec.coupling, dtype=float)
        self.Cinv = np.linalg.inv(self.C)
        self._extra = ["Ia"] + (["Fvm"] if viscous else []) + (["Fcm"] if coulomb else [])
        units = {"Ia": "kg m^2", "Fvm": "N m s/rad", "Fcm": "N m"}
        self.names = list(self.links.names) + [f"{p}{j}" for p in self._extra for j in range(1, n + 1)]
        self.units = list(self.links.units) + [units[p] for p in self._extra for _ in range(n)]

    @property
    def n_joints(self) -> int:
        return self.spec.n_joints

    @property
    def n_params(self) -> int:
        return len(self.names)

    def stack(self, q_rad, dq_rad_s, ddq_rad_s2) -> np.ndarray:
        """Rows sample-major (row k*n + j: motor j of sample k), like ``Regressor.stack``."""
        q_rad, dq_rad_s, ddq_rad_s2 = (np.asarray(x, dtype=float) for x in (q_rad, dq_rad_s, ddq_rad_s2))
        N, n = q_rad.shape
        Wl = self.links.stack(q_rad, dq_rad_s, ddq_rad_s2).reshape(N, n, -1)
        Wl = np.einsum("ji,kjp->kip", self.C, Wl)  # C^T W per sample
        dqm = dq_rad_s @ self.Cinv.T
        ddqm = ddq_rad_s2 @ self.Cinv.T
        extra = np.zeros((N, n, n * len(self._extra)))
        diag = np.arange(n)
        for b, p in enumerate(self._extra):
            val = {"Ia": ddqm, "Fvm": dqm}.get(p)
            if val is None:
                val = coulomb_sign(dqm, self.spec.coulomb_smoothing_rad_s)
            extra[:, diag, b * n + diag] = val
        return np.concatenate([Wl, extra], axis=2).reshape(N * n, self.n_params)

    def random_states(self, n_samples: int, rng: np.random.Generator):
        return self.links.random_states(n_samples, rng)


class MotorFrictionOnly:
    """The project's motor-torque ``Regressor`` restricted to the columns of the authors' model:
    links, drive inertia, motor-side viscous and Coulomb friction (no link-side friction: on
    the CLOOS all friction is modelled per motor coordinate)."""

    def __init__(self, reg: Regressor):
        self.reg = reg
        self.spec = reg.spec
        self.options = reg.options
        keep_prefix = ("Ia", "Fvm", "Fcm")
        n_in = 10 * reg.n_joints
        self.index = np.array([i for i, nm in enumerate(reg.names)
                               if i < n_in or nm.rstrip("0123456789") in keep_prefix])
        order = {"Ia": 0, "Fvm": 1, "Fcm": 2}
        extra = sorted((i for i in self.index if i >= n_in),
                       key=lambda i: (order[reg.names[i].rstrip("0123456789")], i))
        self.index = np.concatenate([self.index[self.index < n_in], np.array(extra, dtype=int)])
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


def project_regressor_supports_coupling(spec: RobotSpec) -> bool:
    """True when ``Regressor(spec, motor_torque)`` applies the coupling itself (checked numerically
    against :class:`CoupledMotorRegressor` on random states)."""
    try:
        reg = MotorFrictionOnly(Regressor(spec, ModelOptions(measurement="motor_torque")))
    except Exception:  # noqa: BLE001 - an older Regressor may refuse coupled robots
        return False
    local = CoupledMotorRegressor(spec)
    if list(reg.names) != list(local.names):
        return False
    states = local.random_states(3, np.random.default_rng(0))
    return bool(np.allclose(reg.stack(*states), local.stack(*states), rtol=1e-9, atol=1e-9))


def motor_regressor(spec: RobotSpec, prefer_project: bool = True):
    """The motor-coordinate regressor of the authors' model (links, Ia, motor friction): the
    project's ``Regressor`` when it supports the coupling, else the local implementation."""
    if prefer_project and project_regressor_supports_coupling(spec):
        return MotorFrictionOnly(Regressor(spec, ModelOptions(measurement="motor_torque")))
    return CoupledMotorRegressor(spec)


#: Standard parameters (link frames = the MDH frames of the robot file) that the authors'
#: Appendix I assumes zero ("some of the robot links possess symmetries"): products of inertia
#: and off-axis first moments of links 2, 4, 5 and 6. With them removed the numerical base set
#: has the paper's 23 rigid-body + 12 friction parameters.
PAPER_SYMMETRY_ZEROS = ("XY2", "YZ2", "MY2", "XY4", "XZ4", "YZ4", "MX4", "MY4",
                        "XY5", "XZ5", "YZ5", "MX5", "MZ5", "XY6", "XZ6", "YZ6", "MX6", "MY6")


class WithoutColumns:
    """A regressor with some standard parameters fixed to zero (their columns dropped)."""

    def __init__(self, reg, zero_names):
        missing = sorted(set(zero_names) - set(reg.names))
        if missing:
            raise ValueError(f"unknown standard parameter(s) {missing}")
        self.reg, self.spec, self.options = reg, reg.spec, reg.options
        self.index = np.array([i for i, nm in enumerate(reg.names) if nm not in set(zero_names)])
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
