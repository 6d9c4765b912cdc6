"""The one RK4 step of the closed-loop model simulations (``closed_loop_sim.ModelLoop`` and
``estimators.simulate_closed_loop``): classical Runge-Kutta on ``ddq = acc(q, dq, tau)`` with the
torque given at the step's start, midpoint and end (equal for a held torque, a ramp for a
first-order hold). Works on one state (n,) or on a stack of states (rows) alike."""
from __future__ import annotations

from typing import Callable

import numpy as np


def rk4_step(acc: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray], q: np.ndarray, v: np.ndarray,
             h_s: float, tau_start, tau_mid, tau_end, a_start: np.ndarray | None = None):
    """(q, v) after one RK4 step of length ``h_s``; ``a_start``: ``acc(q, v, tau_start)`` when the
    caller has it already."""
    a1 = acc(q, v, tau_start) if a_start is None else a_start
    q2, v2 = q + 0.5 * h_s * v, v + 0.5 * h_s * a1
    a2 = acc(q2, v2, tau_mid)
    q3, v3 = q + 0.5 * h_s * v2, v + 0.5 * h_s * a2
    a3 = acc(q3, v3, tau_mid)
    q4, v4 = q + h_s * v3, v + h_s * a3
    a4 = acc(q4, v4, tau_end)
    return q + h_s / 6 * (v + 2 * v2 + 2 * v3 + v4), v + h_s / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
