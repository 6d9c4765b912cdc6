"""The twin's ground-truth torque model, shared by every simulator backend and the tests.

Coordinates: ``q`` are joint (link) coordinates; motor coordinates (scaled to
the joint side) are ``q_m = C^-1 q`` with the robot's coupling matrix ``C``
(identity for independent drives; a differential wrist gear couples columns).

Measurement model (joint-side units):

    tau_joint = RNEA_links(q, dq, ddq) + f_link(dq) - tau_spring(q)
    tau_motor = C^T tau_joint + Ia ddq_m + f_motor(dq_m) + off_motor

``tau_joint`` is what a joint-torque sensor behind the gearbox reads (link-side
friction and springs act between the sensor and the link, so it sees them);
``tau_motor`` is motor current times torque constant times gear ratio, in motor
coordinates. ``f(v) = Fv v + Fc s(v)`` with the smoothed sign
``s(v) = tanh(v / coulomb_smoothing_rad_s)``, identical in the simulation and in
the regressor, so the identification model is exact in noise-free runs. For
model-mismatch studies a side may add a Stribeck term or asymmetric Coulomb
levels (:class:`robident_twin.model.robot.FrictionVariant`); the regressor does not.
"""
from __future__ import annotations

import functools

import numpy as np

from robident_twin.model.builders import pinocchio_model
from robident_twin.model.robot import FrictionVariant, RobotSpec


@functools.lru_cache(maxsize=16)
def _upper_index(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n, 1)


def symmetric_from_upper(M: np.ndarray) -> np.ndarray:
    """The symmetric matrix of ``M``'s upper triangle (pinocchio's ``crba`` fills only that one),
    bit for bit ``np.triu(M) + np.triu(M, 1).T``: ``M + 0.0`` (a copy, -0.0 turned +0.0 as that
    sum does) with the upper triangle copied below the diagonal by index (a tenth of the two
    triangle masks' cost per call; the twins call it every control period)."""
    S = np.asarray(M, dtype=float) + 0.0
    i, j = _upper_index(S.shape[0])
    S[j, i] = S[i, j]
    return S


def coulomb_sign(dq_rad_s: np.ndarray, smoothing_rad_s: float) -> np.ndarray:
    """Smoothed sign of the velocity used for every Coulomb term."""
    return np.tanh(np.asarray(dq_rad_s) / smoothing_rad_s)


def _variant_terms(variants: list[FrictionVariant], fc_Nm: np.ndarray, v: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Stribeck / asymmetric additions to Fc s(v), shape like v."""
    out = np.zeros_like(v)
    for j, var in enumerate(variants):
        if var.kind == "stribeck":
            out[..., j] += (var.stribeck_Nm - fc_Nm[j]) * np.exp(-(v[..., j] / var.stribeck_velocity_rad_s) ** 2) * s[..., j]
        elif var.kind == "asymmetric":
            neg = var.coulomb_negative_Nm
            # Coulomb level fc for v > 0 and neg for v < 0 (continuous in v)
            out[..., j] += (neg - fc_Nm[j]) * np.minimum(s[..., j], 0.0)
    return out


def _has_variants(variants) -> bool:
    return any(v.kind != "viscous_coulomb" for v in variants)


def link_friction_Nm(spec: RobotSpec, dq_rad_s: np.ndarray) -> np.ndarray:
    """Link-side friction torque (seen by the joint-torque sensor), shape like dq."""
    dq_rad_s = np.asarray(dq_rad_s, dtype=float)
    s = coulomb_sign(dq_rad_s, spec.coulomb_smoothing_rad_s)
    f = spec.fv_link_Nms_rad * dq_rad_s + spec.fc_link_Nm * s
    variants = [j.friction_link_variant for j in spec.joints]
    if _has_variants(variants):
        f = f + _variant_terms(variants, spec.fc_link_Nm, dq_rad_s, s)
    return f


def motor_side_friction_Nm(spec: RobotSpec, dqm_rad_s: np.ndarray) -> np.ndarray:
    """Motor-side friction and offset in motor coordinates (seen by the motor torque only)."""
    dqm_rad_s = np.asarray(dqm_rad_s, dtype=float)
    s = coulomb_sign(dqm_rad_s, spec.coulomb_smoothing_rad_s)
    f = spec.fv_motor_Nms_rad * dqm_rad_s + spec.fc_motor_Nm * s + spec.offset_motor_Nm
    variants = [j.friction_motor_variant for j in spec.joints]
    if _has_variants(variants):
        f = f + _variant_terms(variants, spec.fc_motor_Nm, dqm_rad_s, s)
    return f


def spring_shape(spec: RobotSpec, q_rad: np.ndarray) -> np.ndarray:
    """Torque per newton of spring force the drive must supply, samples x joints (zero
    where a joint has no spring): ``l r sin(q - q0) / sqrt(l^2 + r^2 - 2 l r cos(q - q0))``.
    It is the regressor column of the spring force parameter ``KSj``."""
    q_rad = np.atleast_2d(np.asarray(q_rad, dtype=float))
    out = np.zeros_like(q_rad)
    for j in spec.spring_joints:
        sp = spec.joints[j].spring
        a = q_rad[:, j] - sp.q0_rad
        l, r = sp.lever_l_m, sp.lever_r_m
        out[:, j] = l * r * np.sin(a) / np.sqrt(l * l + r * r - 2 * l * r * np.cos(a))
    return out


def spring_torque_Nm(spec: RobotSpec, q_rad: np.ndarray) -> np.ndarray:
    """Joint torque the springs apply to the links (restoring towards q0), samples x joints."""
    force = np.array([j.spring.force_N if j.spring is not None else 0.0 for j in spec.joints])
    return -spring_shape(spec, q_rad) * force


def to_motor(spec: RobotSpec, x_joint: np.ndarray) -> np.ndarray:
    """Joint-coordinate positions/velocities/accelerations (samples x joints) to motor coordinates."""
    if not spec.is_coupled:
        return np.asarray(x_joint, dtype=float)
    return np.asarray(x_joint, dtype=float) @ spec.coupling_inv.T


def joint_torque_to_motor(spec: RobotSpec, tau_joint_Nm: np.ndarray) -> np.ndarray:
    """C^T tau: the motor-coordinate torques that balance joint torques (samples x joints)."""
    if not spec.is_coupled:
        return np.asarray(tau_joint_Nm, dtype=float)
    return np.asarray(tau_joint_Nm, dtype=float) @ spec.coupling


def motor_torque_Nm(spec: RobotSpec, tau_joint_Nm: np.ndarray, dq_rad_s: np.ndarray,
                    ddq_rad_s2: np.ndarray) -> np.ndarray:
    """Motor torques (motor coordinates) for link-side torques ``tau_joint_Nm`` delivered
    by the gearbox at joint velocity/acceleration dq, ddq: C^T tau + Ia ddq_m + f_motor(dq_m)."""
    dqm, ddqm = to_motor(spec, dq_rad_s), to_motor(spec, ddq_rad_s2)
    return (joint_torque_to_motor(spec, tau_joint_Nm) + spec.drive_inertia_kgm2 * ddqm
            + motor_side_friction_Nm(spec, dqm))


#: above this many rows :meth:`TruthModel.rnea_links` evaluates each distinct (q, dq, ddq) once
DEDUPE_ROWS = 256


def _distinct_rows(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first index of each distinct row, each row's distinct index) of the rows of ``cols``
    side by side, rows equal byte for byte (a tiled periodic reference: one period's rows)."""
    x = np.ascontiguousarray(np.hstack([np.asarray(c, dtype=float) for c in cols]))
    keys = x.view(np.dtype((np.void, x.dtype.itemsize * x.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.ravel()


class TruthModel:
    """Ground-truth inverse dynamics of a twin (pinocchio RNEA plus payload, springs,
    drive and friction)."""

    def __init__(self, spec: RobotSpec):
        self.spec = spec
        self.model = pinocchio_model(spec)  # includes the payload when it is attached
        self.data = self.model.createData()

    def rnea_links(self, q, dq, ddq) -> np.ndarray:
        """Rigid-body torques of the links alone, samples x joints."""
        import pinocchio as pin

        q, dq, ddq = (np.atleast_2d(x) for x in (q, dq, ddq))
        rows = None
        if q.shape[0] > DEDUPE_ROWS:  # a reference repeats its period: each distinct state once
            rows, inverse = _distinct_rows(q, dq, ddq)
            q, dq, ddq = q[rows], dq[rows], ddq[rows]
        out = np.empty_like(q, dtype=float)
        for k in range(q.shape[0]):
            out[k] = pin.rnea(self.model, self.data, q[k], dq[k], ddq[k])
        return out if rows is None else out[inverse]

    def torques(self, q, dq, ddq) -> tuple[np.ndarray, np.ndarray]:
        """(tau_joint_Nm, tau_motor_Nm), each samples x joints; tau_motor in motor coordinates."""
        q, dq, ddq = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q, dq, ddq))
        tau_joint = self.rnea_links(q, dq, ddq) + link_friction_Nm(self.spec, dq)
        if self.spec.spring_joints:
            tau_joint = tau_joint - spring_torque_Nm(self.spec, q)
        return tau_joint, motor_torque_Nm(self.spec, tau_joint, dq, ddq)
