"""Write a Recording as a NumPy .npz, atomically (a killed run never leaves a half-written file).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from robident_twin.atomic import atomic_path


def save_recording(rec, path: Path) -> None:
    """Write a recording atomically (a killed run never leaves a half-written file)."""
    arrays = {k: v for k, v in rec.channels().items()}
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez(tmp, **arrays, sample_rate_hz=rec.sample_rate_hz,
                 period_samples=-1 if rec.period_samples is None else rec.period_samples,
                 n_periods=-1 if rec.n_periods is None else rec.n_periods,
                 metadata=json.dumps({k: v for k, v in rec.metadata.items() if not isinstance(v, np.ndarray)}))
