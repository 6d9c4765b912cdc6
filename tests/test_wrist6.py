"""Axis 6 of the CLOOS twin (issue 15 item 4, session 9; opt-in ``run.py --wrist6``, README "Axis 6:
dissipative extra friction, ... (session 9)"): the burst-line estimator on a known signal, the axis mask of
the constrained friction fit on the real data, and the switch reaching the chain and the twin."""
from __future__ import annotations

import numpy as np
import pytest

import cloos_run

from robident_twin.validation import cloos_calibration as cc
from robident_twin.validation import cloos_wrist6 as w6
from robident_twin.validation import friction_fit as dfit
from robident_twin.validation import twin_vs_real as tv

FS = 500.0


def _bursts(f_burst_hz, t, v, amp=1.0, decay_s=0.25):
    """Decaying rings at ``f_burst_hz`` that start at each sign change of ``v``."""
    x = np.zeros_like(t)
    for i in np.flatnonzero(np.diff(np.sign(v)) != 0):
        tt = t[i:] - t[i]
        x[i:] += amp * np.exp(-tt / decay_s) * np.sin(2 * np.pi * f_burst_hz * tt)
    return x


def test_burst_line_is_the_ringing_after_the_reversals_not_the_strongest_line():
    """A 6 Hz line through the whole record carries more energy than 9 Hz bursts after each reversal: the
    whole-record line (the committed rule) finds 6 Hz, the burst line 9 Hz (to the 0.12 Hz FFT grid)."""
    t = np.arange(int(20 * FS)) / FS
    v = np.sin(2 * np.pi * 0.4 * t + 0.3)
    r = 0.5 * np.sin(2 * np.pi * 6.0 * t) + _bursts(9.0, t, v)
    assert abs(tv.strongest_line_hz(r[:, None], FS) - 6.0) < 0.1
    assert abs(w6.burst_line_hz(r, v, FS) - 9.0) < 0.15
    with pytest.raises(ValueError, match="no reversal"):
        w6.burst_line_hz(r, np.ones_like(r), FS)


@pytest.fixture(scope="module")
def real_A(cloos_data_root):
    from robident_twin.datasets.cloos_model import build_model

    model = build_model(symmetric=True)
    real, recs = tv.real_statistics(cloos_data_root, model)
    return model, real, recs


def test_dissipative_on_axis_6_alone_keeps_axes_1_to_5_and_makes_axis_6_dissipative(real_A):
    """calibrate(dissipative=(5,)): axes 1-5 keep the plain (unconstrained) fit's friction and ripple; axis 6's
    total friction (regressor + extra, the twin's sign smoothing, no load) is >= 0 over A's speeds, where
    the plain fit's is negative (-0.60 Nm); the YAML names the constrained axis."""
    model, real, recs = real_A
    plain = tv.calibrate(real, recs["A"], model)
    only6 = tv.calibrate(real, recs["A"], model, dissipative=w6.WRIST6_AXES)
    a, b = plain.effects, only6.effects
    for name, digits in (("stribeck_Nm", 4), ("visc2_Nms2_rad2", 4), ("load_coulomb", 5), ("ripple_Nm", 4)):
        np.testing.assert_allclose(getattr(b, name)[:5], getattr(a, name)[:5], rtol=0, atol=0.51 * 10.0 ** -digits)
    assert abs(b.stribeck_Nm[5] - a.stribeck_Nm[5]) > 0.5  # axis 6 moves: -1.74 -> -0.84 Nm
    d = recs["A"].data
    dqm = d.dq_rad_s @ np.linalg.inv(np.asarray(model[0].spec.coupling)).T
    v = np.linspace(1e-6, np.max(np.abs(dqm[:, 5])), 20001)

    def f_min(cal):
        tw, fx = tv.CloosTwin(cal, model), cal.effects
        return dfit.total_friction_Nm(v, tw.fc[5], tw.fv[5], fx.stribeck_Nm[5], fx.stribeck_vel_rad_s,
                                      fx.visc2_Nms2_rad2[5], fx.load_coulomb[5], tw.eps).min(), tw.fc[5]

    fmin, fc = f_min(only6)
    assert fmin >= -1e-6 * fc and b.load_coulomb[5] >= 0
    assert f_min(plain)[0] < -0.3
    assert cc.calibration_dict(only6)["friction_constraint"].endswith("axes 6 only")
    assert "friction_constraint" not in cc.calibration_dict(plain)


def _run_module():
    return cloos_run.load()


@pytest.mark.parametrize("flags", [[], ["--wrist6"], ["--wrist6", "5,6"], ["--wrist6", "--dissipative"],
                                   ["--wrist6", "--wrist-loop"]])
def test_run_py_wrist6_reaches_the_chain_and_the_twin(flags, monkeypatch, tmp_path):
    """--wrist6: the friction fit constrained on axis 6 alone (--wrist6 5,6: axes 5 and 6; every axis with
    --dissipative), its result
    handed through every later step to the replayed twin; without it the chain is today's (the steps are
    recorders; their own tests are above and in test_wrist_loop.py)."""
    log, history = cloos_run.record_chain(monkeypatch, flags, tmp_path)
    dis = True if "--dissipative" in flags else ((4, 5) if "5,6" in flags else (5,) if "--wrist6" in flags else False)
    wrist = ["wrist"] if "--wrist-loop" in flags else []
    assert log == [f"calibrate(dissipative={dis})", *wrist, "link", "mode", "with_mode", "loop", "twin"]
    assert history == ("fit", *wrist, "link", "with_mode", "loop")

@pytest.mark.parametrize("text", ["2", "5,x", "0"])
def test_run_py_wrist6_rejects_axes_outside_the_wrist(text, capsys):
    """--wrist6 AXES outside 4-6 or not numbers: argparse's usage error (exit 2) naming the flag, no traceback."""
    with pytest.raises(SystemExit) as e:
        _run_module().main(["--wrist6", text])
    assert e.value.code == 2 and "--wrist6" in capsys.readouterr().err
    assert w6.parse_axes("6") == (5,) and w6.parse_axes("6,5") == (4, 5) and w6.parse_axes("") == ()
