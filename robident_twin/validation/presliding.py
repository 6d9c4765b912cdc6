"""Presliding (Dahl) friction for the CLOOS twin's axis 4 (issue 15, item 4; session 9).

Dahl's model with the unit friction state z (the friction torque is ``fc_Nm * z``):

    dz/dx = (1 - z sgn(v)) / x_c,    dx = v dt,

where x_c [rad] is the presliding distance: a standing axis moved by a small angle d from rest
(z = 0) carries the friction fc d / x_c (the presliding stiffness sigma0 = fc / x_c) and does not
slide; at a constant speed z tends to sgn(v) and the friction to the static Coulomb law fc sgn(v).
After a reversal the friction crosses from -fc to +fc over about x_c of travel, so at a finite
acceleration it rises with the speed as a Stribeck term of depth about -fc does.

Over a step of constant velocity the equation integrates exactly (z relaxes towards sgn(v)
exponentially in the travel): ``z' = sgn(v) + (z - sgn(v)) exp(-|v dt| / x_c)``; it keeps |z| <= 1
and is stable for any x_c, dt. The model is passive (dissipative) for |z| <= 1.

:class:`DahlFriction` is the optional per-step state of the twin's replay loop
(:meth:`robident_twin.validation.twin_vs_real.CloosTwin.replay`): the axes with elements
(``TwinEffects.presliding``, :class:`PreslidingParams`) get the sum of ``w_i fc z_i`` in place of the
smoothed Coulomb step ``fc tanh(v / eps)``, each element's exact step and its derivative in the velocity
taken implicitly like the rest of the friction's slope. :func:`dahl_path` runs the law along a recorded
velocity (the calibration on Trajectory A).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def dahl_step(z, v_rad_s, dt_s: float, presliding_rad):
    """One exact step of the unit Dahl state at constant velocity ``v_rad_s`` over ``dt_s``."""
    s = np.sign(v_rad_s)
    return s + (z - s) * np.exp(-np.abs(v_rad_s) * dt_s / presliding_rad)


def dahl_path(v_rad_s: np.ndarray, dt_s: float, presliding_rad: float, z0: float = 0.0,
              periodic: bool = False) -> np.ndarray:
    """The unit Dahl state along a sampled velocity (one axis), each sample's state after the step
    with that sample's velocity. ``periodic``: the record is one period of a periodic motion; it is
    run twice and the second pass returned (the state at the start is the one the motion leaves)."""
    v = np.asarray(v_rad_s, dtype=float)
    decay = np.exp(-np.abs(v) * dt_s / presliding_rad)
    s = np.sign(v)
    z = float(z0)
    out = np.empty(v.size)
    for _ in range(2 if periodic else 1):
        for i in range(v.size):
            z = s[i] + (z - s[i]) * decay[i]
            out[i] = z
    return out


@dataclass(frozen=True)
class PreslidingParams:
    """Presliding friction per axis as parallel Dahl elements (a two-element Maxwell-slip model):
    element i of axis j carries ``weight[j, i]`` of the axis's Coulomb level with presliding distance
    ``presliding_rad[j, i]`` (0 = no element). An axis whose weights sum to 1 has its Coulomb step
    replaced; 0 keeps the smoothed Coulomb step."""

    presliding_rad: np.ndarray  # (6, k)
    weight: np.ndarray  # (6, k)


class DahlFriction:
    """The Dahl states of the twin's presliding elements during one replay (None from :meth:`of` when
    no axis has one: the replay then runs its smoothed-Coulomb code path unchanged)."""

    def __init__(self, axes, fc_Nm, weight, presliding_rad, dt_s: float, eps_rad_s: float, z0=None):
        self.axes = np.asarray(axes, dtype=int)  # axis of each element (an axis may have several)
        self.fc_axis = np.asarray(fc_Nm, dtype=float)
        self.fc = self.fc_axis[self.axes] * np.asarray(weight, dtype=float)  # each element's Coulomb level
        self.xc = np.asarray(presliding_rad, dtype=float)
        self.ax = np.unique(self.axes)
        self.dt, self.eps = float(dt_s), float(eps_rad_s)
        self.z = np.zeros(self.axes.size) if z0 is None else np.asarray(z0, dtype=float)[self.axes].copy()
        self.started = False  # the first step has no previous step to complete

    @classmethod
    def of(cls, params: PreslidingParams | None, fc_Nm, dt_s: float, eps_rad_s: float, dqm0_rad_s=None):
        """The elements of ``params`` (None, or no element: None); the states start at the static law of
        the initial velocity (``tanh(dqm0 / eps)``: a moving axis slides, a standing one is at rest)."""
        if params is None:
            return None
        xc, w = np.asarray(params.presliding_rad, dtype=float), np.asarray(params.weight, dtype=float)
        axes, el = np.nonzero(xc > 0)
        if not axes.size:
            return None
        z0 = None if dqm0_rad_s is None else np.tanh(np.asarray(dqm0_rad_s, dtype=float) / eps_rad_s)
        return cls(axes, fc_Nm, w[axes, el], xc[axes, el], dt_s, eps_rad_s, z0)

    def replace_coulomb(self, v_rad_s, tanh_v, share, fr_Nm, slope_Nms_rad):
        """One control step: first the previous step is completed (the exact Dahl step with the velocity
        it ended at, ``v_rad_s``, :meth:`advance`), then ``fr_Nm`` and its velocity slope are returned
        with the presliding axes' smoothed Coulomb step (``share * fc * tanh_v``, slope
        ``share * fc (1 - tanh_v^2) / eps``) replaced by the Dahl elements' friction over the next step:
        the exact step's state at the present velocity, fc_i z_i'(v), and its derivative in v as the
        slope, fc_i g_i exp(-|v| dt / x_i) dt / x_i with g_i = 1 - z_i sgn(v) (the implicit part enters the
        step's matrix as the rest of the slope does; the force stays within +-fc_i however stiff)."""
        if self.started:
            self.advance(v_rad_s)
        self.started = True
        a, ax = self.axes, self.ax
        v = v_rad_s[a]
        decay = np.exp(-np.abs(v) * self.dt / self.xc)
        s = np.sign(v)
        z_next = s + (self.z - s) * decay
        k = self.fc * (1.0 - self.z * s) * decay * self.dt / self.xc
        fr, slope = fr_Nm.copy(), slope_Nms_rad.copy()
        th = tanh_v[ax]
        fr[ax] -= share[ax] * self.fc_axis[ax] * th
        slope[ax] -= share[ax] * self.fc_axis[ax] * (1.0 - th * th) / self.eps
        np.add.at(fr, a, share[a] * self.fc * z_next)
        np.add.at(slope, a, share[a] * k)
        return fr, slope

    def advance(self, v_rad_s) -> None:
        """The exact Dahl step of every element with the new velocity."""
        self.z = dahl_step(self.z, np.asarray(v_rad_s)[self.axes], self.dt, self.xc)
