"""Axis 4 held at standstill (robident_twin/validation/cloos_hold.py; issue 15, item 4, session 10): the
integrator hold's known answers, the in-position window read from deg_e, the switch reaching run.py's chain and the
twin's replay, and an all-zero window being today's loop bit for bit."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import cloos_run
from robident_twin.errors import ConfigError
from robident_twin.validation import cloos_hold


def test_integrator_holds_only_on_a_standing_reference_within_the_window():
    dq = np.zeros((3, 6))
    dq[1, 3] = 0.2  # step 1: axis 4's reference moves
    h = cloos_hold.IntegratorHold(np.array([0, 0, 0, 1e-5, 0, 0]), dq)
    integ, inc = np.arange(6.0), np.full(6, 0.5)
    e = np.zeros(6)
    e[3] = 0.5e-5
    assert h.update(0, e).tolist() == [False, False, False, True, False, False]  # standing, inside: held
    np.testing.assert_array_equal(h.integrate(integ, inc), integ + np.where(np.arange(6) == 3, 0.0, 0.5))
    assert not h.update(1, e).any()  # moving reference: integrates
    e[3] = -2e-5
    assert not h.update(2, e).any()  # standing, outside the window: integrates
    np.testing.assert_array_equal(h.integrate(integ, inc), integ + inc)
    assert h.held_steps[3] == 1 and h.standing_steps[3] == 2
    with pytest.raises(ConfigError, match="hold_window_rad"):
        cloos_hold.IntegratorHold(np.array([0, 0, 0, -1e-5, 0, 0]), dq)


def test_window_is_the_largest_standing_error_at_least_one_encoder_step():
    dq = np.zeros((5, 6))
    dq[:2, 3] = 0.1  # axis 4 moves in the first two samples: their error does not count
    e_deg = np.zeros((5, 6))
    e_deg[:, 3] = np.degrees([9e-5, -9e-5, 2e-6, -3e-6, 1e-6])
    w = cloos_hold.hold_window_rad(e_deg, dq, 1e-6)
    np.testing.assert_allclose(w, [0, 0, 0, 3e-6, 0, 0], rtol=1e-12)
    assert cloos_hold.hold_window_rad(e_deg, dq, 1e-5)[3] == 1e-5  # below one encoder step: the step
    dq[:, 3] = 0.1
    with pytest.raises(ConfigError, match="axis 4 never stands still"):
        cloos_hold.hold_window_rad(e_deg, dq, 1e-6)
    with pytest.raises(ConfigError, match="shape"):
        cloos_hold.hold_window_rad(e_deg[:4], dq, 1e-6)


def test_window_of_the_real_standing_j4(cloos_data_root):
    """Process 2 (J4 standing the whole run): the real deg_e stays within -2..+3 steps of 1.32 urad (3.95 urad
    at most), below the twin's 10 urad encoder step, which is therefore the window."""
    assert cloos_hold.hold_window_on_real(1e-7, cloos_data_root)[3] == pytest.approx(3.95e-6, abs=0.01e-6)
    np.testing.assert_array_equal(cloos_hold.hold_window_on_real(1e-5, cloos_data_root), [0, 0, 0, 1e-5, 0, 0])


@pytest.fixture(scope="module")
def cloos(cloos_committed):
    model, _real, recs, cal = cloos_committed
    return model, recs, cal


def test_hold_reaches_the_replay_and_a_zero_window_is_the_plain_loop(cloos):
    """The first 0.6 s of process 2 (J4 standing) with axis 4's inverter loop: an all-zero window is the loop
    without a hold bit for bit; a window wider than the twin's standing J4 error holds its integrator throughout,
    which changes J4's torque; the YAML keeps the window."""
    from robident_twin.validation import cloos_calibration as cc, twin_vs_real as tv

    model, recs, cal = cloos
    d = recs["process2_validation"].data
    n = 300
    short = dataclasses.replace(d, q_rad=d.q_rad[:n], dq_rad_s=d.dq_rad_s[:n], ddq_rad_s2=d.ddq_rad_s2[:n],
                                tau_Nm=d.tau_Nm[:n])
    inv = cloos_hold.with_hold(cal, np.zeros(6))
    plain = dataclasses.replace(inv, effects=dataclasses.replace(inv.effects, hold_window_rad=None))
    rp = tv.CloosTwin(plain, model).replay(short, 1, 0, averaged=False)
    rz = tv.CloosTwin(inv, model).replay(short, 1, 0, averaged=False)
    np.testing.assert_array_equal(rz.data.tau_Nm, rp.data.tau_Nm)
    wide = cloos_hold.with_hold(cal, np.array([0, 0, 0, 1.0, 0, 0]))
    assert wide.effects.inverter_velocity_bandwidth_hz[3] == cloos_hold.HOLD_INVERTER_BANDWIDTH_HZ
    rw = tv.CloosTwin(wide, model).replay(short, 1, 0, averaged=False)
    assert np.max(np.abs(rw.data.tau_Nm[:, 3] - rp.data.tau_Nm[:, 3])) > 0.05
    import yaml  # the YAML keeps the window; without one there is no entry

    d_wide = yaml.safe_load(yaml.safe_dump(cc.calibration_dict(wide)))
    assert d_wide["integrator_hold"]["window_rad"] == [0, 0, 0, 1.0, 0, 0]
    assert "integrator_hold" not in cc.calibration_dict(plain)


@pytest.mark.parametrize("flags", [[], ["--j4-hold"], ["--j4-hold", "--wrist4", "--wrist-loop"]])
def test_run_py_j4_hold_reaches_the_chain_and_the_twin(flags, monkeypatch, tmp_path):
    """--j4-hold: axis 4's hold set right after the friction fit (and --wrist4), before the wrist loop, and handed
    through every later step to the replayed twin; without it the chain is today's."""
    log, history = cloos_run.record_chain(monkeypatch, flags, tmp_path)
    w4 = ["wrist4"] if "--wrist4" in flags else []
    hold = ["hold"] if "--j4-hold" in flags else []
    wrist = ["wrist"] if "--wrist-loop" in flags else []
    assert log == ["calibrate(dissipative=False)", *["wrist4(False)"] * len(w4), *hold, *wrist, "link", "mode",
                   "with_mode", "loop", "twin"]
    assert history == ("fit", *w4, *hold, *wrist, "link", "with_mode", "loop")
