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


class Stop(Exception):
    """Raised by the recorded chain's twin: carries the calibration's history of steps."""


def record_chain(monkeypatch, flags: list[str], out_dir) -> tuple[list[str], tuple]:
    """Run ``run.main(flags)`` with every step of its calibration chain replaced by a recorder (the order and
    the hand-over are the property; the steps have their own tests). Returns the log of calls, with their
    switches, and the history of steps the replayed twin's calibration went through."""
    from types import SimpleNamespace

    import numpy as np

    from robident_twin.validation import cloos_calibration as cc, twin_vs_real as tv

    run = load("twin_vs_real_run_recorded")
    log = []

    def cal(name, prev=None):
        fx = SimpleNamespace(inverter_velocity_bandwidth_hz=np.zeros(6), link_friction_share=np.zeros(6),
                             encoder_resolution_rad=1e-5, hold_window_rad=np.zeros(6))
        return SimpleNamespace(history=(prev.history if prev else ()) + (name,), effects=fx, fit={})

    def step(name):
        return lambda c, *a, **k: log.append(name) or cal(name, c)

    def calibrate(real, recA, model, dissipative=False):
        log.append(f"calibrate(dissipative={dissipative})")
        return cal("fit")

    def per_axis(c, ev, damping=False):
        assert ev == "evidence"
        log.append(f"per_axis(damping={damping})")
        return cal("per_axis", c)

    def twin(c, model, **switches):  # the replay's own switches (file_clock) are logged when on
        on = [k for k, v in switches.items() if v]
        log.append(f"twin({','.join(on)})" if on else "twin")
        raise Stop(c.history)

    monkeypatch.setattr(run, "build_model", lambda symmetric: "model")
    monkeypatch.setattr(tv, "real_statistics", lambda root, model: ("real", {"A": "recA"}))
    monkeypatch.setattr(tv, "calibrate", calibrate)
    monkeypatch.setattr(run.w4, "calibrate_presliding_on_real",
                        lambda c, real, recA, model, root, dissipative=False: log.append(f"wrist4({dissipative})")
                        or cal("wrist4", c))
    monkeypatch.setattr(run.cloos_hold, "hold_window_on_real", lambda res, root=None: np.zeros(6))
    monkeypatch.setattr(run.cloos_hold, "with_hold", step("hold"))
    monkeypatch.setattr(cc, "calibrate_wrist_loop_on_real", step("wrist"))
    monkeypatch.setattr(cc, "with_link_stribeck", step("link_stribeck"))
    monkeypatch.setattr(run.cpa, "real_residual_evidence", lambda real, recA, model: "evidence")
    monkeypatch.setattr(run.cpa, "with_per_axis_modes", per_axis)
    monkeypatch.setattr(run.cpa, "summary_line", lambda c, ev: "")
    monkeypatch.setattr(cc, "calibrate_link_friction", step("link"))
    monkeypatch.setattr(run.cpa, "fit_axis_damping", lambda c, *a, **k: log.append("axis_fit") or {})
    monkeypatch.setattr(run.cpa, "with_axis_damping_fit", step("with_axis_fit"))
    monkeypatch.setattr(run.ds, "load", lambda name, root=None: name)
    monkeypatch.setattr(cc, "fit_main_mode_damping", lambda c, *a, **k: log.append("mode") or SimpleNamespace(
        files=[], damping_ratios=[0.1], misfit=[[1.0]], best=0, adopted=True))
    monkeypatch.setattr(cc, "with_main_mode_fit", step("with_mode"))
    monkeypatch.setattr(cc, "correct_through_loop", step("loop"))
    monkeypatch.setattr(run.ci, "calibrate_inplane_wrist", step("inplane"))
    monkeypatch.setattr(run.ci, "summary_line", lambda c: "")
    monkeypatch.setattr(run.ci, "calibrate_inplane_springs", step("inplane_springs"))
    monkeypatch.setattr(run.ci, "springs_summary_line", lambda c: "")
    monkeypatch.setattr(tv, "CloosTwin", twin)
    try:
        run.main(explicit(run, flags) + ["--out", str(out_dir)])
    except Stop as stop:
        return log, stop.args[0]
    raise AssertionError("run.main did not reach the twin")
