"""ICMA 2020 Sec. IV-C: model-based feed-forward control of the CLOOS QRC 350 (Table VII).

1. Table VII from the authors' control-error files (RMS of ``deg_e`` per joint, without a model,
   with models A and B and with the process model; process 1 and 2) beside the paper's numbers.
2. The same comparison on the CLOOS twin: identification on the twin (``task=identify`` settings),
   then the twin's controller (P position / PI velocity loop + torque feed-forward, Fig. 3) along
   the validation trajectory with no model, the CAD-like nominal model and the identified model;
   the twin's improvement ratio beside the real one.

    OMP_NUM_THREADS=1 python experiments/icma2020_control/run.py [--root DIR] [--friction nominal|stribeck]
        [--duration-s S] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def real_tables(root) -> dict:
    from robident_twin.datasets import cloos_control as cc

    out = {}
    for p in cc.PROCESSES:
        rms = cc.rms_table_deg(p, root)
        paper = cc.PAPER_TABLE_VII_DEG if p == 1 else None  # the paper prints process 1 only
        print(f"\nTable VII, process {p}: RMS reference error (deg) from the files" + (" | the paper's" if paper else ""))
        print(cc.format_table_vii(rms, paper))
        out[f"process{p}"] = {m: v.tolist() for m, v in rms.items()}
        if paper:
            same = all(np.round(rms[m], 4).tolist() == list(paper[m]) for m in paper)
            print(f"equal to the paper's printed digits: {same}")
            out["process1_equals_paper"] = same
    return out


def twin_comparison(friction: str, duration_s: float | None, out_dir: Path) -> dict:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from robident_twin.control_task import run_control
    from robident_twin.paths import CONF_DIR
    from robident_twin.validation.control import format_control_table

    overrides = ["robot=cloos_qrc350", f"friction={friction}", "output.plots=false", "output.report=false",
                 "acquisition.save_recordings=false", "control.trajectory=validation",
                 f"control.duration_s={'null' if duration_s is None else duration_s}"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=overrides)
    plain = OmegaConf.to_container(cfg, resolve=True)
    res = run_control(plain, out_dir)  # identifies on the twin first (control.identified: both null)
    print(f"\nCLOOS twin ({friction} friction): RMS reference error (deg), identified on the twin")
    print(format_control_table(res))
    return res


def main(argv=None) -> dict:
    from robident_twin.datasets import cloos_control as cc

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=None, help="dataset folder (default: $ROBIDENT_CLOOS_DATA or the shared folder)")
    ap.add_argument("--friction", default="nominal", choices=["nominal", "stribeck", "asymmetric"])
    ap.add_argument("--duration-s", type=float, default=None, help="play only the first S seconds (default: a period)")
    ap.add_argument("--out", default=None, help="write results.json here (default: this folder)")
    a = ap.parse_args(argv)
    real = real_tables(a.root)
    with tempfile.TemporaryDirectory() as d:
        twin = twin_comparison(a.friction, a.duration_s, Path(d))
    real_ratio = {m: float(np.mean(np.array(real["process1"][m]) / np.array(real["process1"]["none"])))
                  for m in cc.MODELS if m != "none"}
    twin_ratio = {k: v["mean_ratio_to_none"] for k, v in twin["feedforward"].items() if k != "none"}
    print("\nmean RMS ratio to no model: real CLOOS (process 1) "
          + ", ".join(f"{k} {v:.3f}" for k, v in real_ratio.items())
          + " | twin " + ", ".join(f"{k} {v:.3f}" for k, v in twin_ratio.items()))
    result = {"real": real, "real_mean_ratio": real_ratio, "twin": twin, "twin_mean_ratio": twin_ratio}
    out = Path(a.out) if a.out else HERE
    path = out / f"results_{a.friction}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"\nwritten {path}")
    return result


if __name__ == "__main__":
    main()
