"""Standard-parameter regressor: tau = W(q, dq, ddq) chi.

Per joint j the standard parameters are named as in Khalil's convention
``XXj XYj XZj YYj YZj ZZj MXj MYj MZj Mj`` (inertia about the origin of link
frame j, first moments, mass), followed per joint by the optional drive
inertia ``Iaj``, viscous ``Fvj``, Coulomb ``Fcj`` and offset ``OFFj``. The link
frames are the robot file's joint frames (z along the joint axis).

Which friction a column carries depends on the measured torque: with
``joint_torque`` it is the link-side friction; with ``motor_torque`` it is
link-side plus motor-side friction regrouped into one term per joint (they
have identical columns), and the drive inertia and offsets appear.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .builders import pinocchio_model
from .dynamics import coulomb_sign
from .errors import ConfigError
from .robot import RobotSpec

KHALIL_LINK = ("XX", "XY", "XZ", "YY", "YZ", "ZZ", "MX", "MY", "MZ", "M")
KHALIL_UNITS = ("kg m^2",) * 6 + ("kg m",) * 3 + ("kg",)
# pinocchio orders a link's parameters [m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]
PIN_FROM_KHALIL = np.array([4, 5, 7, 6, 8, 9, 1, 2, 3, 0])

MEASUREMENTS = ("joint_torque", "motor_torque")


@dataclass(frozen=True)
class ModelOptions:
    """Which terms the identification model has.

    measurement: ``joint_torque`` (torque sensors) or ``motor_torque`` (currents).
    drive_inertia: add ``Ia`` columns; ``None`` means yes for motor torque, no for joint torque.
    """

    measurement: str = "joint_torque"
    drive_inertia: bool | None = None
    viscous: bool = True
    coulomb: bool = True
    offsets: bool = False

    def __post_init__(self):
        if self.measurement not in MEASUREMENTS:
            raise ConfigError(f"model.measurement: expected one of {MEASUREMENTS}, got '{self.measurement}'")

    @property
    def with_drive_inertia(self) -> bool:
        if self.drive_inertia is None:
            return self.measurement == "motor_torque"
        return bool(self.drive_inertia)


class Regressor:
    """Builds the standard regressor of a robot for given model options."""

    def __init__(self, spec: RobotSpec, options: ModelOptions = ModelOptions()):
        self.spec = spec
        self.options = options
        self.model = pinocchio_model(spec)
        self.data = self.model.createData()
        n = spec.n_joints
        names, units = [], []
        for j in range(1, n + 1):
            names += [f"{k}{j}" for k in KHALIL_LINK]
            units += list(KHALIL_UNITS)
        extra = []
        if options.with_drive_inertia:
            extra.append(("Ia", "kg m^2"))
        if options.viscous:
            extra.append(("Fv", "N m s/rad"))
        if options.coulomb:
            extra.append(("Fc", "N m"))
        if options.offsets:
            extra.append(("OFF", "N m"))
        self._extra = [e for e, _ in extra]
        for prefix, unit in extra:
            names += [f"{prefix}{j}" for j in range(1, n + 1)]
            units += [unit] * n
        self.names: list[str] = names
        self.units: list[str] = units
        # column permutation from pinocchio's per-link layout to the Khalil layout
        self._pin_cols = np.concatenate([10 * i + PIN_FROM_KHALIL for i in range(n)])

    @property
    def n_joints(self) -> int:
        return self.spec.n_joints

    @property
    def n_params(self) -> int:
        return len(self.names)

    def true_parameters(self) -> np.ndarray:
        """The ground-truth standard vector chi from the robot's source of truth."""
        import pinocchio as pin

        spec = self.spec
        chi = []
        for i in range(1, self.n_joints + 1):
            link = spec.joints[i - 1].link
            inertia = pin.Inertia(link.mass_kg, link.com_m, link.inertia_com_kgm2)
            chi.append(inertia.toDynamicParameters()[PIN_FROM_KHALIL])
        motor = self.options.measurement == "motor_torque"
        for prefix in self._extra:
            if prefix == "Ia":
                chi.append(spec.drive_inertia_kgm2 if motor else np.zeros(self.n_joints))
            elif prefix == "Fv":
                chi.append(spec.fv_link_Nms_rad + (spec.fv_motor_Nms_rad if motor else 0.0))
            elif prefix == "Fc":
                chi.append(spec.fc_link_Nm + (spec.fc_motor_Nm if motor else 0.0))
            elif prefix == "OFF":
                chi.append(spec.offset_motor_Nm if motor else np.zeros(self.n_joints))
        return np.concatenate(chi)

    def sample(self, q, dq, ddq) -> np.ndarray:
        """Regressor of one sample, joints x parameters."""
        return self.stack(np.atleast_2d(q), np.atleast_2d(dq), np.atleast_2d(ddq))

    def stack(self, q_rad: np.ndarray, dq_rad_s: np.ndarray, ddq_rad_s2: np.ndarray) -> np.ndarray:
        """Stacked regressor for samples x joints inputs: rows ordered sample-major
        (row k*n + j is joint j of sample k), matching ``tau.reshape(-1)``."""
        import pinocchio as pin

        q_rad, dq_rad_s, ddq_rad_s2 = (np.ascontiguousarray(x, dtype=float) for x in (q_rad, dq_rad_s, ddq_rad_s2))
        N, n = q_rad.shape
        if n != self.n_joints or dq_rad_s.shape != q_rad.shape or ddq_rad_s2.shape != q_rad.shape:
            raise ValueError(f"expected three arrays of shape (samples, {self.n_joints}), got "
                             f"{q_rad.shape}, {dq_rad_s.shape}, {ddq_rad_s2.shape}")
        n_link = 10 * n
        W = np.zeros((N, n, self.n_params))
        links = W[:, :, :n_link]
        m, d = self.model, self.data
        fn = pin.computeJointTorqueRegressor
        for k in range(N):
            links[k] = fn(m, d, q_rad[k], dq_rad_s[k], ddq_rad_s2[k])
        W[:, :, :n_link] = links[:, :, self._pin_cols]
        diag = np.arange(n)
        col = n_link
        for prefix in self._extra:
            if prefix == "Ia":
                W[:, diag, col + diag] = ddq_rad_s2
            elif prefix == "Fv":
                W[:, diag, col + diag] = dq_rad_s
            elif prefix == "Fc":
                W[:, diag, col + diag] = coulomb_sign(dq_rad_s, self.spec.coulomb_smoothing_rad_s)
            elif prefix == "OFF":
                W[:, diag, col + diag] = 1.0
            col += n
        return W.reshape(N * n, self.n_params)

    def random_states(self, n_samples: int, rng: np.random.Generator):
        """Random (q, dq, ddq) within the robot's position, velocity and acceleration limits."""
        s = self.spec
        q = rng.uniform(s.q_min_rad, s.q_max_rad, size=(n_samples, self.n_joints))
        dq = rng.uniform(-s.dq_max_rad_s, s.dq_max_rad_s, size=(n_samples, self.n_joints))
        ddq = rng.uniform(-s.ddq_max_rad_s2, s.ddq_max_rad_s2, size=(n_samples, self.n_joints))
        return q, dq, ddq
