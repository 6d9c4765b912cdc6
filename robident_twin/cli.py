"""``robident-twin``: the Hydra application.

    robident-twin                                  # identify the default robot on its twin
    robident-twin estimator=ols noise=none         # noise-free OLS
    robident-twin noise.torque_std_Nm=0.5 seed=3   # any key can be overridden
    robident-twin task=design design.install=true  # re-optimise the stored excitation

Outputs go to Hydra's run directory (``outputs/<date>/<time>/`` by default):
``summary.json``, ``validation_torques.png``, ``parameters.png`` and the raw
recordings. Bad input ends with a message naming what and where, exit code 2,
and a ``FAILED.txt`` in the run directory instead of a summary.
"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from .errors import RobidentError
from .paths import CONF_DIR

TASKS = ("identify", "design", "montecarlo", "aggregate", "dryrun")


def _run_dir() -> Path:
    from hydra.core.hydra_config import HydraConfig

    try:
        return Path(HydraConfig.get().runtime.output_dir)
    except Exception:  # called outside Hydra
        return Path.cwd()


def run_identify(cfg: DictConfig, out: Path) -> dict:
    from .pipeline import channel_names, identify
    from .report import format_table, plot_parameters, plot_validation, write_json

    plain = OmegaConf.to_container(cfg, resolve=True)
    result = identify(plain, out_dir=out)
    summary = result.summary
    summary["config"] = plain
    if cfg.output.plots:
        vd = result.validation_data
        t = 1.0 / vd.sample_rate_hz * __import__("numpy").arange(vd.n_samples)
        plot_validation(t, vd.tau_Nm, result.tau_val_pred_Nm, channel_names(result.model.spec, result.model.regressor.options.measurement),
                        out / "validation_torques.png")
        plot_parameters(summary, out / "parameters.png")
    write_json(summary, out / "summary.json")
    print(format_table(summary))
    print(f"\nresults in {out}")
    return summary


def run_design(cfg: DictConfig, out: Path) -> Path:
    from .excitation import optimise_condition, save_design
    from .pipeline import build_model, model_options, resolve_robot

    spec = resolve_robot(cfg.robot)
    model = build_model(spec, model_options(OmegaConf.to_container(cfg.model), OmegaConf.to_container(cfg.robot)),
                        int(cfg.base.n_samples), int(cfg.base.seed))
    d = cfg.design
    res = optimise_condition(spec, model.regressor, model.base, n_harmonics=int(d.harmonics),
                             base_freq_hz=float(d.base_freq_hz), n_starts=int(d.starts), seed=int(d.seed))
    meta = {"robot": spec.name, "cond": float(res.cond), "criterion": "cond", "seed": int(d.seed),
            "harmonics": int(d.harmonics)}
    path = out / Path(cfg.robot.excitation).name
    save_design(res.trajectory, path, meta)
    print(f"design: cond {res.cond:.2f} after {res.time_s:.1f} s, written to {path}")
    if d.install:
        target = CONF_DIR / cfg.robot.excitation
        save_design(res.trajectory, target, meta)
        print(f"installed as {target}")
    return path


@hydra.main(version_base=None, config_path=str(CONF_DIR), config_name="config")
def app(cfg: DictConfig) -> None:
    out = _run_dir()
    try:
        if cfg.task == "identify":
            run_identify(cfg, out)
        elif cfg.task == "design":
            run_design(cfg, out)
        elif cfg.task == "montecarlo":
            from .sweeps import run_job
            run_job(OmegaConf.to_container(cfg, resolve=True), out)
        elif cfg.task == "aggregate":
            from .sweeps import aggregate
            aggregate(Path(cfg.montecarlo.sweep_dir or out), None, plots=bool(cfg.output.plots))
        elif cfg.task == "dryrun":
            from .dryrun import run_dryrun_task
            run_dryrun_task(cfg, out)
        else:
            raise RobidentError(f"task: unknown task '{cfg.task}'; expected one of {', '.join(TASKS)}")
    except RobidentError as exc:
        (out / "FAILED.txt").write_text(f"{type(exc).__name__}: {exc}\n")
        print(f"robident-twin: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Exception:  # an unexpected failure: keep the traceback next to the outputs
        (out / "FAILED.txt").write_text(traceback.format_exc())
        raise


def main() -> None:
    app()


if __name__ == "__main__":
    main()
