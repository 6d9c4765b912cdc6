"""One progress bar for a whole sweep (issue 18): jobs x runs counted from the jobs' files, the jobs'
own bars off (joblib workers would interleave them), nothing drawn off a terminal. The counting is
tested with a fake tqdm that records its total and updates."""
from __future__ import annotations

import os

import pytest

from robident_twin.validation import sweeps


class FakeBar:
    """Records what a tqdm bar is told."""

    def __init__(self, total=None, *a, **kw):
        self.total = total
        self.updates: list[int] = []

    def update(self, n=1):
        self.updates.append(n)

    @property
    def n(self):
        return sum(self.updates)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def finish(job_dir):
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / sweeps.RESULT).write_bytes(b"PAR1")


def count(job_dir, runs):
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / sweeps.RUNS_DONE).write_text(str(runs))


def test_the_sweep_bar_counts_runs_over_all_jobs(tmp_path):
    runs = [4, 4, 6]
    finish(tmp_path / "0")
    count(tmp_path / "1", 2)
    bar = FakeBar()
    sp = sweeps.SweepProgress(tmp_path, runs, bar)
    assert bar.total == 14 and bar.updates == [4 + 2]
    assert sp.poll() == 6 and bar.updates == [6]  # nothing new: no update
    count(tmp_path / "2", 3)
    (tmp_path / "1" / sweeps.RUNS_DONE).write_text("garbage")  # a torn read counts as nothing new
    sp.poll()
    assert bar.updates == [6, 3]
    finish(tmp_path / "1")
    count(tmp_path / "2", 99)  # never more than the job's runs
    sp.poll()
    finish(tmp_path / "2")
    sp.poll()
    assert bar.n == bar.total == 14 and all(u > 0 for u in bar.updates)


def test_watch_advances_until_the_runner_ends(tmp_path):
    runs = [3, 3]
    events = iter([lambda: count(tmp_path / "0", 1), lambda: finish(tmp_path / "0"),
                   lambda: count(tmp_path / "1", 2), lambda: finish(tmp_path / "1")])

    class Runner:  # a multirun whose jobs progress between two polls
        returncode = 0

        def poll(self):
            step = next(events, None)
            if step is None:
                return 0
            step()
            return None

    bar = FakeBar()
    assert sweeps.watch(Runner(), tmp_path, runs, bar, interval_s=0) == 0
    assert bar.total == 6 and bar.n == 6 and bar.updates == [1, 2, 2, 1]


def test_jobs_count_their_runs_and_draw_no_bar_under_the_sweep_bar(tmp_path, monkeypatch):
    """A real (small) Monte-Carlo job through run_job: with the sweep bar on, it counts each
    finished run in its directory, its own bar is off, and the count file is gone at the end."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from robident_twin.paths import CONF_DIR
    from robident_twin.validation import montecarlo

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = OmegaConf.to_container(compose(config_name="config", overrides=[
            "task=montecarlo", "montecarlo.runs=3", "montecarlo.sample_rate_hz=20", "montecarlo.progress=true",
            "output.plots=false"]), resolve=True)
    seen = {}
    real = montecarlo.run_from_config

    def spy(cfg, progress=None, callback=None):
        seen["progress"] = progress
        return real(cfg, progress, callback=callback)

    counts = []
    real_write = sweeps.write_text_atomic

    def record(path, text, *a, **kw):
        if path.name == sweeps.RUNS_DONE:
            counts.append(int(text))
        return real_write(path, text, *a, **kw)

    monkeypatch.setattr(montecarlo, "run_from_config", spy)
    monkeypatch.setattr(sweeps, "write_text_atomic", record)
    monkeypatch.setenv(sweeps.SWEEP_BAR_ENV, "1")
    sweeps.run_job(cfg, tmp_path / "0")
    assert seen["progress"] is False and counts == [1, 2, 3]
    assert (tmp_path / "0" / sweeps.RESULT).exists() and not (tmp_path / "0" / sweeps.RUNS_DONE).exists()
    assert sweeps.runs_done(tmp_path, [3]) == 3


@pytest.mark.parametrize("terminal", [False, True])
def test_run_sweep_draws_one_bar_only_on_a_terminal(tmp_path, monkeypatch, terminal):
    from robident_twin import progress as prog

    calls = {}

    def validate(overrides, configs=None):
        from types import SimpleNamespace

        from robident_twin.config.schema import MontecarloConfig

        configs.extend(SimpleNamespace(montecarlo=MontecarloConfig(runs=r)) for r in (5, 7))  # a RunConfig's part
        return 2

    class Proc:
        returncode = 0

        def poll(self):
            return 0

    def popen(cmd, env=None):
        calls["popen_env"] = env
        return Proc()

    def call(cmd, env=None):
        calls["call_env"] = env if env is not None else dict(os.environ)
        return 0

    bars = []

    def fake_bar(total, desc, flag=True, unit="it", **kw):
        bars.append(FakeBar(total))
        return bars[-1]

    monkeypatch.setattr(sweeps, "validate_sweep", validate)
    monkeypatch.setattr(sweeps.subprocess, "Popen", popen)
    monkeypatch.setattr(sweeps.subprocess, "call", call)
    monkeypatch.setattr(prog, "enabled", lambda flag=True, stream=None: bool(flag) and terminal)
    monkeypatch.setattr(prog, "bar", fake_bar)
    monkeypatch.delenv(sweeps.SWEEP_BAR_ENV, raising=False)
    assert sweeps.run_sweep(tmp_path, ["task=montecarlo"]) == 0
    if terminal:  # one bar over 12 runs; the jobs are told not to draw theirs
        assert len(bars) == 1 and bars[0].total == 12
        assert calls["popen_env"][sweeps.SWEEP_BAR_ENV] == "1" and "call_env" not in calls
    else:  # a log or a pipe: no bar, the jobs as before
        assert bars == [] and "popen_env" not in calls and sweeps.SWEEP_BAR_ENV not in calls["call_env"]
