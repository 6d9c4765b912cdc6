"""The default run's speed-ups keep every result: the base-parameter cache (a hit equals the
computation, a changed model misses) and the forked work (the same values on either route)."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from robident_twin import forked
from robident_twin.errors import IdentificationError
from robident_twin.model import base_params as bp
from robident_twin.model.regressor import Regressor


def _same(a: bp.BaseParameters, b: bp.BaseParameters) -> None:
    assert a.names == b.names and a.standard_names == b.standard_names and a.standard_units == b.standard_units
    assert np.array_equal(a.base_index, b.base_index)
    assert a.K.tobytes() == b.K.tobytes()  # bit for bit


def test_base_parameter_cache_hit_equals_the_computation(iiwa, tmp_path, monkeypatch):
    monkeypatch.setenv("ROBIDENT_CACHE", str(tmp_path))
    reg = Regressor(iiwa)
    first = bp.compute_base_parameters(reg, n_samples=40)
    files = list((tmp_path / "base_parameters").glob("*.npz"))
    assert len(files) == 1 and oct(files[0].stat().st_mode & 0o777) != "0o600"  # the umask's mode

    def no_compute(*a, **k):
        raise AssertionError("computed again although cached")

    monkeypatch.setattr(bp, "_compute", no_compute)
    _same(bp.compute_base_parameters(reg, n_samples=40), first)


def test_a_changed_model_misses_the_cache(iiwa, tmp_path, monkeypatch):
    monkeypatch.setenv("ROBIDENT_CACHE", str(tmp_path))
    bp.compute_base_parameters(Regressor(iiwa), n_samples=40)
    # a link 2 mm longer: the same names and units, another model
    j = iiwa.joints[3]
    longer = dataclasses.replace(j, origin_xyz_m=np.asarray(j.origin_xyz_m, float) + [0.0, 0.0, 0.002])
    changed = dataclasses.replace(iiwa, joints=iiwa.joints[:3] + (longer,) + iiwa.joints[4:], _cache={})
    calls = []
    real = bp._compute
    monkeypatch.setattr(bp, "_compute", lambda *a: calls.append(1) or real(*a))
    got = bp.compute_base_parameters(Regressor(changed), n_samples=40)
    assert calls == [1]  # computed, not read
    assert len(list((tmp_path / "base_parameters").glob("*.npz"))) == 2
    monkeypatch.setenv("ROBIDENT_CACHE", str(tmp_path / "fresh"))  # an empty cache: the computation itself
    _same(got, bp.compute_base_parameters(Regressor(changed), n_samples=40))
    bp.compute_base_parameters(Regressor(iiwa), n_samples=41)  # another base.n_samples: a miss as well
    assert calls == [1, 1, 1]
    assert len(list((tmp_path / "base_parameters").glob("*.npz"))) == 2


def test_a_damaged_cache_entry_is_recomputed(iiwa, tmp_path, monkeypatch):
    monkeypatch.setenv("ROBIDENT_CACHE", str(tmp_path))
    reg = Regressor(iiwa)
    first = bp.compute_base_parameters(reg, n_samples=40)
    (entry,) = (tmp_path / "base_parameters").glob("*.npz")
    entry.write_bytes(b"not an npz")
    _same(bp.compute_base_parameters(reg, n_samples=40), first)


@pytest.mark.parametrize("enabled", [True, False])
def test_forked_work_returns_its_value_and_raises_its_error(monkeypatch, enabled):
    monkeypatch.setattr(forked, "ENABLED", enabled)
    monkeypatch.setattr(forked, "core_free", lambda: True)  # fork even on a busy machine
    big = np.arange(300_000, dtype=float)  # inherited by the child, never pickled on the way in
    assert np.array_equal(forked.start(lambda: big * 2).result(), big * 2)
    with pytest.raises(IdentificationError, match="rank"):
        forked.start(lambda: (_ for _ in ()).throw(IdentificationError("rank deficient"))).result()
    unpicklable = forked.start(lambda: (lambda: 3))  # a value that cannot cross the pipe is made here
    assert unpicklable.result()() == 3


def test_the_robident_fork_variable(monkeypatch):
    from robident_twin.errors import ConfigError

    monkeypatch.setattr(forked, "core_free", lambda: False)
    monkeypatch.setenv("ROBIDENT_FORK", "1")
    assert forked.available()
    monkeypatch.setenv("ROBIDENT_FORK", "auto")
    assert not forked.available()
    monkeypatch.setenv("ROBIDENT_FORK", "0")
    monkeypatch.setattr(forked, "core_free", lambda: True)
    assert not forked.available()
    monkeypatch.setenv("ROBIDENT_FORK", "yes")
    with pytest.raises(ConfigError, match="ROBIDENT_FORK"):
        forked.available()


def test_identify_gives_the_same_summary_with_and_without_the_forked_estimation(monkeypatch):
    """The excitation's processing, regressor and estimate run in a forked child during the
    validation run: the summary and the data equal the sequential run's bit for bit."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from robident_twin.paths import CONF_DIR
    from robident_twin.pipeline import identify

    with initialize_config_dir(version_base=None, config_dir=str(CONF_DIR)):
        cfg = OmegaConf.to_container(compose(config_name="config", overrides=[
            "robot=kuka_ir361", "twin=ideal", "acquisition.periods=2", "acquisition.transient_periods=0", "backend.control_rate_hz=250",
            "processing.decimate=5", "output.plots=false", "output.report=false"]), resolve=True)
    monkeypatch.setattr(forked, "core_free", lambda: True)  # fork even on a busy machine
    children = []
    real_child = forked._Child
    monkeypatch.setattr(forked, "_Child", lambda *a: children.append(1) or real_child(*a))
    runs = {}
    for enabled in (True, False):
        monkeypatch.setattr(forked, "ENABLED", enabled)
        runs[enabled] = identify(cfg, progress=False)
    assert children == [1]  # the first run forked, the second did not
    a, b = (runs[e].summary for e in (True, False))
    assert set(a["timings_s"]) == set(b["timings_s"])
    a, b = ({k: v for k, v in s.items() if k != "timings_s"} for s in (a, b))
    assert a == b
    assert runs[True].estimate.cov.tobytes() == runs[False].estimate.cov.tobytes()
    assert runs[True].data.tau_Nm.tobytes() == runs[False].data.tau_Nm.tobytes()


def test_the_report_made_with_a_forked_section_equals_the_sequential_one(identify_run, tmp_path):
    """task=identify makes the report's excitation section (dry run, config only) in a forked child
    during the acquisition: the page equals one rebuilt from the run's files in one process."""
    import json

    from robident_twin.report.html import REPORT, ReportData, write_identify_report

    _, run, _ = identify_run
    summary = json.loads((run / "summary.json").read_text())
    rebuilt = write_identify_report(run, summary, ReportData.load(run / "report_data.npz"), tmp_path)
    assert rebuilt == tmp_path / REPORT
    assert (run / REPORT).read_text() == rebuilt.read_text()


def _in_daemon(q):
    forked.core_free = lambda: True  # in this child only: fork even on a busy machine
    q.put(forked.start(lambda: 5).result())


def test_forked_work_inside_a_daemonic_worker_runs_in_that_worker():
    """A pool worker is daemonic and may not fork children: the work runs in the worker."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_in_daemon, args=(q,), daemon=True)
    p.start()
    assert q.get(timeout=30) == 5
    p.join()


@pytest.mark.parametrize("task, argv, fast", [("identify", [], True), ("identify", ["-m", "seed=1,2"], False),
                                              ("montecarlo", [], False), (None, [], False)])
def test_only_a_finished_single_identify_run_skips_the_interpreter_teardown(monkeypatch, task, argv, fast):
    """``robident-twin`` ends with os._exit(0) (after flushing the console and the logs) only when
    one identify run finished: a sweep, another task or a failed run (_FINISHED None) end normally."""
    import logging

    from robident_twin import cli

    calls = []

    def app():
        cli._FINISHED = task

    monkeypatch.setattr(cli, "app", app)
    monkeypatch.setattr(cli, "_FINISHED", None)
    monkeypatch.setattr(cli.sys, "argv", ["robident-twin", *argv])
    monkeypatch.setattr(cli, "_one_blas_thread", lambda: None)
    monkeypatch.setattr(logging, "shutdown", lambda: calls.append("logging"))
    monkeypatch.setattr(__import__("os"), "_exit", lambda code: calls.append(code))
    cli.main()
    assert calls == (["logging", 0] if fast else [])


def test_identify_calls_after_fork_once_between_the_validation_fork_and_the_excitation_run(monkeypatch):
    """``identify(after_fork=...)`` (the CLI imports pyplot there) runs once, after the validation
    run's child is started (so that child does not wait for it) and before the excitation run."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import robident_twin.pipeline as pl
    from robident_twin.paths import CONF_DIR

    with initialize_config_dir(version_base=None, config_dir=str(CONF_DIR)):
        cfg = OmegaConf.to_container(compose(config_name="config", overrides=[
            "robot=kuka_ir361", "twin=ideal", "acquisition.periods=2", "acquisition.transient_periods=0",
            "backend.control_rate_hz=250", "processing.decimate=5", "output.plots=false", "output.report=false"]),
            resolve=True)
    events = []
    start = pl._start_validation
    monkeypatch.setattr(pl, "_start_validation", lambda *a, **k: events.append("fork") or start(*a, **k))
    check = pl.check_recording
    monkeypatch.setattr(pl, "check_recording", lambda rec, spec, what: events.append(what) or check(rec, spec, what))
    monkeypatch.setattr(forked, "ENABLED", False)  # the validation job runs here, at its result: the order is plain
    pl.identify(cfg, progress=False, after_fork=lambda: events.append("after_fork"))
    assert events[:3] == ["fork", "after_fork", "excitation recording"] and events.count("after_fork") == 1


def test_core_free_reads_the_cores_busy_now_and_keeps_one_answer_per_run(monkeypatch):
    """The fork decision: other processes' busy cores now (/proc/stat) below the cores minus 1.5,
    measured once per run (reused for DECISION_TTL_S, so a run's own children do not count); the
    1-min load average only without /proc/stat."""
    monkeypatch.setattr(forked.os, "cpu_count", lambda: 2)
    calls = []

    def busy(value):
        def f(window_s=0.05):
            calls.append(value)
            return value
        return f

    for value, free in ((0.1, True), (0.6, False), (1.9, False)):
        monkeypatch.setattr(forked, "_decision", None)
        monkeypatch.setattr(forked, "busy_cores", busy(value))
        assert forked.core_free() is free, value
    n = len(calls)
    assert forked.core_free() is False and len(calls) == n  # reused, not measured again
    monkeypatch.setattr(forked, "_decision", (time.monotonic() - forked.DECISION_TTL_S - 1, True))
    assert forked.core_free() is False and len(calls) == n + 1  # stale: measured again

    def no_proc(window_s=0.05):
        raise OSError("no /proc/stat")

    monkeypatch.setattr(forked, "busy_cores", no_proc)
    for load, free in ((0.9, True), (1.6, False)):  # the 1-min load average counts this process
        monkeypatch.setattr(forked, "_decision", None)
        monkeypatch.setattr(forked.os, "getloadavg", lambda load=load: (load, load, load))
        assert forked.core_free() is free, load


def test_busy_cores_sees_a_spinning_process():
    """busy_cores counts a process that keeps a core busy (at least 0.7 of one while it spins;
    whatever else runs only adds to it)."""
    import multiprocessing as mp

    if not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat (not Linux)")
    stop = mp.Event()
    p = mp.get_context("fork").Process(target=_spin, args=(stop,), daemon=True)
    p.start()
    try:
        forked.busy_cores(0.05)  # the spinner is running
        assert forked.busy_cores(0.2) >= 0.7
    finally:
        stop.set()
        p.join(5)


def _spin(stop) -> None:
    while not stop.is_set():
        pass


def test_the_cli_turns_mujoco_rendering_off_unless_the_user_chose_a_backend(monkeypatch):
    from robident_twin import cli

    monkeypatch.delenv("MUJOCO_GL", raising=False)
    cli._no_mujoco_rendering()
    assert os.environ["MUJOCO_GL"] == "disable"
    monkeypatch.setenv("MUJOCO_GL", "egl")
    cli._no_mujoco_rendering()
    assert os.environ["MUJOCO_GL"] == "egl"
    code = "import sys, mujoco; print('glfw' in sys.modules)"  # what the switch saves: the GLFW lookup
    env = {k: v for k, v in os.environ.items() if k != "MUJOCO_GL"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**env, "MUJOCO_GL": "disable"})
    assert out.stdout.strip() == "False", out.stderr[-500:]
