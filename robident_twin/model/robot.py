"""Robot source of truth: load and validate ``sim_assets/<robot>/robot.yaml``.

One file per robot holds kinematics, link inertials, drives, friction, limits
and default sensor noise. Everything else (URDF, MJCF, pinocchio model, the
true standard-parameter vector) is generated from the :class:`RobotSpec` it
loads, so the engines and the identification model cannot drift apart.

Conventions: SI units, angles in radians inside the code (the file may give
limits in degrees where the key says ``_deg``); arrays are per joint.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robident_twin.errors import RobotSpecError
from robident_twin.paths import SIM_ASSETS_DIR


@dataclass(frozen=True)
class LinkInertial:
    """Inertial parameters of one link in its own (joint) frame."""

    mass_kg: float
    com_m: np.ndarray  # (3,) centre of mass in the link frame
    inertia_com_kgm2: np.ndarray  # (3, 3) inertia tensor about the COM, link-frame axes


FRICTION_KINDS = ("viscous_coulomb", "stribeck", "asymmetric")


@dataclass(frozen=True)
class FrictionVariant:
    """What the twin adds to viscous + Coulomb friction on one side of one joint, for
    model-mismatch studies (the identification model stays viscous + Coulomb).

    ``stribeck``: f += (Fs - Fc) exp(-(dq / vs)^2) s(dq), static friction ``Fs``.
    ``asymmetric``: the Coulomb level is ``Fc`` for dq > 0 and ``coulomb_negative_Nm``
    for dq < 0 (the regressor's Fc then identifies their mean, the offset their
    half-difference times s(dq)).
    """

    kind: str = "viscous_coulomb"
    stribeck_Nm: float = 0.0
    stribeck_velocity_rad_s: float = 0.05
    coulomb_negative_Nm: float | None = None


@dataclass(frozen=True)
class Spring:
    """A gravity-compensation spring on a joint (IR 361 axis 2): a force ``force_N``
    between a point at ``lever_l_m`` on the fixed link and a point at ``lever_r_m``
    on the moving link, giving the applied joint torque
    ``-l r F sin(q - q0) / sqrt(l^2 + r^2 - 2 l r cos(q - q0))`` (constant force)."""

    force_N: float
    lever_l_m: float
    lever_r_m: float
    q0_rad: float = 0.0


@dataclass(frozen=True)
class JointSpec:
    """One revolute joint, the link it moves, its drive, friction and sensors."""

    name: str
    origin_xyz_m: np.ndarray  # joint frame origin in the parent frame
    origin_rpy_rad: np.ndarray  # URDF roll-pitch-yaw of the joint frame in the parent frame
    q_min_rad: float
    q_max_rad: float
    dq_max_rad_s: float
    ddq_max_rad_s2: float
    tau_max_Nm: float
    link: LinkInertial
    drive_inertia_kgm2: float  # joint side (rotor inertia x gear ratio^2)
    gear_ratio: float
    fv_link_Nms_rad: float
    fc_link_Nm: float
    fv_motor_Nms_rad: float
    fc_motor_Nm: float
    offset_motor_Nm: float
    q_std_rad: float
    encoder_resolution_rad: float
    tau_joint_std_Nm: float
    tau_motor_std_Nm: float
    friction_link_variant: FrictionVariant = FrictionVariant()
    friction_motor_variant: FrictionVariant = FrictionVariant()
    spring: Spring | None = None


@dataclass(frozen=True)
class ImportInfo:
    """Where an imported robot came from (a URDF or MJCF, :mod:`robident_twin.model.importer`).

    The spec's joint frames are the user's joint frames rotated so that the joint axis is
    z: ``axis_rotations[i]`` maps vectors from the internal frame of joint i to the user's
    frame of that joint's child link (identity where the axis already is +z), so an internal
    inertial ``(m, c, I)`` is ``(m, R c, R I R^T)`` in the user's link frame."""

    model_path: Path
    kind: str  # "urdf" | "mjcf"
    link_names: tuple[str, ...]  # the user's name of the (merged) link each joint moves
    axis_rotations: tuple[np.ndarray, ...]
    flange_frame: str
    locked_joints: tuple[tuple[str, float], ...] = ()
    overlay_path: Path | None = None
    defaults_used: tuple[str, ...] = ()


@dataclass(frozen=True)
class RobotSpec:
    """A validated robot: the single source of truth for every model built from it."""

    name: str
    description: str
    source: Path
    gravity_m_s2: np.ndarray
    coulomb_smoothing_rad_s: float
    flange_xyz_m: np.ndarray
    flange_rpy_rad: np.ndarray
    home_rad: np.ndarray
    joints: tuple[JointSpec, ...]
    # q_joint = C q_motor (motor coordinates scaled to the joint side); identity for
    # independent drives, a differential gear couples columns (CLOOS axes 5 and 6)
    coupling_matrix: np.ndarray | None = None
    has_joint_torque_sensors: bool = True
    payload: LinkInertial | None = None  # in the flange frame
    payload_attached: bool = False
    imported: ImportInfo | None = None  # set when the robot was imported from a URDF/MJCF
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def coupling(self) -> np.ndarray:
        """C with q_joint = C q_motor (identity when the file has no coupling)."""
        return np.eye(self.n_joints) if self.coupling_matrix is None else self.coupling_matrix

    def _memo(self, key: Any, make):
        """A model-only value computed once per spec (the twins' callbacks ask for it every step).
        The entry is tied to the very ``joints`` and ``coupling_matrix`` objects it was made from,
        so a ``dataclasses.replace`` copy that shares ``_cache`` never sees another spec's value."""
        hit = self._cache.get(key)
        if hit is not None and hit[0] is self.joints and hit[1] is self.coupling_matrix:
            return hit[2]
        value = make()
        self._cache[key] = (self.joints, self.coupling_matrix, value)
        return value

    @property
    def coupling_inv(self) -> np.ndarray:
        return self._memo("coupling_inv", lambda: np.linalg.inv(self.coupling)).copy()

    @property
    def is_coupled(self) -> bool:
        return self._memo("is_coupled", lambda: self.coupling_matrix is not None
                          and not np.allclose(self.coupling_matrix, np.eye(self.n_joints)))

    @property
    def spring_joints(self) -> list[int]:
        """Indices (0-based) of the joints with a spring."""
        return [i for i, j in enumerate(self.joints) if j.spring is not None]

    def with_payload(self, attached: bool) -> "RobotSpec":
        """The same robot with its payload mounted or not (an error if it has none)."""
        import dataclasses

        if attached and self.payload is None:
            raise RobotSpecError(f"{self.source}: field 'payload': robot {self.name} has no payload to attach")
        return dataclasses.replace(self, payload_attached=bool(attached), _cache={})

    @property
    def n_joints(self) -> int:
        return len(self.joints)

    @property
    def joint_names(self) -> list[str]:
        return [j.name for j in self.joints]

    def _arr(self, attr: str) -> np.ndarray:
        return self._memo(("arr", attr), lambda: np.array([getattr(j, attr) for j in self.joints], dtype=float)).copy()

    @property
    def q_min_rad(self) -> np.ndarray:
        return self._arr("q_min_rad")

    @property
    def q_max_rad(self) -> np.ndarray:
        return self._arr("q_max_rad")

    @property
    def dq_max_rad_s(self) -> np.ndarray:
        return self._arr("dq_max_rad_s")

    @property
    def ddq_max_rad_s2(self) -> np.ndarray:
        return self._arr("ddq_max_rad_s2")

    @property
    def tau_max_Nm(self) -> np.ndarray:
        return self._arr("tau_max_Nm")

    @property
    def drive_inertia_kgm2(self) -> np.ndarray:
        return self._arr("drive_inertia_kgm2")

    @property
    def fv_link_Nms_rad(self) -> np.ndarray:
        return self._arr("fv_link_Nms_rad")

    @property
    def fc_link_Nm(self) -> np.ndarray:
        return self._arr("fc_link_Nm")

    @property
    def fv_motor_Nms_rad(self) -> np.ndarray:
        return self._arr("fv_motor_Nms_rad")

    @property
    def fc_motor_Nm(self) -> np.ndarray:
        return self._arr("fc_motor_Nm")

    @property
    def offset_motor_Nm(self) -> np.ndarray:
        return self._arr("offset_motor_Nm")

    @property
    def q_std_rad(self) -> np.ndarray:
        return self._arr("q_std_rad")

    @property
    def encoder_resolution_rad(self) -> np.ndarray:
        return self._arr("encoder_resolution_rad")

    @property
    def tau_joint_std_Nm(self) -> np.ndarray:
        return self._arr("tau_joint_std_Nm")

    @property
    def tau_motor_std_Nm(self) -> np.ndarray:
        return self._arr("tau_motor_std_Nm")

    @property
    def gear_ratio(self) -> np.ndarray:
        return self._arr("gear_ratio")


# --------------------------------------------------------------------------- loading


def available_robots() -> list[str]:
    """Names of the robots that have a ``sim_assets/<name>/robot.yaml``."""
    return sorted(p.parent.name for p in SIM_ASSETS_DIR.glob("*/robot.yaml"))


def robot_file(name: str) -> Path:
    """Path of a robot's source-of-truth file; a clear error for an unknown name."""
    path = SIM_ASSETS_DIR / name / "robot.yaml"
    if not path.is_file():
        raise RobotSpecError(
            f"unknown robot '{name}': there is no {path}; available robots: "
            f"{', '.join(available_robots()) or '(none)'}"
        )
    return path


def load_robot(name_or_path: str | Path, overlay: str | Path | None = None) -> RobotSpec:
    """Load and validate a robot by name (``iiwa14``), by the path of its YAML file, or
    from a URDF / MJCF (``.urdf``, ``.xml``, ``.mjcf``) with an optional overlay YAML
    (:func:`robident_twin.model.importer.import_robot`)."""
    p = Path(name_or_path)
    if p.suffix.lower() in {".urdf", ".xml", ".mjcf"}:
        from robident_twin.model.importer import import_robot

        return import_robot(p, overlay)
    if overlay:
        raise RobotSpecError(f"robot.overlay: an overlay only applies to a URDF or MJCF robot file, not to {p}")
    path = p if (p.suffix in {".yaml", ".yml"} or p.is_file()) else robot_file(str(name_or_path))
    if not path.is_file():
        raise RobotSpecError(f"robot file {path} does not exist")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RobotSpecError(f"{path}: not a UTF-8 text file (byte {exc.start}: {exc.reason}); expected a "
                             "UTF-8 YAML robot file") from exc
    except OSError as exc:
        raise RobotSpecError(f"{path}: not readable: {exc}") from exc
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKey as exc:
        raise RobotSpecError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise RobotSpecError(f"{path}: not valid YAML: {exc}") from exc
    return parse_robot(raw, path)


class _DuplicateKey(Exception):
    pass


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """yaml.safe_load that refuses a key given twice in one mapping (YAML would keep the last
    silently: a second ``sensors:`` block would replace the first). On libyaml's parser when PyYAML
    has it (4x faster on a robot file; the same Python constructor, so the same values)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise _DuplicateKey(f"line {key_node.start_mark.line + 1}: key '{key}' given twice in one mapping "
                                    f"(first on line {seen[key]}); expected each key once")
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


#: The keys a robot file may hold, per level (a nested dict: the keys of a sub-mapping;
#: None: a value). Anything else is refused: a misspelt key would otherwise fall back to
#: its default silently (``sensor:`` -> zero noise, ``drvie:`` -> no drive inertia).
_INERTIA_KEYS = {k: None for k in ("xx", "yy", "zz", "xy", "xz", "yz")}
_FRICTION_SIDE_KEYS = {k: None for k in ("viscous_Nms_rad", "coulomb_Nm", "offset_Nm", "kind", "stribeck_Nm",
                                         "stribeck_velocity_rad_s", "coulomb_negative_Nm")}
JOINT_KEYS: dict[str, Any] = {
    "name": None,
    "origin": {"xyz_m": None, "rpy_rad": None},
    "limits": {"position_deg": None, "velocity_deg_s": None, "acceleration_rad_s2": None, "torque_Nm": None},
    "link": {"mass_kg": None, "com_m": None, "inertia_com_kgm2": _INERTIA_KEYS},
    "drive": {"inertia_kgm2": None, "gear_ratio": None},
    "friction": {"link": _FRICTION_SIDE_KEYS, "motor": _FRICTION_SIDE_KEYS},
    "sensors": {"q_std_rad": None, "encoder_resolution_rad": None, "tau_joint_std_Nm": None,
                "tau_motor_std_Nm": None},
    "spring": {"force_N": None, "lever_l_m": None, "lever_r_m": None, "q0_deg": None},
}
ROBOT_KEYS: dict[str, Any] = {
    "name": None, "description": None, "gravity_m_s2": None, "coulomb_smoothing_rad_s": None,
    "flange": {"xyz_m": None, "rpy_rad": None}, "home_deg": None, "joints": None, "coupling_matrix": None,
    "has_joint_torque_sensors": None,
    "payload": {"mass_kg": None, "com_m": None, "inertia_com_kgm2": _INERTIA_KEYS}, "payload_attached": None,
}


def _check_keys(path: Path, d: Any, schema: dict[str, Any], where: str) -> None:
    """Refuse keys that ``schema`` does not list, at every level, naming the key path, the
    expected keys and the closest one (a typo)."""
    if not isinstance(d, dict):
        return  # the type is checked (and named) where the value is read
    for key, value in d.items():
        full = f"{where}.{key}" if where else str(key)
        if not isinstance(key, str) or key not in schema:
            close = difflib.get_close_matches(str(key), list(schema), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            noun = "friction side" if where.endswith(".friction") else "key"
            raise RobotSpecError(f"{path}: field '{where or '<top level>'}': unknown {noun} '{key}' (at {full})"
                                 f"{hint}; expected keys there: {', '.join(sorted(schema))}")
        sub = schema[key]
        if isinstance(sub, dict):
            _check_keys(path, value, sub, full)


def check_robot_keys(raw: Any, path: Path) -> None:
    """Every key of a parsed robot file is known (see ROBOT_KEYS / JOINT_KEYS)."""
    if not isinstance(raw, dict):
        return
    _check_keys(path, raw, ROBOT_KEYS, "")
    joints = raw.get("joints")
    if isinstance(joints, list):
        for i, jr in enumerate(joints):
            _check_keys(path, jr, JOINT_KEYS, f"joints[{i}]")


class _Reader:
    """Reads fields from a nested mapping and names the file and field on any error."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, what: str) -> RobotSpecError:
        return RobotSpecError(f"{self.path}: field '{where}': {what}")

    def get(self, d: Any, key: str, where: str, default: Any = ...) -> Any:
        if not isinstance(d, dict):
            raise self.fail(where, f"expected a mapping, got {type(d).__name__}")
        if key not in d or d[key] is None:
            if default is ...:
                raise self.fail(f"{where}.{key}" if where else key, "missing (required)")
            return default
        return d[key]

    def number(self, d: Any, key: str, where: str, default: Any = ..., *, positive=False,
               nonneg=False) -> float:
        full = f"{where}.{key}" if where else key
        v = self.get(d, key, where, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(full, f"expected a number, got {v!r}")
        v = float(v)
        if not math.isfinite(v):
            raise self.fail(full, f"expected a finite number, got {v}")
        if positive and v <= 0:
            raise self.fail(full, f"expected a positive number, got {v}")
        if nonneg and v < 0:
            raise self.fail(full, f"expected a non-negative number, got {v}")
        return v

    def vector(self, d: Any, key: str, where: str, n: int, default: Any = ...) -> np.ndarray:
        full = f"{where}.{key}" if where else key
        v = self.get(d, key, where, default)
        if (not isinstance(v, (list, tuple)) or len(v) != n
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
            raise self.fail(full, f"expected a list of {n} numbers, got {v!r}")
        arr = np.asarray(v, dtype=float)
        if not np.all(np.isfinite(arr)):
            raise self.fail(full, f"expected finite numbers, got {v!r}")
        return arr


def _inertia_tensor(r: _Reader, d: Any, where: str) -> np.ndarray:
    keys = ("xx", "yy", "zz", "xy", "xz", "yz")
    vals = {}
    for k in keys:
        default = 0.0 if k in ("xy", "xz", "yz") else ...
        vals[k] = r.number(d, k, where, default)
    I = np.array([[vals["xx"], vals["xy"], vals["xz"]],
                  [vals["xy"], vals["yy"], vals["yz"]],
                  [vals["xz"], vals["yz"], vals["zz"]]])
    eig = np.linalg.eigvalsh(I)
    if eig[0] <= 0:
        raise r.fail(where, f"inertia tensor about the COM is not positive definite "
                            f"(principal moments {eig.tolist()})")
    a, b, c = eig
    tol = 1e-12 * c
    if a + b < c - tol:
        raise r.fail(where, f"inertia tensor violates the triangle inequality: principal "
                            f"moments {a:.6g} + {b:.6g} < {c:.6g}")
    return I


def parse_robot(raw: Any, path: Path) -> RobotSpec:
    """Validate a parsed robot file. Every error names the file and the field."""
    r = _Reader(Path(path))
    if not isinstance(raw, dict):
        raise RobotSpecError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    check_robot_keys(raw, Path(path))
    name = r.get(raw, "name", "")
    if not isinstance(name, str) or not name:
        raise r.fail("name", "expected a non-empty string")
    joints_raw = r.get(raw, "joints", "")
    if not isinstance(joints_raw, list) or not joints_raw:
        raise r.fail("joints", "expected a non-empty list of joints")
    n = len(joints_raw)
    joints = []
    for i, jr in enumerate(joints_raw):
        w = f"joints[{i}]"
        jname = r.get(jr, "name", w)
        origin = r.get(jr, "origin", w)
        lim = r.get(jr, "limits", w)
        pos = r.get(lim, "position_deg", f"{w}.limits")
        if (not isinstance(pos, list) or len(pos) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in pos)
                or not all(math.isfinite(x) for x in pos) or not pos[0] < pos[1]):
            raise r.fail(f"{w}.limits.position_deg", f"expected [lower, upper], two finite numbers of degrees "
                                                     f"with lower < upper, got {pos!r}")
        link = r.get(jr, "link", w)
        mass = r.number(link, "mass_kg", f"{w}.link", positive=True)
        com = r.vector(link, "com_m", f"{w}.link", 3)
        inertia = _inertia_tensor(r, r.get(link, "inertia_com_kgm2", f"{w}.link"), f"{w}.link.inertia_com_kgm2")
        if not isinstance(jname, str) or not jname:
            raise r.fail(f"{w}.name", f"expected a non-empty string, got {jname!r}")
        drive = r.get(jr, "drive", w, {})
        fr = r.get(jr, "friction", w, {})
        if not isinstance(fr, dict):
            raise r.fail(f"{w}.friction", f"expected a mapping with 'link' and/or 'motor' (each a mapping of "
                                          f"viscous_Nms_rad, coulomb_Nm, ...), got {fr!r}")
        unknown = set(fr) - {"link", "motor"}
        if unknown:
            raise r.fail(f"{w}.friction", f"unknown friction side(s) {sorted(unknown)}; expected 'link' and/or 'motor'")
        fl = r.get(fr, "link", f"{w}.friction", {})
        fm = r.get(fr, "motor", f"{w}.friction", {})
        variants = {side: _friction_variant(r, d, f"{w}.friction.{side}") for side, d in (("link", fl), ("motor", fm))}
        spring = None
        if jr.get("spring") is not None:
            sp = jr["spring"]
            spring = Spring(force_N=r.number(sp, "force_N", f"{w}.spring", nonneg=True),
                            lever_l_m=r.number(sp, "lever_l_m", f"{w}.spring", positive=True),
                            lever_r_m=r.number(sp, "lever_r_m", f"{w}.spring", positive=True),
                            q0_rad=math.radians(r.number(sp, "q0_deg", f"{w}.spring", 0.0)))
            if abs(spring.lever_l_m - spring.lever_r_m) < 1e-9:
                raise r.fail(f"{w}.spring", "lever_l_m and lever_r_m must differ (the spring length would reach zero)")
        sens = r.get(jr, "sensors", w, {})
        joints.append(JointSpec(
            name=str(jname),
            origin_xyz_m=r.vector(origin, "xyz_m", f"{w}.origin", 3),
            origin_rpy_rad=r.vector(origin, "rpy_rad", f"{w}.origin", 3, [0.0, 0.0, 0.0]),
            q_min_rad=math.radians(pos[0]),
            q_max_rad=math.radians(pos[1]),
            dq_max_rad_s=math.radians(r.number(lim, "velocity_deg_s", f"{w}.limits", positive=True)),
            ddq_max_rad_s2=r.number(lim, "acceleration_rad_s2", f"{w}.limits", positive=True),
            tau_max_Nm=r.number(lim, "torque_Nm", f"{w}.limits", positive=True),
            link=LinkInertial(mass, com, inertia),
            drive_inertia_kgm2=r.number(drive, "inertia_kgm2", f"{w}.drive", 0.0, nonneg=True),
            gear_ratio=r.number(drive, "gear_ratio", f"{w}.drive", 1.0),
            fv_link_Nms_rad=r.number(fl, "viscous_Nms_rad", f"{w}.friction.link", 0.0, nonneg=True),
            fc_link_Nm=r.number(fl, "coulomb_Nm", f"{w}.friction.link", 0.0, nonneg=True),
            fv_motor_Nms_rad=r.number(fm, "viscous_Nms_rad", f"{w}.friction.motor", 0.0, nonneg=True),
            fc_motor_Nm=r.number(fm, "coulomb_Nm", f"{w}.friction.motor", 0.0, nonneg=True),
            offset_motor_Nm=r.number(fm, "offset_Nm", f"{w}.friction.motor", 0.0),
            q_std_rad=r.number(sens, "q_std_rad", f"{w}.sensors", 0.0, nonneg=True),
            encoder_resolution_rad=r.number(sens, "encoder_resolution_rad", f"{w}.sensors", 0.0, nonneg=True),
            tau_joint_std_Nm=r.number(sens, "tau_joint_std_Nm", f"{w}.sensors", 0.0, nonneg=True),
            tau_motor_std_Nm=r.number(sens, "tau_motor_std_Nm", f"{w}.sensors", 0.0, nonneg=True),
            friction_link_variant=variants["link"],
            friction_motor_variant=variants["motor"],
            spring=spring,
        ))
        if joints[-1].gear_ratio == 0:
            raise r.fail(f"{w}.drive.gear_ratio", "must not be zero")
    names = [j.name for j in joints]
    if len(set(names)) != n:
        raise r.fail("joints", f"joint names must be unique, got {names}")
    flange = r.get(raw, "flange", "", {})
    home_deg = r.vector(raw, "home_deg", "", n, [0.0] * n)
    home = np.radians(home_deg)
    lo = np.array([j.q_min_rad for j in joints])
    hi = np.array([j.q_max_rad for j in joints])
    if np.any(home < lo) or np.any(home > hi):
        raise r.fail("home_deg", "home configuration is outside the position limits")
    coupling = None
    if raw.get("coupling_matrix") is not None:
        c = raw["coupling_matrix"]
        if (not isinstance(c, list) or len(c) != n or not all(isinstance(row, list) and len(row) == n for row in c)
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for row in c for x in row)):
            raise r.fail("coupling_matrix", f"expected a {n} x {n} list of lists of numbers (q_joint = C q_motor), "
                                            f"got {c!r}")
        coupling = np.asarray(c, dtype=float)
        if not np.all(np.isfinite(coupling)):
            raise r.fail("coupling_matrix", "expected finite numbers")
        if abs(np.linalg.det(coupling)) < 1e-9 or np.linalg.cond(coupling) > 1e9:
            raise r.fail("coupling_matrix", f"the gear coupling matrix is singular (det {np.linalg.det(coupling):.3g}); "
                                            "every motor must drive an independent combination of joints")
    payload = None
    if raw.get("payload") is not None:
        pl = raw["payload"]
        payload = LinkInertial(r.number(pl, "mass_kg", "payload", positive=True), r.vector(pl, "com_m", "payload", 3),
                               _inertia_tensor(r, r.get(pl, "inertia_com_kgm2", "payload"), "payload.inertia_com_kgm2"))
    attached = raw.get("payload_attached", False)
    if not isinstance(attached, bool):
        raise r.fail("payload_attached", f"expected true or false, got {attached!r}")
    if attached and payload is None:
        raise r.fail("payload_attached", "is true but the file has no 'payload'")
    has_sensors = raw.get("has_joint_torque_sensors", True)
    if not isinstance(has_sensors, bool):
        raise r.fail("has_joint_torque_sensors", f"expected true or false, got {has_sensors!r}")
    return RobotSpec(
        name=name,
        description=str(raw.get("description", name)),
        source=Path(path),
        gravity_m_s2=r.vector(raw, "gravity_m_s2", "", 3, [0.0, 0.0, -9.81]),
        coulomb_smoothing_rad_s=r.number(raw, "coulomb_smoothing_rad_s", "", 0.01, positive=True),
        flange_xyz_m=r.vector(flange, "xyz_m", "flange", 3, [0.0, 0.0, 0.0]),
        flange_rpy_rad=r.vector(flange, "rpy_rad", "flange", 3, [0.0, 0.0, 0.0]),
        home_rad=home,
        joints=tuple(joints),
        coupling_matrix=coupling,
        has_joint_torque_sensors=has_sensors,
        payload=payload,
        payload_attached=attached,
    )


def _friction_variant(r: "_Reader", d: Any, where: str) -> FrictionVariant:
    if not isinstance(d, dict):
        raise r.fail(where, f"expected a mapping, got {type(d).__name__}")
    known = {"viscous_Nms_rad", "coulomb_Nm", "offset_Nm", "kind", "stribeck_Nm", "stribeck_velocity_rad_s",
             "coulomb_negative_Nm"}
    unknown = set(d) - known
    if unknown:
        raise r.fail(where, f"unknown key(s) {sorted(unknown)}; expected some of {sorted(known)}")
    kind = d.get("kind", "viscous_coulomb")
    if kind not in FRICTION_KINDS:
        raise r.fail(f"{where}.kind", f"unknown friction kind {kind!r}; expected one of {', '.join(FRICTION_KINDS)}")
    v = FrictionVariant(kind=kind)
    if kind == "stribeck":
        v = FrictionVariant(kind=kind, stribeck_Nm=r.number(d, "stribeck_Nm", where, nonneg=True),
                            stribeck_velocity_rad_s=r.number(d, "stribeck_velocity_rad_s", where, 0.05, positive=True))
    elif kind == "asymmetric":
        v = FrictionVariant(kind=kind, coulomb_negative_Nm=r.number(d, "coulomb_negative_Nm", where, nonneg=True))
    return v


def with_friction_variant(spec: RobotSpec, kind: str, side: str = "both", stribeck_ratio: float = 1.5,
                          stribeck_velocity_rad_s: float = 0.05, negative_ratio: float = 0.8) -> RobotSpec:
    """The robot with a friction variant on every joint (Hydra group ``friction``):
    ``stribeck`` (static level ``stribeck_ratio`` x Fc, Stribeck velocity) or
    ``asymmetric`` (Coulomb level ``negative_ratio`` x Fc for negative velocities), on
    the ``link`` side, the ``motor`` side or ``both``."""
    import dataclasses

    from robident_twin.errors import ConfigError

    if kind not in ("stribeck", "asymmetric"):
        raise ConfigError(f"friction.kind: unknown friction kind {kind!r}; expected nominal, stribeck or asymmetric")
    if side not in ("link", "motor", "both"):
        raise ConfigError(f"friction.side: expected link, motor or both, got {side!r}")
    if not stribeck_ratio >= 0 or not stribeck_velocity_rad_s > 0 or not negative_ratio >= 0:
        raise ConfigError("friction: stribeck_ratio and negative_ratio must be >= 0, stribeck_velocity_rad_s > 0")
    joints = []
    for j in spec.joints:
        upd = {}
        for s_name, fc in (("link", j.fc_link_Nm), ("motor", j.fc_motor_Nm)):
            if side in (s_name, "both"):
                if kind == "stribeck":
                    var = FrictionVariant(kind, stribeck_Nm=stribeck_ratio * fc,
                                          stribeck_velocity_rad_s=stribeck_velocity_rad_s)
                else:
                    var = FrictionVariant(kind, coulomb_negative_Nm=negative_ratio * fc)
                upd[f"friction_{s_name}_variant"] = var
        joints.append(dataclasses.replace(j, **upd))
    return dataclasses.replace(spec, joints=tuple(joints), _cache={})
