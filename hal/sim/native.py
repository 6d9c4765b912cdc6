"""The fast loop's passive-force laws compiled (``hal/sim/native/passive.c``), installed as
MuJoCo's ``mjcb_passive`` so that MuJoCo calls C directly, with no Python in each RK4 stage.

:func:`hal.sim.fastloop.lean_passive` builds the numpy callback and, when this module can, a
:class:`NativePassive` with the same law and parameters (the ideal twin; the realistic twin's
link-side friction; elastic joints with friction on both sides, uncoupled; and the twins' general
callbacks for viscous + Coulomb friction: coupled joints with numpy's ``@`` on the coupling matrix,
springs, any set of realistic effects, the gears' transmission error); the fast loop installs it with
:func:`installed` inside the twin's ``physics`` (which holds the lock and restores the previous
callback). The C laws do the numpy callback's operations in the same order (no ``-ffast-math``,
no fused multiply-add); libm's ``tanh``/``exp`` may differ from numpy's in the last bit, so a
run is equal to the numpy run to rounding, not bit-identical (``tests/test_native_passive.py``).

The library is compiled on first use with the system compiler (``$CC``, else ``cc``) and kept in
the user cache (``robident_twin.paths.cache_dir() / "native"``), named by a hash of the source,
the MuJoCo version, the compiler and the flags, written atomically (parallel workers may compile
at once). No compiler, a failed compile or a failed load: one log line saying why, and the numpy
callback runs. ``ROBIDENT_NATIVE=0`` forces the numpy callback.

MuJoCo's callback is process-global. The C function checks that it is called with the twin's
mjData; with another one it calls the context's fallback: the Python bindings' own trampoline
(captured while the numpy callback is installed), which looks up the Python objects and calls
the numpy callback, whose ``dd is not d`` branch runs the twin's general callback.
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from robident_twin.atomic import atomic_path
from robident_twin.paths import cache_dir

log = logging.getLogger(__name__)

#: the C source (a module attribute: a test points it at a missing file)
SOURCE = Path(__file__).resolve().parent / "native" / "passive.c"
#: IEEE semantics: no -ffast-math, and no contraction of a * b + c into one rounding
FLAGS = ("-O2", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math")

_P = ctypes.POINTER(ctypes.c_double)
_FALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class _Context(ctypes.Structure):
    """``robident_passive_ctx`` of passive.c, field by field."""
    _fields_ = [("data", ctypes.c_void_p), ("fallback", ctypes.c_void_p), ("n", ctypes.c_int),
                ("eps_rad_s", ctypes.c_double), ("drift_fraction", ctypes.c_double),
                ("drift_time_s", ctypes.c_double), ("fv", _P), ("fc", _P), ("off", _P),
                ("inv_vs", _P), ("sa", _P), ("lc", _P),
                ("fvm", _P), ("fcm", _P), ("offm", _P), ("sam", _P), ("lcm", _P),
                ("flags", ctypes.c_int), ("te_lines", ctypes.c_int), ("te_inv_blend", ctypes.c_double),
                ("sp_on", _P), ("sp_q0", _P), ("sp_l", _P), ("sp_r", _P), ("sp_force", _P),
                ("cm", _P), ("cm_exact", _P), ("ci", _P), ("ci_exact", _P),
                ("te_w", _P), ("te_phase", _P), ("te_aw", _P), ("te_aw2", _P), ("te_J", _P)]


class _Callback(ctypes._CFuncPtr):
    """A C function pointer MuJoCo's ``set_mjcb_passive`` installs as is; called from Python (by
    the bindings' trampoline, for another mjData) it runs ``self.python``."""
    _flags_ = _FALLBACK._flags_
    _argtypes_ = _FALLBACK._argtypes_
    _restype_ = _FALLBACK._restype_

    def __call__(self, m, d):
        return self.python(m, d)


_LIBS: dict[tuple, ctypes.CDLL | None] = {}  # per (compiler, source): one build or load, one log line per process


def enabled() -> bool:
    """False when ``ROBIDENT_NATIVE=0`` (read at each call)."""
    return os.environ.get("ROBIDENT_NATIVE", "1").strip() not in ("0", "false", "no", "off")


def _compiler() -> list[str]:
    return shlex.split(os.environ.get("CC", "").strip() or "cc")


def _build(cc: list[str], source: Path, folder: Path) -> ctypes.CDLL:
    """The compiled library (from the cache, else compiled into it); OSError/RuntimeError on failure."""
    import mujoco

    if not cc or shutil.which(cc[0]) is None:
        raise RuntimeError(f"no C compiler ({' '.join(cc) or 'cc'}) on PATH")
    text = source.read_bytes()  # OSError when the source is missing
    try:
        version = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"the compiler {' '.join(cc)} does not run ({exc})") from exc
    include = mujoco_folder() / "include"
    key = hashlib.sha256(b"\0".join([text, mujoco.__version__.encode(), " ".join(cc).encode(),
                                     version.encode(), " ".join(FLAGS).encode()])).hexdigest()[:20]
    so = folder / f"{source.stem}-{key}.so"  # passive-<key>.so, loop-<key>.so
    if so.is_file():
        try:
            return ctypes.CDLL(str(so))
        except OSError:
            pass  # a damaged file: compile it again
    with atomic_path(so, suffix=".so") as tmp:  # a parallel worker sees no library or a whole one
        cmd = [*cc, *FLAGS, f"-I{include}", str(source), "-o", str(tmp), "-lm"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeError(f"{' '.join(cc)} failed to run ({exc})") from exc
        if done.returncode != 0 or tmp.stat().st_size == 0:
            msg = (done.stderr or done.stdout).strip().splitlines()
            raise RuntimeError(f"{' '.join(cc)} exited with {done.returncode} compiling {source}"
                               + (f": {msg[0]}" if msg else ""))
    return ctypes.CDLL(str(so))


def library(source: Path | None = None,
            unavailable: str = "compiled passive forces unavailable, the numpy callback runs") -> ctypes.CDLL | None:
    """The compiled laws (``source``: another C file of native/, built the same way, e.g. the
    control loop's), or None (``ROBIDENT_NATIVE=0``, or the build failed: logged once,
    ``unavailable`` saying what runs instead)."""
    if not enabled():
        return None
    cc = _compiler()
    source = SOURCE if source is None else source
    key = (tuple(cc), str(source))
    if key not in _LIBS:
        try:
            _LIBS[key] = _build(cc, source, cache_dir() / "native")
        except (OSError, RuntimeError) as exc:
            log.warning("%s: %s", unavailable, exc)
            _LIBS[key] = None
    return _LIBS[key]


_SLOT: list = []  # libmujoco's mjcb_passive as a ctypes variable (found once), or None


def mujoco_folder() -> Path:
    """The ``mujoco`` package's folder: its libmujoco and its C headers (``include/``)."""
    import mujoco

    return Path(mujoco.__file__).resolve().parent


def libmujoco(symbol: str = "mjcb_passive") -> ctypes.CDLL | None:
    """The MuJoCo library the ``mujoco`` package loaded (found next to ``mujoco.__file__``; the
    first one that exports ``symbol``), or None."""
    folder = mujoco_folder()
    for lib in sorted(folder.glob("libmujoco.so*")) + sorted(folder.glob("libmujoco*.dylib")):
        try:
            found = ctypes.CDLL(str(lib))
            getattr(found, symbol)
            return found
        except (OSError, AttributeError):
            continue
    return None


def _mjcb_passive_address() -> int | None:
    """The C function MuJoCo calls now as ``mjcb_passive`` (libmujoco's global), None if not found."""
    if not _SLOT:
        lib = libmujoco()
        _SLOT.append(None if lib is None else ctypes.c_void_p.in_dll(lib, "mjcb_passive"))
    return None if _SLOT[0] is None else _SLOT[0].value


_ARRAYS = ("fv", "fc", "off", "inv_vs", "sa", "lc", "fvm", "fcm", "offm", "sam", "lcm",
           "sp_on", "sp_q0", "sp_l", "sp_r", "sp_force", "te_J")
_MATRICES = ("cm", "cm_exact", "ci", "ci_exact")  # n x n, row-major
_TE_ARRAYS = ("te_w", "te_phase", "te_aw", "te_aw2")  # (n, lines[, 2]), row-major
_INTS = ("flags", "te_lines")

#: ``robident_passive_ctx.flags`` of passive.c (the general laws)
ELASTIC, COUPLED, SPRINGS, LINK_FR, MOTOR_FR, FE, FE_LINK, FE_MOTOR, FUSED, TE = (1 << i for i in range(10))
#: joints at most of the general laws (GEN_MAXN of passive.c)
MAXN = 16


class NativePassive:
    """One compiled callback bound to one MjData: the C function's name in the library, its
    context and the arrays the context points into (kept alive here)."""

    def __init__(self, lib: ctypes.CDLL, name: str, data, n: int, python, **params):
        self.lib, self.name, self.python = lib, name, python
        self.arrays = {}
        for k, v in params.items():
            if k in _ARRAYS:  # own copies (te_J is written in place)
                self.arrays[k] = np.array(np.broadcast_to(np.asarray(v, float), (n,)), order="C")
            elif k in _MATRICES:
                self.arrays[k] = np.array(np.broadcast_to(np.asarray(v, float), (n, n)), order="C")
            elif k in _TE_ARRAYS:
                self.arrays[k] = np.array(v, float, order="C")
        ctx = _Context(data=data._address, n=n)
        for k, v in params.items():
            if k in self.arrays:
                setattr(ctx, k, self.arrays[k].ctypes.data_as(_P))
            elif k in _INTS:
                setattr(ctx, k, int(v))
            else:
                setattr(ctx, k, float(v))
        self.ctx = ctx
        self.fn = _Callback(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
        self.fn.python = python


def _bound(lib, name: str, d, n: int, python, **params) -> NativePassive | None:
    """A :class:`NativePassive`, or None with a log line when the library lacks ``name``."""
    try:
        return NativePassive(lib, name, d, n, python, **params)
    except AttributeError as exc:
        log.warning("compiled passive force %s unavailable, the numpy callback runs: %s", name, exc)
        return None


def _applies(d, n: int) -> bool:
    return d.qvel.size >= n and d.qfrc_passive.size >= n and d.act.size >= n


def ideal(d, python, fv, fc, off, eps_rad_s) -> NativePassive | None:
    """The ideal twin's ``qfrc_passive -= fv v + fc tanh(v / eps) + off`` over all of ``d.qvel``."""
    lib = library()
    n = d.qvel.size
    if lib is None:
        return None
    return _bound(lib, "robident_ideal_passive", d, n, python, fv=fv, fc=fc, off=off, eps_rad_s=eps_rad_s)


def link(d, n: int, python, fv, fc, inv_vs, sa, lc, drift_fraction, drift_time_s) -> NativePassive | None:
    """The realistic twin's link-side law (``FrictionEffect.link_total_Nm``) on the first ``n`` dofs."""
    lib = library()
    if lib is None or not _applies(d, n):
        return None
    return _bound(lib, "robident_link_passive", d, n, python, fv=fv, fc=fc, inv_vs=inv_vs, sa=sa, lc=lc,
                  drift_fraction=drift_fraction, drift_time_s=drift_time_s)


def elastic_motor(d, n: int, python, link: dict, motor: dict, inv_vs, drift_fraction, drift_time_s,
                  eps_rad_s) -> NativePassive | None:
    """The realistic twin with elastic joints and motor-side friction (uncoupled): the rotors'
    unmodelled and ideal motor-side laws on dofs n..2n-1, the link-side law on 0..n-1
    (``link``: fv, fc, sa, lc; ``motor``: fvm, fcm, offm, sam, lcm)."""
    lib = library()
    if lib is None or not (_applies(d, n) and d.qvel.size >= 2 * n):
        return None
    return _bound(lib, "robident_elastic_motor_passive", d, n, python, inv_vs=inv_vs,
                  drift_fraction=drift_fraction, drift_time_s=drift_time_s, eps_rad_s=eps_rad_s, **link, **motor)


def exact_entries(A) -> np.ndarray:
    """1.0 where an entry of ``A`` is 0 or a power of two (its products are exact), else 0.0:
    passive.c's matrix-vector product adds these first, then the others with one rounding each."""
    mant, _ = np.frexp(np.asarray(A, float))
    return ((mant == 0.0) | (np.abs(mant) == 0.5)).astype(float)


def _coupling(spec) -> dict:
    C, ci = np.asarray(spec.coupling, float), np.asarray(spec.coupling_inv, float)
    return dict(cm=C, cm_exact=exact_entries(C), ci=ci, ci_exact=exact_entries(ci))


def _springs(spec) -> dict:
    n = spec.n_joints
    on, q0, lv, rv, force = (np.zeros(n) for _ in range(5))
    for j in spec.spring_joints:
        sp = spec.joints[j].spring
        on[j], q0[j], lv[j], rv[j] = 1.0, sp.q0_rad, sp.lever_l_m, sp.lever_r_m
    for j, jt in enumerate(spec.joints):
        force[j] = jt.spring.force_N if jt.spring is not None else 0.0
    return dict(sp_on=on, sp_q0=q0, sp_l=lv, sp_r=rv, sp_force=force)


def general_ideal(d, spec, python) -> NativePassive | None:
    """The ideal twin's general law (``MujocoTwin._passive_callback`` for coupled joints or
    springs, viscous + Coulomb friction) on the rigid twin's ``n`` dofs."""
    lib = library()
    n = spec.n_joints
    if lib is None or n > MAXN or not (_applies(d, n) and d.qvel.size == n):
        return None
    flags = (COUPLED if spec.is_coupled else 0) | (SPRINGS if spec.spring_joints else 0)
    return _bound(lib, "robident_general_ideal_passive", d, n, python, flags=flags,
                  eps_rad_s=spec.coulomb_smoothing_rad_s, fv=spec.fv_link_Nms_rad, fc=spec.fc_link_Nm,
                  fvm=spec.fv_motor_Nms_rad, fcm=spec.fc_motor_Nm, offm=spec.offset_motor_Nm,
                  **_springs(spec), **_coupling(spec))


def general(d, spec, python, elastic: bool, fe=None, fused: bool = False, te=None) -> NativePassive | None:
    """The realistic twin's general law (``MujocoTwin._realistic_passive``, viscous + Coulomb
    friction) with ``fe`` (a :class:`hal.sim.effects.FrictionEffect`, or None) and the
    transmission error ``te`` (a :class:`hal.sim.effects.TransmissionErrorEffect`, or None: its
    held inertia is read from ``arrays["te_J"]``, which the caller keeps equal to ``te.J``)."""
    lib = library()
    n = spec.n_joints
    if lib is None or n > MAXN or not (_applies(d, n) and d.qvel.size == (2 * n if elastic else n)):
        return None
    fvl, fcl = spec.fv_link_Nms_rad, spec.fc_link_Nm
    fvm, fcm, off = spec.fv_motor_Nms_rad, spec.fc_motor_Nm, spec.offset_motor_Nm
    flags = ((ELASTIC if elastic else 0) | (COUPLED if spec.is_coupled else 0)
             | (SPRINGS if spec.spring_joints else 0) | (LINK_FR if np.any(fvl) or np.any(fcl) else 0)
             | (MOTOR_FR if np.any(fvm) or np.any(fcm) or np.any(off) else 0))
    params = dict(eps_rad_s=spec.coulomb_smoothing_rad_s, fv=fvl, fc=fcl, fvm=fvm, fcm=fcm, offm=off,
                  sa=np.zeros(n), lc=np.zeros(n), sam=np.zeros(n), lcm=np.zeros(n), inv_vs=np.ones(n),
                  drift_fraction=0.0, drift_time_s=1.0)
    if fe is not None:
        flags |= FE | (FUSED if fused else 0)
        for motor, fc, fv, sa, lc in fe.sides:
            if not (np.array_equal(fc, fcm if motor else fcl) and np.array_equal(fv, fvm if motor else fvl)):
                return None  # a side's levels are the ideal law's (FrictionEffect): else keep numpy
            flags |= FE_MOTOR if motor else FE_LINK
            params.update(dict(sam=sa, lcm=lc) if motor else dict(sa=sa, lc=lc))
        params.update(inv_vs=fe.inv_vs, drift_fraction=fe.p.drift_fraction, drift_time_s=fe.p.drift_time_s)
    if te is not None:
        lines = np.asarray(te._w).shape[1]
        flags |= TE
        params.update(te_lines=lines, te_inv_blend=te._inv_blend, te_w=np.asarray(te._w)[..., 0],
                      te_phase=np.broadcast_to(te._phase, (n, lines, 2)), te_aw=te._aw, te_aw2=te._aw2,
                      te_J=np.array(te.J, float))
    return _bound(lib, "robident_general_passive", d, n, python, flags=flags, **params,
                  **_springs(spec), **_coupling(spec))


@contextmanager
def installed(cb: NativePassive | None):
    """Run the block with ``cb`` as ``mjcb_passive`` (None: nothing changes). Call it inside the
    twin's ``physics(cb.python)``: the numpy callback installed there gives the fallback its
    trampoline, and ``physics`` restores the previous callback afterwards."""
    if cb is None:
        yield
        return
    import mujoco

    if mujoco.get_mjcb_passive() is not cb.python:
        raise RuntimeError("native.installed(cb) runs inside physics(cb.python)")
    tramp = _mjcb_passive_address()
    if tramp is None:  # no fallback for another mjData: keep the numpy callback
        log.warning("libmujoco's mjcb_passive not found, the numpy passive callback runs")
        yield
        return
    cb.ctx.fallback = tramp
    slot = ctypes.c_void_p.in_dll(cb.lib, "robident_ctx")
    previous = slot.value
    slot.value = ctypes.addressof(cb.ctx)
    mujoco.set_mjcb_passive(cb.fn)
    try:
        yield
    finally:
        mujoco.set_mjcb_passive(cb.python)
        slot.value = previous


def sosfilt(sos: np.ndarray, x: np.ndarray, zi: np.ndarray) -> bool:
    """``scipy.signal.sosfilt``'s kernel compiled (``robident_sosfilt``, the same operations in its
    order): filters ``x`` (signals x samples, float64, C order) in place along its rows from the
    state ``zi`` (signals x sections x 2, float64, C order; updated). False, with nothing touched,
    when the library is unavailable (then the caller runs scipy's)."""
    lib = library()
    fn = getattr(lib, "robident_sosfilt", None) if lib is not None else None
    if fn is None:
        return False
    sos = np.ascontiguousarray(sos, dtype=float)
    for a, name in ((x, "x"), (zi, "zi")):
        if a.dtype != np.float64 or not a.flags.c_contiguous or not a.flags.writeable:
            raise ValueError(f"native.sosfilt: {name} must be a writable C-ordered float64 array")
    ns = sos.shape[0]
    if sos.shape != (ns, 6) or x.ndim != 2 or zi.shape != (x.shape[0], ns, 2):
        raise ValueError(f"native.sosfilt: shapes sos {sos.shape}, x {x.shape}, zi {zi.shape} do not match")
    fn.restype = None
    fn.argtypes = [_P, ctypes.c_int, _P, ctypes.c_int, ctypes.c_long, _P]
    fn(sos.ctypes.data_as(_P), ns, x.ctypes.data_as(_P), x.shape[0], x.shape[1], zi.ctypes.data_as(_P))
    return True
