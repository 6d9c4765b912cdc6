"""Is the real CLOOS wrist residual a torque of the wrist's pose (the torch's hose package)? (issue 15)

The twin misses the residual RMS on J5/J6 and the residual autocorrelation at 100 ms on J3/J4/J6:
the real residual of the Trajectory A fit keeps slow components (below 2.5 Hz: 19 / 13 / 31 % of
the J4 / J5 / J6 energy) that the twin does not make. The hypothesis tested here: the dress pack
(cables, gas and wire hoses to the torch) bends and twists with the wrist, so its torque is a
smooth function of the wrist positions (q4, q5, q6, partly q3), missing from the rigid-body model.

Per joint J3-J6 and per candidate basis, the real Trajectory A residual (measured torque - the
authors' 35-parameter WLS model) is fitted by least squares (a constant added) and the fit is
judged by:

* the share of A's residual energy it explains, against two controls with the same number of
  columns: the same basis of the states shifted by half a period (same spectra, no physical
  link to the torque) and random smooth periodic signals below 2 Hz (5 draws, mean);
* cross-validation: the coefficients fitted on A applied to Trajectory C and the two process
  validation files (RMS of the prediction error with / without the term; < 1 = it transfers);
* the residual autocorrelation at 100 ms on A and C before and after removing the fitted term
  (does the term carry the slow, positively correlated part?).

The next candidates (friction the regressor lacks that varies slowly: position-dependent
Coulomb/viscous friction, presliding (Dahl) friction, a low-passed friction state, load-dependent
Coulomb friction) go through the same test.

    OMP_NUM_THREADS=1 python experiments/twin_vs_real_cloos/analyse_wrist.py [--root DIR]

(about 10 s). The last block checks the test's power: a pose torque of the size that would close
the twin's J5/J6 residual gap, added to the real residual, is found (share well above the controls,
C error down).
"""
from __future__ import annotations

import argparse

import numpy as np

from robident_twin.validation.residual_candidates import JOINTS, SETS, candidates, evaluate, load, with_pose_torque


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=None)
    a = ap.parse_args(argv)
    data = load(a.root)
    row = lambda x, p=3: " ".join(f"{v:6.{p}f}" for v in x)
    r = data["A"]["r"]
    f = np.fft.rfftfreq(len(r), 1.0 / data["A"]["fs"])
    P = np.abs(np.fft.rfft(r - r.mean(0), axis=0)) ** 2
    print("joints                                      J3     J4     J5     J6")
    print("real residual RMS on A [Nm]             " + row(np.sqrt(np.mean(r ** 2, 0))[list(JOINTS)], 2))
    print("energy share below 2.5 Hz on A          " + row((P[f < 2.5].sum(0) / P.sum(0))[list(JOINTS)]))
    for name, basis in candidates().items():
        e = evaluate(data, basis)
        print(f"\n{name} ({e['columns']} columns + constant per joint)")
        print("  share of A's residual explained       " + row(e["share"]))
        print("  control: same basis, states shifted   " + row(e["shifted"]))
        print("  control: random smooth (< 2 Hz), mean " + row(e["random"]))
        for n in SETS[1:]:
            print(f"  {'RMS ratio with/without on ' + n:38s}" + row(e["transfer"][n], 2))
        print("  ACF 100 ms on A: real / after the fit  " + row(e["acf_A"], 2) + "  /" + row(e["acf_A_after"], 2))
        print("  ACF 100 ms on C: real / after the fit  " + row(e["acf_C"], 2) + "  /" + row(e["acf_C_after"], 2))
    # the test's power: a synthetic pose torque added to every file's residual (the size that would
    # close the twin's J5/J6 residual gap is about 0.34-0.41 x the real residual RMS)
    pose = candidates()["pose q4-q6, order 1"]
    for frac in (0.2, 0.4):
        e = evaluate(with_pose_torque(data, frac), pose)
        print(f"\nsynthetic pose torque of RMS {frac} x the residual's added, pose q4-q6 order 1:")
        print("  share of A's residual explained       " + row(e["share"]))
        print("  control: same basis, states shifted   " + row(e["shifted"]))
        print("  control: random smooth (< 2 Hz), mean " + row(e["random"]))
        print(f"  {'RMS ratio with/without on C':38s}" + row(e["transfer"]["C"], 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
