"""Acceptance on the real CLOOS QRC 350 data (ICMA 2020, MIT-licensed, read from the shared folder).

Absent data: a skip on a developer machine, a FAILURE in CI (CI=true)."""
import os

import numpy as np
import pytest
import scipy.io

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model, design_matrix
from robident_twin.estimate import wls_sample
from robident_twin.process_reduction import prediction_errors, reduce_model

# paper Table II, model A, trajectory C: mean absolute error per joint [Nm]
PAPER_C_MAE = np.array([16.974, 49.945, 18.592, 1.149, 1.082, 0.286])
# Sec. IV-B: condition numbers of the full and reduced process models
PAPER_COND = {"process1": (61.7, 8.46), "process2": (1632.0, 2.73)}


@pytest.fixture(scope="module")
def data_root():
    if not ds.dataset_available():
        msg = f"CLOOS ICMA 2020 dataset not found at {ds.default_root()} (set {ds.ENV_VAR})"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(msg + " - required in CI")
        pytest.skip(msg)
    return ds.default_root()


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


def test_importer_units_and_coordinates(data_root):
    raw = ds.load("A", data_root, k_dg=0.0, joint_signs=(1,) * 6)
    rec = ds.load("A", data_root)
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
    val = ds.load("process1_validation", data_root)
    assert val.desired and val.data.tau_var_sample_Nm2 is None
    assert np.abs(val.data.q_rad).max() < 2 * np.pi  # degrees converted to radians


def test_model_A_predicts_trajectory_C(data_root, sym_model, full_model):
    """Acceptance: MAE per joint on trajectory C no worse than 1.1 x the paper's Table II."""
    for label, (reg, base) in (("paper's 35-parameter set", sym_model), ("our 52-parameter set", full_model)):
        A = ds.load("A", data_root).data
        est = wls_sample(design_matrix(reg, base, A), A.tau_Nm, base.names, A.tau_var_sample_Nm2)
        C = ds.load("C", data_root).data
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
def test_process_reduction_condition_numbers(data_root, sym_model, process):
    """Acceptance: the reductions reach condition numbers of the paper's order within 5 %."""
    reg, base = sym_model
    rec = ds.load(process, data_root).data
    W = design_matrix(reg, base, rec)
    fric = [n for n in base.names if n.startswith(("Fvm", "Fcm"))] if process == "process1" else []
    paper_full, paper_red = PAPER_COND[process]
    for crit in ("ratio", "difference"):
        res = reduce_model(W, rec.tau_Nm, base.names, rec.tau_var_sample_Nm2, 0.05, fric, criterion=crit)
        print(f"\n{process} [{crit}]: removed {len(res.removed)} of {len(res.names)}, cond "
              f"{res.cond_full:.1f} -> {res.cond_reduced:.2f} (paper {paper_full} -> {paper_red}); "
              f"max e*_r/e*_0 {np.max(res.er_rel / res.e0_rel):.3f}")
        assert res.cond_full == pytest.approx(paper_full, rel=0.05)
        assert abs(np.log10(res.cond_reduced / paper_red)) < 1.0  # same order of magnitude
        assert res.cond_reduced < res.cond_full / 4
        if crit == "ratio":
            assert np.all(res.er_rel <= 1.05 * res.e0_rel + 1e-12)
        else:
            assert np.all(res.er_rel - res.e0_rel <= 0.05 + 1e-12)
        assert set(fric) <= set(res.kept)
        assert len(res.removed) >= 5


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
