"""Unique run directories: ``outputs/<date>/<time with microseconds>_<run id>``.

Hydra's default ``outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}`` gives two runs started in the same
second one directory, and the later one overwrites the other's results. conf/config.yaml sets
``hydra.run.dir`` to ``outputs/${now:%Y-%m-%d}/${now:%H-%M-%S-%f}_${run_id:}``: microseconds, and
the ``run_id`` resolver registered here, six random hex digits drawn once per process (so every
access within one run gives the same directory, and two processes never share one even when
started in the same microsecond, up to a 1 in 16.7 million chance).
"""
from __future__ import annotations

import secrets

from omegaconf import OmegaConf

_RUN_ID: str | None = None


def run_id() -> str:
    """This process's run id (six hex digits, drawn on first use)."""
    global _RUN_ID
    if _RUN_ID is None:
        _RUN_ID = secrets.token_hex(3)
    return _RUN_ID


def register() -> None:
    """Register the ``run_id`` OmegaConf resolver (idempotent)."""
    if not OmegaConf.has_resolver("run_id"):
        OmegaConf.register_new_resolver("run_id", run_id)


register()
