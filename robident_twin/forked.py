"""Work started in a forked process while this one goes on (the default run's second core).

``start(fn)`` forks a child that inherits this process's memory (no pickling of the inputs),
runs ``fn()`` and sends its return value (or its exception) back through a pipe; the handle's
``result()`` waits for it (``ready()`` polls, ``cancel()`` stops it). Where ``fork`` is not the safe default (not Linux), no core is free
(:func:`core_free`) or ``ENABLED`` is false, ``fn`` runs in this process when ``result()`` is called; a value that does not pickle is
computed there too. ``fn`` must depend only on what exists at ``start`` (the child sees a copy
of that memory), so the result is the same on either route. The child
prints nothing: progress and console lines stay in the parent, in order.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from robident_twin.errors import ConfigError, RobidentError

#: False: every ``start`` runs its function in this process (tests compare both routes)
ENABLED = True


def _cpu_times() -> tuple[float, float]:
    """(idle, total) jiffies of all cores from /proc/stat's first line (idle + iowait as idle)."""
    with open("/proc/stat") as f:
        v = [float(x) for x in f.readline().split()[1:]]
    return v[3] + (v[4] if len(v) > 4 else 0.0), sum(v[:8])


def busy_cores(window_s: float = 0.05) -> float:
    """How many cores other processes keep busy now: the non-idle share of all cores' time over
    ``window_s`` (this process sleeps meanwhile), times the cores (Linux /proc/stat)."""
    import time

    i0, t0 = _cpu_times()
    time.sleep(window_s)
    i1, t1 = _cpu_times()
    if t1 <= t0:
        raise OSError("/proc/stat did not advance")
    return (1.0 - (i1 - i0) / (t1 - t0)) * (os.cpu_count() or 1)


#: seconds a :func:`core_free` answer is reused: one measurement serves a whole run, taken before
#: its first child exists (a later one would count this run's own children as busy)
DECISION_TTL_S = 30.0
_decision: tuple[float, bool] | None = None  # (time.monotonic(), answer)


def core_free() -> bool:
    """Is a core idle for a child, beside this process? Other processes must leave this one's core
    and half of another free: their busy cores now (:func:`busy_cores`, /proc/stat over 50 ms) below
    the cores minus 1.5. Not the 1-min load average: right after a run (the user's previous one, a
    build) it stays high for a minute while the cores are idle. Without /proc/stat: the 1-min load
    average (which counts this process) below the cores minus a half. On a busy machine a child only
    competes for the same cores and adds its own start-up: then the work stays here. The answer is
    reused for :data:`DECISION_TTL_S`."""
    import time

    global _decision
    now = time.monotonic()
    if _decision is not None and now - _decision[0] < DECISION_TTL_S:
        return _decision[1]
    _decision = (now, _measure_core_free())
    return _decision[1]


def _measure_core_free() -> bool:
    n = os.cpu_count() or 1
    try:
        return busy_cores() < n - 1.5
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.getloadavg()[0] < n - 0.5
    except OSError:
        return False


def available() -> bool:
    """Fork here? Not off Linux, not inside a daemonic worker (a multiprocessing pool's), which
    may not have children, and not when no core is free. ``ROBIDENT_FORK``: ``auto`` (unset),
    ``1`` (fork whatever the load), ``0`` (never)."""
    import multiprocessing as mp

    mode = os.environ.get("ROBIDENT_FORK", "auto").strip() or "auto"
    if mode not in ("auto", "0", "1"):
        raise ConfigError(f"environment variable ROBIDENT_FORK: expected auto, 0 or 1, got {mode!r}")
    return (ENABLED and mode != "0" and sys.platform.startswith("linux") and hasattr(os, "fork")
            and not mp.current_process().daemon and (mode == "1" or core_free()))


class _Here:
    """The route without fork: ``fn`` runs in this process when its result is asked for, so the
    order of the work is the sequential one."""

    parallel = False  # nothing runs until ``result()``

    def __init__(self, fn: Callable[[], Any]):
        self._fn = fn

    def ready(self, timeout_s: float = 0.0) -> bool:
        return True  # ``result()`` computes it now

    def result(self) -> Any:
        return self._fn()

    def cancel(self) -> None:
        pass


class _Child:
    """A forked child running ``fn``; ``result()`` receives its value or re-raises its error."""

    def __init__(self, fn: Callable[[], Any], what: str):
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        self.what = what
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_child_main, args=(fn, send), daemon=True)
        self._fn = fn
        self._proc.start()
        send.close()

    parallel = True  # running now, on another core

    def ready(self, timeout_s: float = 0.0) -> bool:
        """Has the child answered (or stopped)? Waits up to ``timeout_s``."""
        return self._recv.closed or self._recv.poll(timeout_s)

    def cancel(self) -> None:
        """Stop the child (the caller failed and will not ask for the result)."""
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join()
        if not self._recv.closed:
            self._recv.close()

    def result(self) -> Any:
        try:
            ok, value = self._recv.recv()
        except EOFError:
            self._proc.join()
            raise RobidentError(f"the forked {self.what} stopped without a result "
                                f"(exit code {self._proc.exitcode})") from None
        finally:
            self._recv.close()
        self._proc.join()
        if ok is None:  # the value cannot cross the pipe (not picklable): compute it here instead
            return self._fn()
        if not ok:
            raise value
        return value


def _child_main(fn: Callable[[], Any], send) -> None:
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 -- the parent owns the console (until os._exit)
    try:
        msg = (True, fn())
    except Exception as exc:  # noqa: BLE001 -- every error goes back to the parent, which raises it
        msg = (False, exc)
    try:
        send.send(msg)
    except Exception:  # noqa: BLE001 -- a value or an exception that does not pickle: the parent redoes the work
        send.send((None, None))
    send.close()


def shared_fraction():
    """A float both sides see (``.value``; shared memory made before ``start``): a child's progress
    in [0, 1], read by the parent to draw it."""
    import multiprocessing as mp

    return mp.RawValue("d", 0.0)


def start(fn: Callable[[], Any], what: str = "work"):
    """``fn()`` in a forked child when available (else here, at ``result()``); ``.result()`` gives its value."""
    return _Child(fn, what) if available() else _Here(fn)
