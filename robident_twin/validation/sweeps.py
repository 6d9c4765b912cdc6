"""Monte-Carlo sweeps: one Hydra job = one batch of runs = one tidy Parquet row.

    # validated sweep (every combination is composed and checked before any run starts)
    python -m robident_twin.validation.sweeps run --sweep-dir multirun/mc1 -- \\
        task=montecarlo hydra/launcher=mc_joblib estimator=ols,wls montecarlo.noise_scale=0.5,1,2
    # the same through Hydra directly (Hydra composes every job first; value checks run per job)
    robident-twin -m hydra.sweep.dir=multirun/mc1 task=montecarlo estimator=ols,wls ...
    # tables and plots of a sweep directory
    robident-twin task=aggregate montecarlo.sweep_dir=multirun/mc1
    python -m robident_twin.validation.sweeps aggregate multirun/mc1

Each job writes, atomically (temporary file + ``os.replace``), in this order:
``parameters.parquet`` (one row per base parameter), ``summary.json`` and last
``result.parquet`` (one row: config, seed, statistics, test outcomes, config hash).
``result.parquet`` present means the job is finished: re-running the same sweep
(same ``hydra.sweep.dir``) skips jobs whose stored config hash matches, so an
interrupted sweep resumes without recomputing finished runs, and a killed job
leaves at most a stray ``*.tmp-<pid>`` file that the aggregation ignores.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from robident_twin.atomic import atomic_path, write_text_atomic
from robident_twin.errors import ConfigError, RobidentError

RESULT = "result.parquet"
PARAMETERS = "parameters.parquet"
SUMMARY = "summary.json"
ESTIMATES = "estimates.npz"  # per-run estimates, truth, CRLB std (the report's convergence plots)
#: Config keys that do not change a job's result (excluded from its hash).
_NOT_HASHED = ("progress", "sweep_dir")
#: A running job's count of finished runs (the overall sweep bar reads it).
RUNS_DONE = "runs_done.txt"
#: Set (to "1") by a runner that draws one bar for the whole sweep: its jobs then draw no bar
#: of their own (joblib's worker processes would interleave them) and count their runs in
#: :data:`RUNS_DONE` instead.
SWEEP_BAR_ENV = "ROBIDENT_SWEEP_BAR"


# ----------------------------------------------------------------------------- atomic writes

def write_parquet_atomic(df, path: Path) -> None:
    """Write a DataFrame as Parquet so that ``path`` is either absent or complete."""
    with atomic_path(path, fsync=True) as tmp:
        df.to_parquet(tmp, index=False, engine="pyarrow")


def write_json_atomic(obj: Any, path: Path) -> None:
    write_text_atomic(path, json.dumps(obj, indent=1, default=float))


# ----------------------------------------------------------------------------- one job

def config_record(run) -> dict[str, Any]:
    """The plain form of a validated run config that a job records (its ``summary.json``) and
    hashes: data written out, never read back as a config."""
    from robident_twin.config import to_plain

    return to_plain(run)


def config_hash(cfg) -> str:
    """Hash of everything that determines a job's result (not the hydra node, not progress).
    A run config (a RunConfig, or a mapping as Hydra writes it to ``.hydra/config.yaml`` or a
    job to its ``summary.json``) is hashed in its validated form (defaults filled in), so the
    config Hydra composed and the validated one the CLI runs hash alike."""
    from robident_twin.config import RunConfig, validate

    if not isinstance(cfg, RunConfig):
        try:
            cfg = validate({k: v for k, v in cfg.items() if k != "hydra"})
        except RobidentError:  # not a complete run config (a partial record): hashed as it is
            pass
    record = config_record(cfg) if isinstance(cfg, RunConfig) else cfg
    plain = {k: v for k, v in record.items() if k not in ("hydra", "output")}
    mc = dict(plain.get("montecarlo") or {})
    for k in _NOT_HASHED:
        mc.pop(k, None)
    plain["montecarlo"] = mc
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:16]


def is_done(out_dir: Path, key: str) -> bool:
    """True when ``out_dir`` holds a finished result of the config with hash ``key``."""
    path = Path(out_dir) / RESULT
    if not path.is_file():
        return False
    import pandas as pd

    try:
        df = pd.read_parquet(path)
    except Exception:  # unreadable: recompute (cannot happen with atomic writes, but be safe)
        return False
    return len(df) == 1 and str(df["config_hash"].iloc[0]) == key


def tidy_row(run, res, summary: Mapping[str, Any], tests, key: str) -> dict[str, Any]:
    """One flat row: config (``run``, a RunConfig), seed, statistics and test outcomes."""
    mc = run.montecarlo
    o = summary["overall"]
    params = summary["parameters"]
    z = np.array([p["bias_over_crlb_sem"] for p in params])
    ratio = np.array([p["efficiency_ratio"] for p in params])
    return {
        "config_hash": key,
        "name": str(mc.name or ""),
        "robot": res.meta.get("robot", run.robot.name),
        "mode": res.mode, "estimator": res.estimator,
        "measurement": str(res.meta.get("measurement")),
        "noise_scale": float(mc.noise_scale),
        "friction": str(mc.friction) if mc.mode != "twin" or run.friction.kind == "nominal" else str(run.friction.kind),
        "design": str(mc.design or run.robot.excitation),
        "seed": int(mc.seed), "runs": res.n_runs, "n_params": res.n_params,
        "n_samples": int(res.meta.get("n_samples", 0)),
        "share_means_in_68": o["share_means_in_68"],
        "share_ratios_in_chi2_90": o["share_ratios_in_chi2_90"],
        "mean_coverage68": o["mean_coverage68"],
        "mean_efficiency_ratio": o["mean_efficiency_ratio"],
        "max_efficiency_ratio": float(ratio.max()),
        "max_abs_bias_over_sem": o["max_abs_bias_over_sem"],
        "rms_bias_over_crlb_sem": float(np.sqrt(np.mean(z**2))),
        "log10_det_crlb": o["log10_det_crlb"], "log10_det_ratio": o["log10_det_ratio"],
        "torque_nrms_percent": o["torque_nrms_percent"],
        "mean_test_statistic": tests.mean_statistic, "mean_test_threshold": tests.mean_threshold,
        "mean_test_ok": tests.mean_ok, "variance_test_ok": tests.variance_ok, "tests_passed": tests.passed,
        "alpha": tests.alpha, "wall_s": float(res.meta.get("wall_s", float("nan"))),
        "bias_test_ok": bool((summary.get("bias_test") or {}).get("passed", True)),
        "n_bias_over_3_sem": int(o.get("n_bias_over_3_sem", 0)),
        "sim_path": str(res.meta.get("sim_path", "exact")),
        "finished_unix_s": time.time(),
    }


def run_job(run, out_dir: Path, progress: bool | None = None) -> dict[str, Any]:
    """Run one Monte-Carlo job (``run``: a RunConfig; a mapping, e.g. a resolved Hydra config, is
    validated once here) into ``out_dir`` unless it is already finished there."""
    import pandas as pd

    from robident_twin.config import validate
    from robident_twin.validation.montecarlo import format_table, run_from_config

    if not hasattr(run, "montecarlo"):
        run = {k: v for k, v in run.items() if k != "hydra"}
    run = validate(run)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    key = config_hash(run)
    if is_done(out_dir, key):
        print(f"montecarlo: {out_dir} already holds this job's result (config {key}); skipped")
        return pd.read_parquet(out_dir / RESULT).iloc[0].to_dict()
    stale = [out_dir / f for f in (RESULT, SUMMARY, PARAMETERS, ESTIMATES) if (out_dir / f).exists()]
    if stale:  # another config's results: unmark the job first, so a killed re-run never mixes old and new
        print(f"montecarlo: {out_dir} holds results of another config; replacing them (config {key})")
        for f in stale:
            f.unlink()
    counter = None
    (out_dir / RUNS_DONE).unlink(missing_ok=True)
    if os.environ.get(SWEEP_BAR_ENV) == "1":  # the sweep's runner draws the one bar
        progress = False

        def counter(r: int) -> None:
            write_text_atomic(out_dir / RUNS_DONE, str(r + 1))

    res, summary, tests = run_from_config(run, progress, callback=counter)
    row = tidy_row(run, res, summary, tests, key)
    prow = pd.DataFrame([{"config_hash": key, "robot": row["robot"], "estimator": row["estimator"],
                          "mode": row["mode"], "noise_scale": row["noise_scale"], "friction": row["friction"],
                          **p} for p in summary["parameters"]])
    write_parquet_atomic(prow, out_dir / PARAMETERS)
    with atomic_path(out_dir / ESTIMATES, suffix=".npz") as tmp:
        np.savez(tmp, estimates=res.estimates, truth=res.truth, crlb_std=np.sqrt(np.diag(res.crlb)),
                 names=np.array(res.names))
    write_json_atomic({"summary": summary, "tests": tests.__dict__, "row": row,
                       "config": config_record(run)}, out_dir / SUMMARY)
    write_parquet_atomic(pd.DataFrame([row]), out_dir / RESULT)  # last: marks the job finished
    (out_dir / RUNS_DONE).unlink(missing_ok=True)
    print(format_table(summary, tests, max_rows=None if res.n_params <= 30 else 20))
    return row


# ----------------------------------------------------------------------------- aggregation

def _hydra_config_hash(job_dir: Path) -> str | None:
    """The config hash of the job's ``.hydra/config.yaml`` (what Hydra last started in this
    directory), or None when there is none or it cannot be resolved outside Hydra."""
    path = job_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        return None
    from omegaconf import OmegaConf

    try:
        return config_hash(OmegaConf.to_container(OmegaConf.load(path), resolve=True))  # a file's data
    except Exception:  # an interpolation only Hydra resolves: nothing to compare
        return None


def job_mismatches(job_dir: Path, result_hash: str) -> list[str]:
    """What in a finished job's directory belongs to a config other than its result's
    (``result.parquet``): the parameter rows, the summary's config, the config Hydra last
    started there. [] when the directory is consistent."""
    import pandas as pd

    out = []
    pp = job_dir / PARAMETERS
    if pp.is_file():
        hashes = sorted(set(map(str, pd.read_parquet(pp, columns=["config_hash"])["config_hash"])))
        if hashes != [result_hash]:
            out.append(f"{PARAMETERS} has config {', '.join(hashes)}")
    sp = job_dir / SUMMARY
    if sp.is_file():
        try:
            cfg = json.loads(sp.read_text()).get("config")
            h = config_hash(cfg) if isinstance(cfg, dict) else None
        except (json.JSONDecodeError, TypeError, ValueError):
            h = "unreadable"
        if h is not None and h != result_hash:
            out.append(f"{SUMMARY} has config {h}")
    h = _hydra_config_hash(job_dir)
    if h is not None and h != result_hash:
        out.append(f".hydra/config.yaml (the config last started there) has config {h}")
    return out


def collect(sweep_dir: Path):
    """All finished jobs' rows and parameter rows under ``sweep_dir`` (temporary files ignored).

    Refuses (ConfigError naming the jobs) a directory that mixes results of different configs:
    a job whose ``result.parquet``, ``parameters.parquet``, ``summary.json`` and
    ``.hydra/config.yaml`` do not carry one config hash (a job directory reused with another
    config and not re-run to the end)."""
    import pandas as pd

    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise ConfigError(f"montecarlo.sweep_dir: {sweep_dir} is not a directory")
    rows, prows, mixed = [], [], []
    for path in sorted(sweep_dir.rglob(RESULT)):
        r = pd.read_parquet(path)
        job = str(path.parent.relative_to(sweep_dir))
        r["job_dir"] = job
        rows.append(r)
        key = str(r["config_hash"].iloc[0]) if "config_hash" in r and len(r) == 1 else None
        if key is None:
            mixed.append(f"job {job}: {RESULT} carries no single config_hash")
        else:
            bad = job_mismatches(path.parent, key)
            if bad:
                mixed.append(f"job {job}: {RESULT} has config {key} but " + "; ".join(bad))
        pp = path.parent / PARAMETERS
        if pp.is_file():
            p = pd.read_parquet(pp)
            p["job_dir"] = job
            prows.append(p)
    if mixed:
        raise ConfigError(f"montecarlo.sweep_dir: {sweep_dir} mixes results of different configs ("
                          f"{len(mixed)} job(s)): " + " | ".join(mixed) + "; expected every file of a job to carry "
                          "its config's hash - re-run the sweep into this directory or remove those jobs")
    if not rows:
        raise ConfigError(f"montecarlo.sweep_dir: no finished job ({RESULT}) under {sweep_dir}")
    return pd.concat(rows, ignore_index=True), (pd.concat(prows, ignore_index=True) if prows else None)


def aggregate(sweep_dir: Path, out_dir: Path | None = None, plots: bool = True) -> dict[str, Path]:
    """Tables (Parquet, CSV, Markdown-like text) and plots of a sweep directory."""
    sweep_dir = Path(sweep_dir)
    out = Path(out_dir) if out_dir else sweep_dir / "aggregate"
    out.mkdir(parents=True, exist_ok=True)
    runs, params = collect(sweep_dir)
    keys = ["robot", "mode", "estimator", "friction", "noise_scale"]
    table = (runs.groupby(keys, dropna=False)
             .agg(jobs=("config_hash", "count"), runs=("runs", "sum"),
                  share_means_in_68=("share_means_in_68", "mean"),
                  share_ratios_in_chi2_90=("share_ratios_in_chi2_90", "mean"),
                  mean_coverage68=("mean_coverage68", "mean"),
                  mean_efficiency_ratio=("mean_efficiency_ratio", "mean"),
                  rms_bias_over_crlb_sem=("rms_bias_over_crlb_sem", "mean"),
                  log10_det_ratio=("log10_det_ratio", "mean"),
                  torque_nrms_percent=("torque_nrms_percent", "mean"),
                  tests_passed=("tests_passed", "mean"))
             .reset_index())
    paths = {"runs": out / "runs.parquet", "table_csv": out / "table.csv", "table_txt": out / "table.txt"}
    write_parquet_atomic(runs, paths["runs"])
    if params is not None:
        paths["parameters"] = out / "parameters.parquet"
        write_parquet_atomic(params, paths["parameters"])
    with atomic_path(paths["table_csv"]) as tmp:
        table.to_csv(tmp, index=False)
    write_text_atomic(paths["table_txt"], table.to_string(index=False, float_format=lambda x: f"{x:.4g}") + "\n")
    if plots:
        paths.update(_plots(runs, out))
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print(f"\naggregate of {len(runs)} job(s) in {out}")
    return paths


def _plots(runs, out: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = {}
    groups = list(runs.groupby(["robot", "mode", "estimator", "friction"]))
    specs = (("bias_vs_noise", "rms_bias_over_crlb_sem", "RMS bias / CRLB standard error of the mean"),
             ("coverage_vs_noise", "mean_coverage68", "68 % interval coverage"))
    for fname, col, label in specs:
        fig, ax = plt.subplots(figsize=(6, 4))
        for (robot, mode, est, fr), g in groups:
            g = g.groupby("noise_scale")[col].mean()
            ax.plot(g.index, g.values, "o-", label=f"{robot} {mode} {est} {fr}")
        if col == "mean_coverage68":
            ax.axhline(0.68, color="k", lw=0.8, ls="--")
        ax.ticklabel_format(axis="y", useOffset=False)  # no "1e-13 + 1.0494" corner offset
        ax.set_xlabel("noise scale")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = out / f"{fname}.png"
        with atomic_path(p, suffix=".png") as tmp:
            fig.savefig(tmp)
        plt.close(fig)
        paths[fname] = p
    fig, ax = plt.subplots(figsize=(6, 4))
    eff = runs.groupby("estimator")["mean_efficiency_ratio"].mean()
    ax.bar(eff.index, eff.values)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_ylabel("mean var / CRLB")
    ax.set_yscale("log")
    fig.tight_layout()
    p = out / "efficiency_per_estimator.png"
    with atomic_path(p, suffix=".png") as tmp:
        fig.savefig(tmp)
    plt.close(fig)
    paths["efficiency_per_estimator"] = p
    return paths


# ----------------------------------------------------------------------------- overall progress

def job_runs_done(job_dir: Path, runs: int) -> int | None:
    """Runs a job ``job_dir`` has finished: all ``runs`` once its result is there, else its count
    (:data:`RUNS_DONE`, at most ``runs``), 0 before its first run; None when unreadable."""
    job_dir = Path(job_dir)
    if (job_dir / RESULT).exists():
        return runs
    try:
        return min(int((job_dir / RUNS_DONE).read_text()), runs)
    except FileNotFoundError:
        return 0
    except (OSError, ValueError):
        return None


def runs_done(sweep_dir: Path, runs_per_job: Sequence[int]) -> int:
    """Runs finished over a sweep's jobs ``sweep_dir/<job number>``."""
    return sum(job_runs_done(Path(sweep_dir) / str(i), r) or 0 for i, r in enumerate(runs_per_job))


class SweepProgress:
    """One bar for a whole sweep (jobs x runs, with rate and ETA), advanced from the jobs' files
    by :meth:`poll` (a job's count never goes back; an unreadable file keeps the last one);
    ``bar`` is a tqdm-like object (``robident_twin.progress.bar``: drawn on a terminal only)."""

    def __init__(self, sweep_dir: Path, runs_per_job: Sequence[int], bar):
        self.sweep_dir, self.runs_per_job = Path(sweep_dir), [int(r) for r in runs_per_job]
        self.bar = bar
        self.per_job = [0] * len(self.runs_per_job)
        bar.total = sum(self.runs_per_job)
        self.poll()

    @property
    def done(self) -> int:
        return sum(self.per_job)

    def poll(self) -> int:
        before = self.done
        for i, runs in enumerate(self.runs_per_job):
            now = job_runs_done(self.sweep_dir / str(i), runs)
            if now is not None and now > self.per_job[i]:
                self.per_job[i] = now
        if self.done > before:
            self.bar.update(self.done - before)
        return self.done


def watch(proc, sweep_dir: Path, runs_per_job: Sequence[int], bar, interval_s: float = 0.5) -> int:
    """Advance the sweep's bar until the runner process ``proc`` ends; its exit code."""
    sp = SweepProgress(sweep_dir, runs_per_job, bar)
    while proc.poll() is None:
        time.sleep(interval_s)
        sp.poll()
    sp.poll()
    return proc.returncode


# ----------------------------------------------------------------------------- sweep validation

def expand_overrides(overrides: Sequence[str]) -> list[list[str]]:
    """All jobs of a Hydra sweep (the basic sweeper's cartesian product), as override lists."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    lists = []
    for o in parsed:
        if o.is_hydra_override():
            continue
        if o.is_sweep_override():
            key = o.get_key_element()
            lists.append([f"{key}={v}" for v in o.sweep_string_iterator()])
        else:
            lists.append([o.input_line])
    return [list(x) for x in itertools.product(*lists)] if lists else [[]]


def validate_job(cfg):
    """Everything a job would refuse, checked without running it (errors name the key).
    ``cfg``: a RunConfig or a mapping (validated here); returns the RunConfig."""
    from robident_twin.config import validate
    from robident_twin.design.stored import resolve_design
    from robident_twin.estimation.estimators import ols  # noqa: F401  (estimator module importable)
    from robident_twin.model.build import model_options, resolve_robot

    run = validate(cfg)
    if run.task not in ("montecarlo",):
        raise ConfigError(f"task: a Monte-Carlo sweep runs task=montecarlo, got '{run.task}'")
    mc = run.montecarlo
    est = run.estimator.name
    if est not in ("ols", "wls"):
        raise ConfigError(f"estimator.name: expected ols or wls, got '{est}'")
    model_options(run.model, run.robot)
    spec = resolve_robot(run.robot)
    from robident_twin.design.auto import excitation_path

    resolve_design(mc.design or excitation_path(spec, run.robot), spec)
    if mc.mode == "twin":
        from hal.factory import make_noise

        make_noise(spec, run.noise)
    return run


def validate_sweep(overrides: Sequence[str], configs: list | None = None) -> int:
    """Compose and check every job of a sweep; raise ConfigError naming the first bad key.

    Returns the number of jobs (and appends each job's validated RunConfig to ``configs``)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from robident_twin.paths import CONF_DIR

    jobs = expand_overrides(overrides)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        for job in jobs:
            try:
                cfg = compose(config_name="config", overrides=job)
            except HydraException as exc:  # unknown group option or key: Hydra names it
                raise ConfigError(f"sweep job {' '.join(job)}: {exc}") from exc
            try:
                run = validate_job(cfg)
            except RobidentError as exc:
                raise ConfigError(f"sweep job {' '.join(job)}: {exc}") from exc
            if configs is not None:
                configs.append(run)
    return len(jobs)


def run_sweep(sweep_dir: Path, overrides: Sequence[str], progress: bool = True) -> int:
    """Validate every job, then launch the Hydra multirun into ``sweep_dir``. On a terminal one
    bar counts the runs of the whole sweep (the jobs draw none)."""
    from robident_twin import progress as prog

    configs: list = []
    n = validate_sweep(overrides, configs)
    print(f"sweep: {n} job(s) valid; launching into {sweep_dir}")
    cmd = [sys.executable, "-m", "robident_twin.cli", "-m", f"hydra.sweep.dir={sweep_dir}", *overrides]
    if not prog.enabled(progress):
        return subprocess.call(cmd)
    runs = [int(run.montecarlo.runs) for run in configs]
    with prog.bar(sum(runs), f"sweep ({n} jobs)", True, unit="run") as bar:
        return watch(subprocess.Popen(cmd, env={**os.environ, SWEEP_BAR_ENV: "1"}), sweep_dir, runs, bar)


def run_ray(sweep_dir: Path, overrides: Sequence[str], address: str | None = None,
            num_cpus: int | None = None) -> int:
    """A plain Ray batch runner (no Hydra launcher plugin needed): one Ray task per job,
    each writing into ``sweep_dir/<job number>`` exactly as a Hydra multirun does (finished
    jobs are skipped on a re-run). ``address``: None starts a local cluster of ``num_cpus``
    CPUs (None: all), ``"auto"`` or ``"ray://host:10001"`` joins a running one. Returns the
    number of failed jobs (0: all finished)."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("the Ray runner needs `pip install ray` (in the test extra: pip install -e '.[test]')") \
            from exc
    from robident_twin import progress as prog

    cfgs: list = []
    validate_sweep(overrides, cfgs)
    jobs = expand_overrides(overrides)
    done = [i for i, c in enumerate(cfgs) if is_done(Path(sweep_dir) / str(i), config_hash(c))]
    for i in done:
        print(f"montecarlo: {Path(sweep_dir) / str(i)} already holds this job's result; skipped")
    if len(done) == len(cfgs):  # a re-run of a finished sweep: nothing to send, no cluster to start
        print(f"ray: {len(cfgs)} of {len(cfgs)} job(s) finished in {sweep_dir}")
        return 0
    started = not ray.is_initialized()
    if started:
        kw = {"num_cpus": num_cpus} if address is None else {}
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}}, **kw)
    try:
        @ray.remote(num_cpus=1)
        def job(cfg, out):
            os.environ[SWEEP_BAR_ENV] = "1"  # count the runs for the overall bar
            return run_job(cfg, Path(out), progress=False)

        refs = [job.remote(c, str(Path(sweep_dir) / str(i))) for i, c in enumerate(cfgs)]
        runs = [int(run.montecarlo.runs) for run in cfgs]
        failed = 0
        with prog.bar(sum(runs), f"sweep ({len(refs)} jobs)", True, unit="run") as bar:
            sp = SweepProgress(sweep_dir, runs, bar)  # the runs of a job on this machine's disk
            pending = list(refs)
            while pending:
                ready, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
                sp.poll()
                for ref in ready:
                    i = refs.index(ref)
                    try:
                        ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        failed += 1
                        print(f"sweep job {i} ({' '.join(jobs[i])}) failed: {exc}", file=sys.stderr)
        print(f"ray: {len(refs) - failed} of {len(refs)} job(s) finished in {sweep_dir}")
        return failed
    finally:
        if started:
            ray.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m robident_twin.validation.sweeps", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="validate every job, then run the Hydra multirun")
    r.add_argument("--sweep-dir", required=True)
    r.add_argument("overrides", nargs="*")
    v = sub.add_parser("validate", help="only validate the sweep")
    v.add_argument("overrides", nargs="*")
    y = sub.add_parser("ray", help="run the sweep as Ray tasks (local or existing cluster)")
    y.add_argument("--sweep-dir", required=True)
    y.add_argument("--address", default=None)
    y.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local cluster (default: all)")
    y.add_argument("overrides", nargs="*")
    a = sub.add_parser("aggregate", help="tables and plots of a sweep directory")
    a.add_argument("sweep_dir")
    a.add_argument("--out", default=None)
    a.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "run":
            return run_sweep(Path(args.sweep_dir), args.overrides)
        if args.cmd == "validate":
            print(f"sweep: {validate_sweep(args.overrides)} job(s) valid")
            return 0
        if args.cmd == "ray":
            return 1 if run_ray(Path(args.sweep_dir), args.overrides, args.address, args.num_cpus) else 0
        aggregate(Path(args.sweep_dir), args.out and Path(args.out), plots=not args.no_plots)
        return 0
    except RobidentError as exc:
        print(f"robident-twin sweeps: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
