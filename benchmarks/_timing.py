"""Timing helper shared by the benchmark scripts (run as ``python benchmarks/bench_x.py``)."""
from __future__ import annotations

import time


def best_of(fn, repeat: int) -> float:
    """The shortest wall time (s) of ``repeat`` calls of ``fn()``."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
