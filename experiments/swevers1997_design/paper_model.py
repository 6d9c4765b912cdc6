"""Swevers 1997 Section IV-B on the paper's own parameterisation: the 21-parameter model of the
KUKA IR 361 axes 1-3 (15 rigid-body base parameters + viscous and Coulomb friction per axis; no
gravity-compensation spring, no drive-inertia column Ia3, no torque offsets: those enter only
the paper's experiments of Section V), rows scaled by 1/noise std (variances 25, 26, 10 N^2 m^2),
columns normalised, five harmonics at 0.1 Hz, 1500 samples at 150 Hz, the joint, velocity,
acceleration, torque and Cartesian constraints (z >= 0.8 m, r >= 0.7 m; our reading of the
garbled numbers).

    python experiments/swevers1997_design/paper_model.py              # evaluate the stored designs
    python experiments/swevers1997_design/paper_model.py --redesign   # re-optimise them (~4 min)

c1 minimises the condition number (2 starts, 150 SLSQP iterations); c2 minimises log det of the
covariance (4 starts, 600 iterations, and the c1 design as an extra start).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from robident_twin.design.constraints import DesignConstraints, check_design  # noqa: E402
from robident_twin.design.criteria import covariance_log10_det, design_criterion  # noqa: E402
from robident_twin.design.fourier import load_design, save_design  # noqa: E402
from robident_twin.design.geometry import CartesianBounds  # noqa: E402
from robident_twin.design.optimise import optimise_design  # noqa: E402
from robident_twin.model.build import build_model  # noqa: E402
from robident_twin.model.regressor import ModelOptions  # noqa: E402
from robident_twin.model.robot import load_robot  # noqa: E402

PAPER = {"c1": 4.15, "c2": 5.94, "n_params": 21}
NOISE_STD_Nm = np.sqrt([25.0, 26.0, 10.0])
N_PERIOD = 1500


def paper_model():
    """(spec without the spring, model) with the paper's 21 base parameters."""
    spec = load_robot("kuka_ir361")
    spec = dataclasses.replace(spec, joints=tuple(dataclasses.replace(j, spring=None) for j in spec.joints), _cache={})
    return spec, build_model(spec, ModelOptions(measurement="motor_torque", drive_inertia=False, offsets=False))


def constraints() -> DesignConstraints:
    return DesignConstraints(cartesian=CartesianBounds(z_min_m=0.8, r_min_m=0.7), torque=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--redesign", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    spec, model = paper_model()
    reg, base = model.regressor, model.base
    c = constraints()
    paths = {k: HERE / "designs" / f"kuka_ir361_paper21_{k}.yaml" for k in ("c1", "c2")}
    if args.redesign:
        r1 = optimise_design(spec, reg, base, "cond", c, n_harmonics=5, base_freq_hz=0.1, n_starts=2, seed=0,
                             maxiter=150, noise_std=NOISE_STD_Nm)
        r2 = optimise_design(spec, reg, base, "dopt", c, n_harmonics=5, base_freq_hz=0.1, n_starts=4, seed=1,
                             maxiter=600, noise_std=NOISE_STD_Nm, initial=r1.trajectory)
        for k, r in (("c1", r1), ("c2", r2)):
            save_design(r.trajectory, paths[k], {"robot": spec.name, "model": "paper 21 parameters", "criterion": k})
    print(f"{spec.name}: {base.n_base} base parameters (paper {PAPER['n_params']}): {', '.join(base.names)}")
    out = {"names": list(base.names)}
    for k in ("c1", "c2"):
        tr = load_design(paths[k])
        cond = design_criterion(tr, reg, base, "cond", NOISE_STD_Nm, N_PERIOD)
        det = covariance_log10_det(tr, reg, base, NOISE_STD_Nm, N_PERIOD)
        viol = len(check_design(tr, spec, c))
        out[k] = {"cond": cond, "paper_cond": PAPER[k], "relative_difference": cond / PAPER[k] - 1,
                  "log10_det_covariance": det, "constraint_violations": viol}
        print(f"{k}: cond {cond:.2f} (paper {PAPER[k]}, {100 * (cond / PAPER[k] - 1):+.1f} %), "
              f"log10 det covariance {det:.2f}, constraint violations {viol}")
    (HERE / "results_kuka_ir361_paper21.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
