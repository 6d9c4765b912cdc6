"""Axis 4 of the CLOOS twin held at standstill as the real drive holds it (issue 15, item 4; session 10).

The real controller's error ``deg_e`` (Table VII runs without feed-forward) on process 2, where J4's desired
position is constant for the whole 6 s, stays within -2..+3 steps of the real J4 encoder (1.3 urad) around a
mean of 0.3 urad, while the twin's loop integrator, winding against axis 4's presliding friction, moves the
twin's J4 by 20.9 mdeg RMS (README "Axis 4 held at standstill (session 10)").

The model: the drive's velocity PI on axis 4 runs in the inverter (as on axes 1-3 and 6, at the bandwidth the
wrist-loop calibration gives axis 4 on process 1's deg_e), and its integrator holds (does not integrate) while the
axis's reference stands still and the encoder reads the target within an in-position window, the real standing
J4's largest |deg_e| but at least one twin encoder step; outside that window, or while the reference moves, it
integrates as before.

:class:`IntegratorHold` is the optional per-step state of the replay loop
(:meth:`robident_twin.validation.twin_vs_real.CloosTwin.replay`, ``TwinEffects.hold_window_rad``; None there:
today's loop, bit for bit).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from robident_twin.errors import ConfigError

#: The held axis (0-based): axis 4.
HOLD_AXES = (3,)
#: A reference slower than this [rad/s] stands still (the process files' desired J4 is constant: exactly 0).
STANDING_VELOCITY_RAD_S = 1e-9
#: The process whose deg_e holds J4 standing still for the whole run (its desired J4 is constant).
HOLD_PROCESS = 2
#: Axis 4's inverter velocity bandwidth [Hz]: what ``cloos_calibration.calibrate_wrist_loop_on_real`` gives
#: axis 4 on process 1's deg_e with the presliding friction (README "Axis 4 with presliding friction (session 9)").
HOLD_INVERTER_BANDWIDTH_HZ = 30.0


class IntegratorHold:
    """Which axes' integrators hold at each step of one replay."""

    def __init__(self, window_rad, dq_ref_rad_s: np.ndarray, standing_rad_s: float = STANDING_VELOCITY_RAD_S):
        self.window = np.asarray(window_rad, dtype=float)
        if self.window.shape != (dq_ref_rad_s.shape[1],) or np.any(self.window < 0) or not np.all(np.isfinite(self.window)):
            raise ConfigError(f"twin: hold_window_rad {window_rad!r}: expected one window >= 0 [rad] per axis")
        self.standing = (np.abs(dq_ref_rad_s) < standing_rad_s) & (self.window > 0)  # (steps, axes)
        self.held = np.zeros(self.window.size, dtype=bool)
        self.held_steps = np.zeros(self.window.size, dtype=int)  # per axis: steps held, and standing steps
        self.standing_steps = np.zeros(self.window.size, dtype=int)

    def update(self, k: int, error_rad: np.ndarray) -> np.ndarray:
        """Step ``k``: the axes whose reference stands and whose encoder error is within the window."""
        self.held = self.standing[k] & (np.abs(error_rad) <= self.window)
        self.held_steps += self.held
        self.standing_steps += self.standing[k]
        return self.held

    def integrate(self, integ: np.ndarray, increment: np.ndarray) -> np.ndarray:
        """``integ + increment`` on the axes not held, ``integ`` on the held ones."""
        return np.where(self.held, integ, integ + increment)


def hold_window_rad(deg_e_deg: np.ndarray, dq_ref_rad_s: np.ndarray, encoder_resolution_rad: float,
                    axes=HOLD_AXES) -> np.ndarray:
    """Per axis: the in-position window, the largest |deg_e| while the axis's reference stands still (samples
    aligned with ``dq_ref_rad_s``), at least one encoder step of the twin; 0 on the other axes. An axis of
    ``axes`` that never stands still in the record is an error (no window can be read from it)."""
    e = np.radians(np.asarray(deg_e_deg, dtype=float))
    dq = np.asarray(dq_ref_rad_s, dtype=float)
    if e.shape != dq.shape:
        raise ConfigError(f"hold window: deg_e has shape {e.shape}, the reference {dq.shape}; expected the same")
    w = np.zeros(e.shape[1])
    for j in axes:
        m = np.abs(dq[:, j]) < STANDING_VELOCITY_RAD_S
        if not m.any():
            raise ConfigError(f"hold window: axis {j + 1} never stands still in the reference; expected a standing segment")
        w[j] = max(float(np.abs(e[m, j]).max()), float(encoder_resolution_rad))
    return w


def with_hold(cal, window_rad: np.ndarray, bandwidth_hz: float = HOLD_INVERTER_BANDWIDTH_HZ, axes=HOLD_AXES):
    """The calibration with the held axes' velocity PI in the inverter at ``bandwidth_hz`` and their
    integrators holding within ``window_rad``."""
    inv = np.array(cal.effects.inverter_velocity_bandwidth_hz, dtype=float)
    inv[list(axes)] = bandwidth_hz
    fx = dataclasses.replace(cal.effects, inverter_velocity_bandwidth_hz=inv,
                             hold_window_rad=np.asarray(window_rad, dtype=float))
    return dataclasses.replace(cal, effects=fx)


def hold_window_on_real(encoder_resolution_rad: float, root=None) -> np.ndarray:
    """:func:`hold_window_rad` from the data set's process-``HOLD_PROCESS`` deg_e (without feed-forward) and
    that run's desired path (the process validation file, byte for byte the run's desired file)."""
    from robident_twin.datasets import cloos_control, cloos_icma2020 as ds

    _, e_deg = cloos_control.load_control_error(HOLD_PROCESS, "none", root)
    d = ds.load(f"process{HOLD_PROCESS}_validation", root).data
    return hold_window_rad(e_deg, d.dq_rad_s, encoder_resolution_rad)
