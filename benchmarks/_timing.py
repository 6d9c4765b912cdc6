"""Timing helper shared by the benchmark scripts (run as ``python benchmarks/bench_x.py``)."""
from __future__ import annotations

import time


def best_of(fn, repeat: int, clock=time.perf_counter) -> float:
    """The shortest time (s, wall by default; ``clock=time.process_time`` for CPU) of ``repeat``
    calls of ``fn()``."""
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best
