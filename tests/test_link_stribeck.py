"""The main axes' extra (Stribeck) friction on the link side of their springs (issue 15, item 4;
session 9, opt-in ``run.py --link-stribeck``, not adopted; experiments/twin_vs_real_cloos/README.md
"Reversal friction on the link side (session 9)").

With the fit's Stribeck term about -Fc, the link-side friction law becomes Fc (1 - exp(-|v| / v_s)):
a reversal at acceleration a steps it within ~2 v_s / a. A's reversals (2.35 rad/s^2) step it within a
quarter of the 7 Hz mode's period, the process paths' (0.6 rad/s^2) over about one period, so the slow
reversal loses far more of its ringing than the fast one against the regressor's sharp sign (measured:
a tenth against a third)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import cloos_run

from robident_twin.processing.signal import IdentificationData
from robident_twin.validation import cloos_calibration as cc
from robident_twin.validation import repetition_noise as rn
from robident_twin.validation import twin_vs_real as tv

CALIBRATION = "sim_assets/cloos_qrc350/twin_calibrated.yaml"


def _reversal(accel_rad_s2: float, fs: float = 500.0, t_end_s: float = 1.6, t_rev_s: float = 0.6):
    """Axis 2 (joint) passes through zero speed at t_rev_s with constant acceleration, the others still:
    q2 = a (t - t_rev)^2 / 2 (a parabola, so the reversal is the only event); fixed start pose."""
    t = np.arange(int(t_end_s * fs)) / fs
    q = np.tile(np.array([0.0, -0.3, 0.4, 0.0, 0.5, 0.0]), (t.size, 1))
    dq, ddq = np.zeros_like(q), np.zeros_like(q)
    q[:, 1] += 0.5 * accel_rad_s2 * (t - t_rev_s) ** 2
    dq[:, 1] = accel_rad_s2 * (t - t_rev_s)
    ddq[:, 1] = accel_rad_s2
    return IdentificationData(q_rad=q, dq_rad_s=dq, ddq_rad_s2=ddq, tau_Nm=np.zeros_like(q), sample_rate_hz=fs,
                              measurement="motor_torque", n_periods=1)


@pytest.fixture(scope="module")
def twins():
    from robident_twin.datasets.cloos_model import build_model

    model = build_model(symmetric=True)
    cal = cc.load_calibration(CALIBRATION)
    # all of axis 2's friction on the link side, no random noise: the ringing is the property
    fx = rn.without_noise(dataclasses.replace(cal.effects, link_friction_share=np.array([0.3, 1.0, 1.0, 0, 0, 1.0])))
    sharp = dataclasses.replace(cal, effects=fx)
    return model, sharp, cc.with_link_stribeck(sharp)


def _ringing_after_reversal(cal, model, accel):
    """J2's 5-10 Hz torque RMS in the 0.8 s after the reversal, the run's start transient excluded."""
    ref = _reversal(accel)
    run = tv.CloosTwin(cal, model).replay(ref, 1, 0, averaged=False)
    b = cc.band_rms(run.data.tau_Nm[int(0.5 * ref.sample_rate_hz):], ref.sample_rate_hz)
    return b[1]


def test_link_stribeck_takes_the_ringing_of_a_slow_reversal_away_much_more_than_of_a_fast_one(twins):
    model, sharp, smooth = twins
    assert not sharp.effects.main_link_extra_friction and smooth.effects.main_link_extra_friction
    fast = [_ringing_after_reversal(c, model, 2.35) for c in (sharp, smooth)]
    slow = [_ringing_after_reversal(c, model, 0.6) for c in (sharp, smooth)]
    print("J2 5-10 Hz after a reversal [Nm], sharp | smooth: fast", np.round(fast, 2), "slow", np.round(slow, 2))
    # the sharp sign steps the link friction by 2 Fc at both: both ring
    assert slow[0] > 0.5 * fast[0]
    # the smooth law (measured 28.2 | 4.5 Nm against 83.4 | 47.2 sharp): the slow reversal rings far less than
    # the fast one, and the smooth law takes away a much larger part of the slow reversal's ringing (first-order
    # estimate 1 / sqrt(1 + (w v_s / a)^2): 0.73 fast, 0.27 slow; measured 0.34 and 0.09)
    assert slow[1] < 0.25 * fast[1]
    assert slow[1] / slow[0] < 0.5 * fast[1] / fast[0]
    assert fast[1] > 0.2 * fast[0]


def test_the_flag_round_trips_through_the_yaml_and_the_committed_file_has_none(tmp_path, twins):
    _model, sharp, smooth = twins
    assert "main_axes_extra_friction" not in cc.calibration_dict(sharp)["link_side_friction"]
    p = tmp_path / "cal.yaml"
    cc.write_calibration_yaml(smooth, p)
    assert cc.load_calibration(p).effects.main_link_extra_friction
    assert not cc.load_calibration(CALIBRATION).effects.main_link_extra_friction


@pytest.mark.parametrize("flags, expected", [([], False), (["--link-stribeck", "--wrist-loop"], True)])
def test_run_py_link_stribeck_reaches_the_link_friction_share_and_the_twin(flags, expected, monkeypatch, tmp_path):
    """run.py --link-stribeck (with --wrist-loop): the flag is set after the effects fit and the wrist loop and
    before the link-side share is calibrated, and the replayed twin is built on it; without it, it is not set."""
    log, history = cloos_run.record_chain(monkeypatch, flags, tmp_path)
    wrist = ["wrist"] if "--wrist-loop" in flags else []
    ls = ["link_stribeck"] if expected else []
    assert log == ["calibrate(dissipative=False)", *wrist, *ls, "link", "mode", "with_mode", "loop", "twin"]
    assert history == ("fit", *wrist, *ls, "link", "with_mode", "loop")

