"""Swevers 1997 Section IV / Table II: Monte-Carlo check of the maximum-likelihood (WLS)
estimator of the KUKA IR 361 axes 1-3 for the c1 (condition number) and c2 (log det of the
covariance) excitation designs.

Setting (paper): five-term Fourier series at 0.1 Hz, 150 Hz sampling, 1500 samples (one
period), zero-mean Gaussian actuator-torque noise of variances 25, 26 and 10 N^2 m^2,
200 runs, noise only on the torques and the regressor from the designed trajectory
(exact mode of robident_twin.validation.montecarlo: the CRLB (W' Sigma^-1 W)^-1 is then exact).

    python experiments/swevers1997_montecarlo/run.py                 # the paper's 21-parameter model
    python experiments/swevers1997_montecarlo/run.py --model twin    # our twin's model (spring, Ia3, offsets)
    python experiments/swevers1997_montecarlo/run.py --model twin --runs 50 --redesign

--model paper (default): the paper's 21-parameter model and its c1/c2 designs of
experiments/swevers1997_design/paper_model.py (designs/kuka_ir361_paper21_c1.yaml, _c2.yaml).
--model twin: the twin's full motor-torque model; its designs are optimised once
(robident_twin.design.optimise.optimise_design, criteria 'cond' and 'dopt') and cached next to
this script in designs/<robot>_c1.yaml, _c2.yaml.
Prints a table in the form of Table II per design, the paper's two summary figures beside
ours, the false-alarm-controlled tests (alpha = 1 %) and the determinants of both designs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from robident_twin.validation import montecarlo as mc  # noqa: E402
from robident_twin.design.criteria import design_criterion  # noqa: E402
from robident_twin.design.fourier import load_design, save_design  # noqa: E402
from robident_twin.design.optimise import optimise_design  # noqa: E402
from robident_twin.model.build import build_model  # noqa: E402
from robident_twin.model.regressor import ModelOptions  # noqa: E402
from robident_twin.model.robot import load_robot  # noqa: E402

PAPER = {"share_means_in_68": 16 / 21, "share_ratios_in_chi2_90": 19 / 21, "n_params": 21,
         "cond_c1": 4.15, "cond_c2": 5.94}
NOISE_VAR_Nm2 = np.array([25.0, 26.0, 10.0])
RATE_HZ, BASE_FREQ_HZ, HARMONICS = 150.0, 0.1, 5


def paper_setting():
    """(spec, model, {label: design path}) of the paper's 21-parameter model."""
    import importlib.util

    src = HERE.parent / "swevers1997_design" / "paper_model.py"
    sp = importlib.util.spec_from_file_location("swevers_paper_model", src)
    pm = importlib.util.module_from_spec(sp)
    sp.loader.exec_module(pm)
    spec, model = pm.paper_model()
    return spec, model, {k: pm.HERE / "designs" / f"kuka_ir361_paper21_{k}.yaml" for k in ("c1", "c2")}


def design(spec, model, criterion: str, starts: int, seed: int, redesign: bool):
    path = HERE / "designs" / f"{spec.name}_{'c1' if criterion == 'cond' else 'c2'}.yaml"
    if path.is_file() and not redesign:
        return load_design(path), path
    t0 = time.perf_counter()
    res = optimise_design(spec, model.regressor, model.base, criterion=criterion, n_harmonics=HARMONICS,
                          base_freq_hz=BASE_FREQ_HZ, n_starts=starts, seed=seed,
                          noise_std=np.sqrt(NOISE_VAR_Nm2[:spec.n_joints]))
    path.parent.mkdir(exist_ok=True)
    save_design(res.trajectory, path, {"robot": spec.name, "criterion": criterion, "seed": seed,
                                       "starts": starts, "design_time_s": round(time.perf_counter() - t0, 1)})
    return load_design(path), path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robot", default="kuka_ir361")
    ap.add_argument("--model", default="paper", choices=("paper", "twin"),
                    help="paper: the paper's 21 parameters (IR 361 only); twin: the robot file's full model")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1997)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--redesign", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results.json"))
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    paper_designs = None
    if args.model == "paper":
        if args.robot != "kuka_ir361":
            ap.error("--model paper is the IR 361's (Swevers 1997); use --model twin for other robots")
        spec, model, paper_designs = paper_setting()
        measurement = "motor_torque"
    else:
        spec = load_robot(args.robot)
        measurement = "joint_torque" if spec.has_joint_torque_sensors else "motor_torque"
        model = build_model(spec, ModelOptions(measurement=measurement))
    std = np.sqrt(NOISE_VAR_Nm2[:spec.n_joints]) if spec.n_joints == 3 else \
        (spec.tau_joint_std_Nm if measurement == "joint_torque" else spec.tau_motor_std_Nm)
    print(f"{spec.name}: {model.base.n_base} base parameters ({measurement}), torque noise variances "
          f"{np.round(std**2, 3).tolist()} N^2 m^2, {int(RATE_HZ / BASE_FREQ_HZ)} samples at {RATE_HZ:g} Hz, "
          f"{args.runs} runs\n")
    out = {}
    for label, criterion in (("c1", "cond"), ("c2", "dopt")):
        if paper_designs is not None:
            traj, path = load_design(paper_designs[label]), paper_designs[label]
        else:
            traj, path = design(spec, model, criterion, args.starts, args.seed, args.redesign)
        res = mc.run_exact(model, traj, RATE_HZ, std, args.runs, args.seed, "wls", progress=True)
        s = mc.summarise(res)
        t = mc.consistency_tests(res, alpha=0.01)
        cond_c1 = design_criterion(traj, model.regressor, model.base, "cond", std, int(RATE_HZ / BASE_FREQ_HZ))
        print(f"=== design {label} ({criterion}, {path.name}): cond of the noise-scaled column-normalised "
              f"regressor (Swevers c1) {cond_c1:.2f} (paper {PAPER['cond_' + label]}); without the noise "
              f"scaling {res.meta['cond']:.2f}")
        print(mc.format_table(s, t))
        o = s["overall"]
        print(f"{'':>4}{'':<36}{'paper':>8}{'ours':>8}")
        print(f"{'':>4}{'means inside their 68 % interval':<36}{100 * PAPER['share_means_in_68']:>7.0f}%"
              f"{100 * o['share_means_in_68']:>7.0f}%")
        print(f"{'':>4}{'variance ratios inside chi2 90 %':<36}{100 * PAPER['share_ratios_in_chi2_90']:>7.0f}%"
              f"{100 * o['share_ratios_in_chi2_90']:>7.0f}%")
        print(f"{'':>4}{'parameters':<36}{PAPER['n_params']:>8}{o['n_params']:>8}\n")
        out[label] = {"design": str(path.relative_to(HERE.parent.parent)), "model": args.model,
                      "names": list(model.base.names), "cond_swevers_c1": cond_c1,
                      "cond_unscaled": res.meta["cond"], "overall": o,
                      "tests": {"passed": t.passed, "mean_statistic": t.mean_statistic,
                                "mean_threshold": t.mean_threshold, "ratio_interval": t.ratio_interval,
                                "ratios_outside": list(t.ratios_outside)},
                      "parameters": s["parameters"]}
    d1, d2 = out["c1"]["overall"]["log10_det_crlb"], out["c2"]["overall"]["log10_det_crlb"]
    print(f"log10 det(CRLB): c1 {d1:.3f}, c2 {d2:.3f} -> c2 {'smaller' if d2 < d1 else 'NOT smaller'} "
          f"(paper: c2 smaller; cond c1 {PAPER['cond_c1']}, c2 {PAPER['cond_c2']})")
    tmp = Path(args.out).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=1, default=float))
    os.replace(tmp, args.out)
    ok = out["c1"]["tests"]["passed"] and out["c2"]["tests"]["passed"] and d2 < d1
    print(f"\nall tests passed: {ok}; results in {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
