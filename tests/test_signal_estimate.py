"""Signal processing and least-squares estimators on synthetic data with known answers."""
import numpy as np
import pytest

from robident_twin.errors import ConfigError, IdentificationError
from robident_twin.estimation.estimators import ols, wls
from robident_twin.processing.signal import average_periods, fourier_differentiate


def test_frequency_domain_differentiation_is_exact_for_excited_harmonics():
    rate, N = 200.0, 2000  # 10 s period
    t = np.arange(N) / rate
    w = 2 * np.pi / 10.0
    q = 0.3 + 0.5 * np.sin(w * t) + 0.2 * np.cos(3 * w * t)
    dq = 0.5 * w * np.cos(w * t) - 0.6 * w * np.sin(3 * w * t)
    ddq = -0.5 * w**2 * np.sin(w * t) - 1.8 * w**2 * np.cos(3 * w * t)
    noisy = q + 1e-3 * np.sin(40 * w * t)  # out-of-band content is removed
    qf, dqf, ddqf = fourier_differentiate(noisy[:, None], rate, 5)
    np.testing.assert_allclose(qf[:, 0], q, atol=1e-12)
    np.testing.assert_allclose(dqf[:, 0], dq, atol=1e-12)
    np.testing.assert_allclose(ddqf[:, 0], ddq, atol=1e-11)


def test_period_average_and_variance_of_the_mean():
    rng = np.random.default_rng(0)
    P, M, sigma = 5000, 8, 0.4
    signal = np.sin(np.linspace(0, 2 * np.pi, P))[:, None]
    x = np.vstack([signal] * M) + sigma * rng.standard_normal((P * M, 1))
    mean, var = average_periods(x, P, M)
    assert np.std(mean - signal) == pytest.approx(sigma / np.sqrt(M), rel=0.05)
    assert var.mean() == pytest.approx(sigma**2 / M, rel=0.05)


def _linear_problem(rng, N=400, n=2, p=4, sig=(0.1, 1.0)):
    W = rng.normal(size=(N * n, p))
    beta = np.array([1.0, -2.0, 0.5, 3.0])
    noise = rng.standard_normal((N, n)) * np.array(sig)
    tau = (W @ beta).reshape(N, n) + noise
    return W, tau, beta


def test_wls_covariance_is_calibrated_and_beats_ols():
    """Over 300 synthetic runs the WLS covariance matches the empirical spread of the
    estimates, and WLS is more precise than OLS when joints have unequal noise."""
    rng = np.random.default_rng(1)
    W, _, beta = _linear_problem(rng)
    names = ["a", "b", "c", "d"]
    sig = np.array([0.1, 1.0])
    est_w, est_o = [], []
    for _ in range(300):
        tau = (W @ beta).reshape(-1, 2) + rng.standard_normal((400, 2)) * sig
        e = wls(W, tau, names, sig**2)
        est_w.append(e.beta)
        est_o.append(ols(W, tau, names).beta)
    est_w, est_o = np.array(est_w), np.array(est_o)
    np.testing.assert_allclose(est_w.std(axis=0), e.std, rtol=0.15)
    assert np.all(np.abs(est_w.mean(axis=0) - beta) < 4 * e.std / np.sqrt(300))
    assert np.all(est_w.std(axis=0) < est_o.std(axis=0))
    assert e.chi2_per_dof == pytest.approx(1.0, abs=0.15)


def test_two_step_wls_estimates_the_joint_variances():
    rng = np.random.default_rng(2)
    W, tau, _ = _linear_problem(rng, N=2000)
    e = wls(W, tau, list("abcd"), weights="residual")
    np.testing.assert_allclose(np.sqrt(e.sigma2_joint_Nm2), [0.1, 1.0], rtol=0.05)


def test_rank_deficiency_names_the_parameters_not_excited():
    rng = np.random.default_rng(3)
    W, tau, _ = _linear_problem(rng)
    W[:, 2] = 0.0
    with pytest.raises(IdentificationError, match="do not excite c"):
        ols(W, tau, list("abcd"))
    W[:, 2] = W[:, 1] * 2.0
    with pytest.raises(IdentificationError, match="rank deficient.*b, c"):
        ols(W, tau, list("abcd"))


def test_wls_without_period_variance_is_a_clear_error():
    rng = np.random.default_rng(4)
    W, tau, _ = _linear_problem(rng)
    with pytest.raises(ConfigError, match="weights=residual"):
        wls(W, tau, list("abcd"), None, weights="period")
    with pytest.raises(IdentificationError, match="noise-free data: use estimator=ols"):
        wls(W, tau, list("abcd"), np.zeros(2))
