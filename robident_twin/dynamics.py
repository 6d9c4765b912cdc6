"""The twin's ground-truth torque model, shared by the simulator backends and the tests.

Measurement model (per joint j, joint-side units):

    tau_joint = RNEA_links(q, dq, ddq) + Fv_link dq + Fc_link s(dq)
    tau_motor = tau_joint + Ia ddq + Fv_motor dq + Fc_motor s(dq) + off_motor

``tau_joint`` is what a joint-torque sensor behind the gearbox reads (link-side
friction acts between the sensor and the link); ``tau_motor`` is motor current
times torque constant times gear ratio. The Coulomb sign is smoothed,
``s(dq) = tanh(dq / coulomb_smoothing_rad_s)``, identically in the simulation
and in the regressor, so the identification model is exact in noise-free runs.
"""
from __future__ import annotations

import numpy as np

from .builders import pinocchio_model
from .robot import RobotSpec


def coulomb_sign(dq_rad_s: np.ndarray, smoothing_rad_s: float) -> np.ndarray:
    """Smoothed sign of the velocity used for every Coulomb term."""
    return np.tanh(np.asarray(dq_rad_s) / smoothing_rad_s)


def link_friction_Nm(spec: RobotSpec, dq_rad_s: np.ndarray) -> np.ndarray:
    """Link-side friction torque (seen by the joint-torque sensor), shape like dq."""
    s = coulomb_sign(dq_rad_s, spec.coulomb_smoothing_rad_s)
    return spec.fv_link_Nms_rad * dq_rad_s + spec.fc_link_Nm * s


def motor_side_friction_Nm(spec: RobotSpec, dq_rad_s: np.ndarray) -> np.ndarray:
    """Motor-side friction and offset (seen by the motor torque only)."""
    s = coulomb_sign(dq_rad_s, spec.coulomb_smoothing_rad_s)
    return spec.fv_motor_Nms_rad * dq_rad_s + spec.fc_motor_Nm * s + spec.offset_motor_Nm


class TruthModel:
    """Ground-truth inverse dynamics of a twin (pinocchio RNEA plus drive and friction)."""

    def __init__(self, spec: RobotSpec):
        self.spec = spec
        self.model = pinocchio_model(spec)
        self.data = self.model.createData()

    def rnea_links(self, q, dq, ddq) -> np.ndarray:
        """Rigid-body torques of the links alone, samples x joints."""
        import pinocchio as pin

        q, dq, ddq = (np.atleast_2d(x) for x in (q, dq, ddq))
        out = np.empty_like(q)
        for k in range(q.shape[0]):
            out[k] = pin.rnea(self.model, self.data, q[k], dq[k], ddq[k])
        return out

    def torques(self, q, dq, ddq) -> tuple[np.ndarray, np.ndarray]:
        """(tau_joint_Nm, tau_motor_Nm), each samples x joints."""
        q, dq, ddq = (np.atleast_2d(x) for x in (q, dq, ddq))
        tau_joint = self.rnea_links(q, dq, ddq) + link_friction_Nm(self.spec, dq)
        tau_motor = (tau_joint + self.spec.drive_inertia_kgm2 * ddq
                     + motor_side_friction_Nm(self.spec, dq))
        return tau_joint, tau_motor
