"""Acceptance on the real CLOOS QRC 350 data (ICMA 2020, MIT-licensed, read from the shared folder).

Absent data: a skip on a developer machine, a FAILURE in CI (CI=true)."""

import numpy as np
import pytest
import scipy.io

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import PAPER_THETA_NAMES, build_model, design_matrix, paper_basis
from robident_twin.estimation.estimators import wls_sample
from robident_twin.estimation.process_reduction import prediction_errors, reduce_model

# paper Table II, model A, trajectory C: mean absolute error per joint [Nm]
PAPER_C_MAE = np.array([16.974, 49.945, 18.592, 1.149, 1.082, 0.286])
# Sec. IV-B: condition numbers of the full and reduced process models
PAPER_COND = {"process1": (61.7, 8.46), "process2": (1632.0, 2.73)}


@pytest.fixture(scope="module")
def sym_model():
    return build_model(symmetric=True)


@pytest.fixture(scope="module")
def full_model():
    return build_model(symmetric=False)


def test_base_parameter_counts(sym_model, full_model):
    _, bs = sym_model
    _, bf = full_model
    n_fric = lambda b: sum(n.startswith(("Fvm", "Fcm")) for n in b.names)  # noqa: E731
    print(f"\nCLOOS base parameters: paper 23 + 12; ours with the paper's symmetries "
          f"{bs.n_base - n_fric(bs)} + {n_fric(bs)}; ours without symmetry assumptions "
          f"{bf.n_base - n_fric(bf)} + {n_fric(bf)}")
    assert (bs.n_base - n_fric(bs), n_fric(bs)) == (23, 12)
    # pinned: no link symmetries assumed (products of inertia and off-axis first moments of
    # links 2, 4, 5, 6 are free), see experiments/icma2020_cloos/README.md
    assert (bf.n_base - n_fric(bf), n_fric(bf)) == (40, 12)


def test_importer_units_and_coordinates(cloos_data_root):
    raw = ds.load("A", cloos_data_root, k_dg=0.0, joint_signs=(1,) * 6)
    rec = ds.load("A", cloos_data_root)
    d = rec.data
    assert d.q_rad.shape == d.tau_Nm.shape == (5001, 6)
    assert rec.sample_time_s == pytest.approx(0.002, rel=1e-6)
    assert d.n_periods == 50 and d.measurement == "motor_torque"
    # variance of the mean = sample variance / N_r
    np.testing.assert_allclose(d.tau_var_sample_Nm2 * 50, rec.tau_sample_variance_Nm2)
    qm = raw.data.q_rad
    np.testing.assert_allclose(d.q_rad[:, 5], -(qm[:, 5] - 227 / 1200 * qm[:, 4]))
    np.testing.assert_allclose(d.q_rad[:, 3], -qm[:, 3])
    np.testing.assert_array_equal(d.tau_Nm, raw.data.tau_Nm)  # motor torques as recorded
    val = ds.load("process1_validation", cloos_data_root)
    assert val.desired and val.data.tau_var_sample_Nm2 is None
    assert np.abs(val.data.q_rad).max() < 2 * np.pi  # degrees converted to radians


def test_model_A_predicts_trajectory_C(cloos_data_root, sym_model, full_model):
    """Acceptance: MAE per joint on trajectory C no worse than 1.1 x the paper's Table II."""
    for label, (reg, base) in (("paper's 35-parameter set", sym_model), ("our 52-parameter set", full_model)):
        A = ds.load("A", cloos_data_root).data
        est = wls_sample(design_matrix(reg, base, A), A.tau_Nm, base.names, A.tau_var_sample_Nm2)
        C = ds.load("C", cloos_data_root).data
        e, _ = prediction_errors(C.tau_Nm, (design_matrix(reg, base, C) @ est.beta).reshape(-1, 6))
        print(f"\n{label}: MAE on C {np.round(e, 3).tolist()} Nm; paper {PAPER_C_MAE.tolist()}; "
              f"ratio {np.round(e / PAPER_C_MAE, 3).tolist()}")
        if base.n_base == 35:  # the acceptance: the paper's model structure
            assert np.all(e <= 1.1 * PAPER_C_MAE), (label, e / PAPER_C_MAE)
        else:  # 17 more (non-symmetric) parameters: joint 4 measured at 1.12x, pinned here
            assert np.all(e <= 1.15 * PAPER_C_MAE), (label, e / PAPER_C_MAE)
        if base.n_base == 35:  # the paper's model: Table I reproduced
            b = dict(zip(base.names, est.beta))
            assert b["MX2R"] == pytest.approx(37.957, abs=2e-3)
            assert b["MY3R"] == pytest.approx(12.163, abs=2e-3)
            assert b["Fcm2"] == pytest.approx(117.258, abs=2e-3)
            assert est.rsd_percent[base.names.index("MX2R")] == pytest.approx(0.008, abs=1e-3)


@pytest.mark.parametrize("process", ["process1", "process2"])
def test_process_reduction_condition_numbers(cloos_data_root, sym_model, process):
    """Algorithm 1 in our numerical base basis with the per-joint criteria: the full model's
    condition number is the paper's within 5 % (measured 1.3 % and 0.1 %). The reduced
    condition number depends on the basis (the column scaling of the kept set: 12.3 and 22.9
    here), so it is compared with the paper's 8.46 and 2.73 only in the paper's own basis
    (test_process_reduction_in_the_paper_basis, 5 %); here the reduction must lower it at least
    fourfold while each per-joint error criterion holds."""
    reg, base = sym_model
    rec = ds.load(process, cloos_data_root).data
    W = design_matrix(reg, base, rec)
    fric = [n for n in base.names if n.startswith(("Fvm", "Fcm"))] if process == "process1" else []
    paper_full, paper_red = PAPER_COND[process]
    for crit in ("ratio", "difference"):
        res = reduce_model(W, rec.tau_Nm, base.names, rec.tau_var_sample_Nm2, 0.05, fric, criterion=crit)
        print(f"\n{process} [{crit}]: removed {len(res.removed)} of {len(res.names)}, cond "
              f"{res.cond_full:.1f} -> {res.cond_reduced:.2f} (paper {paper_full} -> {paper_red}); "
              f"max e*_r/e*_0 {np.max(res.er_rel / res.e0_rel):.3f}")
        assert res.cond_full == pytest.approx(paper_full, rel=0.05)
        assert res.cond_reduced < res.cond_full / 4
        if crit == "ratio":
            assert np.all(res.er_rel <= 1.05 * res.e0_rel + 1e-12)
        else:
            assert np.all(res.er_rel - res.e0_rel <= 0.05 + 1e-12)
        assert set(fric) <= set(res.kept)
        assert len(res.removed) >= 5


# Table I model A (theta_1..35), Table IV theta_0 / theta_r and the kept sets (paper indices)
PAPER_THETA_A = np.array([19.763, 23.798, -0.850, 17.162, 37.957, 11.684, 0.768, 1.785, 8.666, 0.266, 5.913, 12.163,
                          4.249, 0.108, 0.162, -0.058, 0.200, 0.225, 1.254, 0.074, 0.043, 0.037, 0.135, 76.809,
                          117.258, 47.677, 4.125, 1.454, 0.834, 62.856, 36.423, 17.903, 1.039, 0.434, 0.426])
PAPER_THETA0 = {"process1": [9.952, 33.558, 1.541, -13.419, 43.786, 2.154, 1.686, 5.073, -1.067, 6.866, 3.132, 12.541],
                "process2": [-437.335, 35.387, 3.090, 11.982, 40.110, 443.672, -2.062, -106.802, 2.602, -4.599, 6.693,
                             11.725]}
PAPER_KEPT = {"process1": {2: 45.321, 5: 43.928, 8: 1.163, 11: 3.446, 12: 12.432, 17: 0.336, 19: 1.323, 22: 0.072,
                           24: 82.415, 25: 124.452, 30: 72.674, 31: 87.536},
              "process2": {1: 48.044, 5: 43.342, 9: 14.090, 12: 14.315, 15: 2.998, 19: 1.326, 22: 0.111, 24: 66.071,
                           25: 94.886, 30: 132.694, 31: 79.244, 35: 1.181}}
PAPER_KEPT_ALL = {"process1": [2, 5, 8, 11, 12, 17, 19, 22] + list(range(24, 36)),
                  "process2": [1, 5, 9, 12, 15, 19, 22, 24, 25, 26, 28, 29, 30, 31, 32, 35]}
PAPER_REMOVED = {"process1": 15, "process2": 19}


@pytest.mark.parametrize("process", ["process1", "process2"])
def test_process_reduction_in_the_paper_basis(cloos_data_root, sym_model, process):
    """Algorithm 1 in the paper's own basis (Appendix I) with the mean-over-joints reading of
    line 10 (experiments/icma2020_cloos/README.md).

    The basis is checked first: model A gives Table I and the full process model Table IV's
    theta_0 (3 decimals); the paper's kept set gives its reduced condition number (8.46, 2.73)
    and theta_r. That set meets the mean-ratio test but not the per-joint one (which is why the
    mean reading is chosen). Our reduction: full cond within the printed digits (0.5 %), the
    reduced cond within 5 % of the paper's (the paper's own tolerance: near-ties of the 5 % test
    may swap one parameter in the stepwise path), removed count within one of the paper's,
    model error grown by at most e_tol, and at least 3/4 of the kept sets shared."""
    reg, base = sym_model
    T = paper_basis(reg, base)
    A = ds.load("A", cloos_data_root).data
    betaA = wls_sample(design_matrix(reg, base, A), A.tau_Nm, base.names, A.tau_var_sample_Nm2).beta
    np.testing.assert_allclose(T @ betaA, PAPER_THETA_A, atol=1.5e-3)
    rec = ds.load(process, cloos_data_root).data
    W = design_matrix(reg, base, rec) @ np.linalg.inv(T)
    ess = list(PAPER_THETA_NAMES[23:]) if process == "process1" else []
    res = reduce_model(W, rec.tau_Nm, PAPER_THETA_NAMES, rec.tau_var_sample_Nm2, 0.05, ess, criterion="mean_ratio")
    np.testing.assert_allclose(res.full.beta[:12], PAPER_THETA0[process], atol=1.5e-3)
    cols = [i - 1 for i in PAPER_KEPT_ALL[process]]
    paper_fit = wls_sample(W[:, cols], rec.tau_Nm, [PAPER_THETA_NAMES[i] for i in cols], rec.tau_var_sample_Nm2)
    got = dict(zip(PAPER_KEPT_ALL[process], paper_fit.beta))
    for i, v in PAPER_KEPT[process].items():
        assert got[i] == pytest.approx(v, abs=1.5e-3), i
    from robident_twin.estimation.process_reduction import condition_number
    paper_full, paper_red = PAPER_COND[process]
    assert condition_number(W[:, cols]) == pytest.approx(paper_red, abs=0.006)
    _, e_paper = prediction_errors(rec.tau_Nm, rec.tau_Nm - paper_fit.residuals_Nm)
    r_paper = e_paper / res.e0_rel
    assert np.mean(r_paper) <= 1.05 < np.max(r_paper)
    kept = [PAPER_THETA_NAMES.index(k) + 1 for k in res.kept]
    shared = len(set(kept) & set(PAPER_KEPT_ALL[process])) / len(set(kept) | set(PAPER_KEPT_ALL[process]))
    print(f"\n{process} (paper basis, mean ratio): cond {res.cond_full:.1f} -> {res.cond_reduced:.2f} "
          f"(paper {paper_full} -> {paper_red}); removed {len(res.removed)} (paper {PAPER_REMOVED[process]}); "
          f"mean e*_r/e*_0 {np.mean(res.er_rel / res.e0_rel):.3f} (paper's set {np.mean(r_paper):.3f}, its max "
          f"{np.max(r_paper):.3f}); kept {kept}; shared with the paper's {shared:.2f}")
    assert res.cond_full == pytest.approx(paper_full, rel=0.005)
    assert res.cond_reduced == pytest.approx(paper_red, rel=0.05)
    assert abs(len(res.removed) - PAPER_REMOVED[process]) <= 1
    assert np.mean(res.er_rel / res.e0_rel) <= 1.05 + 1e-12
    assert shared >= 0.75
    assert set(ess) <= set(res.kept)


def test_missing_file_and_fields_give_clear_errors(tmp_path, monkeypatch):
    monkeypatch.setenv(ds.ENV_VAR, str(tmp_path))
    assert ds.data_root() == tmp_path
    with pytest.raises(ds.DatasetError, match=r"Trajectory_A\.mat.*not found"):
        ds.load("A")
    f = tmp_path / "Optimal_Excitation" / "Trajectory_A.mat"
    f.parent.mkdir(parents=True)
    N = 10
    good = {"average": np.zeros((N, 6)), "variance": np.ones((N, 6))}
    t = 0.002 * np.arange(1, N + 1)
    scipy.io.savemat(f, {"time_vec_save": t, "q_meas": good, "dq_meas": good, "ddq_meas": good,
                         "tau_meas": {"average": np.zeros((N, 6))}})
    with pytest.raises(ds.DatasetError, match=r"Trajectory_A\.mat: missing field 'tau_meas\.variance'"):
        ds.load("A")
    scipy.io.savemat(f, {"time_vec_save": t, "q_meas": good, "dq_meas": good, "ddq_meas": good})
    with pytest.raises(ds.DatasetError, match=r"Trajectory_A\.mat: missing field 'tau_meas'"):
        ds.load("A")
    scipy.io.savemat(f, {"time_vec_save": t, "q_meas": good, "dq_meas": {"average": np.zeros((N, 5))},
                         "ddq_meas": good, "tau_meas": good})
    with pytest.raises(ds.DatasetError, match=r"field 'dq_meas\.average': expected an array of shape \(10, 6\)"):
        ds.load("A")
    # the function argument overrides the environment
    with pytest.raises(ds.DatasetError, match="elsewhere"):
        ds.load("B", root=tmp_path / "elsewhere")
    with pytest.raises(ds.DatasetError, match="unknown CLOOS dataset"):
        ds.load("D")
