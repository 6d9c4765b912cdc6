"""The dynamics of an identification model with base parameters ``beta``, on every robot the
regressor handles: coupled drives, gravity-compensation springs, link and motor friction,
motor offsets and an attached payload.

The torque of the actuated channel is ``tau = A(q) ddq + b(q, dq)`` (linear in ddq):

- motor channel (``measurement`` motor_torque or both; motor coordinates, q_joint = C q_motor):
  ``A = C^T M(q) + diag(Ia) C^-1`` and
  ``b = C^T (h(q, dq) + KS s(q) + Fv dq + Fc sgn(dq)) + Fvm dq_m + Fcm sgn(dq_m) + OFF``;
- joint channel (``joint_torque``): ``A = M(q)``, ``b = h + KS s(q) + Fv dq + Fc sgn(dq)``
  (joint-torque sensor offsets are a property of the sensor, not a torque on the links).

M and h come from pinocchio (CRBA, non-linear effects) on a model copy carrying a standard
vector ``chi`` with ``K chi = beta`` (:func:`~robident_twin.estimation.estimators._anchor_standard`),
so the torques are exactly ``W_base(q, dq, ddq) beta`` of the channel (checked against the
regressor in tests/test_closed_loop_sim.py). Used by the closed-loop simulation of the model
(IDIM-IV, DIDIM) and by maximum likelihood (its derivatives).
"""
from __future__ import annotations

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.model.dynamics import coulomb_sign, spring_shape, symmetric_from_upper


class ModelDynamics:
    """Forward and inverse dynamics of the actuated channel of ``regressor`` at base parameters ``beta``."""

    def __init__(self, regressor, base, beta: np.ndarray):
        import pinocchio as pin

        from robident_twin.estimation.estimators import _anchor_standard
        from robident_twin.estimation.physical import pinocchio_model_with

        o, spec = regressor.options, regressor.spec
        if not o.uses_links:
            raise ConfigError("the model dynamics need the links: model.measurement=difference models the drive "
                              "chain alone (use motor_torque, joint_torque or both)")
        self.channel = "motor" if o.uses_motor else "joint"
        self.spec = spec
        self.n = n = spec.n_joints
        self.chi = _anchor_standard(regressor, base, np.asarray(beta, dtype=float))
        self.model = pinocchio_model_with(regressor, self.chi)
        self.data = self.model.createData()
        self._pin = pin

        def per_joint(symbol):  # by the regressor's keys: names may be the user's (Fv[panda_joint1])
            values = regressor.per_joint(self.chi, symbol)
            return np.zeros(n) if values is None else values

        self.ks, self.fv, self.fc = per_joint("KS"), per_joint("Fv"), per_joint("Fc")
        self.ia, self.fvm, self.fcm, self.off = per_joint("Ia"), per_joint("Fvm"), per_joint("Fcm"), per_joint("OFF")
        if self.channel == "joint":
            self.ia, self.fvm, self.fcm, self.off = (np.zeros(n) for _ in range(4))
        self.coupled = spec.is_coupled and self.channel == "motor"
        self.C = spec.coupling if self.coupled else np.eye(n)
        self.Cinv = spec.coupling_inv if self.coupled else np.eye(n)
        self.eps = spec.coulomb_smoothing_rad_s
        self._has_spring = bool(spec.spring_joints) and np.any(self.ks != 0)

    # ------------------------------------------------------------------ one state
    def mass(self, q: np.ndarray) -> np.ndarray:
        """A(q): d tau / d ddq of the channel (n x n)."""
        pin = self._pin
        M = pin.crba(self.model, self.data, q)
        M = symmetric_from_upper(M)
        return self.C.T @ M + self.ia[:, None] * self.Cinv

    def bias(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """b(q, dq): the channel torque at zero acceleration."""
        link = self._pin.nonLinearEffects(self.model, self.data, q, dq) + self.fv * dq \
            + self.fc * coulomb_sign(dq, self.eps)
        if self._has_spring:
            link = link + self.ks * spring_shape(self.spec, q[None])[0]
        dqm = self.Cinv @ dq
        return self.C.T @ link + self.fvm * dqm + self.fcm * coulomb_sign(dqm, self.eps) + self.off

    def forward(self, extra_inertia_kgm2: np.ndarray | None = None):
        """``acc(q, dq, tau) -> ddq``: the forward dynamics of the channel, ``(A(q) + diag(extra))
        ddq + b(q, dq) = tau``. Independent drives: pinocchio's ABA on a model copy whose armature
        is the drive inertia plus ``extra`` (O(n), no mass matrix); coupled drives: a solve with
        :meth:`mass` and :meth:`bias`."""
        n = self.n
        extra = np.zeros(n) if extra_inertia_kgm2 is None else np.asarray(extra_inertia_kgm2, dtype=float)
        if self.coupled:
            E = np.diag(extra)
            return lambda q, dq, tau: np.linalg.solve(self.mass(q) + E, tau - self.bias(q, dq))
        pin = self._pin
        model = pin.Model(self.model)
        model.armature = self.ia + extra  # uncoupled: A = M + diag(Ia)
        data = model.createData()
        aba = pin.aba
        fv, fc, eps, off = self.fv + self.fvm, self.fc + self.fcm, self.eps, self.off
        ks, spring = (self.ks, self.spec) if self._has_spring else (None, None)

        def acc(q, dq, tau):
            rest = fv * dq + fc * np.tanh(dq / eps) + off  # the channel's torque beyond M ddq + h
            if ks is not None:
                rest = rest + ks * spring_shape(spring, q[None])[0]
            return aba(model, data, q, dq, tau - rest)

        return acc

    def torque(self, q, dq, ddq) -> np.ndarray:
        """Inverse dynamics of the channel, samples x joints (for checks)."""
        q, dq, ddq = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q, dq, ddq))
        return np.array([self.mass(q[k]) @ ddq[k] + self.bias(q[k], dq[k]) for k in range(q.shape[0])])

    # ------------------------------------------------------------------ derivatives (maximum likelihood)
    def derivatives(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray):
        """d tau / d(q, dq, ddq) of the channel, each samples x channel x joints (pinocchio RNEA
        derivatives, the spring's by central differences of its closed-form shape)."""
        pin = self._pin
        N, n = q.shape
        Dq, Dv, Da = (np.empty((N, n, n)) for _ in range(3))
        for k in range(N):
            pin.computeRNEADerivatives(self.model, self.data, q[k], dq[k], ddq[k])
            Dq[k], Dv[k] = self.data.dtau_dq, self.data.dtau_dv
            Da[k] = np.triu(self.data.M) + np.triu(self.data.M, 1).T
        dsgn = (1 - np.tanh(dq / self.eps) ** 2) / self.eps
        Dv += (self.fv + self.fc * dsgn)[:, :, None] * np.eye(n)
        if self._has_spring:
            h = 1e-6
            ds = (spring_shape(self.spec, q + h) - spring_shape(self.spec, q - h)) / (2 * h)
            Dq += (self.ks * ds)[:, :, None] * np.eye(n)
        if self.coupled:
            Dq, Dv, Da = (np.einsum("ji,kjl->kil", self.C, D) for D in (Dq, Dv, Da))
        dqm = dq @ self.Cinv.T
        dsgm = (1 - np.tanh(dqm / self.eps) ** 2) / self.eps
        Dv += (self.fvm + self.fcm * dsgm)[:, :, None] * self.Cinv[None]
        Da += self.ia[:, None] * self.Cinv
        return Dq, Dv, Da
