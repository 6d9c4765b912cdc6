"""A robot's own drive loop for the realistic twin (optional ``drive_loop`` section of ``twin.yaml``).

The twin's default joint controller is a PD (+ optional I) tuned from ``backend.controller``
(a bandwidth on an inertia). A real industrial drive has its own tuning: a P position loop
around a PI velocity loop (ICMA 2020 Fig. 3 for the CLOOS QRC 350), tuned on the whole axis
inertia it moves (link + drive, motor coordinates), however elastic the gear. With the
``closed_loop`` effect, a robot whose ``twin.yaml`` has the section runs that loop instead:

- velocity loop ``u = Kv e_v + Ki int e_v`` on ``e_v = dq_ref + Kp (q_ref - q) - v``, with
  ``Kv = J w_v``, ``Kp = w_p`` (1/s) and the PI zero at ``integral_hz``: ``Ki = Kv 2 pi integral_hz``;
- which is the twin's ``kp e_q + kd e_v + ki int(e_v + kp/kd e_q)`` with ``kd = J w_v``,
  ``kp = J w_v w_p``, ``ki = kd 2 pi integral_hz``, i.e. :class:`hal.sim.mujoco_backend.ControllerConfig`
  with ``bandwidth = sqrt(w_p w_v)``, ``damping_ratio = sqrt(w_v / (4 w_p))`` (:func:`drive_controller`)
  and the gains on the whole axis inertia ``J`` also with elastic joints (:func:`tuned_on_axis`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robident_twin.errors import ConfigError

from .sourced import sourced_values

KEYS = ("position_bandwidth_hz", "velocity_bandwidth_hz", "integral_hz")


@dataclass(frozen=True)
class DriveLoopParams:
    position_bandwidth_hz: float  # w_p / 2 pi: the position loop's gain Kp (1/s) over 2 pi
    velocity_bandwidth_hz: float  # w_v / 2 pi: the velocity loop's crossover on the axis inertia
    integral_hz: float  # the velocity loop's PI zero


def load_drive_loop(path: Path, body: Any, sources: dict) -> DriveLoopParams:
    """The optional ``drive_loop`` section: the three keys of :data:`KEYS`, each ``{value, source}``."""
    vals = {}
    for key, raw in sourced_values(path, body, "drive_loop", KEYS, sources).items():
        where = f"drive_loop.{key}"
        zero_ok = key == "integral_hz"
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not np.isfinite(raw) \
                or (raw < 0 if zero_ok else raw <= 0):
            what = "non-negative" if zero_ok else "positive"
            raise ConfigError(f"{path}: field '{where}.value': expected a {what} frequency (Hz), got {raw!r}")
        vals[key] = float(raw)
    p = DriveLoopParams(**vals)
    top = float(np.sqrt(p.position_bandwidth_hz * p.velocity_bandwidth_hz))
    if not p.integral_hz < top:
        raise ConfigError(f"{path}: field 'drive_loop.integral_hz.value': expected below sqrt(position_bandwidth_hz "
                          f"velocity_bandwidth_hz) = {top:.3g} Hz, got {p.integral_hz}")
    return p


def tuned_on_axis(setup) -> bool:
    """True when the twin runs the robot's drive loop (``closed_loop`` and a ``drive_loop`` section)."""
    return (not setup.ideal and setup.has("closed_loop") and setup.params is not None
            and getattr(setup.params, "drive_loop", None) is not None)


def drive_controller(setup, controller):
    """The controller config the twin runs: the robot's drive loop in the PD + I terms of
    ``controller`` (its ``feedforward`` kept) when :func:`tuned_on_axis`, else ``controller``."""
    if not tuned_on_axis(setup):
        return controller
    p = setup.params.drive_loop
    wp, wv = p.position_bandwidth_hz, p.velocity_bandwidth_hz
    return dataclasses.replace(controller, bandwidth_hz=float(np.sqrt(wp * wv)),
                               damping_ratio=float(np.sqrt(wv / (4.0 * wp))), integral_hz=p.integral_hz)
