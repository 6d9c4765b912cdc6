"""The CLOOS twin's repetition noise (robident_twin/validation/repetition_noise.py, issue 15 item 4):
white per-sample torque-measurement noise with std sqrt(a^2 + b^2 dqm^2 + c^2 tau^2), heavy-tailed
(Gaussian scale mixture). Checked: the unit noise's variance and kurtosis against their closed
forms; a replay of the calibrated twin whose per-sample variance over the repetitions follows
b^2 dqm^2 + c^2 tau^2 when only those terms are on, and is the loop's (tiny) own when all are off;
the local-scatter estimator on sample variances of known kurtosis. No dataset needed."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from robident_twin.datasets.cloos_model import build_model
from robident_twin.processing.signal import IdentificationData
from robident_twin.validation import repetition_noise as rn
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.cloos_calibration import load_calibration

CALIBRATION = Path(__file__).resolve().parents[1] / "sim_assets" / "cloos_qrc350" / "twin_calibrated.yaml"


def test_unit_noise_has_unit_variance_and_the_stated_kurtosis():
    rng = np.random.default_rng(0)
    s = np.array([0.0, 0.3, 0.5])
    w = rn.unit_noise(rng, (400_000, 3), s)
    np.testing.assert_allclose(w.var(axis=0), 1.0, rtol=0.03)
    k = stats.kurtosis(w, axis=0)  # excess (Fisher)
    np.testing.assert_allclose(k, rn.excess_kurtosis(s), rtol=0.12, atol=0.05)
    assert rn.excess_kurtosis(0.5) > 5.0
    # every spread 0: exactly the Gaussian stream (the twin's random numbers as without the tail)
    np.testing.assert_array_equal(rn.unit_noise(np.random.default_rng(4), (50, 6), np.zeros(6)),
                                  np.random.default_rng(4).standard_normal((50, 6)))


def test_local_scatter_recovers_the_kurtosis_of_sample_variances():
    """Sample variances of 50 draws of the scale mixture under a smooth profile: the estimator
    gives the mixture's kurtosis and its inverse the spread (Gaussian: about 0)."""
    rng = np.random.default_rng(1)
    n = 5000
    profile = 1.0 + 0.8 * np.sin(np.linspace(0, 6 * np.pi, n))[:, None] ** 2
    s_true = np.array([0.0, 0.4])
    v = (rn.unit_noise(rng, (50, n, 2), s_true) ** 2 * profile[None]).sum(0) / 49  # zero-mean draws
    k = rn.local_scatter_kurtosis(v)
    assert abs(k[0]) < 0.8, k
    np.testing.assert_allclose(k[1], rn.excess_kurtosis(0.4), rtol=0.3)
    s = rn.tail_spread_from_variance(v)
    assert s[0] < 0.15 and abs(s[1] - 0.4) < 0.08, s


@pytest.fixture(scope="module")
def sine_twin():
    """The committed calibrated twin with its repetition noise off, and a 0.5 s sine period (0.1 rad,
    up to 1.3 rad/s)."""
    model = build_model(symmetric=True)
    cal = load_calibration(CALIBRATION)
    n, rate = 250, 500.0
    w = 2 * np.pi * rate / n
    t = np.arange(n)[:, None] / rate
    a = 0.1 * np.ones((1, 6))
    q0 = np.array([[0.2, -0.4, 0.3, 0.1, 0.4, -0.2]])
    ref = IdentificationData(q_rad=q0 + a * np.sin(w * t), dq_rad_s=a * w * np.cos(w * t),
                             ddq_rad_s2=-a * w * w * np.sin(w * t), tau_Nm=np.zeros((n, 6)), sample_rate_hz=rate,
                             measurement="motor_torque", n_periods=1)
    quiet = dataclasses.replace(cal, effects=rn.without_noise(cal.effects))
    return model, quiet, ref


def test_replay_variance_follows_the_speed_and_torque_terms(sine_twin):
    """Only b (speed) and c (torque) on, of similar size per axis: the per-sample variance over 30
    repetitions (after 4 warm-up periods), regressed on dqm^2 and tau^2 (the replay's own averaged
    torque), returns b^2 and c^2 (within 15 %); all noise off: the variance is the loop's own, below
    1 % of it."""
    model, quiet, ref = sine_twin
    b, c = np.array([8.0, 14.0, 5.0, 0.5, 0.65, 0.15]), np.array([0.01, 0.01, 0.01, 0.05, 0.02, 0.05])
    fx = dataclasses.replace(quiet.effects, speed_noise_Nms_rad=b, load_noise=c)
    run = tv.CloosTwin(dataclasses.replace(quiet, effects=fx), model).replay(ref, 30, seed=7, warmup_periods=4)
    off = tv.CloosTwin(quiet, model).replay(ref, 4, seed=7, warmup_periods=4)
    C = np.asarray(model[0].spec.coupling, dtype=float)
    dqm = ref.dq_rad_s @ np.linalg.inv(C).T
    var, tau = run.sample_variance_Nm2, run.data.tau_Nm
    for j in range(6):
        G = np.column_stack([dqm[:, j] ** 2, tau[:, j] ** 2])
        coef = np.linalg.lstsq(G, var[:, j], rcond=None)[0]
        print(f"axis {j + 1}: fitted / set b^2, c^2", np.round(coef / [b[j] ** 2, c[j] ** 2], 3))
        np.testing.assert_allclose(coef, [b[j] ** 2, c[j] ** 2], rtol=0.15, err_msg=f"axis {j + 1}")
    assert np.all(off.sample_variance_Nm2.mean(0) < 1e-2 * var.mean(0)), off.sample_variance_Nm2.mean(0) / var.mean(0)
