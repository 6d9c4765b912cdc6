"""Command line of the excitation design::

    python -m robident_twin.design.excitation_cli --robot iiwa14 --out conf/excitation/iiwa14_default.yaml \
        --seed 0 --harmonics 5 --base-freq 0.1 --starts 4
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from robident_twin.design.constraints import DesignConstraints
from robident_twin.design.criteria import CRITERIA
from robident_twin.design.fourier import (
    DEFAULT_N_CONSTRAINT,
    DEFAULT_N_SAMPLES,
    save_design,
)
from robident_twin.design.geometry import CartesianBounds, CollisionSettings
from robident_twin.design.optimise import optimise_design
from robident_twin.design.optimise_cond import CRITERION, optimise_condition
from robident_twin.errors import RobidentError

# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """``python -m robident_twin.design.excitation_cli``: optimise and save a design."""
    p = argparse.ArgumentParser(prog="python -m robident_twin.design.excitation_cli",
                                description="Optimise a Fourier excitation trajectory (min cond of "
                                            "the base regressor) and save it as YAML.")
    p.add_argument("--robot", default="iiwa14", help="robot name or path of its robot.yaml")
    p.add_argument("--out", required=True, type=Path, help="output YAML file")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--harmonics", type=int, default=5)
    p.add_argument("--base-freq", type=float, default=0.1, help="base frequency, Hz")
    p.add_argument("--starts", type=int, default=4)
    p.add_argument("--maxiter", type=int, default=300, help="SLSQP iterations per start")
    p.add_argument("--margin", type=float, default=0.95, help="fraction of the limits used in design")
    p.add_argument("--samples", type=int, default=DEFAULT_N_SAMPLES,
                   help="criterion samples per period")
    p.add_argument("--check-points", type=int, default=DEFAULT_N_CONSTRAINT,
                   help="constraint grid points per period")
    p.add_argument("--measurement", default="joint_torque", choices=("joint_torque", "motor_torque"))
    p.add_argument("--zero-start", action="store_true", help="add dq(0) = ddq(0) = 0")
    p.add_argument("--max-cond", type=float, default=1e4,
                   help="fail when no feasible design reaches this condition number")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--criterion", choices=CRITERIA, default=None,
                   help="optimise_design criterion (cond = Swevers c1 noise-scaled, dopt = c2, eopt, "
                        "goal); default: the unweighted cond of optimise_condition")
    p.add_argument("--method", choices=("slsqp", "de"), default="slsqp")
    p.add_argument("--torque", action="store_true", help="nominal torques within 0.9 x the limits")
    p.add_argument("--z-min", type=float, default=None, help="end-effector height bound, m")
    p.add_argument("--z-max", type=float, default=None)
    p.add_argument("--r-min", type=float, default=None, help="distance from the base axis, m")
    p.add_argument("--collision", action="store_true", help="self-collision (link capsules)")
    p.add_argument("--resonance-hz", type=float, default=None, help="lowest resonance (bandwidth bound)")
    args = p.parse_args(argv)
    try:
        from robident_twin.model.base_params import compute_base_parameters
        from robident_twin.model.regressor import ModelOptions, Regressor
        from robident_twin.model.robot import load_robot

        spec = load_robot(args.robot)
        regressor = Regressor(spec, ModelOptions(measurement=args.measurement))
        base = compute_base_parameters(regressor)
        if args.criterion is not None:
            cart = None
            if any(v is not None for v in (args.z_min, args.z_max, args.r_min)):
                cart = CartesianBounds(z_min_m=args.z_min, z_max_m=args.z_max, r_min_m=args.r_min)
            cons = DesignConstraints(margin=args.margin, zero_start=args.zero_start,
                                     resonance_hz=args.resonance_hz, torque=args.torque, cartesian=cart,
                                     collision=CollisionSettings() if args.collision else None,
                                     n_check=args.check_points)
            result = optimise_design(spec, regressor, base, args.criterion, cons,
                                     n_harmonics=args.harmonics, base_freq_hz=args.base_freq,
                                     n_starts=args.starts, seed=args.seed, method=args.method,
                                     n_samples=args.samples, maxiter=args.maxiter, max_cond=args.max_cond,
                                     progress=not args.no_progress)
            save_design(result.trajectory, args.out, {"measurement": args.measurement,
                                                      "design_time_s": round(result.time_s, 2)})
            print(f"saved {args.out}: {args.criterion} design, cond {result.cond:.4g} "
                  f"({base.n_base} base parameters), {result.n_starts} starts in {result.time_s:.1f} s")
            return 0
        result = optimise_condition(
            spec, regressor, base, n_harmonics=args.harmonics, base_freq_hz=args.base_freq,
            n_starts=args.starts, seed=args.seed, n_samples=args.samples, n_check=args.check_points,
            margin=args.margin, maxiter=args.maxiter, zero_start=args.zero_start,
            max_cond=args.max_cond, progress=not args.no_progress)
        meta = {"robot": spec.name, "cond": round(float(result.cond), 6), "criterion": CRITERION,
                "measurement": args.measurement, "n_base": int(base.n_base), "seed": args.seed,
                "harmonics": args.harmonics, "n_starts": args.starts, "margin": args.margin,
                "n_samples": args.samples, "n_check": args.check_points,
                "zero_start": bool(args.zero_start), "design_time_s": round(result.time_s, 2)}
        save_design(result.trajectory, args.out, meta)
    except RobidentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"saved {args.out}: cond {result.cond:.4g} ({base.n_base} base parameters), "
          f"{args.starts} starts in {result.time_s:.1f} s")
    for h in result.history:
        print(f"  start {h['start']}: cond {h['cond_start']:.4g} -> {h['cond']:.4g}, "
              f"{'feasible' if h['feasible'] else 'infeasible'}, repair x{h['repair_scale']:.4f}, "
              f"{h['nit']} it, {h['time_s']:.1f} s, {h['message']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
