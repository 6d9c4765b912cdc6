"""Cartesian bounds and collision settings of a design (pinocchio forward kinematics, MuJoCo capsules).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.model.robot import RobotSpec


def _opt_float(d: Mapping[str, Any], key: str, where: str, default=None, positive=False):
    v = d.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where}.{key}: expected a finite number, got {v!r}")
    if positive and v <= 0:
        raise ConfigError(f"{where}.{key}: expected a positive number, got {v!r}")
    return float(v)


def _vec3(v: Any, where: str) -> tuple[float, float, float] | None:
    if v is None:
        return None
    try:
        arr = np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        arr = np.zeros(0)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ConfigError(f"{where}: expected a list of 3 finite numbers (m), got {v!r}")
    return tuple(float(x) for x in arr)


@dataclass(frozen=True)
class CartesianBounds:
    """Bounds on the end-effector position (the flange origin, base frame, m).

    Swevers 1997: height bounds ``z_min_m <= z <= z_max_m`` and a minimum distance from the base
    axis ``r = sqrt(x^2 + y^2) >= r_min_m`` (closer, the robot touches its base); Kolyubin 2017
    eq. 10: ``d_xy >= 0.3``, ``z >= -0.2`` (see :meth:`kolyubin2017`); plus an optional
    axis-aligned box ``box_lo_m <= p <= box_hi_m`` and a maximum reach ``r_max_m``.
    """

    z_min_m: float | None = None
    z_max_m: float | None = None
    r_min_m: float | None = None
    r_max_m: float | None = None
    box_lo_m: tuple[float, float, float] | None = None
    box_hi_m: tuple[float, float, float] | None = None

    def __post_init__(self):
        for lo, hi in (("z_min_m", "z_max_m"), ("r_min_m", "r_max_m")):
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and not a < b:
                raise ConfigError(f"cartesian: {lo} = {a} must be below {hi} = {b}")
        if (self.box_lo_m is None) != (self.box_hi_m is None):
            raise ConfigError("cartesian: give both box_lo_m and box_hi_m, or neither")
        if self.box_lo_m is not None and not all(a < b for a, b in zip(self.box_lo_m, self.box_hi_m)):
            raise ConfigError(f"cartesian: box_lo_m {self.box_lo_m} must be below box_hi_m "
                              f"{self.box_hi_m} on every axis")

    @classmethod
    def kolyubin2017(cls) -> "CartesianBounds":
        """The workspace bounds of Kolyubin 2017 eq. 10: d_xy >= 0.3 m, z >= -0.2 m."""
        return cls(z_min_m=-0.2, r_min_m=0.3)

    @classmethod
    def from_config(cls, d: Mapping[str, Any] | None, where: str = "design.cartesian"):
        if d is None:
            return None
        if not isinstance(d, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {d!r}")
        allowed = {"z_min_m", "z_max_m", "r_min_m", "r_max_m", "box_lo_m", "box_hi_m", "preset"}
        unknown = set(d) - allowed
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
        if d.get("preset") is not None:
            if d["preset"] != "kolyubin2017":
                raise ConfigError(f"{where}.preset: expected 'kolyubin2017', got {d['preset']!r}")
            return cls.kolyubin2017()
        vals = {k: _opt_float(d, k, where) for k in ("z_min_m", "z_max_m", "r_min_m", "r_max_m")}
        if all(v is None for v in vals.values()) and d.get("box_lo_m") is None:
            return None
        return cls(**vals, box_lo_m=_vec3(d.get("box_lo_m"), f"{where}.box_lo_m"),
                   box_hi_m=_vec3(d.get("box_hi_m"), f"{where}.box_hi_m"))

    def names(self) -> list[str]:
        out = []
        if self.z_min_m is not None:
            out.append(f"height z >= {self.z_min_m:g} m")
        if self.z_max_m is not None:
            out.append(f"height z <= {self.z_max_m:g} m")
        if self.r_min_m is not None:
            out.append(f"distance from base axis >= {self.r_min_m:g} m")
        if self.r_max_m is not None:
            out.append(f"distance from base axis <= {self.r_max_m:g} m")
        if self.box_lo_m is not None:
            out += [f"box {ax} >= {v:g} m" for ax, v in zip("xyz", self.box_lo_m)]
            out += [f"box {ax} <= {v:g} m" for ax, v in zip("xyz", self.box_hi_m)]
        return out

    def values_and_limits(self, p_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(T, m) bounded quantities (z, r or a coordinate, m) and their (m,) bounds, in the
        order of :meth:`names`."""
        p = np.atleast_2d(p_m)
        r = np.hypot(p[:, 0], p[:, 1])
        vals, lims = [], []
        for key, q in (("z_min_m", p[:, 2]), ("z_max_m", p[:, 2]), ("r_min_m", r), ("r_max_m", r)):
            if getattr(self, key) is not None:
                vals.append(q)
                lims.append(getattr(self, key))
        if self.box_lo_m is not None:
            for bound in (self.box_lo_m, self.box_hi_m):
                for i in range(3):
                    vals.append(p[:, i])
                    lims.append(bound[i])
        return (np.stack(vals, axis=1) if vals else np.zeros((p.shape[0], 0))), np.array(lims)

    def margins(self, p_m: np.ndarray) -> np.ndarray:
        """(T, m) signed margins (>= 0 inside) for end-effector positions p_m (T, 3)."""
        p = np.atleast_2d(p_m)
        cols = []
        r = np.hypot(p[:, 0], p[:, 1])
        if self.z_min_m is not None:
            cols.append(p[:, 2] - self.z_min_m)
        if self.z_max_m is not None:
            cols.append(self.z_max_m - p[:, 2])
        if self.r_min_m is not None:
            cols.append(r - self.r_min_m)
        if self.r_max_m is not None:
            cols.append(self.r_max_m - r)
        if self.box_lo_m is not None:
            cols += [p[:, i] - self.box_lo_m[i] for i in range(3)]
            cols += [self.box_hi_m[i] - p[:, i] for i in range(3)]
        return np.stack(cols, axis=1) if cols else np.zeros((p.shape[0], 0))


@dataclass(frozen=True)
class Obstacle:
    """A static obstacle in the base frame: ``shape`` sphere (size [r]), box (half sizes
    [hx, hy, hz]) or capsule (size [r, half_length] along z), centre ``pos_m``."""

    name: str
    shape: str
    pos_m: tuple[float, float, float]
    size_m: tuple[float, ...]

    def __post_init__(self):
        n_size = {"sphere": 1, "box": 3, "capsule": 2}
        if self.shape not in n_size:
            raise ConfigError(f"obstacle '{self.name}': shape: expected one of {sorted(n_size)}, "
                              f"got {self.shape!r}")
        if len(self.size_m) != n_size[self.shape] or not all(s > 0 for s in self.size_m):
            raise ConfigError(f"obstacle '{self.name}': size_m: expected {n_size[self.shape]} positive "
                              f"number(s) for a {self.shape}, got {list(self.size_m)}")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.shape, "pos_m": list(self.pos_m),
                "size_m": list(self.size_m)}


@dataclass(frozen=True)
class CollisionSettings:
    """Self-collision (link capsules at least ``min_link_gap`` apart in the chain) and
    collision with ``obstacles`` (every moving link). Distances must stay above
    ``clearance_m``. Capsules of radius ``radius_m`` join successive joint origins."""

    self_collision: bool = True
    obstacles: tuple[Obstacle, ...] = ()
    radius_m: float = 0.06
    clearance_m: float = 0.01
    min_link_gap: int = 2

    @classmethod
    def from_config(cls, d: Mapping[str, Any] | None, where: str = "design.collision"):
        if d is None or d is False:
            return None
        if d is True:
            return cls()
        if not isinstance(d, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {d!r}")
        allowed = {"self_collision", "obstacles", "radius_m", "clearance_m", "min_link_gap"}
        unknown = set(d) - allowed
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(allowed)}")
        obstacles = []
        for i, ob in enumerate(d.get("obstacles") or []):
            w = f"{where}.obstacles[{i}]"
            if not isinstance(ob, Mapping) or "pos_m" not in ob or "size_m" not in ob:
                raise ConfigError(f"{w}: expected a mapping with name, shape, pos_m, size_m; got {ob!r}")
            obstacles.append(Obstacle(str(ob.get("name", f"ob{i}")), str(ob.get("shape", "box")),
                                      _vec3(ob["pos_m"], f"{w}.pos_m"),
                                      tuple(float(x) for x in ob["size_m"])))
        radius = _opt_float(d, "radius_m", where, 0.06, positive=True)
        clearance = _opt_float(d, "clearance_m", where, 0.01)
        gap = d.get("min_link_gap", 2)
        if not isinstance(gap, int) or gap < 2:
            raise ConfigError(f"{where}.min_link_gap: expected an integer >= 2, got {gap!r}")
        return cls(bool(d.get("self_collision", True)), tuple(obstacles), radius, clearance, gap)


class CollisionChecker:
    """Signed distances between the link capsules and obstacles of the MuJoCo collision model
    (:func:`robident_twin.model.builders.collision_mjspec`), evaluated with ``mj_geomDistance``."""

    def __init__(self, spec: RobotSpec, settings: CollisionSettings):
        import mujoco

        from robident_twin.model.builders import collision_model

        self.spec, self.settings = spec, settings
        self.model = collision_model(spec, settings.radius_m, [o.as_dict() for o in settings.obstacles])
        self.data = mujoco.MjData(self.model)
        gid = {self.model.geom(i).name: i for i in range(self.model.ngeom)}
        n = spec.n_joints
        pairs: list[tuple[int, int]] = []
        names: list[str] = []
        if settings.self_collision:
            for a in range(0, n + 1):
                for b in range(a + settings.min_link_gap, n + 1):
                    pairs.append((gid[f"link{a}"], gid[f"link{b}"]))
                    names.append(f"link{a}-link{b}")
        for ob in settings.obstacles:
            for b in range(1, n + 1):
                pairs.append((gid[f"obstacle_{ob.name}"], gid[f"link{b}"]))
                names.append(f"{ob.name}-link{b}")
        self.pairs, self.pair_names = pairs, names
        self._mj = mujoco
        # self pairs already within the clearance at home (joined through a short link) can never
        # separate: they are not checked (listed in ``skipped_pairs``)
        d_home = self.distances(spec.home_rad[None, :])[0]
        keep = [i for i, nm in enumerate(names)
                if nm.startswith("obstacle") or not nm.startswith("link") or d_home[i] > settings.clearance_m]
        self.skipped_pairs = [names[i] for i in range(len(names)) if i not in keep]
        self.pairs = [pairs[i] for i in keep]
        self.pair_names = [names[i] for i in keep]

    def distances(self, q_rad: np.ndarray) -> np.ndarray:
        """(T, P) signed distances (m, negative = penetration) for configurations (T, n)."""
        q = np.atleast_2d(q_rad)
        out = np.empty((q.shape[0], len(self.pairs)))
        m, d, mj = self.model, self.data, self._mj
        for k in range(q.shape[0]):
            d.qpos[:] = q[k]
            mj.mj_kinematics(m, d)
            for p, (g1, g2) in enumerate(self.pairs):
                out[k, p] = mj.mj_geomDistance(m, d, g1, g2, 10.0, None)
        return out


def _frame_id(model, name: str = "flange") -> int:
    fid = model.getFrameId(name)
    if fid >= model.nframes:
        raise ConfigError(f"frame '{name}' not found in the pinocchio model")
    return fid


class EndEffector:
    """Flange position by pinocchio forward kinematics."""

    def __init__(self, spec: RobotSpec):
        from robident_twin.model.builders import pinocchio_model

        self.model = pinocchio_model(spec)
        self.data = self.model.createData()
        self.fid = _frame_id(self.model, "flange")

    def positions(self, q_rad: np.ndarray) -> np.ndarray:
        import pinocchio as pin

        q = np.atleast_2d(q_rad)
        out = np.empty((q.shape[0], 3))
        for k in range(q.shape[0]):
            pin.framesForwardKinematics(self.model, self.data, q[k])
            out[k] = self.data.oMf[self.fid].translation
        return out
