"""Standard-parameter regressor: tau = W(q, dq, ddq) chi.

Per joint j the standard parameters are named as in Khalil's convention
``XXj XYj XZj YYj YZj ZZj MXj MYj MZj Mj`` (inertia about the origin of link
frame j, first moments, mass; the link frames are the robot file's joint
frames, z along the joint axis). An optional payload is link n+1 (Jubien 2014:
``XX8 ... M8`` on a 7-axis arm), its parameters expressed in the flange frame.
Then, per joint where present:

- ``KSj``  spring force [N] of a gravity-compensation spring (IR 361 axis 2);
- ``Fvj``, ``Fcj`` link-side viscous and Coulomb friction (seen by joint-torque
  sensors and, through the gears, by the motors);
- ``OFFJj`` joint-torque sensor offsets (``offsets=True`` with a joint channel);
- ``Iaj``  drive inertia, ``Fvmj``, ``Fcmj`` motor-side friction and ``OFFj``
  motor torque offsets, in motor coordinates (seen by the motor torques only).

The four identification models of Jubien 2014 are the ``measurement`` options:
A ``motor_torque`` (links + drives + friction: link and motor friction have
identical columns when the drives are independent, so the base parameters
regroup them), B ``joint_torque`` (links + link friction), C ``both`` (the two
stacked per sample: n joint-torque rows then n motor rows) and D ``difference``
(motor minus joint torque: the drive chain alone). With a coupling matrix C
(q_joint = C q_motor) the motor rows are C^T times the link rows plus the
drive columns evaluated at q_m = C^-1 q.

The names above are those of a numbered robot (the built-in ones); a robot imported from
a URDF or MJCF speaks in its own names (``XX[panda_link3]``, ``Fv[panda_joint2]``):
:mod:`robident_twin.model.names` makes every name, ``Regressor.keys`` holds each column's
symbol and joint.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robident_twin.errors import ConfigError, RobotSpecError
from robident_twin.model.builders import pinocchio_model, rpy_to_matrix
from robident_twin.model.dynamics import coulomb_sign, spring_shape, to_motor
from robident_twin.model.names import LINK_SYMBOLS, element_labels, parameter_name
from robident_twin.model.robot import LinkInertial, RobotSpec

KHALIL_LINK = LINK_SYMBOLS
KHALIL_UNITS = ("kg m^2",) * 6 + ("kg m",) * 3 + ("kg",)
# pinocchio orders a link's parameters [m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]
PIN_FROM_KHALIL = np.array([4, 5, 7, 6, 8, 9, 1, 2, 3, 0])

MEASUREMENTS = ("joint_torque", "motor_torque", "both", "difference")


@dataclass(frozen=True)
class ModelOptions:
    """Which terms the identification model has.

    measurement: ``joint_torque`` (torque sensors, Jubien model B), ``motor_torque``
    (currents, model A), ``both`` (model C) or ``difference`` (model D).
    drive_inertia: add ``Ia`` columns; ``None`` means yes whenever motor torques are used.
    payload: add the payload's ten parameters (link n+1); identifiable from
    experiments with and without it.
    """

    measurement: str = "joint_torque"
    drive_inertia: bool | None = None
    viscous: bool = True
    coulomb: bool = True
    offsets: bool | None = None  # None (default, as the CLI): motor offsets when the robot file has any and motors are measured
    payload: bool = False

    def __post_init__(self):
        if self.measurement not in MEASUREMENTS:
            raise ConfigError(f"model.measurement: expected one of {MEASUREMENTS}, got '{self.measurement}'")

    @property
    def uses_motor(self) -> bool:
        return self.measurement in ("motor_torque", "both", "difference")

    @property
    def uses_joint(self) -> bool:
        return self.measurement in ("joint_torque", "both")

    @property
    def uses_links(self) -> bool:
        return self.measurement != "difference"

    @property
    def with_drive_inertia(self) -> bool:
        if self.drive_inertia is None:
            return self.uses_motor
        return bool(self.drive_inertia) and self.uses_motor

    @property
    def channels_per_joint(self) -> int:
        return 2 if self.measurement == "both" else 1


def khalil_vector(link: LinkInertial) -> np.ndarray:
    """The ten Khalil standard parameters of a body about its frame origin."""
    import pinocchio as pin

    return pin.Inertia(link.mass_kg, link.com_m, link.inertia_com_kgm2).toDynamicParameters()[PIN_FROM_KHALIL]


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])


def _khalil_to_parts(k: np.ndarray):
    J = np.array([[k[0], k[1], k[2]], [k[1], k[3], k[4]], [k[2], k[4], k[5]]])
    return J, k[6:9], k[9]


def _parts_to_khalil(J, h, m) -> np.ndarray:
    return np.array([J[0, 0], J[0, 1], J[0, 2], J[1, 1], J[1, 2], J[2, 2], h[0], h[1], h[2], m])


def payload_transform(spec: RobotSpec) -> np.ndarray:
    """10 x 10 matrix A mapping a body's Khalil parameters in the flange frame to the
    same body's parameters in the last link's frame (linear: parallel-axis theorem
    for inertia about a frame origin, J' = R J R^T - [t][Rh] - [Rh][t] - m [t][t])."""
    R = rpy_to_matrix(spec.flange_rpy_rad)
    t = np.asarray(spec.flange_xyz_m, float)
    T = _skew(t)
    A = np.zeros((10, 10))
    for i in range(10):
        e = np.zeros(10)
        e[i] = 1.0
        J, h, m = _khalil_to_parts(e)
        Rh = R @ h
        H = _skew(Rh)
        A[:, i] = _parts_to_khalil(R @ J @ R.T - T @ H - H @ T - m * T @ T, Rh + m * t, m)
    return A


class Regressor:
    """Builds the standard regressor of a robot for given model options."""

    def __init__(self, spec: RobotSpec, options: ModelOptions = ModelOptions()):
        self.spec = spec
        self.options = options
        if options.payload and spec.payload is None:
            raise ConfigError(f"model.payload is true but robot {spec.name} ({spec.source}) has no 'payload'")
        if options.measurement == "difference" and spec.is_coupled:
            raise ConfigError(f"model.measurement=difference needs independent drives; robot {spec.name} has a "
                              "coupling matrix (stack the channels with measurement=both instead)")
        if options.uses_joint and not spec.has_joint_torque_sensors:
            raise ConfigError(f"model.measurement={options.measurement} needs joint-torque sensors, which robot "
                              f"{spec.name} does not have (has_joint_torque_sensors: false in {spec.source}); "
                              "use motor_torque")
        # the model without payload: the last link carries it when it is mounted
        self.model = pinocchio_model(spec.with_payload(False) if spec.payload_attached else spec)
        self.data = self.model.createData()
        n = spec.n_joints
        o = options
        blocks: list[tuple[str, str, str, list[int]]] = []  # (prefix, unit, block, joints)
        all_j = list(range(n))
        link_keys, units = [], []
        if o.uses_links:
            for j in range(n + (1 if o.payload else 0)):  # the payload is body n (0-based)
                link_keys += [(k, j) for k in KHALIL_LINK]
                units += list(KHALIL_UNITS)
            if o.with_drive_inertia:
                blocks.append(("Ia", "kg m^2", "drive", all_j))
            if spec.spring_joints:
                blocks.append(("KS", "N", "link", spec.spring_joints))
            # link-side friction: measured by joint-torque sensors; with motor torques only
            # where the robot file has some (it regroups with the motor friction for
            # independent drives, but not through a differential gear)
            link_friction = o.uses_joint or bool(np.any(spec.fv_link_Nms_rad != 0) or np.any(spec.fc_link_Nm != 0))
            if o.viscous and link_friction:
                blocks.append(("Fv", "N m s/rad", "link", all_j))
            if o.coulomb and link_friction:
                blocks.append(("Fc", "N m", "link", all_j))
        elif o.with_drive_inertia:
            blocks.append(("Ia", "kg m^2", "drive", all_j))
        if o.uses_motor:
            if o.viscous:
                blocks.append(("Fvm", "N m s/rad", "drive", all_j))
            if o.coulomb:
                blocks.append(("Fcm", "N m", "drive", all_j))
            if o.offsets or (o.offsets is None and np.any(spec.offset_motor_Nm != 0)):
                blocks.append(("OFF", "N m", "drive", all_j))
        if o.uses_joint and o.offsets is True:
            blocks.append(("OFFJ", "N m", "sensor", all_j))
        keys = list(link_keys)
        self._n_inertial = len(link_keys)
        self._blocks = []
        col = len(keys)
        for prefix, unit, block, joints in blocks:
            self._blocks.append((prefix, block, joints, col))
            keys += [(prefix, j) for j in joints]
            units += [unit] * len(joints)
            col += len(joints)
        #: per column, (Khalil symbol, 0-based joint, or body: a payload is body n)
        self.keys: tuple[tuple[str, int], ...] = tuple(keys)
        self._column = {key: i for i, key in enumerate(keys)}
        links, jnames = element_labels(spec)
        self.names: list[str] = [parameter_name(s, links[j] if s in KHALIL_LINK else jnames[j]) for s, j in keys]
        if len(set(self.names)) != len(self.names):
            raise RobotSpecError(f"{spec.source}: the parameter names of robot {spec.name} are not unique")
        self.units: list[str] = units
        # column permutation from pinocchio's per-link layout to the Khalil layout
        self._pin_cols = np.concatenate([10 * i + PIN_FROM_KHALIL for i in range(n)])
        self._payload_A = payload_transform(spec) if o.payload else None

    @property
    def n_joints(self) -> int:
        return self.spec.n_joints

    def column(self, symbol: str, j: int) -> int | None:
        """The column of parameter ``symbol`` of joint (or body) ``j`` (0-based), None if absent."""
        return self._column.get((symbol, int(j)))

    def columns(self, symbol: str) -> np.ndarray:
        """The columns of every parameter ``symbol``, in joint order."""
        return np.array([i for i, (s, _) in enumerate(self.keys) if s == symbol], dtype=int)

    def per_joint(self, chi: np.ndarray, *symbols: str, missing: float = 0.0) -> np.ndarray | None:
        """Per joint, the sum of ``chi`` over the parameters ``symbols`` of that joint (``missing``
        where it has none); None when no joint has any."""
        cols = [[self.column(s, j) for s in symbols] for j in range(self.n_joints)]
        if all(c is None for row in cols for c in row):
            return None
        return np.array([sum(chi[c] for c in row if c is not None) if any(c is not None for c in row) else missing
                         for row in cols], dtype=float)

    @property
    def n_bodies(self) -> int:
        """Bodies with ten inertial parameters (links, plus a payload)."""
        return sum(1 for s, _ in self.keys if s == "M")

    @property
    def n_params(self) -> int:
        return len(self.names)

    @property
    def n_channels(self) -> int:
        """Torque channels per sample (2 n for measurement=both, else n)."""
        return self.options.channels_per_joint * self.n_joints

    def true_parameters(self) -> np.ndarray:
        """The ground-truth standard vector chi from the robot's source of truth (the
        nominal friction: a Stribeck or asymmetric twin variant is a model mismatch)."""
        spec, o, n = self.spec, self.options, self.n_joints
        chi = np.zeros(self.n_params)
        if o.uses_links:
            links = [khalil_vector(j.link) for j in spec.joints]
            if spec.payload_attached and not o.payload:
                links[-1] = links[-1] + payload_transform(spec) @ khalil_vector(spec.payload)
            chi[:10 * n] = np.concatenate(links)
            if o.payload:
                chi[10 * n:10 * n + 10] = khalil_vector(spec.payload)
        values = {
            "KS": np.array([j.spring.force_N if j.spring is not None else 0.0 for j in spec.joints]),
            "Fv": spec.fv_link_Nms_rad, "Fc": spec.fc_link_Nm, "OFFJ": np.zeros(n),
            "Ia": spec.drive_inertia_kgm2, "Fvm": spec.fv_motor_Nms_rad, "Fcm": spec.fc_motor_Nm,
            "OFF": spec.offset_motor_Nm,
        }
        for prefix, _, joints, col in self._blocks:
            chi[col:col + len(joints)] = values[prefix][joints]
        return chi

    def sample(self, q, dq, ddq) -> np.ndarray:
        """Regressor of one sample, channels x parameters."""
        return self.stack(np.atleast_2d(q), np.atleast_2d(dq), np.atleast_2d(ddq))

    def stack(self, q_rad: np.ndarray, dq_rad_s: np.ndarray, ddq_rad_s2: np.ndarray,
              payload_attached: bool | np.ndarray | None = None) -> np.ndarray:
        """Stacked regressor for samples x joints inputs (joint coordinates): rows ordered
        sample-major (row k*c + i is channel i of sample k, c = n_channels), matching
        ``tau.reshape(-1)`` for a samples x channels torque array. ``payload_attached``
        (a bool or one per sample; default: the robot's state) zeroes the payload columns
        of the samples recorded without it."""
        import pinocchio as pin

        q_rad, dq_rad_s, ddq_rad_s2 = (np.ascontiguousarray(x, dtype=float) for x in (q_rad, dq_rad_s, ddq_rad_s2))
        N, n = q_rad.shape
        if n != self.n_joints or dq_rad_s.shape != q_rad.shape or ddq_rad_s2.shape != q_rad.shape:
            raise ValueError(f"expected three arrays of shape (samples, {self.n_joints}), got "
                             f"{q_rad.shape}, {dq_rad_s.shape}, {ddq_rad_s2.shape}")
        o, spec = self.options, self.spec
        P = self.n_params
        # link-side rows (joint coordinates): inertial, spring, link friction, sensor offsets
        L = np.zeros((N, n, P))
        if o.uses_links:
            n_link = 10 * n
            links = L[:, :, :n_link]
            m, d = self.model, self.data
            fn = pin.computeJointTorqueRegressor
            for k in range(N):
                links[k] = fn(m, d, q_rad[k], dq_rad_s[k], ddq_rad_s2[k])
            L[:, :, :n_link] = links[:, :, self._pin_cols]
            if o.payload:
                att = spec.payload_attached if payload_attached is None else payload_attached
                att = np.broadcast_to(np.asarray(att, dtype=float), (N,))
                L[:, :, n_link:n_link + 10] = (L[:, :, n_link - 10:n_link] @ self._payload_A) * att[:, None, None]
        D = np.zeros((N, n, P)) if o.uses_motor else None
        need_motor = o.uses_motor and any(b == "drive" for _, b, _, _ in self._blocks)
        if need_motor:
            dqm, ddqm = to_motor(spec, dq_rad_s), to_motor(spec, ddq_rad_s2)
        eps = spec.coulomb_smoothing_rad_s
        S = None
        for prefix, block, joints, col in self._blocks:
            jj = np.asarray(joints)
            cols = col + np.arange(len(joints))
            if prefix == "KS":
                L[:, jj, cols] = spring_shape(spec, q_rad)[:, jj]
            elif prefix == "Fv":
                L[:, jj, cols] = dq_rad_s[:, jj]
            elif prefix == "Fc":
                L[:, jj, cols] = coulomb_sign(dq_rad_s[:, jj], eps)
            elif prefix == "OFFJ":
                S = np.zeros((N, n, P))
                S[:, jj, cols] = 1.0
            elif prefix == "Ia":
                D[:, jj, cols] = ddqm[:, jj]
            elif prefix == "Fvm":
                D[:, jj, cols] = dqm[:, jj]
            elif prefix == "Fcm":
                D[:, jj, cols] = coulomb_sign(dqm[:, jj], eps)
            elif prefix == "OFF":
                D[:, jj, cols] = 1.0
        meas = o.measurement
        if meas == "joint_torque":
            W = L if S is None else L + S
        elif meas == "difference":
            W = D
        else:
            motor = (np.einsum("ji,kjp->kip", spec.coupling, L) if spec.is_coupled else L) + D
            if meas == "motor_torque":
                W = motor
            else:  # both: n joint-torque rows, then n motor rows, per sample
                W = np.concatenate([L if S is None else L + S, motor], axis=1)
        return W.reshape(N * W.shape[1], P)

    def random_states(self, n_samples: int, rng: np.random.Generator):
        """Random (q, dq, ddq) within the robot's position, velocity and acceleration limits."""
        s = self.spec
        q = rng.uniform(s.q_min_rad, s.q_max_rad, size=(n_samples, self.n_joints))
        dq = rng.uniform(-s.dq_max_rad_s, s.dq_max_rad_s, size=(n_samples, self.n_joints))
        ddq = rng.uniform(-s.ddq_max_rad_s2, s.ddq_max_rad_s2, size=(n_samples, self.n_joints))
        return q, dq, ddq
