"""Sweeps: atomic results, validation of a whole sweep before any run, the joblib launcher,
the Ray runner on a local cluster, resume of a killed sweep without recomputation,
aggregation into tables and plots."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from robident_twin.validation import sweeps
from robident_twin.errors import ConfigError
from robident_twin.paths import ROOT

# no per-job report.html (80 % of a small job's CPU; the Monte-Carlo report has its own tests in
# test_html_report.py and the tutorial's): these tests are about the sweep's files
FAST = ["task=montecarlo", "montecarlo.runs=4", "montecarlo.sample_rate_hz=20", "montecarlo.progress=false",
        "output.plots=false", "output.report=false"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "1"}


def _run(args, **kw):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=600, **kw)


def test_atomic_write_leaves_nothing_when_killed_mid_write(tmp_path, monkeypatch):
    df = pd.DataFrame([{"config_hash": "abc", "x": 1.0}])
    target = tmp_path / sweeps.RESULT

    def broken(self, path, **kw):  # a write that dies half-way
        Path(path).write_bytes(b"PAR1\x00\x01partial")
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", broken)
    with pytest.raises(KeyboardInterrupt):
        sweeps.write_parquet_atomic(df, target)
    assert list(tmp_path.iterdir()) == []
    assert not sweeps.is_done(tmp_path, "abc")
    monkeypatch.undo()
    sweeps.write_parquet_atomic(df, target)
    assert sweeps.is_done(tmp_path, "abc") and not sweeps.is_done(tmp_path, "other")


@pytest.mark.parametrize("override, key", [
    ("montecarlo.runs=5,-1", "montecarlo.runs"),
    ("montecarlo.noise_scale=1,0", "montecarlo.noise_scale"),
    ("montecarlo.mode=exact,twin montecarlo.friction=lugre", "montecarlo.friction"),
    ("montecarlo.mode=twin montecarlo.process_noise_Nm=0.5,-1", "montecarlo.process_noise_Nm"),
    ("montecarlo.mode=exact montecarlo.process_noise_Nm=0.5", "montecarlo.process_noise_Nm"),
    ("montecarlo.mode=twin montecarlo.sim=fast", "montecarlo.sim"),
    ("estimator=wls,bogus", "estimator"),
    ("montecarlo.nosie_scale=2", "nosie_scale"),
])
def test_bad_sweep_fails_before_any_run(override, key, tmp_path):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        sweeps.validate_sweep(["task=montecarlo", *override.split()])


def test_bad_sweep_cli_exits_before_creating_the_sweep(tmp_path):
    d = tmp_path / "sweep"
    r = _run(["robident_twin.validation.sweeps", "run", "--sweep-dir", str(d), "--", *FAST, "montecarlo.noise_scale=1,-2"])
    assert r.returncode == 2, r.stderr
    assert "montecarlo.noise_scale" in r.stderr
    assert not d.exists()


def test_joblib_sweep_and_aggregate(tmp_path):
    d = tmp_path / "sweep"
    r = _run(["robident_twin.validation.sweeps", "run", "--sweep-dir", str(d), "--", *FAST, "hydra/launcher=mc_joblib",
              "estimator=ols,wls"])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    results = sorted(d.rglob(sweeps.RESULT))
    assert len(results) == 2
    rows = pd.concat([pd.read_parquet(p) for p in results])
    assert set(rows["estimator"]) == {"ols", "wls"} and (rows["runs"] == 4).all()
    paths = sweeps.aggregate(d, plots=True)
    table = pd.read_csv(paths["table_csv"])
    assert len(table) == 2 and set(table["estimator"]) == {"ols", "wls"}
    for k in ("bias_vs_noise", "coverage_vs_noise", "efficiency_per_estimator"):
        assert paths[k].stat().st_size > 1000


def test_ray_runner_on_a_local_cluster(tmp_path, capsys, monkeypatch):
    """Two jobs as Ray tasks on a local 2-CPU cluster; a re-run skips both (resume).

    Its time is Ray's (a local cluster's start ~5.7 s and shutdown ~1.4 s wall, and each worker
    importing the package), not the jobs' (4 runs at 20 Hz): a smaller job would prove nothing
    cheaper. The re-run is the same ``main`` called in this process (it must start no cluster):
    its subprocess only repeated the imports (1.6 s CPU)."""
    d = tmp_path / "sweep"
    args = ["robident_twin.validation.sweeps", "ray", "--sweep-dir", str(d), "--num-cpus", "2", "--", *FAST,
            "estimator=ols,wls"]
    env = {**ENV, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    r = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "2 of 2 job(s) finished" in r.stdout
    results = sorted(d.rglob(sweeps.RESULT))
    assert [p.parent.name for p in results] == ["0", "1"]
    runs, params = sweeps.collect(d)
    assert set(runs["estimator"]) == {"ols", "wls"} and (runs["runs"] == 4).all()
    assert len(params) == 2 * int(runs["n_params"].iloc[0])
    mtimes = [p.stat().st_mtime_ns for p in results]
    import ray

    def no_cluster(*a, **kw):
        raise AssertionError("a re-run of a finished sweep started a Ray cluster")

    monkeypatch.setattr(ray, "init", no_cluster)
    capsys.readouterr()
    assert sweeps.main(args[1:]) == 0
    out = capsys.readouterr().out
    assert [p.stat().st_mtime_ns for p in sorted(d.rglob(sweeps.RESULT))] == mtimes
    assert out.count("skipped") == 2 and "2 of 2 job(s) finished" in out


def test_killed_sweep_resumes_without_recomputing(tmp_path):
    d = tmp_path / "sweep"
    args = [*FAST, "montecarlo.runs=150", "montecarlo.noise_scale=0.5,1,2", "hydra/launcher=mc_basic"]
    cmd = [sys.executable, "-m", "robident_twin.cli", "-m", f"hydra.sweep.dir={d}", *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    t0 = time.time()
    while not list(d.rglob(sweeps.RESULT)) and time.time() - t0 < 300 and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = {p: p.stat().st_mtime_ns for p in d.rglob(sweeps.RESULT)}
    assert 1 <= len(done_before) < 3, "the sweep should have been killed mid-way"
    r = _run(["robident_twin.cli", "-m", f"hydra.sweep.dir={d}", *args])
    assert r.returncode == 0, r.stderr[-3000:]
    results = sorted(d.rglob(sweeps.RESULT))
    assert len(results) == 3 and len({p.parent for p in results}) == 3
    for p, mtime in done_before.items():  # finished jobs were skipped, not recomputed
        assert p.stat().st_mtime_ns == mtime
    assert r.stdout.count("skipped") == len(done_before)
    assert not [p for p in d.rglob("*.tmp-*")]
    runs, _ = sweeps.collect(d)
    assert sorted(runs["noise_scale"]) == [0.5, 1.0, 2.0]


def test_aggregate_refuses_a_job_directory_mixing_configs(tmp_path, monkeypatch, capsys):
    """A job directory reused with another config: its files must all carry the job's config hash,
    else aggregate names the job; a re-run with another config unmarks the job before computing."""
    import json

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from robident_twin.validation import montecarlo
    from robident_twin.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg_a, cfg_b = (compose("config", overrides=[*FAST, f"estimator={e}"]) for e in ("ols", "wls"))
    a = OmegaConf.to_container(cfg_a, resolve=True)
    b = OmegaConf.to_container(cfg_b, resolve=True)
    job = tmp_path / "sweep" / "0"
    sweeps.run_job(a, job)
    (job / ".hydra").mkdir()
    OmegaConf.save(cfg_a, job / ".hydra" / "config.yaml")  # as Hydra writes it: the job's own config
    runs, _ = sweeps.collect(tmp_path / "sweep")
    assert list(runs["estimator"]) == ["ols"]
    key_a, key_b = sweeps.config_hash(a), sweeps.config_hash(b)

    OmegaConf.save(cfg_b, job / ".hydra" / "config.yaml")  # Hydra started another config here, which never finished
    with pytest.raises(ConfigError, match=rf"mixes results of different configs \(1 job\(s\)\): job 0: result\.parquet "
                                          rf"has config {key_a} but \.hydra/config\.yaml .* has config {key_b}"):
        sweeps.collect(tmp_path / "sweep")
    OmegaConf.save(cfg_a, job / ".hydra" / "config.yaml")

    params = pd.read_parquet(job / sweeps.PARAMETERS)
    params.loc[2:, "config_hash"] = key_b  # parameter rows of another config
    params.to_parquet(job / sweeps.PARAMETERS)
    with pytest.raises(ConfigError, match=rf"job 0: result\.parquet has config {key_a} but parameters\.parquet has "
                                          rf"config .*{key_b}"):
        sweeps.aggregate(tmp_path / "sweep", plots=False)
    params["config_hash"] = key_a
    params.to_parquet(job / sweeps.PARAMETERS)

    s = json.loads((job / sweeps.SUMMARY).read_text())
    s["config"]["estimator"]["name"] = "wls"
    (job / sweeps.SUMMARY).write_text(json.dumps(s))
    with pytest.raises(ConfigError, match=rf"job 0: result\.parquet has config {key_a} but summary\.json has config"):
        sweeps.collect(tmp_path / "sweep")

    def killed(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(montecarlo, "run_from_config", killed)
    with pytest.raises(KeyboardInterrupt):
        sweeps.run_job(b, job)  # the directory reused with config b, killed before it finished
    assert not (job / sweeps.RESULT).exists()  # a's result no longer marks the job finished
    assert "holds results of another config" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="no finished job"):
        sweeps.collect(tmp_path / "sweep")
