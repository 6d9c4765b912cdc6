"""reduction.method / physical.method of task=identify (robident_twin.estimation.postprocess) with the
defaults of conf/config.yaml, on synthetic iiwa 14 data with the robot's per-joint noise:
the summary entries hold what README documents and their numbers are checked against the
truth and the base-parameter model."""
import json

import numpy as np
import pytest
from omegaconf import OmegaConf

from robident_twin.model.base_params import compute_base_parameters
from robident_twin.errors import ConfigError
from robident_twin.estimation.estimators import wls
from robident_twin.design.fourier import load_design
from robident_twin.paths import CONF_DIR
from robident_twin.model.build import IdentificationModel
from robident_twin.estimation.postprocess import run_physical, run_reduction
from robident_twin.model.regressor import Regressor


@pytest.fixture(scope="module")
def setup(iiwa):
    reg = Regressor(iiwa)
    base = compute_base_parameters(reg)
    model = IdentificationModel(iiwa, reg, base)
    beta = model.true_base()
    rng = np.random.default_rng(7)
    s2 = np.asarray(iiwa.tau_joint_std_Nm) ** 2

    def data(design, N):
        traj = load_design(CONF_DIR / "excitation" / design)
        states = traj.evaluate(np.arange(N) * traj.period_s / N)
        W = base.columns(reg.stack(*states))
        return W, (W @ beta).reshape(N, -1) + rng.standard_normal((N, 7)) * np.sqrt(s2), states[0]

    W, tau, q = data("iiwa14_default.yaml", 300)
    Wv, tau_v, qv = data("iiwa14_validation.yaml", 200)
    cfg = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml"))
    return dict(model=model, est=wls(W, tau, base.names, s2), W=W, tau=tau, Wv=Wv, tau_v=tau_v,
                q_all=np.vstack([q, qv]), cfg=cfg, beta=beta)


def _args(s):
    return s["model"], s["est"], s["W"], s["tau"], s["Wv"], s["tau_v"]


def test_config_defaults_are_off(setup):
    assert setup["cfg"]["reduction"]["method"] == "none" and setup["cfg"]["physical"]["method"] == "none"
    assert run_reduction(setup["cfg"]["reduction"], *_args(setup)) is None
    assert run_physical(setup["cfg"]["physical"], *_args(setup), setup["q_all"], True) is None


def test_essential_reduction_entry(setup):
    cfg = dict(setup["cfg"]["reduction"], method="essential")
    r = run_reduction(cfg, *_args(setup))
    json.dumps(r)  # serialisable as it goes into summary.json
    names = [p["name"] for p in r["parameters"]]
    print(f"\nessential: {r['n_before']} -> {r['n_after']}, cond {r['cond_before']:.1f} -> {r['cond_after']:.1f}, "
          f"difference to the base model per joint [%] "
          f"{np.round(100 * np.array(r['validation']['difference_to_base_per_joint']), 2)}")
    assert r["weighted"] and r["n_after"] == len(names) == r["n_before"] - len(r["removed"]) > 0
    assert set(names).isdisjoint(r["removed"]) and len(r["removed"]) > 0
    for p in r["parameters"]:  # Xu's stopping rule: no kept parameter with RSD > 40 % and |value| < 0.01
        assert not (p["rsd_percent"] is not None and p["rsd_percent"] > 40 and abs(p["estimate"]) < 0.01), p
    idx = [setup["model"].base.names.index(n) for n in r["removed"]]
    assert np.all(np.abs(setup["beta"][idx]) < 0.05)  # only small true parameters were removed
    assert np.all(np.array(r["validation"]["difference_to_base_per_joint"]) < 0.05)


def test_ftest_reduction_entry(setup):
    r = run_reduction(dict(setup["cfg"]["reduction"], method="ftest"), *_args(setup))
    assert r["method"] == "f-test" and r["settings"]["residuals_normal"]
    assert np.all(np.array(r["validation"]["difference_to_base_per_joint"]) < 0.05)


@pytest.mark.parametrize("method", ["sdp", "xu"])
def test_physical_entry(setup, method):
    cfg = dict(setup["cfg"]["physical"], method=method)
    if method == "xu":
        cfg["xu"] = dict(cfg["xu"], n_starts=2)
    p = run_physical(cfg, *_args(setup), setup["q_all"], True)
    json.dumps(p)
    d = np.array(p["validation"]["difference_to_base_per_joint"])
    print(f"\n{method}: consistent {p['consistent']}, min eig M(q) {p['min_mass_matrix_eigenvalue_kgm2']:.3g} kg m^2, "
          f"{p['solve_time_s']:.2f} s; difference to the base model per joint [%] {np.round(100 * d, 2)}")
    assert p["consistent"] and p["nonneg_drive_friction_ok"]
    assert p["min_mass_matrix_eigenvalue_kgm2"] > 0
    assert np.all(d < 0.05)
    assert len(p["links"]) == 7
    for link in p["links"]:
        assert link["mass_kg"] > 0 and link["triangle_ok"] and link["min_pseudo_inertia_eig"] > 0
        assert np.linalg.eigvalsh(np.array(link["inertia_com_kgm2"])).min() > 0
        assert "true" in link and link["true"]["mass_kg"] > 0
    # the physical set mapped back to the base parameters agrees with the estimate within 3 std
    # on every base parameter (Xu fits the torques, the SDP the estimate; neither sees the other)
    assert p["max_base_difference_over_std"] < 3.0, p["max_base_difference_over_std"]
    if method == "xu":  # bounds around the CAD-like nominal model, not around the truth
        from robident_twin.estimation.postprocess import _xu_bounds, nominal_model

        b = _xu_bounds(cfg["xu"], nominal_model(setup["model"].spec))  # what run_physical uses on a twin
        mt = np.array([link["true"]["mass_kg"] for link in p["links"]])
        assert not np.allclose(0.5 * (b.mass_kg[0] + b.mass_kg[1]), mt)
        assert np.all((b.mass_kg[0] < mt) & (mt < b.mass_kg[1]))


def test_bad_methods_name_the_key(setup):
    with pytest.raises(ConfigError, match="reduction.method"):
        run_reduction({"method": "lasso"}, *_args(setup))
    with pytest.raises(ConfigError, match="physical.method"):
        run_physical({"method": "lmi"}, *_args(setup), setup["q_all"], True)
    with pytest.raises(ConfigError, match="physical.prior"):
        run_physical({"method": "sdp", "prior": "cad"}, *_args(setup), setup["q_all"], True)


def test_essential_set_feeds_the_xu_retrieval(setup):
    """reduction.method=essential with physical.method=xu: the retrieval fits the torques with the
    essential parameters' regressor only (Xu 2020, Y_e pi_e). Its least-squares floor equals the
    residual of an independent lstsq on the essential columns (weighted per joint like the
    estimate), which differs from the floor of all base columns."""
    r = run_reduction(dict(setup["cfg"]["reduction"], method="essential"), *_args(setup))
    cfg = dict(setup["cfg"]["physical"], method="xu")
    cfg["xu"] = dict(cfg["xu"], n_starts=1, maxiter=60)
    p = run_physical(cfg, *_args(setup), setup["q_all"], True, reduction=r)
    json.dumps(p)
    es = p["essential_set"]
    assert es["n_fitted"] == r["n_after"] < r["n_before"] == es["n_base"]
    assert es["removed"] == list(r["removed"])
    names = list(setup["est"].names)
    keep = [i for i, nm in enumerate(names) if nm not in set(r["removed"])]
    w = np.tile(1.0 / np.sqrt(setup["est"].sigma2_joint_Nm2), setup["tau"].shape[0])
    Ww, yw = setup["W"] * w[:, None], setup["tau"].reshape(-1) * w

    def floor(cols):
        x = np.linalg.lstsq(Ww[:, cols], yw, rcond=None)[0]
        return float(np.linalg.norm(yw - Ww[:, cols] @ x))

    ess, full = floor(keep), floor(list(range(len(names))))
    print(f"\nXu on the essential set: {es['n_fitted']} of {es['n_base']} base parameters, LS floor {ess:.4f} "
          f"(all base columns {full:.4f}), objective {p['objective']:.4f}")
    assert p["extra"]["ls_objective"] == pytest.approx(ess, rel=1e-8)
    assert abs(ess - full) > 1e-6 * full
    assert p["objective"] >= ess * (1 - 1e-9) and p["consistent"]
    without = run_physical(dict(cfg, xu=dict(cfg["xu"], maxiter=5)), *_args(setup), setup["q_all"], True)
    assert without["essential_set"] is None and without["extra"]["ls_objective"] == pytest.approx(full, rel=1e-8)
