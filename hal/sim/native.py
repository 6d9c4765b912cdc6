"""The fast loop's passive-force laws compiled (``hal/sim/native/passive.c``), installed as
MuJoCo's ``mjcb_passive`` so that MuJoCo calls C directly, with no Python in each RK4 stage.

:func:`hal.sim.fastloop.lean_passive` builds the numpy callback and, when this module can, a
:class:`NativePassive` with the same law and parameters (the ideal twin; the realistic twin's
link-side friction; elastic joints with friction on both sides, uncoupled, the general
callback's law); the fast loop installs it with
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
                ("fvm", _P), ("fcm", _P), ("offm", _P), ("sam", _P), ("lcm", _P)]


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
    include = Path(mujoco.__file__).resolve().parent / "include"
    key = hashlib.sha256(b"\0".join([text, mujoco.__version__.encode(), " ".join(cc).encode(),
                                     version.encode(), " ".join(FLAGS).encode()])).hexdigest()[:20]
    so = folder / f"passive-{key}.so"
    if so.is_file():
        try:
            return ctypes.CDLL(str(so))
        except OSError:
            pass  # a damaged file: compile it again
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".passive-{key}.{os.getpid()}.{os.urandom(4).hex()}.so"
    try:
        cmd = [*cc, *FLAGS, f"-I{include}", str(source), "-o", str(tmp), "-lm"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeError(f"{' '.join(cc)} failed to run ({exc})") from exc
        if done.returncode != 0 or not tmp.is_file():
            msg = (done.stderr or done.stdout).strip().splitlines()
            raise RuntimeError(f"{' '.join(cc)} exited with {done.returncode} compiling {source}"
                               + (f": {msg[0]}" if msg else ""))
        os.replace(tmp, so)  # atomic: a parallel worker sees the old state or a whole library
    finally:
        tmp.unlink(missing_ok=True)
    return ctypes.CDLL(str(so))


def library() -> ctypes.CDLL | None:
    """The compiled laws, or None (``ROBIDENT_NATIVE=0``, or the build failed: logged once)."""
    if not enabled():
        return None
    cc = _compiler()
    key = (tuple(cc), str(SOURCE))
    if key not in _LIBS:
        try:
            _LIBS[key] = _build(cc, SOURCE, cache_dir() / "native")
        except (OSError, RuntimeError) as exc:
            log.warning("compiled passive forces unavailable, the numpy callback runs: %s", exc)
            _LIBS[key] = None
    return _LIBS[key]


_SLOT: list = []  # libmujoco's mjcb_passive as a ctypes variable (found once), or None


def _mjcb_passive_address() -> int | None:
    """The C function MuJoCo calls now as ``mjcb_passive`` (libmujoco's global), None if not found."""
    if not _SLOT:
        import mujoco

        folder = Path(mujoco.__file__).resolve().parent
        found = None
        for lib in sorted(folder.glob("libmujoco.so*")) + sorted(folder.glob("libmujoco*.dylib")):
            try:
                found = ctypes.c_void_p.in_dll(ctypes.CDLL(str(lib)), "mjcb_passive")
                break
            except (OSError, ValueError):
                continue
        _SLOT.append(found)
    return None if _SLOT[0] is None else _SLOT[0].value


_ARRAYS = ("fv", "fc", "off", "inv_vs", "sa", "lc", "fvm", "fcm", "offm", "sam", "lcm")


class NativePassive:
    """One compiled callback bound to one MjData: the C function's name in the library, its
    context and the arrays the context points into (kept alive here)."""

    def __init__(self, lib: ctypes.CDLL, name: str, data, n: int, python, **params):
        self.lib, self.name, self.python = lib, name, python
        self.arrays = {k: np.ascontiguousarray(np.broadcast_to(np.asarray(v, float), (n,)))
                       for k, v in params.items() if k in _ARRAYS}
        ctx = _Context(data=data._address, n=n)
        for k, v in params.items():
            if k in self.arrays:
                setattr(ctx, k, self.arrays[k].ctypes.data_as(_P))
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
