"""Process trajectories for in-process identification (CLOOS QRC 350 paper, ICMA 2020).

Two task-like motions, as a robot does them in production, instead of an optimised
excitation:

- :func:`pick_and_place`: cycles between random points of a pick area and of a place
  area (boxes in the base frame), each cycle approaching from above, descending,
  lifting and moving over; joint-space quintic rest-to-rest segments between the
  inverse-kinematics solutions of the waypoints;
- :func:`square`: the end effector traces a horizontal square (straight edges, rest at
  the corners) with the tool pointing down.

Inverse kinematics: damped least squares on pinocchio's frame Jacobian (position and
optionally orientation), warm-started, with a null-space pull toward a reference
configuration and the joint limits enforced. Time law: every segment is as fast as the
velocity and acceleration limits times ``speed_fraction`` allow (analytic for the
quintic; for the square, the path is parametrised by arc length with a cubic spline
and the duration is scaled until the joint limits hold). An optional restricted
workspace (:class:`robident_twin.design.geometry.CartesianBounds`) is checked on every
sample; waypoints outside it or unreachable targets raise :class:`TrajectoryError`.

Both motions start and end at rest at the same configuration, so the result is a
periodic :class:`hal.protocol.JointTrajectory` (one period) that a backend can repeat.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robident_twin.design.geometry import CartesianBounds, EndEffector
from robident_twin.errors import ConfigError, TrajectoryError
from robident_twin.model.robot import RobotSpec

TOOL_DOWN = np.diag([1.0, -1.0, -1.0])  # flange z axis pointing down (rotation by pi about x)
#: largest joint step between neighbouring inverse-kinematics points of a square's edge; more is a
#: jump to another arm configuration (the spline through it would leave the joint limits)
MAX_IK_STEP_RAD = 0.3


@dataclass(frozen=True)
class Area:
    """An axis-aligned box of points in the base frame: centre and half sizes, m."""

    centre_m: tuple[float, float, float]
    half_size_m: tuple[float, float, float]

    def __post_init__(self):
        c, h = np.asarray(self.centre_m, float), np.asarray(self.half_size_m, float)
        if c.shape != (3,) or h.shape != (3,) or not np.all(np.isfinite(c)) or np.any(h < 0):
            raise ConfigError(f"area: expected centre_m and half_size_m of 3 numbers (half sizes >= 0), "
                              f"got {self.centre_m}, {self.half_size_m}")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        c, h = np.asarray(self.centre_m, float), np.asarray(self.half_size_m, float)
        return c + rng.uniform(-1.0, 1.0, (n, 3)) * h


@dataclass
class ProcessTrajectory:
    """A process motion: the sampled joint trajectory (one period, periodic) and what it does."""

    kind: str
    trajectory: Any  # hal.protocol.JointTrajectory
    waypoints_m: np.ndarray
    waypoint_q_rad: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- inverse kinematics


class InverseKinematics:
    """Damped-least-squares IK of the flange frame (pinocchio)."""

    def __init__(self, spec: RobotSpec, damping: float = 1e-3, q_ref_rad: np.ndarray | None = None,
                 nullspace_gain: float = 0.1):
        self.spec = spec
        self.ee = EndEffector(spec)
        self.model, self.data, self.fid = self.ee.model, self.ee.data, self.ee.fid
        self.damping = damping
        self.q_ref = default_reference(spec) if q_ref_rad is None else np.asarray(q_ref_rad, float)
        self.k_null = nullspace_gain
        lo, hi = spec.q_min_rad, spec.q_max_rad
        self.lo, self.hi = lo + 0.02 * (hi - lo), hi - 0.02 * (hi - lo)

    def solve(self, p_m, R=None, q_init=None, tol_m: float = 1e-6, max_iter: int = 500) -> np.ndarray:
        """Joint angles reaching position ``p_m`` (and rotation ``R`` if given), from ``q_init``
        and, failing that, from the reference configuration; raises TrajectoryError when the
        target is not reached within the joint limits."""
        if q_init is not None:
            try:
                return self._solve(p_m, R, q_init, tol_m, max_iter)
            except TrajectoryError:
                pass
        try:
            return self._solve(p_m, R, None, tol_m, max_iter)
        except TrajectoryError:
            # the reference turned toward the target about the first (vertical) axis
            q0 = self.q_ref.copy()
            q0[0] = np.clip(math.atan2(float(p_m[1]), float(p_m[0])), self.lo[0], self.hi[0])
            return self._solve(p_m, R, q0, tol_m, max_iter)

    def _solve(self, p_m, R, q_init, tol_m, max_iter) -> np.ndarray:
        import pinocchio as pin

        p = np.asarray(p_m, dtype=float)
        q = (self.q_ref if q_init is None else np.asarray(q_init, float)).copy()
        n = self.spec.n_joints
        err_norm = math.inf
        for _ in range(max_iter):
            pin.framesForwardKinematics(self.model, self.data, q)
            M = self.data.oMf[self.fid]
            J6 = pin.computeFrameJacobian(self.model, self.data, q, self.fid,
                                          pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
            e_p = p - M.translation
            if R is None:
                e, J = e_p, J6[:3]
            else:
                e_r = M.rotation @ pin.log3(M.rotation.T @ R)  # world-aligned rotation error
                e, J = np.concatenate([e_p, e_r]), J6
            err_norm = float(np.linalg.norm(e_p)) + (0.0 if R is None else 0.1 * float(np.linalg.norm(e[3:])))
            if err_norm < tol_m:
                return q
            JJt = J @ J.T + self.damping * np.eye(J.shape[0])
            Jp = J.T @ np.linalg.solve(JJt, np.eye(J.shape[0]))
            k_null = self.k_null * min(1.0, err_norm / 0.05)  # pull toward q_ref only far away
            dq = Jp @ e + (np.eye(n) - Jp @ J) @ (k_null * (self.q_ref - q))
            step = np.max(np.abs(dq))
            if step > 0.3:
                dq *= 0.3 / step
            q = np.clip(q + dq, self.lo, self.hi)
        raise TrajectoryError(
            f"inverse kinematics of robot '{self.spec.name}': target {np.round(p, 4).tolist()} m"
            f"{' with the tool pointing down' if R is not None else ''} not reached within the joint "
            f"limits (residual {err_norm:.3g} m after {max_iter} iterations); move the area or point "
            f"closer to the robot")


def default_reference(spec: RobotSpec) -> np.ndarray:
    """A bent 'elbow up' reference: +30 % of the upper range on even joints 2, 6 (1-based) and
    -45 % on joint 4 for 7-axis arms; the middle of the range otherwise."""
    centre = 0.5 * (spec.q_max_rad + spec.q_min_rad)
    half = 0.5 * (spec.q_max_rad - spec.q_min_rad)
    q = centre.copy()
    n = spec.n_joints
    if n >= 6:
        q[1] = centre[1] + 0.25 * half[1]
        q[3] = centre[3] - 0.45 * half[3] if n == 7 else centre[3]
        q[-2 if n == 7 else 4] = centre[-2 if n == 7 else 4] + 0.35 * half[-2 if n == 7 else 4]
    return q


# --------------------------------------------------------------------------- time laws


def _quintic_profile(T: float, t: np.ndarray):
    """s, ds, dds of the rest-to-rest quintic 10 u^3 - 15 u^4 + 6 u^5, u = t / T."""
    u = t / T
    s = 10 * u**3 - 15 * u**4 + 6 * u**5
    ds = (30 * u**2 - 60 * u**3 + 30 * u**4) / T
    dds = (60 * u - 180 * u**2 + 120 * u**3) / T**2
    return s, ds, dds


def _quintic_duration(dq_rad: np.ndarray, spec: RobotSpec, fraction: float, dt: float) -> float:
    """Shortest multiple of dt for which a rest-to-rest quintic over dq stays within
    fraction x the velocity (peak 15/8 dq/T) and acceleration (peak 10/sqrt(3) dq/T^2) limits."""
    d = np.abs(dq_rad)
    T = max(float(np.max(15.0 / 8.0 * d / (fraction * spec.dq_max_rad_s))),
            float(np.max(np.sqrt(10.0 / math.sqrt(3.0) * d / (fraction * spec.ddq_max_rad_s2)))), 4 * dt)
    return math.ceil(T / dt - 1e-9) * dt


def _check_fraction(speed_fraction: float, rate_hz: float):
    if not (isinstance(speed_fraction, (int, float)) and 0 < speed_fraction <= 1):
        raise ConfigError(f"speed_fraction: expected a fraction of the limits in (0, 1], got {speed_fraction!r}")
    if not (isinstance(rate_hz, (int, float)) and rate_hz > 0):
        raise ConfigError(f"rate_hz: expected a positive rate in Hz, got {rate_hz!r}")


def _assemble(segments, spec, rate_hz):
    """Concatenate (q, dq, ddq) segments (each sampled from t = 0 to T - dt) into one period."""
    from hal.protocol import JointTrajectory

    q = np.vstack([s[0] for s in segments])
    dq = np.vstack([s[1] for s in segments])
    ddq = np.vstack([s[2] for s in segments])
    t = np.arange(q.shape[0]) / rate_hz
    return JointTrajectory(t, q, dq, ddq, period_s=q.shape[0] / rate_hz)


def _check_workspace(ee: EndEffector, q: np.ndarray, workspace: CartesianBounds | None, what: str,
                     t_s: np.ndarray | None = None):
    if workspace is None:
        return
    p = ee.positions(q)
    g = workspace.margins(p)
    if g.size and g.min() < -1e-6:
        k, i = np.unravel_index(int(np.argmin(g)), g.shape)
        when = f" at t = {t_s[k]:.3f} s" if t_s is not None else f" (point {k})"
        raise TrajectoryError(
            f"{what}: leaves the restricted workspace{when}: end effector {np.round(p[k], 4).tolist()} m "
            f"violates '{workspace.names()[i]}' by {-g[k, i]:.4g} m")


# --------------------------------------------------------------------------- pick and place


def pick_and_place(spec: RobotSpec, pick: Area, place: Area, n_cycles: int = 3, seed: int = 0,
                   lift_m: float = 0.1, speed_fraction: float = 0.5, rate_hz: float = 1000.0,
                   tool_down: bool = True, workspace: CartesianBounds | None = None,
                   q_ref_rad: np.ndarray | None = None) -> ProcessTrajectory:
    """Pick-and-place cycles between random points (seeded) of ``pick`` and ``place``.

    Each cycle: above pick -> pick -> above pick -> above place -> place -> above place, then
    back to the first waypoint (closed loop). Rest at every waypoint; each segment is the
    fastest quintic within ``speed_fraction`` x the velocity and acceleration limits."""
    _check_fraction(speed_fraction, rate_hz)
    if isinstance(n_cycles, bool) or not isinstance(n_cycles, int) or n_cycles < 1:
        raise ConfigError(f"n_cycles: expected an integer >= 1, got {n_cycles!r}")
    rng = np.random.default_rng(seed)
    picks, places = pick.sample(rng, n_cycles), place.sample(rng, n_cycles)
    up = np.array([0.0, 0.0, lift_m])
    points = []
    for a, b in zip(picks, places):
        points += [a + up, a, a + up, b + up, b, b + up]
    points = np.array(points)
    ik = InverseKinematics(spec, q_ref_rad=q_ref_rad)
    if workspace is not None:
        g = workspace.margins(points)
        if g.size and g.min() < 0:
            k, i = np.unravel_index(int(np.argmin(g)), g.shape)
            raise TrajectoryError(f"pick_and_place: waypoint {np.round(points[k], 4).tolist()} m is outside "
                                  f"the restricted workspace ('{workspace.names()[i]}' by {-g[k, i]:.4g} m); "
                                  f"move the pick/place areas inside it")
    R = TOOL_DOWN if tool_down else None
    qs = []
    q_prev = None
    for p in points:
        q_prev = ik.solve(p, R, q_prev)
        qs.append(q_prev)
    qs = np.array(qs)
    dt = 1.0 / rate_hz
    segments = []
    closed = np.vstack([qs, qs[:1]])
    for k in range(len(qs)):
        d = closed[k + 1] - closed[k]
        T = _quintic_duration(d, spec, speed_fraction, dt)
        t = np.arange(int(round(T / dt))) * dt
        s, ds, dds = _quintic_profile(T, t)
        segments.append((closed[k] + np.outer(s, d), np.outer(ds, d), np.outer(dds, d)))
    jt = _assemble(segments, spec, rate_hz)
    _check_workspace(ik.ee, jt.q_rad[::10], workspace, "pick_and_place", jt.t_s[::10])
    return ProcessTrajectory("pick_and_place", jt, points, qs,
                             {"seed": seed, "n_cycles": n_cycles, "lift_m": lift_m,
                              "speed_fraction": speed_fraction, "picks_m": picks, "places_m": places})


# --------------------------------------------------------------------------- square


def square(spec: RobotSpec, centre_m, side_m: float = 0.3, speed_fraction: float = 0.5,
           rate_hz: float = 1000.0, points_per_edge: int = 60, tool_down: bool = True,
           workspace: CartesianBounds | None = None, q_ref_rad: np.ndarray | None = None,
           laps: int = 1) -> ProcessTrajectory:
    """The end effector traces a horizontal square of side ``side_m`` centred at ``centre_m``
    (corners in the order (-,-), (+,-), (+,+), (-,+)), straight edges, rest at every corner.

    Each edge: IK on ``points_per_edge`` points, a cubic spline q(s) in the edge fraction s and
    a rest-to-rest quintic s(t) whose duration is the shortest keeping
    dq = q'(s) s' and ddq = q''(s) s'^2 + q'(s) s'' within speed_fraction x the limits."""
    from scipy.interpolate import CubicSpline

    _check_fraction(speed_fraction, rate_hz)
    if not side_m > 0:
        raise ConfigError(f"side_m: expected a positive length in m, got {side_m!r}")
    c = np.asarray(centre_m, dtype=float)
    if c.shape != (3,):
        raise ConfigError(f"centre_m: expected 3 coordinates (m), got {centre_m!r}")
    h = 0.5 * side_m
    corners = c + np.array([[-h, -h, 0], [h, -h, 0], [h, h, 0], [-h, h, 0]])
    if workspace is not None:
        g = workspace.margins(corners)
        if g.size and g.min() < 0:
            k, i = np.unravel_index(int(np.argmin(g)), g.shape)
            raise TrajectoryError(f"square: corner {np.round(corners[k], 4).tolist()} m is outside the "
                                  f"restricted workspace ('{workspace.names()[i]}' by {-g[k, i]:.4g} m)")
    ik = InverseKinematics(spec, q_ref_rad=q_ref_rad)
    R = TOOL_DOWN if tool_down else None
    dt = 1.0 / rate_hz
    lim_v = speed_fraction * spec.dq_max_rad_s
    lim_a = speed_fraction * spec.ddq_max_rad_s2
    segments, wq = [], []
    s_grid = np.linspace(0.0, 1.0, int(points_per_edge))
    edges = [(corners[i], corners[(i + 1) % 4]) for i in range(4)] * int(laps)

    def edge_points(q_prev):
        out = []
        for a, b in edges:
            qs = []
            for s in s_grid:
                q_prev = ik.solve(a + s * (b - a), R, q_prev)
                qs.append(q_prev)
            out.append(np.array(qs))
        return out

    # a redundant arm's IK drifts in its null space around the loop: start the next attempt where
    # the last one ended (a fixed point closes the loop), then close it in joint space
    points = edge_points(None)
    for _ in range(3):
        if np.abs(points[-1][-1] - points[0][0]).max() <= 1e-3:
            break
        points = edge_points(points[-1][-1])
    points[-1][-1] = points[0][0]
    for (a, b), qs in zip(edges, points):
        jump = np.abs(np.diff(qs, axis=0)).max(axis=1) if len(qs) > 1 else np.zeros(1)
        if jump.max() > MAX_IK_STEP_RAD:
            k = int(np.argmax(jump))
            raise TrajectoryError(f"square: inverse kinematics jumps by {jump[k]:.3g} rad between two neighbouring "
                                  f"points of the edge {np.round(a, 4).tolist()} -> {np.round(b, 4).tolist()} m "
                                  "(another arm configuration); move the square or make it smaller")
        wq.append(qs[0])
        spl = CubicSpline(s_grid, qs, axis=0)
        d1, d2 = spl.derivative(1), spl.derivative(2)
        # peak joint rates for T = 1, then scale: dq ~ 1/T, ddq ~ 1/T^2
        t1 = np.linspace(0.0, 1.0, 400)
        s, ds, dds = _quintic_profile(1.0, t1)
        v1 = np.abs(d1(s) * ds[:, None]).max(axis=0)
        a1 = np.abs(d2(s) * ds[:, None] ** 2 + d1(s) * dds[:, None]).max(axis=0)
        T = max(float(np.max(v1 / lim_v)), float(np.sqrt(np.max(a1 / lim_a))), 4 * dt) * 1.02
        for _ in range(5):  # check on the samples themselves and stretch if needed
            T = math.ceil(T / dt) * dt
            t = np.arange(int(round(T / dt))) * dt
            s, ds, dds = _quintic_profile(T, t)
            seg = (spl(s), d1(s) * ds[:, None], d2(s) * ds[:, None] ** 2 + d1(s) * dds[:, None])
            ratio = max(float(np.max(np.abs(seg[1]) / lim_v)), math.sqrt(float(np.max(np.abs(seg[2]) / lim_a))))
            if ratio <= 1.0:
                break
            T *= ratio * 1.001
        segments.append(seg)
    jt = _assemble(segments, spec, rate_hz)
    _check_workspace(ik.ee, jt.q_rad[::10], workspace, "square", jt.t_s[::10])
    return ProcessTrajectory("square", jt, corners, np.array(wq),
                             {"centre_m": c, "side_m": side_m, "speed_fraction": speed_fraction,
                              "laps": laps})


# --------------------------------------------------------------------------- from the config


def _reference_point(spec: RobotSpec) -> tuple[np.ndarray, float, float]:
    """The flange at :func:`default_reference`: (position, horizontal radius, azimuth)."""
    p = EndEffector(spec).positions(default_reference(spec)[None])[0]
    rho = float(np.hypot(p[0], p[1]))
    if rho < 0.2 * float(np.linalg.norm(p)):  # an upright reference: work at half the height's reach
        rho = 0.5 * float(np.linalg.norm(p))
    return p, rho, float(math.atan2(p[1], p[0])) if abs(p[1]) + abs(p[0]) > 1e-9 else 0.0


def _reachable(spec: RobotSpec, points: np.ndarray, tool_down: bool) -> bool:
    ik = InverseKinematics(spec)
    q = None
    try:
        for p in points:
            q = ik.solve(p, TOOL_DOWN if tool_down else None, q, max_iter=200)
    except TrajectoryError:
        return False
    return True


def _box_corners(area: Area, lift_m: float) -> np.ndarray:
    c, h = np.asarray(area.centre_m), np.asarray(area.half_size_m)
    s = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
    pts = c + s * h
    return np.vstack([pts, pts + [0.0, 0.0, lift_m]])


#: (radius, height) of the automatic areas as fractions of the reference pose's horizontal reach,
#: tried in order (at the reference pose's azimuth, then along +x) until inverse kinematics reaches
#: every corner
_AREA_CANDIDATES = tuple((r, dz) for dz in (0.0, -0.3, -0.6, -0.9, 0.3) for r in (0.8, 0.65, 0.95))


def _candidates(az: float):
    return [(fr, dz, a) for a in dict.fromkeys((az, 0.0)) for fr, dz in _AREA_CANDIDATES]


def default_areas(spec: RobotSpec, lift_m: float = 0.1, tool_down: bool = True) -> tuple[Area, Area]:
    """Pick and place areas of a robot without configured ones: boxes of 0.2 x 0.2 x 0.04 times
    the horizontal reach of the reference pose (:func:`default_reference`), 0.5 rad either side
    of it; radius and height are the first of :data:`_AREA_CANDIDATES` where every corner (and
    the lifted corners) is reachable."""
    p, rho, az0 = _reference_point(spec)
    half = (0.1 * rho, 0.1 * rho, 0.02 * rho)
    for fr, dz, az in _candidates(az0):
        r, z = fr * rho, float(p[2]) + dz * rho
        pick = Area((r * math.cos(az - 0.5), r * math.sin(az - 0.5), z), half)
        place = Area((r * math.cos(az + 0.5), r * math.sin(az + 0.5), z + 0.05 * rho), half)
        if _reachable(spec, np.vstack([_box_corners(pick, lift_m), _box_corners(place, lift_m)]), tool_down):
            return pick, place
    raise TrajectoryError(f"pick_and_place: no automatic pick/place areas of robot '{spec.name}' are reachable"
                          f"{' with the tool pointing down' if tool_down else ''}; configure trajectory.pick and "
                          "trajectory.place")


def default_square_centre(spec: RobotSpec, tool_down: bool = True) -> tuple[np.ndarray, float]:
    """Centre (m) and side (m) of the square of a robot without a configured one: side 0.3 x the
    horizontal reach of the reference pose, at the first of :data:`_AREA_CANDIDATES` where the
    corners and edge midpoints (and the shifted validation square's) are reachable."""
    p, rho, az0 = _reference_point(spec)
    side = 0.3 * rho
    h = 0.5 * side
    pts = np.array([[x, y, 0.0] for x in (-h, 0, h) for y in (-h, 0, h, 2 * h)])
    for fr, dz, az in _candidates(az0):
        c = np.array([fr * rho * math.cos(az), fr * rho * math.sin(az), float(p[2]) + dz * rho])
        if not _reachable(spec, c + pts, tool_down):
            continue
        try:  # both squares (identification and the shifted validation one) without configuration jumps
            for shift in (0.0, 0.5 * side):
                square(spec, c + [0.0, shift, 0.0], side, rate_hz=100.0, points_per_edge=20, tool_down=tool_down)
        except TrajectoryError:
            continue
        return c, side
    raise TrajectoryError(f"square: no automatic square of robot '{spec.name}' is reachable"
                          f"{' with the tool pointing down' if tool_down else ''}; configure trajectory.centre_m")


TRAJECTORY_KINDS = ("pick_and_place", "square")


def from_config(spec: RobotSpec, cfg, rate_hz: float, validation: bool = False) -> ProcessTrajectory:
    """The process trajectory of a ``trajectory`` config group (conf/trajectory/): ``kind``
    pick_and_place (areas ``pick``/``place`` of ``centre_m``/``half_size_m``, null: :func:`default_areas`;
    ``n_cycles``, ``seed``, ``lift_m``) or square (``centre_m``/``side_m``, null:
    :func:`default_square_centre`; ``points_per_edge``, ``laps``); ``speed_fraction`` and
    ``tool_down`` for both. ``validation``: the held-out motion (pick-and-place: other random
    points, seed ``validation_seed``; square: the square shifted by half a side and traced
    at 0.8 x the speed)."""
    from robident_twin.design.config import as_trajectory

    cfg = as_trajectory(cfg)  # the typed option (a mapping is validated as one)
    kind = cfg.kind
    if kind not in TRAJECTORY_KINDS:
        raise ConfigError(f"trajectory.kind: expected one of {TRAJECTORY_KINDS} for a process trajectory, got {kind!r}")
    tool_down = spec.n_joints >= 6 if cfg.tool_down is None else cfg.tool_down
    if kind == "pick_and_place":
        speed, lift = cfg.speed_fraction, cfg.lift_m
        if not (cfg.pick and cfg.place):
            pick, place = default_areas(spec, lift, tool_down)
        if cfg.pick:
            pick = Area(tuple(cfg.pick.centre_m), tuple(cfg.pick.half_size_m))
        if cfg.place:
            place = Area(tuple(cfg.place.centre_m), tuple(cfg.place.half_size_m))
        seed = cfg.validation_seed if validation else cfg.seed
        return pick_and_place(spec, pick, place, n_cycles=cfg.n_cycles, seed=seed,
                              lift_m=lift, speed_fraction=speed, rate_hz=rate_hz,
                              tool_down=tool_down)
    if kind == "square":
        speed = cfg.speed_fraction
        if cfg.centre_m is not None:
            c, side = np.asarray(cfg.centre_m, dtype=float), 0.3
        else:
            c, side = default_square_centre(spec, tool_down)
        if cfg.side_m is not None:
            side = cfg.side_m
        if validation:
            c = c + np.array([0.0, 0.5 * side, 0.0])
            speed *= 0.8
        return square(spec, c, side_m=side, speed_fraction=speed, rate_hz=rate_hz,
                      points_per_edge=cfg.points_per_edge, tool_down=tool_down, laps=cfg.laps)
