"""The fast loop's control periods compiled (``hal/sim/native/loop.c``): one C call per chunk of
:data:`hal.sim.fastloop.TICK_EVERY` periods instead of a Python loop body of about 15 numpy calls
around each ``mj_step``.

:func:`hal.sim.fastloop.simulate` asks :func:`prepare` for a :class:`CompiledLoop` where it
applies: uncoupled joints, no transmission error, a PD law (no PI velocity loop), the compiled
passive-force callback installed (:mod:`hal.sim.native`); that is the ideal twin and the
realistic twin of the iiwa 14 and the LWR4+ (the default run's). The C loop performs the Python
loop's operations in the same order, so a run is bit-identical to the Python loop's
(``tests/test_native_loop.py``); the Python loop stays the reference and serves every other case.

The library is compiled and cached as the passive forces' (:func:`hal.sim.native.library`, same
flags). libmujoco's ``mj_step``, ``mj_forward``, ``mj_RungeKutta`` and the thread-local log
handler setter that the Python bindings use to turn an ``mju_error`` into ``mujoco.FatalError``
come from the library the ``mujoco`` package loaded (:func:`hal.sim.native.libmujoco`); the
MjModel/MjData pointers from the bindings' ``_address``. Without any of them (or with
``ROBIDENT_NATIVE=0``, no compiler, a failed build) the Python loop runs, with one log line per
process saying why.
"""
from __future__ import annotations

import ctypes
import logging
from pathlib import Path

import numpy as np

from . import native

log = logging.getLogger(__name__)

#: the C source (a module attribute: a test points it at a missing file)
SOURCE = Path(__file__).resolve().parent / "native" / "loop.c"
#: joints at most (LOOP_MAXN of loop.c)
MAXN = 64
#: False: the Python loop everywhere, silently (the benchmark's and the tests' comparison)
USE = True
#: libmujoco's functions the loop calls, by the context's field name
MUJOCO_FUNCTIONS = {"step": "mj_step", "forward": "mj_forward", "runge_kutta": "mj_RungeKutta",
                    "set_tls_log": "_mjPRIVATE_setTlsLogHandler", "global_log": "_mjPRIVATE_getGlobalLogHandler"}

_P = ctypes.POINTER(ctypes.c_double)


class _Context(ctypes.Structure):
    """``robident_loop_ctx`` of loop.c, field by field."""
    _fields_ = ([(k, ctypes.c_void_p) for k in MUJOCO_FUNCTIONS] + [("m", ctypes.c_void_p), ("d", ctypes.c_void_p)]
                + [(k, ctypes.c_int) for k in ("n", "substeps", "rk4", "realistic", "elastic", "closed", "direct",
                                                "delay", "head", "has_prev", "record_from", "record_to")]
                + [("rate_hz", ctypes.c_double)]
                + [(k, _P) for k in ("res", "kp", "kd", "alpha", "qref", "dqref", "ff", "noise", "queue", "q_prev",
                                     "v_f", "pos_out", "vel_out", "act_out", "q_out", "a_out", "b_out", "qloop")]
                + [("error", ctypes.c_char * 1024)])


_SAID: set[str] = set()  # the reasons already logged in this process (one line each)


def _unavailable(reason: str, level: int = logging.WARNING) -> None:
    if reason not in _SAID:
        _SAID.add(reason)
        log.log(level, "compiled control loop unavailable, the Python loop runs: %s", reason)


_FUNCS: list = []  # libmujoco's function addresses by field (found once), or None


def mujoco_functions() -> dict[str, int] | None:
    """The addresses of :data:`MUJOCO_FUNCTIONS` in the loaded libmujoco, or None."""
    if not _FUNCS:
        lib = native.libmujoco("mj_step")
        found = None
        if lib is not None:
            try:
                found = {k: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                         for k, name in MUJOCO_FUNCTIONS.items()}
            except AttributeError:
                found = None
        _FUNCS.append(found)
    return _FUNCS[0]


def library() -> ctypes.CDLL | None:
    """The compiled loop (``robident_loop_run``), or None (logged once)."""
    lib = native.library(SOURCE, "compiled control loop unavailable, the Python loop runs")
    if lib is None:
        return None
    try:
        lib.robident_loop_run.argtypes = (ctypes.POINTER(_Context), ctypes.c_int, ctypes.c_int)
        lib.robident_loop_run.restype = ctypes.c_int
    except AttributeError as exc:
        _unavailable(str(exc))
        return None
    return lib


def _row(x, n: int) -> np.ndarray:
    """``x`` broadcast to ``(n,)``, a float64 C array of its own."""
    return np.array(np.broadcast_to(np.asarray(x, float), (n,)), order="C")


def _rows(x, N: int, n: int) -> np.ndarray | None:
    a = np.ascontiguousarray(x, dtype=float)
    return a if a.shape == (N, n) else None


class CompiledLoop:
    """The context of one run's C loop and the arrays it points into (kept alive here)."""

    def __init__(self, lib: ctypes.CDLL, ctx: _Context, keep: dict):
        self.lib, self.ctx, self.keep = lib, ctx, keep

    def run(self, k0: int, k1: int) -> None:
        """Control periods [k0, k1); ``mujoco.FatalError`` for an ``mju_error``, as the bindings'."""
        if self.lib.robident_loop_run(ctypes.byref(self.ctx), int(k0), int(k1)) != 0:
            import mujoco

            raise mujoco.FatalError(self.ctx.error.decode(errors="replace"))

    @property
    def has_prev(self) -> bool:
        return bool(self.ctx.has_prev)

    def queue_rows(self) -> list[np.ndarray]:
        """The delay line, oldest first (``LoopController.queue``)."""
        q, head = self.keep["queue"], self.ctx.head
        return [q[(head + j) % len(q)].copy() for j in range(len(q))]


def prepare(twin, *, n: int, N: int, qref, dqref, ff, res, kp, kd, realistic: bool, elastic: bool, direct: bool,
            closed: bool, delay: int = 0, queue=(), alpha=0.0, noise=None, q_prev=None, v_f=None,
            record_from: int, record_to: int, outputs: dict, rk4: bool, substeps: int, rate_hz: float,
            passive_installed: bool) -> CompiledLoop | None:
    """The C loop for this run, or None (then the Python loop runs; a log line says why when it
    should have applied). The caller has checked the path (uncoupled, no transmission error, PD);
    ``outputs``: the recording arrays the C loop fills (``pos_out``, ``vel_out``, ``act_out``,
    ``q_out``, ``a_out``, ``b_out``, ``qloop``; None where unused); ``v_f`` is updated in place."""
    if not USE:
        return None
    if not native.enabled():
        _unavailable("ROBIDENT_NATIVE=0", logging.INFO)  # asked for: not a warning
        return None
    if not passive_installed:
        return None  # the numpy passive callback: the Python loop (the reference of that case)
    m, d = twin.model, twin.data
    addr_m, addr_d = getattr(m, "_address", None), getattr(d, "_address", None)
    if not (isinstance(addr_m, int) and isinstance(addr_d, int) and addr_m and addr_d):
        _unavailable("the mujoco bindings give no _address of MjModel/MjData")
        return None
    nq = 2 * n if elastic else n
    if (n > MAXN or m.nq != nq or m.nv != nq or d.ctrl.size != n or d.act.size != n
            or max(N, abs(record_from), abs(record_to)) >= 2**31):
        return None  # another layout than the twin's: the Python loop
    funcs = mujoco_functions()
    if funcs is None:
        _unavailable("libmujoco (mj_step, its log handler) not found next to " + str(native.mujoco_folder()))
        return None
    lib = library()
    if lib is None:
        return None
    keep = {"res": _row(res, n), "kp": _row(kp, n), "kd": _row(kd, n), "alpha": _row(alpha, n),
            "qref": _rows(qref, N, n), "dqref": _rows(dqref, N, n), "ff": _rows(ff, N, n),
            "noise": _rows(noise, N, n) if closed else None,
            "queue": np.array([np.asarray(u, float) for u in queue], float).reshape(len(queue), n),
            "q_prev": _row(q_prev if q_prev is not None else 0.0, n)}
    if any(keep[k] is None for k in ("qref", "dqref", "ff")) or (closed and keep["noise"] is None):
        return None
    if realistic and len(queue) != delay:
        return None
    n_rec = max(record_to - record_from, 0)
    widths = dict(act_out=n, qloop=n if closed else None, **(dict(pos_out=2 * n, vel_out=2 * n) if direct
                                                             else dict(q_out=n, a_out=n, b_out=n)))
    for k, width in widths.items():  # what the C loop writes: rows i = k - record_from < n_rec
        a = outputs.get(k)
        if width is not None and not (isinstance(a, np.ndarray) and a.shape == (n_rec, width)):
            return None
    keep.update(outputs)
    if closed:  # updated in place: the caller's array
        if not (isinstance(v_f, np.ndarray) and v_f.dtype == float and v_f.shape == (n,) and v_f.flags.c_contiguous):
            return None
        keep["v_f"] = v_f
    for k, a in keep.items():
        if a is not None and not (a.dtype == float and a.flags.c_contiguous and a.flags.writeable):
            return None
    ctx = _Context(m=addr_m, d=addr_d, n=n, substeps=int(substeps), rk4=int(rk4), realistic=int(realistic),
                   elastic=int(elastic), closed=int(closed), direct=int(direct), delay=int(delay), head=0,
                   has_prev=int(q_prev is not None), record_from=int(record_from), record_to=int(record_to),
                   rate_hz=float(rate_hz), **funcs)
    for k, a in keep.items():
        if a is not None and a.size:
            setattr(ctx, k, a.ctypes.data_as(_P))
    return CompiledLoop(lib, ctx, keep)
