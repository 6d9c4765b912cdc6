"""How far a twin's run moves under rounding: the compiled passive forces against numpy's, and
numpy's against itself with one rotor's start position moved by 1 ulp (README "Compiled passive
forces").

    python benchmarks/rounding_sensitivity.py [--robot cloos_qrc350] [--seconds 12]

One realistic-twin run of the robot's stored excitation (no sensor noise, seed 0) three times:
compiled (``ROBIDENT_NATIVE=1``), numpy (``ROBIDENT_NATIVE=0``) and numpy with rotor 2's start
position moved to the next float. Printed: the largest motor-torque difference to the numpy run
over the first 1 %, 10 %, 25 %, 50 % and 100 % of the run, and the RMS difference per joint.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robot", default="cloos_qrc350")
    ap.add_argument("--seconds", type=float, default=12.0)
    args = ap.parse_args()
    from hal.factory import make_robot
    from hal.sim import effects as fx
    from robident_twin.design.stored import reference, resolve_design
    from robident_twin.model.robot import load_robot
    from robident_twin.paths import CONF_DIR
    from robident_twin.validation.control import truncated

    spec = load_robot(args.robot)
    ref = truncated(reference(resolve_design(str(CONF_DIR / "excitation" / f"{args.robot}_default.yaml"), spec),
                              1000.0), args.seconds)
    runs = {}
    for key, flag, moved in (("compiled", "1", False), ("numpy", "0", False), ("numpy, 1 ulp moved", "0", True)):
        os.environ["ROBIDENT_NATIVE"] = flag
        robot = make_robot(spec, {"name": "mujoco"}, {"enabled": False}, seed=0,
                           twin_cfg={"name": "realistic", "effects": list(fx.EFFECTS)})
        if moved:
            k = spec.n_joints + 1 if robot.elastic else 1
            robot.data.qpos[k] = np.nextafter(robot.data.qpos[k], np.inf)
        runs[key] = robot.run(ref, periods=1).tau_motor_Nm
    base = runs["numpy"]
    print(f"{args.robot}, {base.shape[0]} samples; RMS motor torque per joint {np.sqrt(np.mean(base ** 2, 0)).round(1)} Nm")
    for key in ("compiled", "numpy, 1 ulp moved"):
        diff = np.abs(runs[key] - base)
        upto = [diff[:max(1, int(f * len(diff)))].max() for f in (0.01, 0.1, 0.25, 0.5, 1.0)]
        print(f"{key:>20}: max |difference| over the first 1/10/25/50/100 %: "
              + " ".join(f"{u:.2e}" for u in upto) + f" Nm; RMS per joint {np.sqrt(np.mean(diff ** 2, 0)).round(3)} Nm")


if __name__ == "__main__":
    main()
