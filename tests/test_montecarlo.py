"""Monte-Carlo validation: the statistics and tests against known distributions, exact-mode
WLS on the iiwa 14 (false-alarm-controlled tests, no seed chosen to pass), the biased
errors-in-variables estimator failing them, and full-twin runs: no bias by a test with a
1 % false-alarm rate, with and without process noise, and a friction mismatch failing it."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from robident_twin.validation import montecarlo as mc
from robident_twin.validation import statistics as mcstats
from robident_twin.errors import ConfigError


def _synthetic(rng, N=60, p=8, shift_sem=None, var_scale=None):
    A = rng.standard_normal((p, p))
    C = A @ A.T / p + 0.1 * np.eye(p)
    truth = rng.standard_normal(p)
    draws = rng.multivariate_normal(truth, C, size=N)
    if shift_sem is not None:
        draws[:, 0] += shift_sem * np.sqrt(C[0, 0] / N)
    if var_scale is not None:
        draws[:, 1] = truth[1] + (draws[:, 1] - truth[1]) * np.sqrt(var_scale)
    std = np.tile(np.sqrt(np.diag(C)), (N, 1))
    names = tuple(f"P{i}" for i in range(p))
    return mc.MonteCarloResult("exact", "wls", names, ("-",) * p, truth, C, draws, std, np.ones(N),
                               np.arange(N))


def test_chi2_interval_matches_scipy():
    lo, hi = mcstats.chi2_ratio_interval(200, 0.90)
    assert lo == pytest.approx(stats.chi2.ppf(0.05, 199) / 199)
    assert hi == pytest.approx(stats.chi2.ppf(0.95, 199) / 199)
    assert lo < 1 < hi


def test_false_alarm_rate_of_the_tests_is_controlled():
    """Gaussian draws with covariance C: the combined tests fail in <= alpha of the MCs."""
    rng = np.random.default_rng(12345)
    trials = 400
    fails = sum(not mc.consistency_tests(_synthetic(rng), alpha=0.01).passed for _ in range(trials))
    # expected <= 4; P(Binomial(400, 0.01) > 12) < 1e-4
    assert fails <= 12


def test_tests_detect_bias_and_inefficiency():
    rng = np.random.default_rng(7)
    biased = mc.consistency_tests(_synthetic(rng, N=200, shift_sem=8.0))
    assert not biased.mean_ok
    inefficient = mc.consistency_tests(_synthetic(rng, N=200, var_scale=3.0))
    assert not inefficient.variance_ok and "P1" in inefficient.ratios_outside
    s = mc.summarise(_synthetic(rng, N=200, shift_sem=8.0))
    assert abs(s["parameters"][0]["bias_over_crlb_sem"]) > 4


@pytest.fixture(scope="module")
def iiwa():
    from robident_twin.model.build import build_model, resolve_robot
    from robident_twin.design.stored import resolve_design
    from robident_twin.model.regressor import ModelOptions

    spec = resolve_robot({"name": "iiwa14"})
    model = build_model(spec, ModelOptions(measurement="joint_torque"))
    traj = resolve_design("excitation/iiwa14_default.yaml", spec)
    return spec, model, traj


def test_exact_mode_wls_is_unbiased_and_efficient(iiwa):
    spec, model, traj = iiwa
    res = mc.run_exact(model, traj, 20.0, spec.tau_joint_std_Nm, n_runs=200, seed=2024, estimator="wls")
    tests = mc.consistency_tests(res, alpha=0.01)
    s = mc.summarise(res)
    print(mc.format_table(s, tests, max_rows=10))
    assert tests.passed, (tests.mean_statistic, tests.ratios_outside)
    # the reported WLS covariance is the CRLB: per-run std equals the CRLB std
    np.testing.assert_allclose(res.reported_std[0], np.sqrt(np.diag(res.crlb)), rtol=1e-6)


@pytest.mark.parametrize("estimator", ["wls", "ols"])
def test_exact_mode_estimates_equal_the_library_estimators(iiwa, estimator):
    """Exact mode factorises the shared regressor once for all runs: every run's estimate, std and
    residual RMS equal those of estimation.estimators.wls / ols on that run's noisy torques."""
    from robident_twin.estimation.estimators import ols, wls

    spec, model, traj = iiwa
    res = mc.run_exact(model, traj, 20.0, spec.tau_joint_std_Nm, n_runs=3, seed=8, estimator=estimator)
    _, q, dq, ddq = traj.sample(20.0)
    W = model.base.columns(model.regressor.stack(q, dq, ddq))
    tau_true = (W @ model.true_base()).reshape(q.shape)
    for r, s in enumerate(res.seeds):
        tau = tau_true + np.random.default_rng(int(s)).standard_normal(q.shape) * spec.tau_joint_std_Nm
        e = (wls(W, tau, model.base.names, spec.tau_joint_std_Nm**2, "period") if estimator == "wls"
             else ols(W, tau, model.base.names))
        np.testing.assert_allclose(res.estimates[r], e.beta, rtol=1e-12, atol=0)
        np.testing.assert_allclose(res.reported_std[r], e.std, rtol=1e-12, atol=0)
        assert res.torque_nrms_percent[r] == pytest.approx(mc.nrms_percent(e.residuals_Nm, tau), rel=1e-12)


def test_biased_estimator_fails(iiwa):
    """Errors in variables: OLS on a regressor from positions with 1 mrad noise, differentiated by
    central differences, fails the bias test; at 100 Hz the same estimator without position
    noise passes it (measured max |t| 2.3; at 20 Hz the differences alone bias the CRLB-based
    mean test), so the failure is the position noise's, not the differentiation's."""
    spec, model, traj = iiwa
    kw = dict(n_runs=30, seed=5, estimator="ols_noisy_q")
    clean = mc.run_exact(model, traj, 100.0, spec.tau_joint_std_Nm, noisy_q_std_rad=0.0, **kw)
    noisy = mc.run_exact(model, traj, 100.0, spec.tau_joint_std_Nm, noisy_q_std_rad=1e-3, **kw)
    b_clean, b_noisy = mc.bias_test(clean, alpha=0.01), mc.bias_test(noisy, alpha=0.01)
    print(f"ols_noisy_q at 100 Hz: max |t| {max(map(abs, b_clean.t)):.1f} without position noise, "
          f"{max(map(abs, b_noisy.t)):.1f} with 1 mrad (threshold {b_clean.threshold:.2f})")
    assert b_clean.passed
    assert not b_noisy.passed
    assert not mc.consistency_tests(noisy, alpha=0.01).mean_ok


def test_stribeck_mismatch_is_detected(iiwa):
    spec, model, traj = iiwa
    truth = mc.with_stribeck(spec, ratio=3.0, velocity_rad_s=0.2)
    res = mc.run_exact(model, traj, 20.0, spec.tau_joint_std_Nm, n_runs=60, seed=9, estimator="wls",
                       truth_spec=truth)
    assert not mc.consistency_tests(res).mean_ok


def test_config_validation_names_the_key():
    good = {"mode": "exact", "runs": 10, "seed": 0, "estimator": None}
    mc.validate_config(good)
    for key, bad in (("runs", 0), ("mode", "fast"), ("estimator", "magic"), ("noise_scale", -1.0),
                     ("friction", "lugre")):
        with pytest.raises(ConfigError, match=f"montecarlo.{key}"):
            mc.validate_config({**good, key: bad})
    with pytest.raises(ConfigError, match="unknown key"):
        mc.validate_config({**good, "rnus": 3})


def test_bias_test_false_alarm_rate_is_controlled():
    """Unbiased Gaussian estimates with a covariance unrelated to the CRLB (as in twin mode):
    the Bonferroni t-test fails in <= alpha of the Monte-Carlos, while the uncorrected rule
    'no bias above 3 standard errors' fails far more often with 57 parameters."""
    rng = np.random.default_rng(4242)
    trials, fails, fails_3sem = 400, 0, 0
    for _ in range(trials):
        res = _synthetic(rng, N=20, p=57)
        res.crlb = res.crlb * 0.3  # the test must not use the CRLB
        bt = mc.bias_test(res, alpha=0.01)
        fails += not bt.passed
        fails_3sem += bt.n_over_3 > 0
    # expected <= 4; P(Binomial(400, 0.01) > 12) < 1e-4
    assert fails <= 12, fails
    assert fails_3sem > 3 * max(fails, 4), (fails_3sem, fails)


def test_bias_test_detects_a_bias():
    rng = np.random.default_rng(99)
    bt = mc.bias_test(_synthetic(rng, N=60, p=57, shift_sem=8.0))
    assert not bt.passed and bt.failing == ("P0",)
    assert bt.threshold == pytest.approx(stats.t.ppf(1 - 0.01 / 114, 59))


TWIN_BACKEND = {"name": "mujoco", "control_rate_hz": 1000.0, "controller": {}}


@pytest.fixture(scope="module")
def twin_wls_40(iiwa):
    """40 full-twin WLS runs (seed 11, 2 periods after 1, decimate 5): the bias test below, and the
    reference whose first runs the IV / TLS runs with the same seed are compared with."""
    spec, model, traj = iiwa
    return mc.run_twin(model, traj, TWIN_BACKEND, {"enabled": True}, n_runs=40, seed=11, estimator="wls",
                       periods=2, transient_periods=1, decimate=5)


@pytest.mark.slow
def test_full_twin_iiwa14_has_no_bias(iiwa, twin_wls_40):
    """Full twin (sensor noise, period averaging, frequency-domain derivatives, WLS with period
    weights), matched friction, default noise: the false-alarm-controlled bias test (1 %) passes
    for every one of the 57 base parameters; the count above 3 standard errors is reported.
    Sensor noise is the only randomness, so one simulation serves every run."""
    res = twin_wls_40
    assert res.meta["sim_path"] == "deterministic"
    s = mc.summarise(res)
    bt = mc.bias_test(res, alpha=0.01)
    s["bias_test"] = {"alpha": bt.alpha, "threshold": bt.threshold, "max_abs_t": bt.max_abs_t,
                      "failing": list(bt.failing), "n_over_3_sem": bt.n_over_3, "passed": bt.passed}
    print(mc.format_table(s, max_rows=10))
    assert res.n_params == 57
    assert bt.passed, [(n, round(t, 2)) for n, t in zip(res.names, bt.t) if abs(t) > bt.threshold]
    assert 0.5 < s["overall"]["mean_efficiency_ratio"] < 2.0
    # the twin's estimates scatter: the runs are not copies of one another
    assert np.all(res.estimates.std(axis=0) > 0)


@pytest.mark.slow
def test_full_twin_friction_mismatch_fails_the_bias_test(iiwa):
    """A Stribeck twin identified with the viscous + Coulomb model: biased, the test fails."""
    spec, model, traj = iiwa
    truth = mc.with_stribeck(spec, ratio=3.0, velocity_rad_s=0.2)
    res = mc.run_twin(model, traj, TWIN_BACKEND, {"enabled": True}, n_runs=10, seed=12, estimator="wls",
                      periods=2, transient_periods=0, decimate=5, truth_spec=truth)
    bt = mc.bias_test(res, alpha=0.01)
    assert res.meta["friction_mismatch"]
    assert not bt.passed and len(bt.failing) > 5 and bt.max_abs_t > 10 * bt.threshold


@pytest.mark.slow
def test_full_twin_with_process_noise_has_no_bias(iiwa):
    """Weak process noise (a 0.05 Nm motor-torque disturbance per control period): every run is
    its own simulation, batched side by side in one MuJoCo model; no detectable bias."""
    spec, model, traj = iiwa
    res = mc.run_twin(model, traj, TWIN_BACKEND, {"enabled": True}, n_runs=16, seed=13, estimator="wls",
                      periods=2, transient_periods=1, decimate=5, process_noise_Nm=0.05, batch_size=8,
                      workers=2)
    assert res.meta["sim_path"] == "batch"
    bt = mc.bias_test(res, alpha=0.01)
    assert bt.passed, [(n, round(t, 2)) for n, t in zip(res.names, bt.t) if abs(t) > bt.threshold]


@pytest.mark.slow
def test_strong_process_noise_biases_the_wrist_friction(iiwa):
    """A finding, not a simulator error: a 0.5 Nm disturbance per control period makes the light
    wrist joint 6's velocity jitter by about the Coulomb band (0.01 rad/s), so the averaged
    friction torque is a smoothed sign: the period-averaging estimator underestimates Fc6 and
    overestimates Fv6 (about -1.8 % and +1 %), and the bias test catches it. The bias grows as
    the disturbance variance: 0.05 Nm (the test above) leaves it below detection. The 40 runs in
    one batched model: a run's noise comes from its own seed, so the estimates equal those of two
    batches of 20 bit for bit (the test above keeps two batches and two workers)."""
    spec, model, traj = iiwa
    res = mc.run_twin(model, traj, TWIN_BACKEND, {"enabled": True}, n_runs=40, seed=21, estimator="wls",
                      periods=2, transient_periods=1, decimate=5, process_noise_Nm=0.5, batch_size=40)
    bt = mc.bias_test(res, alpha=0.01)
    assert not bt.passed and "Fc6" in bt.failing
    assert set(bt.failing) <= {"Fc6", "Fv6", "Fc7", "Fv7", "Fc5", "Fv5"}, bt.failing
    i = res.names.index("Fc6")
    assert res.estimates[:, i].mean() < res.truth[i]


def test_twin_config_keys_are_checked():
    good = {"mode": "twin", "runs": 10, "seed": 0, "estimator": None}
    mc.validate_config({**good, "friction": "stribeck", "process_noise_Nm": [0.1] * 7, "sim": "batch",
                        "batch_size": 8, "workers": 2})
    for key, bad in (("process_noise_Nm", -0.1), ("process_noise_Nm", "loud"), ("sim", "gpu"),
                     ("batch_size", 0), ("workers", 0)):
        with pytest.raises(ConfigError, match=f"montecarlo.{key}"):
            mc.validate_config({**good, key: bad})
    with pytest.raises(ConfigError, match="montecarlo.process_noise_Nm"):
        mc.validate_config({**good, "mode": "exact", "process_noise_Nm": 0.5})


@pytest.fixture(scope="module")
def swevers_ir361():
    """Both Swevers IR 361 designs' exact-mode WLS Monte-Carlos (200 runs, seed 31), run once for
    both parametrised cases of the test below (each case compares its design with the other)."""
    from robident_twin.design.fourier import load_design
    from robident_twin.paths import ROOT
    from robident_twin.model.build import build_model
    from robident_twin.model.regressor import ModelOptions
    from robident_twin.model.robot import load_robot

    spec = load_robot("kuka_ir361")
    model = build_model(spec, ModelOptions(measurement="motor_torque"))
    designs = ROOT / "experiments" / "swevers1997_montecarlo" / "designs"
    std = np.sqrt([25.0, 26.0, 10.0])
    return {k: mc.run_exact(model, load_design(designs / f"kuka_ir361_{k}.yaml"), 150.0, std, 200, seed=31,
                            estimator="wls") for k in ("c1", "c2")}


@pytest.mark.parametrize("label", ["c1", "c2"])
def test_swevers_ir361_exact_wls_both_designs(label, swevers_ir361):
    """Swevers 1997 Sec. IV: IR 361 axes 1-3, 1500 samples at 150 Hz, noise variances 25, 26,
    10 N^2 m^2, 200 runs of WLS; the false-alarm-controlled tests pass for both designs and
    the D-optimal c2 design has the smaller covariance determinant."""
    res = swevers_ir361
    r = res[label]
    assert r.meta["n_samples"] == 1500
    tests = mc.consistency_tests(r, alpha=0.01)
    assert tests.passed, (tests.mean_statistic, tests.ratios_outside)
    assert np.linalg.slogdet(res["c2"].crlb)[1] < np.linalg.slogdet(res["c1"].crlb)[1]


def test_twin_mode_accepts_iv_ml_tls_and_exact_mode_refuses_them(iiwa, twin_wls_40):
    """montecarlo.estimator=iv|tls in twin mode estimate every run from its recording (same seeds,
    same recordings as WLS): IV with the reference as instruments agrees with WLS within a third of
    WLS's reported std run by run; exact mode, which has no recording, names the key. The WLS runs
    are the first three of the 40 above: a run's seed is the master seed's spawned child of its
    index (asserted equal), its recording the one simulation plus that seed's sensor noise."""
    import dataclasses

    spec, model, traj = iiwa
    kw = dict(n_runs=3, seed=11, periods=2, transient_periods=1, decimate=5)
    i = mc.run_twin(model, traj, TWIN_BACKEND, {"enabled": True}, estimator="iv", **kw)
    t = mc.run_twin(model, traj, TWIN_BACKEND, {"enabled": True}, estimator="tls", **kw)
    w = twin_wls_40
    np.testing.assert_array_equal(w.seeds[:3], i.seeds)
    w = dataclasses.replace(w, estimates=w.estimates[:3], reported_std=w.reported_std[:3])
    d = np.max(np.abs(i.estimates - w.estimates) / w.reported_std)
    print(f"\ntwin iv vs wls: max |difference| / std(WLS) {d:.3f}; tls max |difference| / std(WLS) "
          f"{np.max(np.abs(t.estimates - w.estimates) / w.reported_std):.3f}")
    assert i.estimator == "iv" and t.estimator == "tls" and i.n_params == t.n_params == 57
    assert d < 0.34
    assert np.all(np.isfinite(t.estimates))
    good = {"mode": "twin", "runs": 10, "seed": 0, "estimator": "ml"}
    mc.validate_config(good)
    with pytest.raises(ConfigError, match="montecarlo.estimator.*exact mode"):
        mc.validate_config({**good, "mode": "exact"})
