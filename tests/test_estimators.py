"""Estimators (OLS, WLS per sample, IDIM-IV, Swevers ML, TLS) and the time-domain signal
path, checked against the iiwa 14 ground truth and synthetic data with known answers."""
import numpy as np
import pytest

from hal.protocol import Recording
from robident_twin.model.base_params import compute_base_parameters
from robident_twin.errors import ConfigError, IdentificationError, RecordingError
from robident_twin.estimation.estimators import (
    ESTIMATORS,
    estimate,
    fourier_basis,
    iv,
    ml_errors_in_variables,
    ols,
    tls,
    wls,
    wls_sample,
)
from robident_twin.design.fourier import load_design
from robident_twin.paths import CONF_DIR
from robident_twin.model.regressor import Regressor
from robident_twin.processing.signal import (
    butter_filtfilt,
    central_differences,
    check_uniform_time,
    durbin_watson,
    parallel_decimate,
    process_nonperiodic,
)


@pytest.fixture(scope="module")
def twin(iiwa):
    reg = Regressor(iiwa)
    base = compute_base_parameters(reg)
    traj = load_design(CONF_DIR / "excitation" / "iiwa14_default.yaml")
    beta = base.from_standard(reg.true_parameters())
    return reg, base, traj, beta


def _one_period(twin, N):
    reg, base, traj, beta = twin
    t = np.arange(N) * traj.period_s / N
    q, dq, ddq = traj.evaluate(t)
    W = base.columns(reg.stack(q, dq, ddq))
    return t, q, dq, ddq, W, (W @ beta).reshape(N, -1)


def test_every_estimator_recovers_the_true_base_parameters_from_exact_data(twin):
    reg, base, traj, beta = twin
    t, q, dq, ddq, W, tau = _one_period(twin, 120)
    names = base.names
    results = {
        "ols": ols(W, tau, names),
        "wls-sample": wls_sample(W, tau, names, np.full(tau.shape, 0.01)),
        "iv": iv(W, tau, names, W),
        "tls": tls(W, tau, names),
        "ml": ml_errors_in_variables(reg, base, t, q, tau, traj.base_freq_hz, traj.n_harmonics, 1e-4, 0.1),
    }
    for name, e in results.items():
        err = np.max(np.abs(e.beta - beta) / np.maximum(np.abs(beta), 1e-3))
        assert err < 1e-6, f"{name}: max relative error {err:.2e}"
        assert e.cov.shape == (base.n_base, base.n_base) and np.all(np.isfinite(e.rsd_percent))
        assert e.residuals_Nm.shape == tau.shape and e.durbin_watson.shape == (7,)


def test_per_sample_wls_is_calibrated_and_beats_per_joint_weights():
    """ICMA 2020 eq. 7: weights 1/variance per sample and joint. With a noise level that
    changes along the trajectory, per-sample WLS is unbiased, its covariance matches the
    Monte-Carlo spread, and it is more precise than OLS."""
    rng = np.random.default_rng(11)
    N, n = 300, 2
    W = rng.normal(size=(N * n, 3))
    beta = np.array([1.0, -2.0, 0.5])
    sig = (0.05 + 1.0 * (np.sin(np.linspace(0, 3 * np.pi, N)) ** 2))[:, None] * np.array([1.0, 0.3])
    est_s, est_o = [], []
    for _ in range(300):
        tau = (W @ beta).reshape(N, n) + rng.standard_normal((N, n)) * sig
        e = wls(W, tau, list("abc"), weights="sample", sigma2_sample_Nm2=sig**2)
        est_s.append(e.beta)
        est_o.append(ols(W, tau, list("abc")).beta)
    est_s, est_o = np.array(est_s), np.array(est_o)
    print("\nper-sample WLS std", est_s.std(0), "OLS std", est_o.std(0))
    np.testing.assert_allclose(est_s.std(axis=0), e.std, rtol=0.15)
    assert np.all(np.abs(est_s.mean(axis=0) - beta) < 4 * e.std / np.sqrt(300))
    assert np.all(est_s.std(axis=0) < 0.7 * est_o.std(axis=0))
    assert e.chi2_per_dof == pytest.approx(1.0, abs=0.15)


def test_monte_carlo_ml_and_iv_have_smaller_bias_than_ols_under_large_position_noise(twin):
    """50 runs, synthetic iiwa 14 data from the regressor: positions with 0.01 rad noise,
    torques with 0.1 Nm noise. OLS uses the usual time-domain processing (zero-phase
    Butterworth + central differences), whose noisy regressor biases it (errors in
    variables); IDIM-IV (instruments from the simulated model) and Swevers' ML do not."""
    reg, base, traj, beta = twin
    N, runs, sq, st = 200, 50, 0.01, 0.1
    t, q, dq, ddq, W0, tau = _one_period(twin, N)
    fs = N / traj.period_s

    def process(qn):  # periodic extension so that the filter has no edge effects
        qf = butter_filtfilt(np.vstack([qn] * 3), fs, 2.0, 4)
        d = central_differences(qf, fs)
        return qf[N:2 * N], d[N:2 * N], central_differences(d, fs)[N:2 * N]

    rng = np.random.default_rng(2024)
    out = {"ols": [], "iv": [], "ml": []}
    for _ in range(runs):
        qn = q + sq * rng.standard_normal(q.shape)
        taun = tau + st * rng.standard_normal(tau.shape)
        W = base.columns(reg.stack(*process(qn)))
        out["ols"].append(ols(W, taun, base.names).beta)
        out["iv"].append(iv(W, taun, base.names, W0).beta)
        out["ml"].append(ml_errors_in_variables(reg, base, t, qn, taun, traj.base_freq_hz, traj.n_harmonics,
                                                sq, st).beta)
    inertial = np.array([not n.startswith("F") for n in base.names])
    stats = {}
    for k, v in out.items():
        v = np.array(v)
        bias = v.mean(axis=0) - beta
        z = np.abs(bias) / (v.std(axis=0, ddof=1) / np.sqrt(runs))
        stats[k] = (np.linalg.norm(bias[inertial]) / np.linalg.norm(beta[inertial]), z[inertial].mean())
        print(f"\n{k}: relative bias of the inertial parameters {100 * stats[k][0]:.3f} %, "
              f"mean |bias| / MC standard error {stats[k][1]:.2f}", end="")
    assert stats["ols"][1] > 2.5  # the OLS bias is real, not Monte-Carlo noise
    assert stats["ml"][0] < 0.3 * stats["ols"][0]
    assert stats["iv"][0] < 0.3 * stats["ols"][0]
    assert stats["ml"][1] < 1.5 and stats["iv"][1] < 1.5  # no significant bias left


def test_butterworth_is_zero_phase_and_rejects_out_of_band_noise():
    fs = 200.0
    t = np.arange(4000) / fs
    slow = np.sin(2 * np.pi * 0.5 * t)
    fast = 0.3 * np.sin(2 * np.pi * 40.0 * t)
    y = butter_filtfilt((slow + fast)[:, None], fs, 5.0, order=4)[:, 0]
    inner = slice(400, -400)
    assert np.max(np.abs(y[inner] - slow[inner])) < 1e-3  # no lag, no distortion, no 40 Hz left
    with pytest.raises(RecordingError, match="cut-off"):
        butter_filtfilt(slow[:, None], fs, 150.0)


def test_parallel_decimation_keeps_the_model_exact_and_whitens_the_residuals():
    """Filtering tau and every regressor column with the same linear filter keeps
    tau_f = W_f beta; decimation turns strongly correlated (over-sampled) noise into
    nearly white residuals (Durbin-Watson towards 2)."""
    rng = np.random.default_rng(5)
    fs, N, n = 1000.0, 6000, 2
    t = np.arange(N) / fs
    cols = [np.sin(2 * np.pi * f * t + p) for f, p in ((0.3, 0), (0.7, 1), (1.1, 2))]
    W = np.zeros((N, n, 3))
    W[:, 0, :] = np.column_stack(cols)
    W[:, 1, :] = np.column_stack(cols[::-1]) ** 2
    W = W.reshape(N * n, 3)
    beta = np.array([2.0, -1.0, 0.5])
    tau_exact = (W @ beta).reshape(N, n)
    Wd, td = parallel_decimate(W, tau_exact, 20, fs)
    assert Wd.shape == (N // 20 * n, 3) and td.shape == (N // 20, n)
    inner = slice(2 * n * 10, -2 * n * 10)
    np.testing.assert_allclose((Wd @ beta)[inner], td.reshape(-1)[inner], atol=1e-9)
    tau = tau_exact + butter_filtfilt(rng.standard_normal((N, n)), fs, 100.0, 2)  # coloured noise
    dw_raw = ols(W, tau, list("abc")).durbin_watson
    Wd, td = parallel_decimate(W, tau, 20, fs)
    e = ols(Wd, td, list("abc"))
    print("\nDurbin-Watson before / after decimation:", dw_raw, e.durbin_watson)
    assert np.all(dw_raw < 0.2) and np.all(np.abs(e.durbin_watson - 2) < 1)
    np.testing.assert_allclose(e.beta, beta, atol=0.05)


def test_durbin_watson_reference_values():
    rng = np.random.default_rng(7)
    white = rng.standard_normal((20000, 2))
    assert np.allclose(durbin_watson(white), 2.0, atol=0.05)
    ar = np.zeros(20000)
    for k in range(1, ar.size):  # AR(1) with phi = 0.9: dw -> 2 (1 - phi) = 0.2
        ar[k] = 0.9 * ar[k - 1] + rng.standard_normal()
    assert durbin_watson(ar)[0] == pytest.approx(0.2, abs=0.03)


def _recording(t, q, tau, rate):
    return Recording(t_s=t, q_rad=q, tau_motor_Nm=tau, tau_joint_Nm=tau, q_cmd_rad=q, sample_rate_hz=rate,
                     metadata={"source": "synthetic"})


def test_nonperiodic_path_gives_the_identification_data_of_the_periodic_path(twin):
    """A non-periodic recording (one period of the Fourier design, 1 kHz, no period
    information): Butterworth + central differences + decimation recover q, dq, ddq and
    the true base parameters from exact torques."""
    reg, base, traj, beta = twin
    rate, T = 500.0, traj.period_s
    t = np.arange(int(rate * T)) / rate
    q, dq, ddq = traj.evaluate(t)
    tau = (base.columns(reg.stack(q, dq, ddq)) @ beta).reshape(len(t), -1)
    data = process_nonperiodic(_recording(t, q, tau, rate), "joint_torque", cutoff_hz=10.0, order=4, decimate=5)
    assert data.sample_rate_hz == 100.0 and data.n_samples == len(t) // 5 and data.n_periods == 1
    inner = slice(50, -50)  # filter / difference edge effects (0.5 s at each end)
    np.testing.assert_allclose(data.dq_rad_s[inner], dq[::5][inner], atol=2e-3)
    np.testing.assert_allclose(data.ddq_rad_s2[inner], ddq[::5][inner], atol=2e-2)
    Wd = base.columns(reg.stack(data.q_rad[inner], data.dq_rad_s[inner], data.ddq_rad_s2[inner]))
    e = ols(Wd, data.tau_Nm[inner], base.names)
    big = np.abs(beta) > 0.05
    assert np.max(np.abs(e.beta - beta)[big] / np.abs(beta[big])) < 0.02


def test_periodic_recording_with_a_time_jump_is_refused():
    """Averaging over periods assumes every period has P consecutive samples: a jump in t_s
    (lost samples not marked in a valid mask) is refused naming the field, sample and step;
    jitter well below a sample period passes."""
    from robident_twin.processing.signal import process_periodic

    N, rate = 400, 100.0
    t = np.arange(N) / rate
    q = np.sin(2 * np.pi * np.arange(N) / 100)[:, None] * np.ones((1, 7))
    jittered = t + np.random.default_rng(0).uniform(-0.1, 0.1, N) / rate
    rec = Recording(t_s=jittered, q_rad=q, tau_motor_Nm=q, tau_joint_Nm=q, q_cmd_rad=q, sample_rate_hz=rate,
                    period_samples=100, n_periods=4, metadata={"source": "jump.npz"})
    assert process_periodic(rec, "joint_torque", 3).n_samples == 100
    t_jump = t.copy()
    t_jump[250:] += 0.5
    rec = Recording(t_s=t_jump, q_rad=q, tau_motor_Nm=q, tau_joint_Nm=q, q_cmd_rad=q, sample_rate_hz=rate,
                    period_samples=100, n_periods=4, metadata={"source": "jump.npz"})
    with pytest.raises(RecordingError, match=r"jump.npz: field t_s jumps by 0.51 s at sample 250 .*a gap"):
        process_periodic(rec, "joint_torque", 3)


def test_recordings_with_gaps_or_missing_fields_are_clear_errors(twin):
    t = np.arange(100) / 100.0
    q = np.zeros((100, 7))
    gap = np.delete(t, np.arange(40, 45))
    with pytest.raises(RecordingError, match=r"not uniformly sampled.*sample 40"):
        check_uniform_time(gap, "synthetic")
    rec = _recording(gap, q[:95], q[:95], 100.0)
    with pytest.raises(RecordingError, match="not uniformly sampled"):
        process_nonperiodic(rec, "joint_torque", cutoff_hz=10.0)
    bad = q.copy()
    bad[17, 3] = np.nan
    with pytest.raises(RecordingError, match=r"q_rad.*sample 17.*joint 4"):
        _recording(t, bad, q, 100.0)
    with pytest.raises(RecordingError, match="t_s is not finite at sample 3"):
        check_uniform_time(np.where(np.arange(100) == 3, np.nan, t))

    class Partial:
        t_s, q_rad, metadata = t, q, {"source": "partial.npz"}

    with pytest.raises(RecordingError, match=r"partial.npz: missing field\(s\) \['sample_rate_hz', 'torque'\]"):
        process_nonperiodic(Partial(), "joint_torque", cutoff_hz=10.0)
    with pytest.raises(ConfigError, match="weights=sample needs the per-sample torque variance"):
        wls(np.eye(14, 3), np.zeros((7, 2)), list("abc"), weights="sample")
    with pytest.raises(ConfigError, match=r"estimator=ml: missing context field\(s\) \['regressor'"):
        estimate("ml", np.eye(14, 3), np.zeros((7, 2)), list("abc"))
    with pytest.raises(ConfigError, match="needs instruments"):
        estimate("iv", np.eye(14, 3), np.zeros((7, 2)), list("abc"))
    with pytest.raises(ConfigError, match="expected one of"):
        estimate("lasso", np.eye(14, 3), np.zeros((7, 2)), list("abc"))


def test_rank_deficiency_is_named_by_every_estimator(twin):
    reg, base, traj, beta = twin
    t, q, dq, ddq, W, tau = _one_period(twin, 60)
    W = W.copy()
    k = base.names.index("Fc3")
    W[:, k] = 0.0
    for method in ("ols", "tls"):
        with pytest.raises(IdentificationError, match="do not excite Fc3"):
            estimate(method, W, tau, base.names)
    with pytest.raises(IdentificationError, match="do not excite Fc3"):
        estimate("wls", W, tau, base.names, weights="sample", sigma2_sample_Nm2=np.ones(tau.shape))
    with pytest.raises(IdentificationError, match="do not excite Fc3"):
        estimate("iv", W, tau, base.names, context={"instruments": W})


def test_every_estimator_config_is_registered():
    import yaml

    files = sorted((CONF_DIR / "estimator").glob("*.yaml"))
    names = {yaml.safe_load(f.read_text())["name"] for f in files}
    assert {"ols", "wls", "iv", "ml", "tls"} <= names and names <= set(ESTIMATORS)
    assert {f.stem for f in files} >= {"ols", "wls", "wls_sample", "iv", "ml", "tls"}


def test_fourier_basis_derivatives():
    t = np.linspace(0, 10, 57)
    Phi, dPhi, ddPhi = fourier_basis(t, 0.1, 3)
    h = 1e-5
    P2, _, _ = fourier_basis(t + h, 0.1, 3)
    P0, _, _ = fourier_basis(t - h, 0.1, 3)
    np.testing.assert_allclose((P2 - P0) / (2 * h), dPhi, atol=1e-7)
    D2 = fourier_basis(t + h, 0.1, 3)[1]
    D0 = fourier_basis(t - h, 0.1, 3)[1]
    np.testing.assert_allclose((D2 - D0) / (2 * h), ddPhi, atol=1e-6)


def test_idim_iv_with_closed_loop_simulated_instruments(iiwa):
    """Gautier's IDIM-IV: the instruments come from the identified model simulated under the
    robot's PD controller with the current estimate. The simulation with the true
    parameters reproduces the controller torque through the regressor, and the IV
    iterations converge to the truth (within 3 std) from noisy torques."""
    import pinocchio as pin

    from robident_twin.estimation.estimators import closed_loop_instruments, simulate_closed_loop
    from robident_twin.model.regressor import ModelOptions

    reg = Regressor(iiwa, ModelOptions(measurement="motor_torque"))
    base = compute_base_parameters(reg)
    beta = base.from_standard(reg.true_parameters())
    traj = load_design(CONF_DIR / "excitation" / "iiwa14_default.yaml")
    rate, dec = 200.0, 5
    q_ref, dq_ref, _ = traj.evaluate(np.arange(int(rate * traj.period_s)) / rate)
    J = np.diag(pin.crba(reg.model, reg.data, iiwa.home_rad)) + iiwa.drive_inertia_kgm2
    w = 2 * np.pi * 5.0
    kp, kd = J * w**2, 2 * J * w
    q, dq, ddq, u = simulate_closed_loop(reg, base, beta, q_ref, dq_ref, rate, kp, kd, record_every=dec)
    W = base.columns(reg.stack(q, dq, ddq))
    np.testing.assert_allclose((W @ beta).reshape(u.shape), u, atol=1e-9)
    assert 1e-3 < np.max(np.abs(q - q_ref[::dec])) < 0.1  # pure PD: a real tracking error
    rng = np.random.default_rng(8)
    tau = u + 0.5 * rng.standard_normal(u.shape)
    inst = closed_loop_instruments(reg, base, q_ref, dq_ref, rate, kp, kd, record_every=dec)
    e = iv(W, tau, base.names, inst, max_iter=10, tol=1e-6)
    print(f"\nIDIM-IV: {e.extra['iterations']} iterations, last relative change {e.extra['last_relative_change']:.1e}")
    assert e.extra["last_relative_change"] < 1e-6 and e.extra["iterations"] <= 6
    assert np.mean(np.abs(e.beta - beta) / e.std <= 3) >= 0.95


def test_per_sample_variances_from_few_periods_need_smoothing():
    """With M = 5 periods the raw per-sample variances give chi2/dof near (M-1)/(M-3) = 2
    (over-confident covariance); smoothing them over a window restores chi2/dof near 1."""
    from robident_twin.processing.signal import average_periods

    rng = np.random.default_rng(12)
    P, M, n = 2000, 5, 2
    W = rng.normal(size=(P * n, 3))
    beta = np.array([1.0, 2.0, -1.0])
    sig = np.array([0.2, 0.5])
    reps = np.vstack([(W @ beta).reshape(P, n)] * M) + rng.standard_normal((P * M, n)) * sig
    mean, var = average_periods(reps, P, M)
    raw = wls_sample(W, mean, list("abc"), var)
    smooth = wls_sample(W, mean, list("abc"), var, var_window=101)
    print(f"\nchi2/dof raw {raw.chi2_per_dof:.2f}, smoothed {smooth.chi2_per_dof:.2f}")
    assert raw.chi2_per_dof == pytest.approx(2.0, rel=0.15)
    assert smooth.chi2_per_dof == pytest.approx(1.0, abs=0.1)


def test_one_qr_gives_the_rank_check_and_the_solve_of_the_two_factorisations(twin):
    """OLS/WLS take the condition number from the QR's R (W = QR has R's singular values) instead
    of a second factorisation (an SVD of the tall W): the estimate and covariance are the QR
    solve's bit for bit, the condition number the SVD's to rounding (1e-12; eps * cond when that is larger), on a well and a badly
    conditioned regressor (a column nearly a multiple of another)."""
    from robident_twin.estimation.estimators import _checked_solve, _solve, check_rank

    reg, base, traj, beta = twin
    W, tau = _one_period(twin, 60)[4:]
    w = np.tile(1.0 / np.array([0.3, 0.5, 0.2, 0.1, 0.05, 0.04, 0.02]), tau.shape[0])
    bad = W.copy()
    bad[:, 1] = 3.0 * bad[:, 0] + 1e-7 * bad[:, 1]
    for A in (W * w[:, None], bad):
        y = tau.reshape(-1) * (w if A is not bad else 1.0)
        cond, b, cov = _checked_solve(A, y, base.names)
        b0, cov0 = _solve(A, y)
        assert b.tobytes() == b0.tobytes() and cov.tobytes() == cov0.tobytes()
        ref = check_rank(A, base.names)
        # the smallest singular value of either factorisation is good to about eps * the largest one
        assert cond == pytest.approx(ref, rel=max(1e-12, 4 * np.finfo(float).eps * ref))
    assert check_rank(bad, base.names) > 1e6  # the second case is ill-conditioned indeed
