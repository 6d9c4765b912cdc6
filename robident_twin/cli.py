"""``robident-twin``: the Hydra application.

    robident-twin                                  # identify the default robot on its twin
    robident-twin estimator=ols noise=none         # noise-free OLS
    robident-twin noise.torque_std_Nm=0.5 seed=3   # any key can be overridden
    robident-twin task=design design.install=true  # re-optimise the stored excitation

Outputs go to Hydra's run directory (``outputs/<date>/<time>_<run id>/`` by default, robident_twin.rundir):
``summary.json``, ``report.html`` (self-contained; ``task=report report.run_dir=<dir>``
rebuilds it), ``validation_torques.png``, ``parameters.png`` and the raw recordings.
Bad input ends with a message naming what and where, exit code 2, and a
``FAILED.txt`` in the run directory instead of a summary.
"""
from __future__ import annotations

import inspect
import sys
import traceback
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from . import rundir  # noqa: F401  (registers the run_id resolver of hydra.run.dir)
from .config import RunConfig, as_dictconfig, to_plain, validate
from . import forked
from .errors import RobidentError
from .paths import CONF_DIR

#: task name -> "module:function" (relative to this package) called as function(run, out_dir) with the
#: validated RunConfig when its first parameter is ``run``; else as function(cfg, out_dir), ``cfg`` the
#: validated config as a DictConfig (run=<the RunConfig> as well when it has a ``run`` parameter). One line per task: adding a task never touches the dispatch below.
TASKS: dict[str, str] = {
    "identify": ".cli:run_identify",
    "design": ".cli:run_design",
    "montecarlo": ".cli:run_montecarlo",
    "aggregate": ".cli:run_aggregate",
    "dryrun": ".design.dryrun:run_dryrun_task",
    "report": ".report.html:run_report_task",
    "export": ".export_task:run_export_task",
    "import": "robident_twin.file_tasks:run_import",
    "export_trajectory": "robident_twin.file_tasks:run_export_trajectory",
    "control": "robident_twin.control_task:run_control_task",
    "robustness": ".robustness_task:run_robustness_task",
    "payload": ".payload_task:run_payload_task",
}


def _run_dir() -> Path:
    from hydra.core.hydra_config import HydraConfig

    try:
        return Path(HydraConfig.get().runtime.output_dir)
    except Exception:  # called outside Hydra
        return Path.cwd()


def run_identify(cfg: DictConfig, out: Path, run: RunConfig | None = None) -> dict:
    from robident_twin.model.build import channel_names
    from robident_twin.pipeline import identify
    from robident_twin.report.tables import format_table, plot_parameters, plot_validation, write_json

    run = validate(cfg) if run is None else run
    plain = to_plain(run)
    excitation = []  # the report's excitation section (config only): in a child once the excitation is recorded,
    start_section = None  # when a core frees up (on a simulator the validation child finishes during the fit)
    if run.output.report:
        from robident_twin.report.html import excitation_blocks

        def start_section():
            excitation.append(forked.start(lambda: excitation_blocks(plain), "report section"))
    draws = run.output.plots or run.output.report

    def import_pyplot():  # once, beside the validation child: every child forked later inherits it
        from robident_twin.report.svg import plt

        plt()

    result = identify(run, out_dir=out, after_excitation=start_section, after_fork=import_pyplot if draws else None)
    summary = result.summary
    summary["config"] = plain
    import time

    t0 = time.perf_counter()
    report = None  # the report's finish(); its other core's figures start now
    if run.output.report:
        from robident_twin.report.identify_run import begin_identify_report

        report = begin_identify_report(result, summary, out, start=lambda fn: forked.start(fn, "report figures"),
                                       pngs=run.output.plots)
    if draws:  # (imported above unless identify forked nothing)
        import_pyplot()
    plots = None  # the PNG files: with the report, written from its figures' drawing; else drawn in a forked child
    if run.output.plots and not run.output.report:
        vd = result.validation_data
        t = 1.0 / vd.sample_rate_hz * __import__("numpy").arange(vd.n_samples)
        names = channel_names(result.model.spec, result.model.regressor.options.measurement)
        plots = forked.start(lambda: (plot_validation(t, vd.tau_Nm, result.tau_val_pred_Nm, names,
                                                      out / "validation_torques.png"),
                                      plot_parameters(summary, out / "parameters.png")), "plots")
    write_json(summary, out / "summary.json")
    __import__("numpy").save(out / "estimate_covariance.npy", result.estimate.cov)  # full covariance (task=payload)
    print(format_table(summary))
    if report is not None:
        path = report(excitation[0].result())
        print(f"report: {path} ({time.perf_counter() - t0:.2f} s)")  # from its start (summary and table included)
    if plots is not None:
        plots.result()
    print(f"\nresults in {out}")
    return summary


def run_design(run: RunConfig, out: Path) -> Path:
    """Every criterion, constraint, optimiser and Swevers' iteration (robident_twin.design.task)."""
    from robident_twin.design.task import run_design_task

    return run_design_task(validate(run), out)


def run_montecarlo(run: RunConfig, out: Path) -> dict:
    from robident_twin.validation.sweeps import run_job

    row = run_job(run, out)
    if run.output.report:
        from robident_twin.report.html import write_montecarlo_report

        print(f"report: {write_montecarlo_report(out)}")
    return row


def run_aggregate(run: RunConfig, out: Path):
    from robident_twin.validation.sweeps import aggregate

    # the tables, plots and report go to this task's own run directory; the sweep is only read
    sweep = run.montecarlo.sweep_dir
    paths = aggregate(Path(sweep or out), out if sweep else None, plots=bool(run.output.plots))
    if run.output.report:
        from robident_twin.report.html import write_aggregate_report

        paths["report"] = write_aggregate_report(paths["runs"].parent)
        print(f"report: {paths['report']}")
    return paths


def task_function(task: str):
    """The function that runs ``task`` (a clear error for an unknown task)."""
    import importlib

    if task not in TASKS:
        raise RobidentError(f"task: unknown task '{task}'; expected one of {', '.join(TASKS)}")
    module, func = TASKS[task].split(":")
    return getattr(importlib.import_module(module, __package__), func)


_APP_STARTED = False  # False while Hydra composes the config: its refusals are bad input too (exit 2)
#: tasks whose finished single run ends the process at once (:func:`_exit_now`): they leave no
#: thread, pool or child behind (the forked children are joined), nothing of theirs is written at exit
FAST_EXIT_TASKS = ("identify",)
_FINISHED: str | None = None  # the task of the run that finished without an error


@hydra.main(version_base=None, config_path=str(CONF_DIR), config_name="config")
def app(cfg: DictConfig) -> None:
    global _APP_STARTED
    _APP_STARTED = True
    out = _run_dir()
    try:
        OmegaConf.set_struct(cfg, True)  # a key that is not in the config is an error, never a new key
        run = validate(cfg)  # the edge: every key checked before any work (robident_twin.config)
        func = task_function(run.task)
        params = list(inspect.signature(func).parameters)
        first = run if params[0] == "run" else as_dictconfig(run)  # a typed task takes run first (issue 14)
        kwargs = {"run": run} if "run" in params[1:] else {}
        from .progress import tee_stdout

        with tee_stdout(out / "cli.log"):  # the console (parameter table, results) kept with the results
            func(first, out, **kwargs)
        global _FINISHED
        _FINISHED = run.task
    except RobidentError as exc:
        (out / "FAILED.txt").write_text(f"{type(exc).__name__}: {exc}\n")
        print(f"robident-twin: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Exception:  # an unexpected failure: keep the traceback next to the outputs
        (out / "FAILED.txt").write_text(traceback.format_exc())
        raise


#: launchers that are not choices of conf/hydra/launcher/, with what to use instead
REMOVED_LAUNCHERS = {
    "mc_ray": ("hydra/launcher=mc_ray: Hydra's Ray launcher is not a choice (its plugin pins ray and "
               "cloudpickle against this project's); run the same sweep on Ray with the extra "
               "`pip install robident-twin[ray]` and `python -m robident_twin.validation.sweeps ray --sweep-dir DIR "
               "[--address auto] -- task=montecarlo ...`, or use hydra/launcher=mc_joblib"),
}


def _refuse_launchers(argv: list[str]) -> None:
    for a in argv:
        k, sep, v = a.partition("=")
        if sep and k.lstrip("+~") == "hydra/launcher" and v in REMOVED_LAUNCHERS:
            print(f"robident-twin: error: {REMOVED_LAUNCHERS[v]}", file=sys.stderr)
            sys.exit(2)


#: keys that are not set on the command line, with the one to use instead
REFUSED_KEYS = {
    "robot.measurement": ("robot.measurement: the torque channel has one key, model.measurement "
                          "(joint_torque | motor_torque | both | difference); robot.measurement is only the "
                          "robot file's default used when model.measurement is null. Use model.measurement=..."),
}


def _refuse_removed_launchers(argv: list[str]) -> None:
    for a in argv:
        k, sep, v = a.partition("=")
        if sep and k.lstrip("+~") in REFUSED_KEYS:
            print(f"robident-twin: error: {REFUSED_KEYS[k.lstrip('+~')]}", file=sys.stderr)
            sys.exit(2)
    _refuse_launchers(argv)


BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _one_blas_thread() -> None:
    """One BLAS thread unless the user set one of :data:`BLAS_THREAD_VARS`: the fits are small
    (tens of thousands of rows x tens of columns), the twin's simulation and the forked estimation
    (robident_twin.forked) already use the second core, and OpenBLAS's spinning threads then only
    oversubscribe it (a 1400 x 57 QR: 0.3 s CPU with two threads, 0.004 s with one, on 2 cores)."""
    import os

    if any(v in os.environ for v in BLAS_THREAD_VARS):
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def _exit_now() -> None:
    """End the process now, exit code 0, after the console and the log files are flushed
    (``logging.shutdown``: Hydra's job log). The interpreter's own teardown of the libraries a run
    loads (numpy, scipy, MuJoCo, pinocchio, matplotlib, Hydra) writes nothing and takes about 0.4 s."""
    import logging
    import os

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _no_mujoco_rendering() -> None:
    """No task renders with MuJoCo: unless the user chose an OpenGL backend (``MUJOCO_GL``),
    ``import mujoco`` skips its renderer's GLFW lookup (``MUJOCO_GL=disable``, MuJoCo's own
    switch; about 0.05 s of each run's start, more on a loaded machine)."""
    import os

    os.environ.setdefault("MUJOCO_GL", "disable")


def main() -> None:
    argv = sys.argv[1:]
    _refuse_removed_launchers(argv)
    _one_blas_thread()
    _no_mujoco_rendering()
    try:
        app()
    except SystemExit as exc:
        # Hydra exits 1 when it refuses the command line (a key not in the config, an unknown
        # group option, an override that does not parse) before the app starts: bad input
        if exc.code == 1 and not _APP_STARTED:
            sys.exit(2)
        raise
    if _FINISHED in FAST_EXIT_TASKS and not {"-m", "--multirun"} & set(argv):  # one run, not a sweep
        _exit_now()


if __name__ == "__main__":
    main()
