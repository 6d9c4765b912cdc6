"""Test helpers for ``experiments/twin_vs_real_cloos/run.py`` (an experiment script, not a package module)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

RUN_PY = Path(__file__).resolve().parents[1] / "experiments" / "twin_vs_real_cloos" / "run.py"


def load(name: str = "twin_vs_real_run"):
    """The experiment script as a fresh module (its functions can then be monkeypatched)."""
    spec = importlib.util.spec_from_file_location(name, RUN_PY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def explicit(run, flags: list[str]) -> list[str]:
    """``flags`` with every adopted switch (``run.ADOPTED``, on by default) not named in them turned off
    (``--no-<switch>``), so that a test's flags list says exactly which switches are on."""
    opts = [f"--{s.replace('_', '-')}" for s in run.ADOPTED]
    return [f"--no-{o[2:]}" for o in opts if o not in flags] + list(flags)
