"""Payload identification on a known robot (Jubien 2014, the payload as a body of its own).

With the payload mounted, tau = tau_robot(q, dq, ddq) + W_p(q, dq, ddq) phi_p + noise. The robot's
torque comes from its known model (an identified run, an exported identified twin or the CAD-like
nominal); the payload's ten parameters phi_p are estimated from the remainder by the configured
least-squares estimator. When the robot model is an estimate with a covariance C_beta, its error
propagates into phi_p: phi_p error = -G delta_beta with G = (W_p' S W_p)^-1 W_p' S W_r (S the
estimator's weights, W_r the robot's base regressor on the same samples), so the reported
covariance is cov_noise + G C_beta G'.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.estimation.estimators import Estimate, estimate

PAYLOAD_ESTIMATORS = ("ols", "wls", "tls")


@dataclass(frozen=True)
class RobotTorqueModel:
    """A known robot's torque model: tau = W_r(q, dq, ddq) beta (samples x channels), with the
    covariance of beta when it is an estimate (None: taken as exact)."""

    source: str
    regressor: object  # anything with stack(q, dq, ddq) -> (N * channels, b) rows sample-major
    beta: np.ndarray
    cov: np.ndarray | None = None
    covariance_kind: str = "none"

    def columns(self, q_rad, dq_rad_s, ddq_rad_s2) -> np.ndarray:
        return self.regressor.stack(q_rad, dq_rad_s, ddq_rad_s2)

    def torque_Nm(self, q_rad, dq_rad_s, ddq_rad_s2) -> np.ndarray:
        return (self.columns(q_rad, dq_rad_s, ddq_rad_s2) @ self.beta).reshape(np.shape(q_rad)[0], -1)


def identify_payload(W_p: np.ndarray, tau_Nm: np.ndarray, robot: RobotTorqueModel, names, q_rad, dq_rad_s,
                     ddq_rad_s2, method: str = "wls", weights: str = "period", sigma2_joint_Nm2=None,
                     sigma2_sample_Nm2=None) -> Estimate:
    """The payload's ten parameters from the torque left after the known robot's."""
    if method not in PAYLOAD_ESTIMATORS:
        raise ConfigError(f"estimator.name: task=payload estimates the payload by least squares on the torque "
                          f"left after the robot's; expected one of {list(PAYLOAD_ESTIMATORS)}, got {method!r}")
    W_r = robot.columns(q_rad, dq_rad_s, ddq_rad_s2)
    tau_robot = (W_r @ robot.beta).reshape(tau_Nm.shape)
    est = estimate(method, W_p, tau_Nm - tau_robot, names, sigma2_joint_Nm2, weights,
                   sigma2_sample_Nm2=sigma2_sample_Nm2, context={}, options={"name": method})
    extra = dict(est.extra, robot_model=robot.source, robot_covariance=robot.covariance_kind)
    if robot.cov is None:
        return replace(est, extra=extra)
    # the same weights as the estimator: per channel (period/residual) or per sample
    N, c = tau_Nm.shape
    if method == "wls" and weights == "sample":
        w = 1.0 / np.sqrt(np.asarray(sigma2_sample_Nm2, float)).reshape(-1)
    elif method == "wls":
        w = np.tile(1.0 / np.sqrt(np.asarray(est.sigma2_joint_Nm2, float)), N)
    else:
        w = np.ones(N * c)
    Wpw, Wrw = W_p * w[:, None], W_r * w[:, None]
    G = np.linalg.lstsq(Wpw, Wrw, rcond=None)[0]
    cov_robot = G @ robot.cov @ G.T
    extra.update(std_noise=np.sqrt(np.diag(est.cov)).tolist(), std_robot_model=np.sqrt(np.diag(cov_robot)).tolist())
    return replace(est, cov=est.cov + cov_robot, extra=extra)
