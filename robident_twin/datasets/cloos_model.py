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

from robident_twin.model.regressor import ModelOptions, Regressor
from robident_twin.model.robot import RobotSpec


class _ColumnSubset:
    """A standard regressor restricted to some of its columns (``index``), with the interface
    :func:`robident_twin.model.base_params.compute_base_parameters` needs."""

    def _select(self, reg, index) -> None:
        self.reg, self.spec, self.options = reg, reg.spec, reg.options
        self.index = np.asarray(index, dtype=int)
        self.names = [reg.names[i] for i in self.index]
        self.units = [reg.units[i] for i in self.index]
        self.keys = [reg.keys[i] for i in self.index]  # (symbol, joint) per column, as Regressor.keys

    def column(self, symbol: str, j: int) -> int | None:
        """As :meth:`Regressor.column`, in this subset's columns."""
        hits = [i for i, k in enumerate(self.keys) if k == (symbol, int(j))]
        return hits[0] if hits else None

    def columns(self, symbol: str) -> np.ndarray:
        """As :meth:`Regressor.columns`, in this subset's columns."""
        return np.array([i for i, (s, _) in enumerate(self.keys) if s == symbol], dtype=int)

    def per_joint(self, chi: np.ndarray, *symbols: str, missing: float = 0.0):
        """As :meth:`Regressor.per_joint`, for parameters ``chi`` of this subset."""
        full = np.zeros(len(self.reg.names))
        full[self.index] = chi
        present = [any(self.column(s, j) is not None for s in symbols) for j in range(self.n_joints)]
        if not any(present):
            return None
        values = self.reg.per_joint(full, *symbols, missing=missing)
        return np.where(present, values, missing)

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

    from robident_twin.model.base_params import compute_base_parameters
    from robident_twin.model.robot import load_robot

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


def model_torque_Nm(reg, base, data, beta) -> np.ndarray:
    """The model's torques (N x joints) along an IdentificationData's path for base parameters ``beta``:
    ``data.tau_Nm - model_torque_Nm(...)`` is the model residual."""
    return (design_matrix(reg, base, data) @ beta).reshape(np.shape(data.q_rad)[0], -1)


# --------------------------------------------------------------------------- the paper's basis
#: The authors' MDH table (ICMA 2020, Table of the robot): alpha_j [rad] and a_j [m] of joint j,
#: and the lengths l2..l6 of Appendix I (l2 = a2, l3 = a3, l4 = a4, l5 = d4, l6 = d6).
MDH_ALPHA_RAD = (0.0, -np.pi / 2, 0.0, -np.pi / 2, np.pi / 2, -np.pi / 2)
MDH_A_M = (0.0, 0.250, 0.630, 0.196, 0.0, 0.0)
APPENDIX_LENGTHS_M = {"l2": 0.250, "l3": 0.630, "l4": 0.196, "l5": 0.805, "l6": 0.100}
#: theta_i (1-based) whose sign in Table I is opposite to Appendix I evaluated with our inertia-tensor
#: convention (products of inertia); a sign does not change a fit or the reduction.
PAPER_THETA_SIGN_FLIPS = (3, 7, 10)
#: names of the paper's 35 parameters, theta_1 .. theta_35 (23 rigid body, then fc, then fv)
PAPER_THETA_NAMES = tuple(f"theta{i}" for i in range(1, 36))


def _appendix_link(link: np.ndarray, j: int) -> dict[str, float]:
    """Link j's parameters as Appendix I uses them: about the origin of the link's standard-DH
    frame (at the distal end: our MDH frame j moved by Rx(alpha_j+1) Tx(a_j+1); link 6 as ours)."""
    XX, XY, XZ, YY, YZ, ZZ, MX, MY, MZ, M = link
    inertia = np.array([[XX, XY, XZ], [XY, YY, YZ], [XZ, YZ, ZZ]])
    h = np.array([MX, MY, MZ])
    second = 0.5 * np.trace(inertia) * np.eye(3) - inertia  # second moment of the mass
    if j < 6:
        c, s = np.cos(MDH_ALPHA_RAD[j]), np.sin(MDH_ALPHA_RAD[j])
        R = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
        p = np.array([MDH_A_M[j], 0.0, 0.0])
    else:
        R, p = np.eye(3), np.zeros(3)
    sp = R.T @ (second - np.outer(h, p) - np.outer(p, h) + M * np.outer(p, p)) @ R
    hp = R.T @ (h - M * p)
    J = np.trace(sp) * np.eye(3) - sp
    return {"xx": J[0, 0], "xy": J[0, 1], "xz": J[0, 2], "yy": J[1, 1], "yz": J[1, 2], "zz": J[2, 2],
            "rx": hp[0], "ry": hp[1], "rz": hp[2], "m": M}


def appendix_theta(names, chi: np.ndarray) -> np.ndarray:
    """The paper's 35 parameters (Appendix I, eq. 16) of a standard vector ``chi`` (our names).

    Transcription notes (the text extraction is garbled in places): theta_3's ``J2xy`` is
    read as J2xz (only then is theta_3 a base parameter); the signs of theta_3, theta_7 and
    theta_10 follow Table I (:data:`PAPER_THETA_SIGN_FLIPS`)."""
    v = dict(zip(names, np.asarray(chi, dtype=float)))
    P = {j: _appendix_link(np.array([v.get(f"{s}{j}", 0.0) for s in
                                     ("XX", "XY", "XZ", "YY", "YZ", "ZZ", "MX", "MY", "MZ", "M")]), j)
         for j in range(1, 7)}

    def m(*js):
        return sum(P[j]["m"] for j in js)

    l2, l3, l4, l5, l6 = (APPENDIX_LENGTHS_M[k] for k in ("l2", "l3", "l4", "l5", "l6"))
    JA = [v.get(f"Ia{j}", 0.0) for j in range(1, 7)]
    rigid = [
        P[1]["yy"] + 2 * l2 * P[1]["rx"] + l2**2 * m(1, 2, 3, 4, 5, 6) + JA[0] + P[2]["yy"]
        - l3**2 * m(2, 3, 4, 5, 6) + P[3]["zz"] - l4**2 * m(3, 4, 5, 6),
        l3**2 * m(2, 3, 4, 5, 6) + P[2]["xx"] - P[2]["yy"],
        -l3 * P[2]["rz"] + l3 * P[3]["ry"] + P[2]["xz"],
        -l3**2 * m(2, 3, 4, 5, 6) + P[2]["zz"] + JA[1],
        l3 * m(2, 3, 4, 5, 6) + P[2]["rx"],
        P[3]["xx"] - P[3]["zz"] + l4**2 * P[3]["m"] + P[4]["zz"] + 2 * l5 * P[4]["ry"] + (l4**2 + l5**2) * m(4, 5, 6),
        -l4 * P[3]["ry"] + P[3]["xy"],
        P[3]["xz"],
        P[3]["yy"] - l4**2 * m(3, 4, 5, 6) + P[4]["zz"] + 2 * l5 * P[4]["ry"] + l5**2 * m(4, 5, 6),
        P[3]["yz"],
        l4 * m(3, 4, 5, 6) + P[3]["rx"],
        l5 * m(4, 5, 6) + P[3]["rz"] + P[4]["ry"],
        JA[2],
        P[4]["xx"] - P[4]["zz"] + P[5]["zz"],
        P[4]["yy"] + P[5]["zz"],
        JA[3],
        l6**2 * P[6]["m"] + 2 * l6 * P[6]["rz"] + P[5]["xx"] - P[5]["zz"] + P[6]["yy"],
        l6**2 * P[6]["m"] + 2 * l6 * P[6]["rz"] + P[5]["yy"] + P[6]["yy"],
        l6 * P[6]["m"] + P[5]["rz"] + P[6]["rz"],
        JA[4],
        P[6]["xx"] - P[6]["yy"],
        P[6]["zz"],
        JA[5],
    ]
    friction = [v.get(f"Fcm{j}", 0.0) for j in range(1, 7)] + [v.get(f"Fvm{j}", 0.0) for j in range(1, 7)]
    theta = np.array(rigid + friction)
    theta[np.array(PAPER_THETA_SIGN_FLIPS) - 1] *= -1.0
    return theta


def paper_basis(reg, base, tol: float = 1e-9) -> np.ndarray:
    """T (35 x 35) with theta_paper = T beta for our base parameters ``beta`` of the symmetric
    model (so the paper-basis design matrix is W @ inv(T)).

    Appendix I is evaluated on every standard parameter (theta = P chi); P must lie in the row
    space of our regrouping matrix K (P = T K), else the transcription is wrong: an error names
    the paper parameters that are not base parameters of our model."""
    from ..errors import IdentificationError

    names = list(reg.names)
    P = np.column_stack([appendix_theta(names, e) for e in np.eye(len(names))])
    if P.shape[0] != base.n_base:
        raise IdentificationError(f"paper basis: Appendix I has {P.shape[0]} parameters, our base set "
                                  f"{base.n_base} (use build_model(symmetric=True))")
    T = np.linalg.lstsq(base.K.T, P.T, rcond=None)[0].T
    bad = np.flatnonzero(np.linalg.norm(T @ base.K - P, axis=1) > tol * max(1.0, np.abs(P).max()))
    if bad.size:
        raise IdentificationError("paper basis: theta " + ", ".join(str(i + 1) for i in bad)
                                  + " of Appendix I are not linear combinations of our base parameters")
    T[np.abs(T) < 1e-12] = 0.0
    return T


_ICMA_CACHE: dict = {}


def icma2020_design(spec: RobotSpec, data) -> tuple[np.ndarray, tuple[str, ...]]:
    """The design matrix of identification data in the paper's basis (Appendix I, 23 rigid-body
    + 12 friction parameters theta1..theta35 with the authors' link symmetries and Coulomb
    smoothing): what ``reduction.basis=icma2020`` feeds Algorithm 1. CLOOS QRC 350 only."""
    from ..errors import ConfigError

    if spec.name != "cloos_qrc350":
        raise ConfigError(f"reduction.basis=icma2020: the paper's basis is the CLOOS QRC 350's "
                          f"(robot=cloos_qrc350), got robot {spec.name!r}; use reduction.basis=numeric")
    if "model" not in _ICMA_CACHE:
        reg, base = build_model(spec, symmetric=True)
        _ICMA_CACHE["model"] = (reg, base, np.linalg.inv(paper_basis(reg, base)))
    reg, base, T_inv = _ICMA_CACHE["model"]
    return design_matrix(reg, base, data) @ T_inv, PAPER_THETA_NAMES
