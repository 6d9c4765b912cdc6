"""A body on a spring about axis 4 of the CLOOS twin (robident_twin/validation/cloos_j4mass.py; issue 15, item 4,
session 10): the high-pass response's known answers, the least-squares fit recovering a known body, the replay state
against the same response, the switch reaching run.py's chain and the twin's replay (None: today's loop)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import cloos_run
from robident_twin.errors import ConfigError
from robident_twin.validation import cloos_j4mass as jm

RATE = 200.0


def _gain(f, f0, zeta):
    r = f / f0
    return r * r / np.hypot(1 - r * r, 2 * zeta * r)


@pytest.mark.parametrize("f", [2.0, 8.0, 20.0])
def test_relative_acceleration_is_the_resonant_high_pass(f):
    """A periodic sine through -s^2 / (s^2 + 2 zeta w s + w^2): amplitude (f/f0)^2 / |1 - (f/f0)^2 + 2 i zeta f/f0|
    (1 / (2 zeta) at the line), within the bilinear transform's warping (< 3 % at 20 Hz / 200 Hz)."""
    t = np.arange(2000) / RATE  # 10 s: a whole number of periods of each f
    y = jm.relative_acceleration(np.sin(2 * np.pi * f * t), RATE, 8.0, 0.05)
    amp = np.sqrt(2 * np.mean(y ** 2))
    assert amp == pytest.approx(_gain(f, 8.0, 0.05), rel=0.03)
    if f == 2.0:  # far below the line the body follows its mount: -s^2 x = +(2 pi f)^2 x, in phase with a sine
        assert np.corrcoef(y, np.sin(2 * np.pi * f * t))[0, 1] > 0.99


def test_fit_recovers_a_known_body_and_holds_a_light_body_bound():
    """A residual made by a known body (8.5 Hz, damping 0.05) from broad-band columns: the grid fit finds its line,
    damping and coefficients; with the inertia bounded below its value, the inertia sits at the bound."""
    rng = np.random.default_rng(0)
    cols = rng.standard_normal((4000, 3)) * [5.0, 2.0, 2.0]
    true = jm.SecondaryMassParams(0.03, 0.12, -0.05, 8.5, 0.05)
    r = -jm.predicted_torque_Nm(true, cols, RATE)  # sign -1: the CLOOS motor-4 torque per joint-4 torque
    grid = {"lines_hz": (8.0, 8.5, 9.0), "dampings": (0.02, 0.05, 0.1)}
    fit = jm.fit_secondary_mass(r, cols, RATE, sign=-1.0, **grid)
    p = fit.params
    assert (p.line_hz, p.damping_ratio) == (8.5, 0.05)
    np.testing.assert_allclose([p.inertia_kgm2, p.mass_moment_x_kgm, p.mass_moment_y_kgm], [0.03, 0.12, -0.05], rtol=1e-6)
    assert fit.share > 0.999999
    held = jm.fit_secondary_mass(r, cols, RATE, sign=-1.0, max_inertia_kgm2=0.01, **grid).params
    assert held.inertia_kgm2 == 0.01
    with pytest.raises(ConfigError, match="inertia_kgm2 > 0"):
        jm.SecondaryMassParams(-0.01, 0.0, 0.0, 8.0, 0.05)
    with pytest.raises(ConfigError, match="positive inertia"):  # nothing to fit: no body anywhere on the grid
        jm.fit_secondary_mass(np.zeros(len(r)), cols, RATE, sign=-1.0, **grid)


@pytest.fixture(scope="module")
def cloos(cloos_committed):
    model, _real, recs, cal = cloos_committed
    return model, recs, cal


def test_replay_state_answers_as_the_high_pass(cloos):
    """The replay's state (semi-implicit Euler at 1 ms, its rigid demand from joint 4's Jacobian) under a mount
    turning sinusoidally about axis 4 alone (joint 4 at 6 Hz, the arm at rest): its extra torque I psi'' has the
    analytic amplitude I |H| |alpha|, in phase with alpha below the line (19 deg at 6 / 8 Hz, damping 0.1)."""
    from robident_twin.validation import twin_vs_real as tv

    model, recs, cal = cloos
    twin = tv.CloosTwin(cal, model)
    p = jm.SecondaryMassParams(0.02, 0.0, 0.0, 8.0, 0.1)
    body = jm.SecondaryMass(p, twin.pin, twin.pmodel, 1e-3)
    w, amp = 2 * np.pi * 6.0, 0.05
    q0 = recs["A"].data.q_rad[0]
    out, alpha = [], []
    for k in range(3000):
        t = k * 1e-3
        q = q0 + np.r_[0, 0, 0, amp * np.sin(w * t), 0, 0]
        dq = np.r_[0, 0, 0, amp * w * np.cos(w * t), 0, 0]
        ddq = np.r_[0, 0, 0, -amp * w * w * np.sin(w * t), 0, 0]
        body.implicit(q, dq)
        out.append(body.advance(ddq))
        alpha.append(ddq[3])
    out, alpha = np.array(out[1000:]), np.array(alpha[1000:])  # after the start's transient (decay 0.2 s)
    expect = p.inertia_kgm2 * _gain(6.0, 8.0, 0.1) * amp * w * w
    assert np.sqrt(2 * np.mean(out ** 2)) == pytest.approx(expect, rel=0.03)
    assert np.corrcoef(out, alpha)[0, 1] > 0.9


def test_body_reaches_the_replay_and_none_is_the_plain_loop(cloos):
    """The first 0.3 s of process 2: the effects with ``j4_mass=None`` replay as the committed twin bit for bit; a
    body changes J4's torque (and only a little elsewhere); the YAML keeps it and reads it back."""
    import yaml

    from robident_twin.validation import cloos_calibration as cc, twin_vs_real as tv

    model, recs, cal = cloos
    d = recs["process1_validation"].data
    n = 300
    short = dataclasses.replace(d, q_rad=d.q_rad[:n], dq_rad_s=d.dq_rad_s[:n], ddq_rad_s2=d.ddq_rad_s2[:n],
                                tau_Nm=d.tau_Nm[:n])
    plain = tv.CloosTwin(cal, model).replay(short, 1, 0, averaged=False)
    none = dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, j4_mass=None))
    np.testing.assert_array_equal(tv.CloosTwin(none, model).replay(short, 1, 0, averaged=False).data.tau_Nm,
                                  plain.data.tau_Nm)
    body = jm.with_j4_mass(cal, jm.SecondaryMassParams(0.04, 0.14, 0.035, 9.0, 0.05))
    rb = tv.CloosTwin(body, model).replay(short, 1, 0, averaged=False)
    diff = np.abs(rb.data.tau_Nm - plain.data.tau_Nm).max(axis=0)
    assert diff[3] > 0.02
    back = yaml.safe_load(yaml.safe_dump(cc.calibration_dict(body)))
    assert back["axis4_body"]["line_hz"] == 9.0
    assert "axis4_body" not in cc.calibration_dict(cal)


@pytest.mark.parametrize("flags", [[], ["--j4-mass"], ["--j4-mass", "--j4-hold", "--wrist4", "--wrist-loop"]])
def test_run_py_j4_mass_reaches_the_chain_and_the_twin(flags, monkeypatch, tmp_path):
    """--j4-mass: the body fitted right after --wrist4 and --j4-hold, before the wrist loop, and handed through every
    later step to the replayed twin; without it the chain is today's."""
    run_cj4 = cloos_run.load("twin_vs_real_run_recorded").cj4  # the same module object the recorded run imports

    def fit(c, make_twin, recA, real):
        from types import SimpleNamespace

        c2 = SimpleNamespace(history=c.history + ("body",), effects=c.effects, fit={})
        return c2, SimpleNamespace(params=jm.SecondaryMassParams(0.04, 0.1, 0.0, 9.0, 0.05), share=0.2)

    monkeypatch.setattr(run_cj4, "calibrate_on_real", fit)
    log, history = cloos_run.record_chain(monkeypatch, flags, tmp_path)
    w4 = ["wrist4"] if "--wrist4" in flags else []
    hold = ["hold"] if "--j4-hold" in flags else []
    body = ["body"] if "--j4-mass" in flags else []
    wrist = ["wrist"] if "--wrist-loop" in flags else []
    assert history == ("fit", *w4, *hold, *body, *wrist, "link", "with_mode", "loop")
