"""A secondary mass on axis 4 of the CLOOS twin (issue 15, item 4; session 10, J4-mode task).

The real J4 residual rings at a line of its own (7-9 Hz) when the main axes ring, without phase coherence with
them (README "The wrist's residual spectra ... (session 10)"). The physical reading tested here: a body carried
by link 4 on a compliant mount (the arc-welding torch's cable package, or the wrist housing) turns about axis 4
against a spring-damper and is driven broad-band by the motion of its mount.

Stated physics. The body has inertia ``I`` about axis 4 and first mass moments ``m c_x, m c_y`` in joint 4's
frame (z = axis 4). Held rigidly it would need the torque about axis 4 (quasi-static terms of its own rotation
dropped) ``e = I alpha_z + m c_x A_y - m c_y A_x``, alpha the mount's angular acceleration and ``A`` its
linear acceleration minus gravity, both in joint 4's frame. On the spring-damper (line ``f``, damping ratio
``zeta``) it deflects by ``psi``: ``psi'' + 2 zeta w psi' + w^2 psi = -e / I`` (w = 2 pi f). The rigid model
(the identified parameters) already carries ``e``; what it misses, and the axis-4 drive carries in addition,
is ``I psi''``, the high-pass response ``-s^2 / (s^2 + 2 zeta w s + w^2)`` of ``e``: nothing at slow motion,
the body's ring above its line. Its forces on the other joints are neglected (a light body).

:class:`SecondaryMass` is the optional per-step state of the replay loop
(:meth:`robident_twin.validation.twin_vs_real.CloosTwin.replay`, ``TwinEffects.j4_mass``; None there: today's
loop, bit for bit).
"""
from __future__ import annotations

import dataclasses

import numpy as np
from scipy import signal

from robident_twin.datasets.cloos_model import model_torque_Nm
from robident_twin.errors import ConfigError

#: The axis carrying the body (0-based joint index) and its pinocchio joint id (the universe is 0).
MASS_AXIS = 3
#: The band of J4's own ring in the real residual (README session 10) [Hz].
RING_BAND_HZ = (6.0, 11.0)
#: Grids of the least-squares fit: line [Hz] and damping ratio.
LINE_GRID_HZ = tuple(np.round(np.arange(6.0, 11.01, 0.1), 2))
DAMPING_GRID = (0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3)
#: A light body: its inertia about axis 4 at most this share of axis 4's own (link + drive at the start pose). Its
#: forces on the other joints are neglected, and the loop's gains are set on the full inertia; unbounded, A's fit
#: puts 0.082 kg m^2 (60 % of axis 4's 0.14) on the spring and the twin's C replay spikes to 1.2 kNm (session 10).
LIGHT_BODY_SHARE = 0.25


@dataclasses.dataclass(frozen=True)
class SecondaryMassParams:
    """The body on axis 4: inertia about the axis [kg m^2], first mass moments in joint 4's frame [kg m],
    its line [Hz] and damping ratio."""

    inertia_kgm2: float
    mass_moment_x_kgm: float
    mass_moment_y_kgm: float
    line_hz: float
    damping_ratio: float

    def __post_init__(self):
        vals = dataclasses.astuple(self)
        if not all(np.isfinite(vals)) or self.inertia_kgm2 <= 0 or self.line_hz <= 0 or self.damping_ratio < 0:
            raise ConfigError(f"twin: j4_mass {self!r}: expected finite values, inertia_kgm2 > 0, line_hz > 0, "
                              f"damping_ratio >= 0")


def mount_motion(pin, pmodel, pdata, q, dq, ddq):
    """``(alpha_z, A_x, A_y)`` of joint 4's frame at one state (joint coordinates): its angular acceleration
    about its own axis and its classical linear acceleration minus gravity, in its own frame."""
    pin.forwardKinematics(pmodel, pdata, q, dq, ddq)
    i = MASS_AXIS + 1
    v, a = pdata.v[i], pdata.a[i]
    w = v.angular
    lin = a.linear + np.cross(w, v.linear) - pdata.oMi[i].rotation.T @ pmodel.gravity.linear
    return float(a.angular[2]), float(lin[0]), float(lin[1])


def mount_columns(pin, pmodel, q, dq, ddq) -> np.ndarray:
    """(N, 3): the columns ``alpha_z, A_y, -A_x`` of ``e`` (coefficients I, m c_x, m c_y) along a path."""
    pdata = pmodel.createData()
    out = np.empty((len(q), 3))
    for k in range(len(q)):
        az, ax, ay = mount_motion(pin, pmodel, pdata, q[k], dq[k], ddq[k])
        out[k] = az, ay, -ax
    return out


def relative_acceleration(x: np.ndarray, sample_rate_hz: float, line_hz: float, damping_ratio: float,
                          periodic: bool = True) -> np.ndarray:
    """``-x`` through ``s^2 / (s^2 + 2 zeta w s + w^2)`` (bilinear transform): the body's ``psi''`` for ``x = e / I``,
    its extra torque ``I psi''`` for ``x = e``. ``periodic``: the record is one period, filtered three times over and
    the last kept (the periodic steady state); else from rest."""
    w = 2 * np.pi * line_hz
    b, a = signal.bilinear([1.0, 0.0, 0.0], [1.0, 2 * damping_ratio * w, w * w], sample_rate_hz)
    x = np.asarray(x, dtype=float)
    n = len(x)
    y = signal.lfilter(b, a, np.concatenate([x, x, x]) if periodic else x, axis=0)
    return -(y[2 * n:] if periodic else y)


@dataclasses.dataclass
class MassFit:
    """The least-squares fit of the body's response to the real J4 residual's ring band."""

    params: SecondaryMassParams
    share: float  # of the band's energy fitted
    share_grid: np.ndarray  # (lines, dampings)
    lines_hz: tuple
    dampings: tuple


def fit_secondary_mass(residual4_Nm: np.ndarray, columns: np.ndarray, sample_rate_hz: float, sign: float = 1.0,
                       lines_hz=LINE_GRID_HZ, dampings=DAMPING_GRID, band_hz=RING_BAND_HZ,
                       max_inertia_kgm2: float = np.inf) -> MassFit:
    """Per (line, damping) of the grids: least squares of the band-passed residual on the band-passed responses
    of the three columns (``sign``: the residual's axis-4 torque per joint-4 torque, -1 in motor coordinates of
    the CLOOS differential gear); the best pair and its coefficients. A fitted inertia <= 0 is not a body: such
    pairs are skipped (share 0); one above ``max_inertia_kgm2`` is held there and the mass moments refitted."""
    r = np.asarray(residual4_Nm, dtype=float)
    if r.ndim != 1 or columns.shape != (len(r), 3):
        raise ConfigError(f"j4 mass fit: residual {r.shape} and columns {columns.shape}: expected (N,) and (N, 3)")
    sos = signal.butter(4, band_hz, btype="band", fs=sample_rate_hz, output="sos")
    rb = signal.sosfiltfilt(sos, r)
    total = float(rb @ rb)
    grid = np.zeros((len(lines_hz), len(dampings)))
    best = (-np.inf, None)
    for i, f in enumerate(lines_hz):
        for j, z in enumerate(dampings):
            X = sign * signal.sosfiltfilt(sos, relative_acceleration(columns, sample_rate_hz, f, z), axis=0)
            c, *_ = np.linalg.lstsq(X, rb, rcond=None)
            if c[0] <= 0:
                continue
            if c[0] > max_inertia_kgm2:
                c = np.r_[max_inertia_kgm2, np.linalg.lstsq(X[:, 1:], rb - max_inertia_kgm2 * X[:, 0], rcond=None)[0]]
            grid[i, j] = 1.0 - float(np.sum((rb - X @ c) ** 2)) / total
            if grid[i, j] > best[0]:
                best = (grid[i, j], SecondaryMassParams(float(c[0]), float(c[1]), float(c[2]), float(f), float(z)))
    if best[1] is None:
        raise ConfigError("j4 mass fit: no line and damping gives a positive inertia; expected a ring to fit")
    return MassFit(best[1], float(best[0]), grid, tuple(lines_hz), tuple(dampings))


def predicted_torque_Nm(p: SecondaryMassParams, columns: np.ndarray, sample_rate_hz: float, periodic=True) -> np.ndarray:
    """The extra joint-4 torque ``I psi''`` of the body along a path (its columns), periodic or from rest."""
    e = columns @ np.array([p.inertia_kgm2, p.mass_moment_x_kgm, p.mass_moment_y_kgm])
    return relative_acceleration(e, sample_rate_hz, p.line_hz, p.damping_ratio, periodic)


class SecondaryMass:
    """The body's deflection as a state of the replay. The rigid model carries the body's rigid demand ``e``; the
    link carries instead the spring's ``T_s = -I (w^2 psi + 2 zeta w psi')``: the joint-4 bias torque gains
    ``T_s - e``. ``e = g . ddq + b`` is linear in the joint accelerations (``g`` from joint 4's local Jacobian),
    so its ``g`` part enters the step's mass matrix (implicit: explicit, the body's inertia against link 4's
    makes the step unstable) and ``T_s - b`` the bias; after the step, ``I psi'' = T_s - e`` (semi-implicit Euler)."""

    def __init__(self, p: SecondaryMassParams, pin, pmodel, dt_s: float):
        self.p, self.pin, self.pmodel, self.pdata = p, pin, pmodel, pmodel.createData()
        self.coef = np.array([p.inertia_kgm2, p.mass_moment_x_kgm, p.mass_moment_y_kgm])
        w = 2 * np.pi * p.line_hz
        self.w2, self.c, self.dt = w * w, 2 * p.damping_ratio * w, float(dt_s)
        self.psi = None  # set at the first step: the static deflection under the first excitation
        self.dpsi = 0.0
        self.zero = np.zeros(pmodel.nv)
        self.unit4 = np.zeros(pmodel.nv)  # the unit vector of joint 4
        self.unit4[MASS_AXIS] = 1.0
        self.g = self.b = None

    def demand(self, q, dq):
        """``(g, b)``: the body's rigid demand ``e = g . ddq + b`` about axis 4 at ``q, dq`` (joint coordinates)."""
        pin, pm, pd = self.pin, self.pmodel, self.pdata
        i = MASS_AXIS + 1
        az, ax, ay = mount_motion(pin, pm, pd, q, dq, self.zero)
        pin.computeJointJacobians(pm, pd, q)
        Jl = pin.getJointJacobian(pm, pd, i, pin.ReferenceFrame.LOCAL)
        I, mx, my = self.coef
        return I * Jl[5] + mx * Jl[1] - my * Jl[0], I * az + mx * ay - my * ax

    def spring_torque(self) -> float:
        return -self.p.inertia_kgm2 * (self.w2 * self.psi + self.c * self.dpsi)

    def implicit(self, q, dq):
        """Before the step: ``(g, T_s - b)``; the joint-4 row of the mass matrix loses ``g``, its bias gains
        ``T_s - b``."""
        self.g, self.b = self.demand(q, dq)
        if self.psi is None:
            self.psi = -self.b / (self.p.inertia_kgm2 * self.w2)
        return self.g, self.spring_torque() - self.b

    def advance(self, ddq) -> float:
        """After the step (joint accelerations ``ddq``): the body's state; returns ``I psi''``."""
        Ipp = self.spring_torque() - (self.g @ ddq + self.b)
        self.dpsi += self.dt * Ipp / self.p.inertia_kgm2
        self.psi += self.dt * self.dpsi
        return Ipp


def ringing_acceleration(pin, pmodel, q_rad: np.ndarray, residual_Nm: np.ndarray, sample_rate_hz: float,
                         band_hz=(4.0, 12.0), axes=(0, 1, 2)) -> np.ndarray:
    """(N, 6) joint accelerations of the main axes' link-side ringing a real record carries but its (Fourier-
    filtered or desired) q does not: their residual's ``band_hz`` part (the spring torque of the real mode) through
    the link-side mass matrix of ``axes``, the other joints held (motor coordinates = joint coordinates there)."""
    sos = signal.butter(4, band_hz, btype="band", fs=sample_rate_hz, output="sos")
    ring = signal.sosfiltfilt(sos, np.asarray(residual_Nm, dtype=float), axis=0)
    ax = list(axes)
    pdata = pmodel.createData()
    out = np.zeros_like(ring)
    for k in range(len(ring)):
        M = pin.crba(pmodel, pdata, q_rad[k])
        M = np.triu(M) + np.triu(M, 1).T
        out[k, ax] = np.linalg.solve(M[np.ix_(ax, ax)], ring[k, ax])
    return out


def fit_on_real(twin, data, residual_Nm: np.ndarray) -> MassFit:
    """The body fitted on one real record (Trajectory A): the mount's motion from its q, dq, ddq plus the main
    axes' ringing (:func:`ringing_acceleration`) on the twin's kinematics (``twin``: a ``CloosTwin``), J4's
    residual in motor coordinates (``twin.C[3, 3]`` per joint-4 torque)."""
    rate = data.sample_rate_hz
    ddq = data.ddq_rad_s2 + ringing_acceleration(twin.pin, twin.pmodel, data.q_rad, residual_Nm, rate)
    cols = mount_columns(twin.pin, twin.pmodel, data.q_rad, data.dq_rad_s, ddq)
    axis = twin.link_side_inertia(data.q_rad[0])[MASS_AXIS] + twin.ia[MASS_AXIS]
    return fit_secondary_mass(residual_Nm[:, MASS_AXIS], cols, rate, float(twin.C[MASS_AXIS, MASS_AXIS]),
                              max_inertia_kgm2=LIGHT_BODY_SHARE * axis)


def calibrate_on_real(cal, make_twin, recA, real) -> tuple:
    """``(calibration with the body, its fit)``: the body fitted on the real Trajectory A residual (of the real
    fit's parameters ``real.beta``) on the kinematics of ``make_twin(cal)`` (a ``CloosTwin``)."""
    twin = make_twin(cal)
    d = recA.data
    reg, base = twin.reg, twin.base
    r = d.tau_Nm - model_torque_Nm(reg, base, d, real.beta)
    fit = fit_on_real(twin, d, r)
    return with_j4_mass(cal, fit.params), fit


def with_j4_mass(cal, params: SecondaryMassParams):
    """The calibration with the body on axis 4."""
    return dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, j4_mass=params))
