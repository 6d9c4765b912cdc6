"""The CLOOS twin against the real ICMA 2020 data (issue 15, Build item 4): statistics of the
real files checked against the paper and an independent fit, the twin's rigid limit equal to
the identified model, the committed calibration equal to the one computed from the files, and
a short replay (10 repetitions of Trajectory A) holding the targets the full run meets."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation import cloos_calibration as cc
from robident_twin.validation import repetition_noise as rn
from robident_twin.validation import twin_step
from robident_twin.validation import cloos_peraxis, cloos_wrist4
from robident_twin.validation import friction_fit as dfit
from robident_twin.validation.cloos_calibration import load_calibration
from robident_twin.datasets.cloos_model import build_model, design_matrix

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = ROOT / "sim_assets" / "cloos_qrc350" / "twin_calibrated.yaml"
#: ICMA 2020 Table II, model A on trajectory C: mean absolute prediction error e_j [Nm]
PAPER_TABLE_II_C = np.array([16.974, 49.945, 18.592, 1.149, 1.082, 0.286])


@pytest.fixture(scope="module")
def setup(cloos_data_root):
    model = build_model(symmetric=True)
    real, recs = tv.real_statistics(cloos_data_root, model)
    cal = tv.calibrate(real, recs["A"], model)
    return model, real, recs, cal


def test_real_statistics_match_paper_and_an_independent_fit(setup):
    (reg, base), real, recs, _ = setup
    d = recs["A"].data
    # independent WLS: scipy lstsq on rows scaled by 1/sigma (the per-sample variance / N_r)
    import scipy.linalg

    W = design_matrix(reg, base, d)
    w = 1.0 / np.sqrt(d.tau_var_sample_Nm2.reshape(-1))
    beta = scipy.linalg.lstsq(W * w[:, None], d.tau_Nm.reshape(-1) * w)[0]
    r = d.tau_Nm - (W @ beta).reshape(d.tau_Nm.shape)
    np.testing.assert_allclose(real.residual_rms_Nm, np.sqrt(np.mean(r ** 2, axis=0)), rtol=1e-9)
    lag = 5  # 10 ms at 500 Hz
    rc = r - r.mean(axis=0)
    np.testing.assert_allclose(real.acf[0.010], np.sum(rc[:-lag] * rc[lag:], 0) / np.sum(rc * rc, 0), atol=1e-12)
    # the model-A prediction on trajectory C equals the paper's Table II (mean absolute error)
    c = recs["C"].data
    e = np.mean(np.abs(c.tau_Nm - (design_matrix(reg, base, c) @ real.beta).reshape(c.tau_Nm.shape)), axis=0)
    np.testing.assert_allclose(e, PAPER_TABLE_II_C, atol=6e-4)
    # the variance profile is the file's per-sample variance over the 50 repetitions
    np.testing.assert_array_equal(real.variance_Nm2, recs["A"].tau_sample_variance_Nm2)


def test_twin_rigid_limit_is_the_identified_model(setup):
    model, real, recs, cal = setup
    twin = tv.CloosTwin(cal, model, coulomb_eps_rad_s=0.001)  # the authors' tanh(1000 dq)
    d = recs["A"].data
    Cinv = np.linalg.inv(twin.C)
    qm, dqm, ddqm = (x @ Cinv.T for x in (d.q_rad, d.dq_rad_s, d.ddq_rad_s2))
    idx = np.arange(0, len(qm), 97)
    tau = np.array([twin.rigid_motor_torque(qm[i], dqm[i], ddqm[i]) for i in idx])
    ref = (design_matrix(*model, d) @ real.beta).reshape(d.tau_Nm.shape)[idx]
    np.testing.assert_allclose(tau, ref, atol=1e-8 * np.abs(ref).max())


@pytest.fixture(scope="module")
def adopted(setup, cloos_data_root):
    """The open-loop part of the committed twin's calibration chain (run.py's ``ADOPTED`` switches): the
    dissipative friction fit, axis 4's presliding friction, the springs of axes 1 and 3 at their own lines."""
    import cloos_run

    assert cloos_run.load().ADOPTED == ("dissipative", "wrist4", "per_axis_modes", "file_clock")  # the last: no calibration
    model, real, recs, _ = setup
    cal = tv.calibrate(real, recs["A"], model, dissipative=True)
    cal = cloos_wrist4.calibrate_presliding_on_real(cal, real, recs["A"], model, cloos_data_root, dissipative=True)
    return cloos_peraxis.with_per_axis_modes(cal, cloos_peraxis.real_residual_evidence(real, recs["A"], model))


def test_committed_calibration_is_the_one_from_the_real_files(setup, adopted):
    """The committed file's open-loop fit equals a fresh calibration on the real files with the adopted
    switches (the in-loop values come from the closed-loop pass of the experiment; ``fit`` keys hold the fit)."""
    cal = adopted
    stored = yaml.safe_load(CALIBRATION.read_text())["calibrated_from_real_data"]
    fresh = cc.calibration_dict(cal)
    np.testing.assert_allclose(stored["beta"], fresh["beta"], rtol=1e-5, atol=1e-6)
    assert set(fresh) - set(stored) == set(), set(fresh) - set(stored)
    for group in ("ripple", "friction_not_in_regressor", "elasticity", "noise", "transmission_error", "presliding_friction"):
        for key, value in fresh[group].items():
            if group in ("noise", "transmission_error") and "fit" not in key and key != "cycles_per_rad":
                continue
            if isinstance(value, str):
                continue
            np.testing.assert_allclose(stored[group][key], value, rtol=1e-3, atol=1e-4, err_msg=f"{group}.{key}")
    # the committed twin is the in-loop calibration of that fit
    committed = load_calibration(CALIBRATION)
    np.testing.assert_allclose(committed.effects.te.cycles_per_rad, cal.effects.te.cycles_per_rad)
    np.testing.assert_array_equal(committed.effects.inverter_velocity_bandwidth_hz, tv.INVERTER_VELOCITY_BANDWIDTH_HZ)
    # the link-side friction share: its target is the real Trajectory A residual's 5-10 Hz RMS (J6: 5-12 Hz), and
    # the share is the stated formula of the two calibration replays (share 0 and 1)
    (reg, base), real, recs, _ = setup
    d = recs["A"].data
    r_real = d.tau_Nm - (design_matrix(reg, base, d) @ real.beta).reshape(d.tau_Nm.shape)
    lf = stored["link_side_friction"]
    np.testing.assert_allclose(lf["ringing_band_rms_real_Nm"], cc.ringing_band_rms(r_real, d.sample_rate_hz), rtol=1e-3,
                               atol=2e-3)
    b0, b1 = np.array(lf["ringing_band_rms_share0_Nm"]), np.array(lf["ringing_band_rms_share1_Nm"])
    t = np.array(lf["ringing_band_rms_real_Nm"])
    el = np.asarray(committed.effects.stiffness_Nm_rad) > 0
    expect = np.where(el & (b1 > b0), np.sqrt(np.clip((t ** 2 - b0 ** 2) / np.maximum(b1 ** 2 - b0 ** 2, 1e-12), 0, 1)), 0)
    np.testing.assert_allclose(committed.effects.link_friction_share, expect, atol=2e-3)


def test_lomb_scargle_power_is_scipys_periodogram():
    """The calibration's ripple search uses a blocked periodogram; it equals scipy's
    ``lombscargle`` (independent library) on an uneven, motor-position-like abscissa, line found."""
    from scipy.signal import lombscargle

    rng = np.random.default_rng(5)
    x = np.cumsum(rng.uniform(0.0, 4e-3, 1500))
    y = np.sin(2 * np.pi * 93.7 * x + 0.4) + rng.normal(size=x.size)
    y -= y.mean()
    w = 2 * np.pi * np.linspace(20.0, 400.0, 1001)  # not a multiple of the block
    ref = lombscargle(x, y, w)
    got = tv.lomb_scargle_power(x, y, w)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10 * ref.max())
    assert abs(w[np.argmax(got)] / (2 * np.pi) - 93.7) < 0.6


N_REP = 10  # repetitions of the short replay (the full experiment: 50)


@pytest.fixture(scope="module")
def short_replays(setup):
    """Trajectories A (seed 3) and C (seed 4) replayed N_REP times on the calibrated twin, processed
    like the real data; their first repetitions also serve the tests below that replay A or C with
    these seeds (test_first_repetitions_of_a_replay_are_the_shorter_replay)."""
    model, _real, recs, _cal = setup
    twin = tv.CloosTwin(load_calibration(CALIBRATION), model)
    return {"A": twin.replay(recs["A"].data, N_REP, seed=3), "C": twin.replay(recs["C"].data, N_REP, seed=4)}


@pytest.fixture(scope="module")
def short_replay(setup, short_replays):
    """The short replay of A and its statistics (validated on the replay of C)."""
    model = setup[0]
    run, run_c = short_replays["A"], short_replays["C"]
    stats = tv.fit_statistics("twin", *model, run.data, run.sample_variance_Nm2, {"C": run_c.data})
    return run, stats


def test_first_repetitions_of_a_replay_are_the_shorter_replay(setup):
    """A replay's first n repetitions, processed, are bit-identical to a replay of n repetitions
    with the same seed (so one simulation serves the tests that replay Trajectory A with seed 3).
    On a 0.4 s sine period about Trajectory A's start (the property does not depend on the path)."""
    model, _real, recs, _cal = setup
    d = recs["A"].data
    n = 200
    w = 2 * np.pi * d.sample_rate_hz / n
    t = np.arange(n)[:, None] / d.sample_rate_hz
    a = 0.05 * np.ones((1, 6))
    ref = dataclasses.replace(d, q_rad=d.q_rad[:1] + a * np.sin(w * t), dq_rad_s=a * w * np.cos(w * t),
                              ddq_rad_s2=-a * w * w * np.sin(w * t), tau_Nm=d.tau_Nm[:n])
    twin = tv.CloosTwin(load_calibration(CALIBRATION), model)
    long, short = twin.replay(ref, 3, seed=3), twin.replay(ref, 2, seed=3)
    prefix = long.first_repetitions(2)
    for f in ("q_rad", "dq_rad_s", "ddq_rad_s2", "tau_Nm", "tau_var_Nm2", "tau_var_sample_Nm2"):
        np.testing.assert_array_equal(getattr(prefix.data, f), getattr(short.data, f), err_msg=f)
    np.testing.assert_array_equal(prefix.sample_variance_Nm2, short.sample_variance_Nm2)
    np.testing.assert_array_equal(prefix.tracking_rms_rad, short.tracking_rms_rad)
    assert prefix.data.n_periods == 2 and not np.array_equal(long.data.tau_Nm, short.data.tau_Nm)


def test_twin_residual_is_not_the_added_noise(setup, short_replay):
    """With the white current noise and the repetition drifts off (every modelled effect kept)
    the twin's residual stays: it comes from the modelled effects (ripple, friction shape,
    elasticity, closed loop, filters, the Fourier-line processing), not from added noise. Both
    fits use the same weights (the noisy run's variance)."""
    model, _real, recs, _cal = setup
    cal = load_calibration(CALIBRATION)
    run = short_replay[0].first_repetitions(2)  # = CloosTwin(cal, model).replay(A, 2, seed=3), the test below
    stats = tv.fit_statistics("twin", *model, run.data, run.sample_variance_Nm2, {})
    fx = rn.without_noise(cal.effects)  # every repetition noise off (white, speed, torque terms, drifts)
    run0 = tv.CloosTwin(tv.Calibration(cal.beta, fx, cal.explained_share), model).replay(recs["A"].data, 2, seed=3)
    data0 = dataclasses.replace(run0.data, tau_var_sample_Nm2=run.data.tau_var_sample_Nm2)
    s0 = tv.fit_statistics("twin-noise-free", *model, data0, run.sample_variance_Nm2, {})
    assert np.all(s0.residual_rms_Nm > 0.8 * stats.residual_rms_Nm), (s0.residual_rms_Nm, stats.residual_rms_Nm)
    # and joint 1's 30-120 Hz residual (the real one's transmission-error line) is the transmission
    # error's: without it the twin keeps less than half of it. (Its whole residual no longer: with
    # the link-side friction J1 also rings at 7 Hz; without the error it keeps 0.77 of it.)
    fx1 = dataclasses.replace(cal.effects, te=None)
    run1 = tv.CloosTwin(tv.Calibration(cal.beta, fx1, cal.explained_share), model).replay(recs["A"].data, 2, seed=3)
    data1 = dataclasses.replace(run1.data, tau_var_sample_Nm2=run.data.tau_var_sample_Nm2)
    s1 = tv.fit_statistics("twin-no-te", *model, data1, run.sample_variance_Nm2, {})
    te_band = lambda data, st: cc.band_rms(data.tau_Nm - (design_matrix(*model, data) @ st.beta).reshape(
        data.tau_Nm.shape), data.sample_rate_hz, (30.0, 120.0))
    b_te, b_no = te_band(run.data, stats), te_band(data1, s1)
    print("J1 30-120 Hz residual RMS with / without the transmission error:", b_te[0], b_no[0])
    assert b_no[0] < 0.5 * b_te[0], (b_no, b_te)


def test_ringing_comes_from_the_link_side_friction(setup, short_replay):
    """The real residual's ~7 Hz ringing (5-10 Hz band: 11.5 / 46.6 / 18.9 Nm on J1-J3): the
    calibrated twin makes most of it on J2 and J3 (10 repetitions: 0.68 / 0.70 of the real band
    RMS; the calibrated share is at its physical limit 1 there) from the friction steps on the link
    side of the elastic gears (the drive holds the motor, the link swings on the spring). With all
    the gear friction on the motor side (share 0, every other effect kept) the drive takes the
    steps in its current and the twin's J2 and J3 ringing falls below 0.3 of the real one (0.18 /
    0.15 in the calibration's replay)."""
    model, real, recs, _cal = setup
    d = recs["A"].data
    band = lambda data, beta: cc.band_rms(data.tau_Nm - (design_matrix(*model, data) @ beta).reshape(data.tau_Nm.shape),
                                          data.sample_rate_hz)
    b_real = band(d, real.beta)
    run, stats = short_replay
    ratio = band(run.data, stats.beta) / b_real
    print("5-10 Hz residual RMS ratio twin/real:", np.round(ratio, 2))
    assert np.all(ratio[[1, 2]] > 0.6), ratio
    cal = load_calibration(CALIBRATION)
    fx0 = dataclasses.replace(cal.effects, link_friction_share=np.zeros(6))
    run0 = tv.CloosTwin(dataclasses.replace(cal, effects=fx0), model).replay(d, 2, seed=3)
    s0 = tv.fit_statistics("twin-share0", *model, run0.data, run0.sample_variance_Nm2, {})
    ratio0 = band(run0.data, s0.beta) / b_real
    print("with the friction on the motor side:", np.round(ratio0, 2))
    assert np.all(ratio0[[1, 2]] < 0.3), ratio0


def test_short_replay_meets_the_targets_the_full_run_meets(setup, short_replay):
    """Asserted: every target the 50-repetition run of the committed twin meets
    (experiments/twin_vs_real_cloos/README.md, 26 of 31), on a 10-repetition replay of the committed
    calibration (A and C): parameter-std median ratio (full run 1.10); residual RMS ratio on joints 1-4 and 6
    (0.96 0.97 0.93 1.06 0.96); variance median ratio on every joint (1.13 1.22 1.10 1.07 1.23 0.91; a
    10-repetition median of the heavy-tailed noise is 5-24 % lower); validation on C on every joint
    (1.08 1.13 0.95 0.97 0.95 0.94); ACF at 10 ms on joints 1-3, 5, 6 (|diff| 0.01 0.02 0.02 0.00 0.07) and at
    100 ms on joints 1, 2, 5 (0.11 0.08 0.12).
    NOT asserted because the full run misses them (no band was widened): residual RMS on joint 5
    (0.64); ACF at 10 ms on joint 4 (0.18: axis 4's presliding friction smooths its residual; the session-8
    twin met it at 0.14 with a friction that fed energy in); ACF at 100 ms on joints 3, 4, 6 (0.18, 0.43, 0.45)."""
    _model, real, _recs, _cal = setup
    _run, stats = short_replay
    cmp = tv.compare(real, stats, n_rep_twin=N_REP)
    rows = cmp["rows"]
    print({k: (np.round(v, 3) if not isinstance(v, dict) else {a: np.round(b, 3) for a, b in v.items()})
           for k, v in rows.items()})
    inside = lambda x, key: np.all((x >= tv.TARGETS[key][0]) & (x <= tv.TARGETS[key][1]))
    assert inside(rows["param_std_median"], "param_std_median")
    assert inside(rows["residual_rms"][[0, 1, 2, 3, 5]], "residual_rms"), rows["residual_rms"]
    assert inside(rows["variance_median"], "variance_median"), rows["variance_median"]
    assert inside(rows["validation"]["C"], "validation"), rows["validation"]["C"]
    assert np.all(rows["acf_abs_diff"][0.010][[0, 1, 2, 4, 5]] <= tv.TARGETS["acf_abs_diff"]), rows["acf_abs_diff"][0.010]
    assert np.all(rows["acf_abs_diff"][0.100][[0, 1, 4]] <= tv.TARGETS["acf_abs_diff"]), rows["acf_abs_diff"][0.100]


def test_process_files_on_their_own_clock_meet_the_bands_the_full_run_meets(setup, short_replays):
    """The two process validation files replayed once each on the committed twin, on their own clock (run.py's
    default since session 10), and predicted with the parameters the twin identifies on its short replay of A:
    the bands the 50-repetition run meets hold (process 1: J1-J4, J6, full run 1.00 1.15 1.34 0.78 0.89;
    process 2: J2-J6, 1.33 1.26 0.90 1.31 1.12). Not asserted because the full run misses them: process 1 J5
    (1.52), process 2 J1 (1.47). On the stated uniform clock process 1 J1 is out (full run 1.73): asserted too."""
    model, real, recs, _cal = setup
    run = short_replays["A"]
    cal = load_calibration(CALIBRATION)
    names = ("process1_validation", "process2_validation")
    ratios = {}
    for clock in (True, False):
        twin = tv.CloosTwin(cal, model, file_clock=clock)
        val = {n: twin.replay(recs[n].data, 1, 2 + i, averaged=False).data for i, n in enumerate(names)}
        stats = tv.fit_statistics("twin", *model, run.data, run.sample_variance_Nm2, val)
        ratios[clock] = {n: stats.validation_rms_Nm[n] / real.validation_rms_Nm[n] for n in names}
    print({c: {n: np.round(r, 3) for n, r in v.items()} for c, v in ratios.items()})
    lo, hi = tv.TARGETS["validation"]
    inside = lambda x: np.all((x >= lo) & (x <= hi))
    assert inside(ratios[True]["process1_validation"][[0, 1, 2, 3, 5]]), ratios[True]
    assert inside(ratios[True]["process2_validation"][[1, 2, 3, 4, 5]]), ratios[True]
    assert ratios[False]["process1_validation"][0] > hi, ratios[False]


def test_feedforward_ratio_on_the_calibrated_twin_is_of_the_real_robots_order(setup):
    """Issue 19 on the twin calibrated against the real CLOOS (committed calibration): a model
    identified on the twin (2 repetitions of Trajectory A), as feed-forward along Trajectory C,
    lowers the RMS tracking error on every joint, by a mean factor of the real robot's order
    (real, Table VII process 1: 0.60 mean over joints and models; this twin with 2 repetitions:
    0.81, per joint 1.00 1.00 1.00 0.54 0.35 1.00 with seed 0 (J6 0.997: since session 8 axis 6's inverter
    loop holds its motor too); seed 3 gave 0.85 before, at the bound's edge),
    the error read on the motor encoders as the
    real deg_e: the main axes' 100 Hz inverter loop holds their motors, so feed-forward hardly
    changes their error; with the sampled 8 Hz loop it was 0.66). The HAL twin's figure is
    tests/test_control.py's."""
    from robident_twin.validation.control import calibrated_cloos_tracking

    model, _real, recs, _cal = setup
    # the test's own replays (seed 0, calibrated_cloos_tracking's default), as written before the
    # session-7 speed-up that reused the short replay's (seed 3): with the session-7 noise model
    # those give a mean of 0.852, above the bound, so the reuse is undone, not the bound moved
    res = calibrated_cloos_tracking(load_calibration(CALIBRATION), model, recs["A"].data, recs["C"].data,
                                    n_identification=2)
    ratio = res["ratio"]
    print("identified / none per joint:", np.round(ratio, 3), "mean", round(float(ratio.mean()), 3))
    assert np.all(ratio < 1.0), ratio
    assert 0.4 <= ratio.mean() <= 0.85, ratio


def test_repetition_variance_scatters_like_the_real_one(setup, short_replay):
    """The real per-sample variance over the repetitions scatters sample by sample far more than a
    sample variance of Gaussian draws (local-scatter excess kurtosis on A: 10.7 3.9 9.0 1.7 14.1
    0.1), which skews its median below its mean; the twin's heavy-tailed white measurement noise
    (robident_twin/validation/repetition_noise.py, spread from that scatter) makes the same on the
    10-repetition replay (0.72 0.62 0.52 of the real on J1, J3, J5; Gaussian noise or drifts between
    repetitions give about 0 or below)."""
    _model, real, _recs, _cal = setup
    run, _stats = short_replay
    k_real = rn.local_scatter_kurtosis(real.variance_Nm2)
    k_twin = rn.local_scatter_kurtosis(run.sample_variance_Nm2, N_REP)
    print("local-scatter excess kurtosis real:", np.round(k_real, 1), "twin (10 repetitions):", np.round(k_twin, 1))
    assert np.all(k_twin[[0, 2, 4]] > 0.4 * k_real[[0, 2, 4]]), (k_twin, k_real)
    assert np.all(k_twin[[0, 2, 4]] < 1.5 * k_real[[0, 2, 4]]), (k_twin, k_real)


def test_replay_step_helpers_equal_their_reference_bit_for_bit():
    """The replay loop's precomputed extra torque equals :func:`extra_torque_Nm` (ripple, extra
    friction, the transmission error's reaction, both flanks) and its index selection np.where,
    bit for bit, on random states of the committed calibration (a replay is bit-reproducible)."""
    fx = dataclasses.replace(load_calibration(CALIBRATION).effects, sign_eps_rad_s=0.005)
    assert fx.te is not None
    extra = twin_step.ExtraTorque(fx)
    rng = np.random.default_rng(11)
    for _ in range(50):
        qm, dqm, tau, ddqm = rng.normal(size=6) * 2, rng.normal(size=6) * 0.3, rng.normal(size=6) * 50, rng.normal(size=6) * 5
        J = rng.uniform(0.1, 3.0, 6)
        s = np.tanh(dqm / fx.sign_eps_rad_s)
        np.testing.assert_array_equal(extra(qm, dqm, s, tau, ddqm, J), tv.extra_torque_Nm(fx, qm, dqm, tau, ddqm, J))
        # a share w of the extra friction (the wrist's motor side): the rest is extra.friction's
        w = rng.uniform(size=6)
        np.testing.assert_allclose(extra(qm, dqm, s, tau, ddqm, J, w) + (1 - w) * extra.friction(dqm, s, tau),
                                   tv.extra_torque_Nm(fx, qm, dqm, tau, ddqm, J), rtol=1e-12, atol=1e-9)
        mask = rng.uniform(size=6) < 0.5
        x, y = rng.normal(size=6), rng.normal(size=6)
        np.testing.assert_array_equal(twin_step.pick(np.flatnonzero(mask), x, y), np.where(mask, x, y))
    A = rng.normal(size=(6, 6)) + 6 * np.eye(6)
    b = rng.normal(size=6)
    np.testing.assert_array_equal(twin_step.solve(A, b), np.linalg.solve(A, b))


def test_real_wrist_rings_after_axis_6_reversals_and_the_twin_from_its_elastic_axis_6(setup, short_replay):
    """Session 8 (the wrist's own mode). Real data: J6's 5-12 Hz ringing starts at axis 6's motor
    reversals (mean envelope over the next 0.4 s: 1.56 x its mean on A, 1.21 on C, the largest of
    the six axes' reversals on both; 0.7 % / 5.3 % of 300 circular shifts reach it), while J4's does not
    follow axis 4's (1.02 / 0.93): the elasticity goes on axis 6 only. Twin: the calibrated axis-6
    spring sits at the strongest 3-15 Hz line of the real J6 residual (scipy's periodogram here) and
    the 10-repetition replay's J6 residual RMS is within the band; with the same twin's axis 6 rigid
    (noise off, 2 repetitions) it falls below 0.75 of it."""
    from scipy.signal import periodogram

    model, real, recs, cal = setup
    Cinv = np.linalg.inv(np.asarray(model[0].spec.coupling, dtype=float))
    for name, lo in (("A", 1.4), ("C", 1.15)):
        d = recs[name].data
        r = d.tau_Nm - (design_matrix(*model, d) @ real.beta).reshape(d.tau_Nm.shape)
        L = cc.reversal_locked_envelope(r, d.dq_rad_s @ Cinv.T, d.sample_rate_hz)
        print(name, "J6 after each axis's reversals:", np.round(L[5], 2), "J4 after axis 4's:", round(L[3, 3], 2))
        assert L[5, 5] > lo and np.argmax(L[5]) == 5, L[5]
        assert L[3, 3] < 1.1, L[3]
    d = recs["A"].data
    r6 = d.tau_Nm[:, 5] - (design_matrix(*model, d) @ real.beta).reshape(d.tau_Nm.shape)[:, 5]
    f, P = periodogram(r6, fs=d.sample_rate_hz, detrend="constant")
    band = (f >= 3.0) & (f <= 15.0)
    assert cal.wrist_mode_hz == pytest.approx(f[band][np.argmax(P[band])], abs=1e-9)
    twin = tv.CloosTwin(cal, model)
    assert cal.effects.stiffness_Nm_rad[5] == pytest.approx(
        (2 * np.pi * cal.wrist_mode_hz) ** 2 * twin.link_side_inertia(d.q_rad[0])[5], rel=1e-12)
    _run, stats = short_replay
    ratio = stats.residual_rms_Nm[5] / real.residual_rms_Nm[5]
    committed = load_calibration(CALIBRATION)
    assert committed.effects.stiffness_Nm_rad[5] > 0 and committed.effects.link_friction_share[5] > 0.5
    fx = rn.without_noise(committed.effects)
    rigid = dataclasses.replace(fx, stiffness_Nm_rad=np.r_[fx.stiffness_Nm_rad[:5], 0.0])
    r0 = {}
    for label, e in (("elastic", fx), ("rigid", rigid)):
        run = tv.CloosTwin(dataclasses.replace(committed, effects=e), model).replay(d, 2, seed=3)
        data = dataclasses.replace(run.data, tau_var_sample_Nm2=d.tau_var_sample_Nm2)
        r0[label] = tv.fit_statistics(label, *model, data, d.tau_var_sample_Nm2, {}).residual_rms_Nm[5]
    print("J6 residual ratio twin/real:", round(ratio, 3), "noise-free elastic / rigid axis 6:", r0)
    assert tv.TARGETS["residual_rms"][0] <= ratio <= tv.TARGETS["residual_rms"][1], ratio
    assert r0["rigid"] < 0.75 * r0["elastic"], r0


def test_slow_process_replay_of_the_elastic_wrist_does_not_limit_cycle(setup):
    """On the slow process-1 motion (first 20 s, noise off) the elastic axis 6 with its gear friction
    on the link side stays quiet: J6's 12-40 Hz error is of the real file's size. Were the calibrated
    extra friction (its Stribeck term, -1.7 Nm, beyond the 0.83 Nm Coulomb level) left on the motor,
    the motor's net friction would be negative at low speed and the replay would ring at 35 Hz
    (12-40 Hz error 0.85 Nm against 0.03 Nm real over the whole file)."""
    model, real, recs, _cal = setup
    d = recs["process1_validation"].data
    n = int(round(20 * d.sample_rate_hz))
    part = dataclasses.replace(d, q_rad=d.q_rad[:n], dq_rad_s=d.dq_rad_s[:n], ddq_rad_s2=d.ddq_rad_s2[:n],
                               tau_Nm=d.tau_Nm[:n])
    committed = load_calibration(CALIBRATION)
    run = tv.CloosTwin(dataclasses.replace(committed, effects=rn.without_noise(committed.effects)), model).replay(
        part, 1, seed=2, averaged=False)
    err = lambda data: data.tau_Nm - (design_matrix(*model, data) @ real.beta).reshape(data.tau_Nm.shape)
    b_twin = cc.band_rms(err(run.data), d.sample_rate_hz, (12.0, 40.0))
    b_real = cc.band_rms(err(part), d.sample_rate_hz, (12.0, 40.0))
    print("12-40 Hz error twin / real [Nm]:", np.round(b_twin, 3), np.round(b_real, 3))
    assert b_twin[5] < 3 * b_real[5], (b_twin, b_real)


def test_dissipative_calibration_keeps_the_total_friction_dissipative_on_the_speeds_of_a(setup):
    """Issue 15 item 4: with ``dissipative=True`` the calibration's regressor Coulomb + viscous + extra
    terms satisfy f(v) v >= 0 at zero load torque over A's motor speeds (the load term >= 0 keeps it
    for any load), on a grid 50x denser than the constraint's. The committed fit (plain least squares,
    the ``setup`` calibration) is negative at low speed on every axis (axis 4: -1.39 Nm)."""
    model, real, recs, cal = setup
    d = recs["A"].data
    dqm = d.dq_rad_s @ np.linalg.inv(np.asarray(model[0].spec.coupling)).T
    cal_d = tv.calibrate(real, recs["A"], model, dissipative=True)
    assert "friction_constraint" in cc.calibration_dict(cal_d) and "friction_constraint" not in cc.calibration_dict(cal)

    def f_min(c, j):
        tw, fx = tv.CloosTwin(c, model), c.effects
        v = np.linspace(1e-6, np.max(np.abs(dqm[:, j])), 20001)
        return dfit.total_friction_Nm(v, tw.fc[j], tw.fv[j], fx.stribeck_Nm[j], fx.stribeck_vel_rad_s,
                                      fx.visc2_Nms2_rad2[j], fx.load_coulomb[j], tw.eps).min(), tw.fc[j]

    assert np.all(cal_d.effects.load_coulomb >= 0)
    for j in range(6):
        fmin, fc = f_min(cal_d, j)
        assert fmin >= -1e-6 * fc, (j + 1, fmin)
    assert f_min(cal, 3)[0] < -1.0  # the plain fit's axis 4, the defect the constraint removes
    # the ripple and transmission-error lines are the plain fit's (the constraint acts on the friction only)
    np.testing.assert_array_equal(cal_d.effects.ripple_cyc_rad, cal.effects.ripple_cyc_rad)
