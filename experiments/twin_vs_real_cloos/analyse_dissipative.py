"""The CLOOS twin's total friction per axis over the speeds of Trajectory A (issue #15, item 4).

Total = the regressor's Coulomb + viscous (identified beta) + the extra terms (Stribeck, quadratic
viscous, load-dependent Coulomb at zero load), with the twin's sign smoothing. Prints, for the
committed calibration YAML (or ``--yaml``) and for a fresh ``twin_vs_real.calibrate`` (its fit is
constrained to dissipate, ``validation.friction_fit``), the minimum of f(v) over v > 0 and the
speeds where it is negative. With ``--standstill OLD.yaml``: the process-2 replay (J4 stands still;
the real J4 holds within 0.06 mdeg, deg_e) on OLD and on ``--yaml``, tracking RMS per joint.
Usage: python experiments/twin_vs_real_cloos/analyse_dissipative.py [--yaml Y] [--standstill OLD]
"""
import argparse

import numpy as np

from robident_twin.datasets.cloos_model import build_model
from robident_twin.validation import friction_fit as dfit
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.cloos_calibration import load_calibration


def show(name, cal, model, dqm):
    tw = tv.CloosTwin(cal, model)
    fx = cal.effects
    print(f"{name}:")
    print("  axis  Fc[Nm]  Stribeck[Nm]  visc2  load    min f(v)[Nm] at v[rad/s]   negative over v [rad/s]")
    for j in range(6):
        v = dfit.speed_grid_rad_s(np.max(np.abs(dqm[:, j])))
        f = dfit.total_friction_Nm(v, tw.fc[j], tw.fv[j], fx.stribeck_Nm[j], fx.stribeck_vel_rad_s,
                                   fx.visc2_Nms2_rad2[j], fx.load_coulomb[j], tw.eps)
        neg = v[f < 0]
        where = f"{neg.min():.2g}-{neg.max():.2g}" if neg.size else "none"
        print(f"  {j + 1}   {tw.fc[j]:7.2f}  {fx.stribeck_Nm[j]:9.2f}  {fx.visc2_Nms2_rad2[j]:7.3f}"
              f"  {fx.load_coulomb[j]:8.5f}  {f.min():8.2f} at {v[np.argmin(f)]:.3g}   {where}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--yaml", default="sim_assets/cloos_qrc350/twin_calibrated.yaml")
    ap.add_argument("--no-fit", action="store_true", help="only the YAML")
    ap.add_argument("--standstill", default=None, help="an older calibration YAML to compare the process-2 replay with")
    a = ap.parse_args(argv)
    model = build_model(symmetric=True)
    real, recs = tv.real_statistics(None, model)
    d = recs["A"].data
    dqm = d.dq_rad_s @ np.linalg.inv(np.asarray(model[0].spec.coupling)).T
    show(a.yaml, load_calibration(a.yaml), model, dqm)
    if not a.no_fit:
        show("twin_vs_real.calibrate (constrained fit, open loop)", tv.calibrate(real, recs["A"], model, dissipative=True), model, dqm)
    if a.standstill:
        d2 = recs["process2_validation"].data
        for path in (a.standstill, a.yaml):
            run = tv.CloosTwin(load_calibration(path), model).replay(d2, 1, 0, averaged=False)
            e4 = run.tracking_error_rad[:, 3]
            print(f"process 2 on {path}: tracking RMS [mdeg] "
                  + " ".join(f"{x:.2f}" for x in 1e3 * np.degrees(run.tracking_rms_rad))
                  + f"; J4 (standing still) peak-to-peak {1e3 * np.degrees(np.ptp(e4)):.2f} mdeg")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
