"""The robustness table (issue 15): every estimator against every twin effect on a robot.

    python experiments/robustness/run.py                                   # iiwa 14, 6 columns x 30 runs
    python experiments/robustness/run.py robustness.runs=10 robot=lwr4p   # any config override
    python experiments/robustness/run.py --contrast                        # the closed-loop noise contrast

The same as ``robident-twin task=robustness`` (robident_twin/validation/robustness.py) without the
run directory: prints the table, the best estimator per twin, the wall time and the load average,
and writes ``results.json`` (or ``results_contrast.json``) next to this script.

``--contrast``: the setting where measurement noise in the closed loop matters -- the ``closed_loop``
effect at the default noise with the differentiation band widened to 1500 harmonics (150 Hz) --
with the ideal twin at the same processing as the control column (10 runs, OLS, WLS, iv_ref, ML).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small fits: a threaded BLAS only loses on a loaded machine
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

CONTRAST = ["robustness.effects=[ideal,closed_loop]", "processing.n_harmonics=1500", "robustness.runs=10",
            "robustness.estimators=[ols,wls,iv_ref,ml]"]


def main(argv: list[str]) -> None:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from robident_twin.paths import CONF_DIR
    from robident_twin.validation import robustness as rb

    contrast = "--contrast" in argv
    overrides = [a for a in argv if a != "--contrast"]
    if contrast:
        overrides = CONTRAST + overrides
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        cfg = OmegaConf.to_container(compose("config", overrides=overrides), resolve=True)
    table = rb.run_table(cfg, progress=False)
    print(rb.format_robustness_table(rb.cells_from(table), table["best"]))
    la = table["load_average"]
    print(f"\nwall time {table['wall_s']:.1f} s ({table['wall_s'] / 60:.1f} min) for {len(table['columns'])} columns "
          f"x {table['runs']} runs x {len(table['estimators'])} estimators on {table['robot']}; CPU {table['cpu_s']:.1f} s; "
          f"load average "
          f"{la[0]:.1f} {la[1]:.1f} {la[2]:.1f} on {os.cpu_count()} cores")
    for col, t in table["timing"].items():
        print(f"  {col:<22} {t['sim_path']:<6} {t['wall_s']:7.1f} s (simulate {t['simulate_s']:.1f} s, "
              f"estimate {t['estimate_s']:.1f} s)")
    out = Path(os.environ.get("ROBUSTNESS_OUT") or HERE / ("results_contrast.json" if contrast else "results.json"))
    out.write_text(json.dumps({"overrides": overrides, **table}, indent=1, default=float))
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
