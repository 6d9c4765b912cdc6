"""Model reduction: essential parameters (Xu 2020) and F-test reduction with a
Kolmogorov-Smirnov normality check (Jubien 2014), against known answers."""
import numpy as np
import pytest

from robident_twin.model.base_params import compute_base_parameters
from robident_twin.errors import ConfigError, IdentificationError
from robident_twin.estimation.estimators import ols
from robident_twin.design.fourier import load_design
from robident_twin.paths import CONF_DIR
from robident_twin.estimation.reduction import essential_parameters, f_test_reduction, ks_normality
from robident_twin.model.regressor import Regressor


def _sparse_problem(rng, noise="normal", N=400):
    """Five parameters, two of them exactly zero (c and e)."""
    n = 2
    W = rng.normal(size=(N * n, 5))
    beta = np.array([2.0, -1.5, 0.0, 1.0, 0.0])
    e = {"normal": rng.standard_normal, "cauchy": rng.standard_cauchy}[noise]((N, n)) * 0.5
    return W, (W @ beta).reshape(N, n) + e, beta


def test_f_test_removes_exactly_the_zero_parameters():
    rng = np.random.default_rng(0)
    W, tau, beta = _sparse_problem(rng)
    red = f_test_reduction(W, tau, list("abcde"))
    assert set(red.removed) == {"c", "e"}
    assert red.names == ("a", "b", "d")
    np.testing.assert_allclose(red.estimate.beta, beta[[0, 1, 3]], atol=0.05)
    assert red.extra["residuals_normal"] and red.extra["ks_pvalue"] > 0.05
    last = red.history[-1]
    assert not last["accepted"] and last["F"] > last["F_crit"]  # the third candidate was rejected
    np.testing.assert_allclose(red.full_vector(5)[[2, 4]], 0.0)


def test_f_test_refuses_non_normal_residuals():
    rng = np.random.default_rng(1)
    W, tau, _ = _sparse_problem(rng, noise="cauchy")
    with pytest.raises(IdentificationError, match="Kolmogorov-Smirnov test rejects normal residuals"):
        f_test_reduction(W, tau, list("abcde"))
    red = f_test_reduction(W, tau, list("abcde"), on_non_normal="warn")
    assert not red.extra["residuals_normal"] and red.extra["ks_pvalue"] < 0.05
    stat, p = ks_normality(np.random.default_rng(2).standard_normal((5000, 3)))
    assert p > 0.01 and stat < 0.03
    with pytest.raises(ConfigError, match="on_non_normal"):
        f_test_reduction(W, tau, list("abcde"), on_non_normal="ignore")


def test_essential_parameters_thresholds():
    rng = np.random.default_rng(3)
    W, tau, beta = _sparse_problem(rng)
    red = essential_parameters(W, tau, list("abcde"), rsd_max_percent=40.0)
    assert set(red.removed) <= {"c", "e"} and len(red.removed) >= 1
    assert np.all(red.estimate.rsd_percent <= 40.0)
    none = essential_parameters(W, tau, list("abcde"), rsd_max_percent=40.0, abs_max=1e-6)
    assert none.removed == ()  # the zero parameters are estimated with |value| > 1e-6
    with pytest.raises(ConfigError, match="rsd_max_percent"):
        essential_parameters(W, tau, list("abcde"), rsd_max_percent=0)


def test_essential_parameters_of_the_iiwa14(iiwa):
    """Xu 2020 thresholds (40 %, 0.01) on synthetic iiwa 14 data with the robot's torque
    noise: every parameter removed contributes little to the torques (checked with the
    true parameters), every kept one has RSD <= 40 %, and the essential model predicts
    held-out torques as well as the base model."""
    reg = Regressor(iiwa)
    base = compute_base_parameters(reg)
    beta = base.from_standard(reg.true_parameters())
    rng = np.random.default_rng(4)
    sig = iiwa.tau_joint_std_Nm

    def data(design, N):
        traj = load_design(CONF_DIR / "excitation" / design)
        q, dq, ddq = traj.evaluate(np.arange(N) * traj.period_s / N)
        W = base.columns(reg.stack(q, dq, ddq))
        return W, (W @ beta).reshape(N, -1)

    W, tau = data("iiwa14_default.yaml", 400)
    tau_n = tau + rng.standard_normal(tau.shape) * sig
    Wv, tau_v = data("iiwa14_validation.yaml", 300)
    red = essential_parameters(W, tau_n, base.names, rsd_max_percent=40.0, abs_max=0.01)
    print(f"\nessential: {base.n_base} -> {red.keep.size} parameters, removed {red.removed}, "
          f"cond {red.cond_before:.1f} -> {red.cond_after:.1f}")
    assert 0 < len(red.removed) < base.n_base // 2
    kept_rsd, kept_val = red.estimate.rsd_percent, np.abs(red.estimate.beta)
    assert not np.any((kept_rsd > 40.0) & (kept_val < 0.01))  # Xu's stopping rule
    strict = essential_parameters(W, tau_n, base.names, rsd_max_percent=40.0)
    assert np.all(strict.estimate.rsd_percent <= 40.0) and set(red.removed) <= set(strict.removed)
    removed = np.setdiff1d(np.arange(base.n_base), red.keep)
    assert np.all(np.abs(beta[removed]) < 0.05)
    contribution = np.sqrt(np.mean(((W[:, removed] @ beta[removed]).reshape(tau.shape)) ** 2, axis=0))
    assert np.all(contribution < 2 * sig)
    full = ols(W, tau_n, base.names)
    rmse_full = np.sqrt(np.mean(((Wv @ full.beta).reshape(tau_v.shape) - tau_v) ** 2, axis=0))
    rmse_ess = np.sqrt(np.mean(((Wv[:, red.keep] @ red.estimate.beta).reshape(tau_v.shape) - tau_v) ** 2, axis=0))
    print("validation RMSE base", rmse_full.round(4), "essential", rmse_ess.round(4))
    assert np.all(rmse_ess < rmse_full + 0.1 * sig)
    f = f_test_reduction(W, tau_n, base.names)
    print(f"F-test: removed {len(f.removed)}, cond {f.cond_before:.1f} -> {f.cond_after:.1f}")
    assert np.all(np.abs(beta[np.setdiff1d(np.arange(base.n_base), f.keep)]) < 0.05)
