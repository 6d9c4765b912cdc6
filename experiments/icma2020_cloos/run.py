"""Reproduce the ICMA 2020 CLOOS QRC 350 identification on the authors' real data.

Prints beside the paper's numbers: Table I (models A and B: parameters and relative standard
deviations), Tables II and III (prediction errors on trajectories A, B, C), Tables IV to VI
(process-based reduction: parameters removed, condition numbers, prediction errors).

    python experiments/icma2020_cloos/run.py [--root DATASET_DIR] [--criterion mean_ratio|ratio|difference]

Data: MIT-licensed supplemental material of Volkmann et al., ICMA 2020 (read in place; see
robident_twin/datasets/cloos_icma2020.py for where it is looked for).
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import PAPER_THETA_NAMES, build_model, design_matrix, paper_basis
from robident_twin.estimation.estimators import wls_sample
from robident_twin.estimation.process_reduction import (
    CRITERIA,
    condition_number,
    prediction_errors,
    reduce_model,
)

# --------------------------------------------------------------------------- the paper's numbers
TABLE_I = {  # i: (model A theta, rsd %, model B theta, rsd %)
    1: (19.763, 0.074, 16.174, 0.113), 2: (23.798, 0.096, 28.312, 0.069), 3: (-0.850, 0.980, -1.076, 0.570),
    4: (17.162, 0.075, 12.657, 0.083), 5: (37.957, 0.008, 38.748, 0.008), 6: (11.684, 0.142, 10.435, 0.162),
    7: (0.768, 0.502, 0.973, 0.506), 8: (1.785, 0.463, 2.284, 0.423), 9: (8.666, 0.064, 9.451, 0.061),
    10: (0.266, 1.743, -1.272, 0.452), 11: (5.913, 0.027, 5.537, 0.034), 12: (12.163, 0.010, 12.203, 0.007),
    13: (4.249, 0.176, 5.555, 0.056), 14: (0.108, 0.681, 0.027, 4.308), 15: (0.162, 0.295, -0.002, 23.001),
    16: (-0.058, 0.799, 0.122, 0.396), 17: (0.200, 0.080, 0.224, 0.070), 18: (0.225, 0.092, 0.280, 0.079),
    19: (1.254, 0.007, 1.265, 0.006), 20: (0.074, 0.362, 0.065, 0.377), 21: (0.043, 0.199, 0.027, 0.266),
    22: (0.037, 0.104, 0.036, 0.112), 23: (0.135, 0.034, 0.137, 0.044), 24: (76.809, 0.040, 75.944, 0.028),
    25: (117.258, 0.022, 104.977, 0.021), 26: (47.677, 0.027, 43.214, 0.025), 27: (4.125, 0.025, 3.292, 0.030),
    28: (1.454, 0.061, 1.245, 0.051), 29: (0.834, 0.054, 0.753, 0.043), 30: (62.856, 0.066, 65.058, 0.051),
    31: (36.423, 0.079, 45.561, 0.057), 32: (17.903, 0.078, 16.107, 0.058), 33: (1.039, 0.049, 1.314, 0.040),
    34: (0.434, 0.193, 0.647, 0.099), 35: (0.426, 0.036, 0.538, 0.029),
}
#: Table II (model A) and III (model B): e_j [Nm], e*_j [%] on the identification trajectory and on C.
TABLE_II = {"A": ([23.298, 44.518, 16.607, 1.083, 1.202, 0.282], [15.172, 12.507, 12.699, 12.732, 15.857, 11.850]),
            "C": ([16.974, 49.945, 18.592, 1.149, 1.082, 0.286], [15.218, 13.734, 17.442, 16.312, 14.261, 12.521])}
TABLE_III = {"B": ([21.439, 48.997, 18.451, 1.182, 0.964, 0.208], [15.081, 16.175, 16.852, 19.174, 12.734, 12.561]),
             "C": ([16.846, 50.935, 17.985, 1.209, 1.069, 0.404], [15.104, 14.007, 16.873, 17.169, 14.088, 17.733])}
#: Table IV kept parameters (paper indices) and the reduction summary of Sec. IV-B.
PAPER_REDUCTION = {
    "process1": dict(cond=(61.7, 8.46), removed=15, kept=[2, 5, 8, 11, 12, 17, 19, 22] + list(range(24, 36))),
    "process2": dict(cond=(1632.0, 2.73), removed=19, kept=[1, 5, 9, 12, 15, 19, 22, 24, 25, 26, 28, 29, 30, 31, 32, 35]),
}
#: Table IV: theta_0 (full model) and theta_r (reduced, None = removed) of the 23 rigid-body
#: parameters, per process (the friction rows are printed from TABLE_IV_FRICTION).
TABLE_IV = {
    "process1": ([9.952, 33.558, 1.541, -13.419, 43.786, 2.154, 1.686, 5.073, -1.067, 6.866, 3.132, 12.541, 6.232,
                  -1.156, 2.215, -2.247, 0.233, 0.088, 1.322, 0.126, -0.133, 0.049, 0.039],
                 [None, 45.321, None, None, 43.928, None, None, 1.163, None, None, 3.446, 12.432, None, None, None,
                  None, 0.336, None, 1.323, None, None, 0.072, None]),
    "process2": ([-437.335, 35.387, 3.090, 11.982, 40.110, 443.672, -2.062, -106.802, 2.602, -4.599, 6.693, 11.725,
                  7.899, 1.804, 3.139, -3.576, 0.259, 0.189, 1.334, 0.093, 0.097, 0.084, 0.040],
                 [48.044, None, None, None, 43.342, None, None, None, 14.090, None, None, 14.315, None, None, 2.998,
                  None, None, None, 1.326, None, None, 0.111, None]),
}
TABLE_IV_FRICTION = {
    "process1": ([82.388, 124.553, 47.021, 4.360, 1.151, 0.664, 73.001, 90.762, 45.309, 2.007, 1.072, 1.748],
                 [82.415, 124.452, 47.102, 4.325, 1.150, 0.665, 72.674, 87.536, 45.794, 1.973, 1.140, 1.749]),
    "process2": ([67.167, 92.337, 47.073, 4.364, 0.849, 0.718, 128.156, 84.485, 27.302, -4340.924, 3.247, 1.183],
                 [66.071, 94.886, 47.594, None, 0.945, 0.719, 132.694, 79.244, 26.225, None, None, 1.181]),
}
#: Table V (process models on their process) and VI (model A on the processes): e_j [Nm], e*_j [%].
TABLE_V = {"process1": ([21.563, 25.332, 9.423, 2.037, 0.384, 0.239], [23.231, 8.919, 7.134, 31.543, 12.336, 31.973]),
           "process2": ([17.937, 30.617, 15.359, 0.892, 0.464, 0.213], [22.569, 14.605, 12.422, 102.439, 52.539, 27.173])}
TABLE_VI = {"process1": ([23.164, 33.788, 11.215, 2.295, 0.452, 0.327], [24.955, 11.897, 8.490, 35.531, 14.522, 43.626]),
            "process2": ([19.000, 35.443, 16.642, 0.994, 0.640, 0.221], [23.908, 16.907, 13.459, 114.172, 72.497, 28.249])}

#: Our base parameter (symmetric model) -> (paper index, sign) where the definitions coincide
#: (checked: identical estimates on trajectory A). The paper's 1, 2, 4, 6, 8, 9 are other linear
#: combinations of the same standard parameters as our ZZ1R, XX2R, ZZ2R, XX3R, XY3R, ZZ3R.
PAPER_INDEX = {"XZ2R": (3, -1.0), "MX2R": (5, 1.0), "XZ3": (7, 1.0), "YZ3": (10, 1.0), "MX3R": (11, 1.0),
               "MY3R": (12, 1.0), "Ia3": (13, 1.0), "XX4R": (14, 1.0), "ZZ4R": (15, 1.0), "Ia4": (16, 1.0),
               "XX5R": (17, 1.0), "ZZ5R": (18, 1.0), "MY5R": (19, 1.0), "Ia5": (20, 1.0), "XX6R": (21, 1.0),
               "ZZ6": (22, 1.0), "Ia6": (23, 1.0)}
PAPER_INDEX.update({f"Fcm{j}": (23 + j, 1.0) for j in range(1, 7)})
PAPER_INDEX.update({f"Fvm{j}": (29 + j, 1.0) for j in range(1, 7)})
UNMAPPED = {"ZZ1R": 1, "XX2R": 2, "ZZ2R": 4, "XX3R": 6, "XY3R": 8, "ZZ3R": 9}


def fmt(v, w=8, p=3):
    return f"{v:{w}.{p}f}" if v is not None and np.isfinite(v) else " " * (w - 1) + "-"


def identify(reg, base, name, root):
    rec = ds.load(name, root)
    W = design_matrix(reg, base, rec.data)
    est = wls_sample(W, rec.data.tau_Nm, base.names, rec.data.tau_var_sample_Nm2)
    return rec, W, est


def errors_on(reg, base, beta, name, root, cols=None, T_inv=None):
    rec = ds.load(name, root)
    W = design_matrix(reg, base, rec.data)
    if T_inv is not None:  # the paper's basis
        W = W @ T_inv
    if cols is not None:
        W = W[:, cols]
    e, er = prediction_errors(rec.data.tau_Nm, (W @ beta).reshape(rec.data.tau_Nm.shape))
    return e, 100 * er


def print_errors(title, rows):
    print(f"\n{title}")
    print("joint | " + " | ".join(f"{lab:^35s}" for lab, *_ in rows))
    print("      | " + " | ".join("  e ours   e paper | e* ours  e* paper" for _ in rows))
    for j in range(6):
        cells = []
        for _, e, er, pe, per in rows:
            cells.append(f"{fmt(e[j])} {fmt(pe[j] if pe else None)} | {fmt(er[j], 7, 2)} {fmt(per[j] if per else None, 7, 2)}")
        print(f"  {j + 1}   | " + " | ".join(cells))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=None, help="dataset folder (default: $ROBIDENT_CLOOS_DATA or the shared folder)")
    ap.add_argument("--criterion", default="mean_ratio", choices=CRITERIA,
                    help="reading of line 10 of Algorithm 1 (see robident_twin.estimation.process_reduction)")
    ap.add_argument("--e-tol", type=float, default=0.05)
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    root = args.root
    print(f"dataset: {ds.data_root(root)} (MIT licence, Volkmann et al. ICMA 2020)")

    reg_s, base_s = build_model(symmetric=True)
    reg_f, base_f = build_model(symmetric=False)
    print(f"\nbase parameters: paper 23 rigid-body + 12 friction = 35; ours with the paper's link "
          f"symmetries {base_s.n_base - 12} + 12 = {base_s.n_base}; ours without symmetry assumptions "
          f"{base_f.n_base - 12} + 12 = {base_f.n_base}")

    # ---------------- Table I
    fits = {m: identify(reg_s, base_s, m, root) for m in "AB"}
    print("\nTable I: WLS estimates (per-sample weights 1/variance), model A (traj. A) and B (traj. B)")
    print(f"{'ours':>6s} {'i':>3s} | {'A ours':>9s} {'A paper':>9s} {'rsd%':>7s} {'paper':>7s} | "
          f"{'B ours':>9s} {'B paper':>9s} {'rsd%':>7s} {'paper':>7s}")
    for k, nm in enumerate(base_s.names):
        i, sgn = PAPER_INDEX.get(nm, (UNMAPPED.get(nm), 1.0))
        pa = TABLE_I.get(i, (None,) * 4)
        cells = []
        for m, (pv, pr) in zip("AB", ((pa[0], pa[1]), (pa[2], pa[3]))):
            est = fits[m][2]
            cells.append(f"{fmt(sgn * est.beta[k], 9)} {fmt(pv, 9)} {fmt(est.rsd_percent[k], 7)} {fmt(pr, 7)}")
        tag = "" if nm in PAPER_INDEX else "  (other definition)"
        print(f"{nm:>6s} {i if i else '-':>3} | {cells[0]} | {cells[1]}{tag}")
    for m in "AB":
        W = fits[m][1]
        print(f"cond(column-normalised design matrix) traj. {m}: {condition_number(W):.2f} "
              f"(paper {'6.76' if m == 'A' else '7.71'})")

    # ---------------- Tables II, III
    for m, table, tit in (("A", TABLE_II, "Table II: prediction errors of model A"),
                          ("B", TABLE_III, "Table III: prediction errors of model B")):
        beta = fits[m][2].beta
        rows = []
        for t in (m, "C"):
            e, er = errors_on(reg_s, base_s, beta, t, root)
            rows.append((f"trajectory {t}", e, er, table[t][0], table[t][1]))
        print_errors(tit + " (symmetric 35-parameter model)", rows)
    recA_f = identify(reg_f, base_f, "A", root)
    rows = []
    for t in ("A", "C"):
        e, er = errors_on(reg_f, base_f, recA_f[2].beta, t, root)
        rows.append((f"trajectory {t}", e, er, TABLE_II[t][0], TABLE_II[t][1]))
    print_errors(f"Table II with our full {base_f.n_base}-parameter base set (no symmetry assumptions)", rows)

    # ---------------- Tables IV-VI in the paper's basis (Appendix I)
    betaA = fits["A"][2].beta
    T = paper_basis(reg_s, base_s)
    T_inv = np.linalg.inv(T)
    thetaA = T @ betaA
    print(f"\nTables IV-VI in the paper's basis (Appendix I, theta = T beta; model A reproduces Table I to "
          f"{np.max(np.abs(thetaA - [TABLE_I[i][0] for i in range(1, 36)])):.4f}), e_tol {100 * args.e_tol:.0f} %, "
          f"criterion '{args.criterion}'")
    for proc in ("process1", "process2"):
        rec = ds.load(proc, root)
        W = design_matrix(reg_s, base_s, rec.data) @ T_inv
        ess = list(PAPER_THETA_NAMES[23:]) if proc == "process1" else []
        res = reduce_model(W, rec.data.tau_Nm, PAPER_THETA_NAMES, rec.data.tau_var_sample_Nm2, args.e_tol, ess,
                           criterion=args.criterion)
        pr = PAPER_REDUCTION[proc]
        kept = [PAPER_THETA_NAMES.index(k) + 1 for k in res.kept]
        paper_cols = [i - 1 for i in pr["kept"]]
        paper_fit = wls_sample(W[:, paper_cols], rec.data.tau_Nm, [PAPER_THETA_NAMES[i] for i in paper_cols],
                               rec.data.tau_var_sample_Nm2)
        _, e_pk = prediction_errors(rec.data.tau_Nm, rec.data.tau_Nm - paper_fit.residuals_Nm)
        print(f"\n{proc} (essential beforehand: {'all friction' if ess else 'none'})")
        print(f"  cond {res.cond_full:.1f} -> {res.cond_reduced:.2f}   paper {pr['cond'][0]} -> {pr['cond'][1]}   "
              f"removed {len(res.removed)} (paper {pr['removed']})")
        print(f"  kept ours : {kept}\n  kept paper: {pr['kept']}  (the paper's kept set on these data: cond "
              f"{condition_number(W[:, paper_cols]):.2f})")
        print(f"  e*_r / e*_0 per joint: ours {np.round(res.er_rel / res.e0_rel, 3).tolist()} (mean "
              f"{np.mean(res.er_rel / res.e0_rel):.3f}); paper's set {np.round(e_pk / res.e0_rel, 3).tolist()} "
              f"(mean {np.mean(e_pk / res.e0_rel):.3f})")
        print("  Table IV   i  theta0 ours  paper | theta_r ours  paper | paper's set on our data")
        p0 = TABLE_IV[proc][0] + TABLE_IV_FRICTION[proc][0][:6] + TABLE_IV_FRICTION[proc][0][6:]
        pr_ = TABLE_IV[proc][1] + TABLE_IV_FRICTION[proc][1]
        rv = res.reduced_vector()
        pk = dict(zip(pr["kept"], paper_fit.beta))
        for i in range(35):
            nm = PAPER_THETA_NAMES[i]
            print(f"       {i + 1:4d} {fmt(res.full.beta[i], 10)} {fmt(p0[i], 10)} | {fmt(rv[i] if nm in res.kept else None, 10)}"
                  f" {fmt(pr_[i], 10)} | {fmt(pk.get(i + 1), 10)}")
        e, er = errors_on(reg_s, base_s, res.reduced.beta, f"{proc}_validation", root, res.kept_index, T_inv)
        eA, erA = errors_on(reg_s, base_s, betaA, f"{proc}_validation", root)
        print_errors(f"  Tables V / VI on the {proc} validation data (desired q, dq, ddq; measured torque)",
                     [("V: process model", e, er, TABLE_V[proc][0], TABLE_V[proc][1]),
                      ("VI: model A", eA, erA, TABLE_VI[proc][0], TABLE_VI[proc][1])])

    # ---------------- Tables IV-VI in our numerical base set (the reduction depends on the basis)
    for reg, base, label in ((reg_s, base_s, "symmetric 35-parameter model"),
                             (reg_f, base_f, f"full {base_f.n_base}-parameter model")):
        print(f"\nTables IV-VI in our numerical basis: process-based reduction, {label}, e_tol {100 * args.e_tol:.0f} %, "
              f"criterion '{args.criterion}'")
        fric = [n for n in base.names if n.startswith(("Fvm", "Fcm"))]
        betaA_m = betaA if base is base_s else recA_f[2].beta
        for proc, ess in (("process1", fric), ("process2", [])):
            rec = ds.load(proc, root)
            W = design_matrix(reg, base, rec.data)
            res = reduce_model(W, rec.data.tau_Nm, base.names, rec.data.tau_var_sample_Nm2, args.e_tol, ess,
                               criterion=args.criterion)
            pr = PAPER_REDUCTION[proc]
            print(f"\n{proc}: essential beforehand: {'all friction' if ess else 'none'}")
            print(f"  removed {len(res.removed)} of {len(res.names)} (paper {pr['removed']} of 35); "
                  f"unidentifiable {list(res.unidentifiable)}")
            print(f"  cond {res.cond_full:.1f} -> {res.cond_reduced:.2f} (paper {pr['cond'][0]} -> {pr['cond'][1]}); "
                  f"weighted {res.cond_full_weighted:.1f} -> {res.cond_reduced_weighted:.2f}")
            print(f"  kept: {' '.join(res.kept)}")
            if base is base_s:
                mapped = sorted(PAPER_INDEX[k][0] for k in res.kept if k in PAPER_INDEX)
                unm = [k for k in res.kept if k not in PAPER_INDEX]
                print(f"  kept, paper indices where the definitions coincide: {mapped} + ours {unm}; "
                      f"paper kept {pr['kept']}")
                print("  Table IV theta0 / theta_r (ours | paper's where mapped):")
                rv = res.reduced_vector()
                for k, nm in enumerate(res.names):
                    i = PAPER_INDEX.get(nm, (None,))[0]
                    print(f"    {nm:>6s} {fmt(res.full.beta[k], 10)} {fmt(rv[k] if nm in res.kept else None, 10)}"
                          + (f"   paper #{i}" if i else ""))
            print(f"  in-sample e_j full  [Nm]: {np.round(res.e0_Nm, 3).tolist()}")
            print(f"  in-sample e_j reduced[Nm]: {np.round(res.er_Nm, 3).tolist()}  "
                  f"(max e*_r/e*_0 = {np.max(res.er_rel / res.e0_rel):.3f})")
            cols = res.kept_index
            e, er = errors_on(reg, base, res.reduced.beta, f"{proc}_validation", root, cols)
            eA, erA = errors_on(reg, base, betaA_m, f"{proc}_validation", root)
            print_errors(f"  Tables V / VI on the {proc} validation data (desired q, dq, ddq; measured torque)",
                         [("V: process model", e, er, TABLE_V[proc][0], TABLE_V[proc][1]),
                          ("VI: model A", eA, erA, TABLE_VI[proc][0], TABLE_VI[proc][1])])


if __name__ == "__main__":
    main()
