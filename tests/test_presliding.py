"""Presliding (Dahl) friction of the CLOOS twin's axis 4 (robident_twin/validation/presliding.py,
cloos_wrist4.py; issue 15, item 4, session 9): known answers of the law, a one-axis mass held by it or
sliding, the scan's known answer on a synthetic residual, and the switch reaching the twin's replay."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from robident_twin.validation import presliding


def test_dahl_path_at_constant_speed_is_the_exponential_approach_to_the_static_law():
    dt, xc, v = 1e-3, 2e-3, 0.05  # 50 urad per step
    z = presliding.dahl_path(np.full(400, v), dt, xc, z0=-1.0)
    travel = v * dt * np.arange(1, 401)
    np.testing.assert_allclose(z, 1.0 - 2.0 * np.exp(-travel / xc), rtol=0, atol=1e-12)
    # steady state = the static Coulomb law sgn(v), either direction; |z| <= 1 all the way
    assert abs(z[-1] - 1.0) < 1e-4
    assert presliding.dahl_path(np.full(400, -v), dt, xc, z0=0.3)[-1] == pytest.approx(-1.0, abs=1e-4)
    assert np.all(np.abs(z) <= 1.0)
    # a standing axis keeps its state (no drift without motion)
    assert presliding.dahl_path(np.zeros(50), dt, xc, z0=0.4)[-1] == 0.4


def test_periodic_dahl_path_starts_in_the_state_the_motion_leaves():
    t = np.arange(1000) * 1e-3
    v = np.sin(2 * np.pi * t)  # one period
    z = presliding.dahl_path(v, 1e-3, 1e-2, periodic=True)
    again = presliding.dahl_path(np.tile(v, 3), 1e-3, 1e-2)[-1000:]
    np.testing.assert_allclose(z, again, atol=1e-9)


def _mass_with_dahl(torque_Nm, fc=4.0, xc=1e-3, J=0.3, dt=1e-3, steps=4000, ramp_steps=1):
    """A rigid axis with only Dahl friction under a torque ramped up over ``ramp_steps`` and then held,
    stepped as the twin's replay steps (the friction's slope implicit): returns (positions, velocities)."""
    dahl = presliding.DahlFriction.of(presliding.PreslidingParams(np.array([[xc]]), np.array([[1.0]])),
                                      np.array([fc]), dt, 0.005, np.zeros(1))
    q, v = 0.0, np.zeros(1)
    Q, V = [], []
    for i in range(steps):
        tnh = np.tanh(v / 0.005)
        fr, slope = dahl.replace_coulomb(v, tnh, np.ones(1), fc * tnh, fc * (1 - tnh * tnh) / 0.005)
        a = (torque_Nm * min(1.0, (i + 1) / ramp_steps) - fr) / (J + dt * slope)
        v = v + dt * a
        q += dt * v[0]
        Q.append(q)
        V.append(v[0])
    return np.array(Q), np.array(V)


def test_presliding_holds_a_torque_below_the_coulomb_level_without_sliding():
    fc, xc = 4.0, 1e-3
    # a torque ramped up slowly: quasi-static Dahl from rest, z = T / fc at the displacement
    # -xc ln(1 - T / fc) (the presliding spring), and there the axis stands
    q, v = _mass_with_dahl(2.0, fc, xc, ramp_steps=2000)
    x_eq = -xc * np.log(1.0 - 2.0 / fc)
    assert abs(v[-1]) < 1e-7 and np.ptp(q[-1000:]) < 1e-3 * xc  # standing (a decaying swing of < 1 urad)
    assert q[-1] == pytest.approx(x_eq, rel=0.05)  # 3 % above: the ramp's small swings creep (Dahl's hysteresis)
    # a step of torque: the axis swings on the presliding spring and then stands, within a few x_c
    q, v = _mass_with_dahl(2.0, fc, xc)
    assert abs(v[-1]) < 1e-6 and np.ptp(q[-500:]) < 1e-8 and x_eq < q[-1] < 5 * xc
    # above the Coulomb level it slides: steady acceleration (T - fc) / J
    q, v = _mass_with_dahl(5.0, fc, xc)
    np.testing.assert_allclose(np.diff(v[-100:]) / 1e-3, (5.0 - fc) / 0.3, rtol=1e-3)


def test_no_presliding_element_keeps_the_smoothed_coulomb_path():
    assert presliding.DahlFriction.of(None, np.ones(6), 1e-3, 0.005) is None
    zero = presliding.PreslidingParams(np.zeros((6, 2)), np.zeros((6, 2)))
    assert presliding.DahlFriction.of(zero, np.ones(6), 1e-3, 0.005) is None


def test_replacing_the_coulomb_step_touches_only_the_presliding_axis():
    p = np.zeros((6, 1))
    p[3] = 1e-3
    dahl = presliding.DahlFriction.of(presliding.PreslidingParams(p, (p > 0).astype(float)), np.arange(1.0, 7.0), 1e-3,
                                      0.005, np.zeros(6))
    v = np.array([0.1, -0.2, 0.0, 0.3, 0.01, -1.0])
    tnh = np.tanh(v / 0.005)
    fr0, sl0 = np.arange(6.0), np.ones(6)
    fr, sl = dahl.replace_coulomb(v, tnh, np.ones(6), fr0, sl0)
    keep = [0, 1, 2, 4, 5]
    np.testing.assert_array_equal(fr[keep], fr0[keep])
    np.testing.assert_array_equal(sl[keep], sl0[keep])
    # axis 4 (fc 4): from rest, the exact step at v: z' = 1 - exp(-v dt / xc); the tanh step removed
    z1 = 1.0 - np.exp(-0.3 * 1e-3 / 1e-3)
    assert fr[3] == pytest.approx(3.0 - 4.0 * tnh[3] + 4.0 * z1, rel=1e-12)


@pytest.fixture(scope="module")
def cloos(cloos_committed):
    return cloos_committed


def test_the_scan_finds_the_presliding_distance_of_a_synthetic_residual(cloos):
    """Known answer: A's torque made of the identified model plus the Dahl friction of axis 4 at 2 mrad in
    place of the twin's tanh step; the scan on A picks 2 mrad, no stiction weight, and fits it all."""
    from types import SimpleNamespace

    from robident_twin.datasets.cloos_model import design_matrix
    from robident_twin.validation import cloos_wrist4 as w4
    from robident_twin.validation import twin_vs_real as tv

    model, real, recs, cal = cloos
    reg, base = model
    d = recs["A"].data
    dqm = d.dq_rad_s @ np.linalg.inv(np.asarray(reg.spec.coupling, dtype=float)).T
    tw = tv.CloosTwin(cal, model)
    x_true = float(10 ** -2.7)  # on the grid
    tau = (design_matrix(reg, base, d) @ real.beta).reshape(d.tau_Nm.shape)
    tau[:, 3] += tw.fc[3] * (presliding.dahl_path(dqm[:, 3], 1 / d.sample_rate_hz, x_true, periodic=True)
                             - np.tanh(dqm[:, 3] / tw.eps))
    recA = SimpleNamespace(data=dataclasses.replace(d, tau_Nm=tau))
    out = w4.calibrate_presliding(cal, real, recA, model, hold_Nm_rad=7e5)
    f = out.fit["presliding_fit"][0]
    assert f.best_rad == pytest.approx(x_true, rel=1e-9)
    assert out.explained_share[3] > 0.999 and f.stiction_rad == 0.0
    np.testing.assert_allclose(out.effects.presliding.presliding_rad[3], [0.0, x_true])
    assert out.effects.stribeck_Nm[3] == 0.0
    np.testing.assert_array_equal(out.effects.stribeck_Nm[[0, 1, 2, 4, 5]], np.asarray(cal.effects.stribeck_Nm)[[0, 1, 2, 4, 5]])
    # the YAML round trip carries it
    from robident_twin.validation import cloos_calibration as cc

    import yaml

    back = yaml.safe_load(yaml.safe_dump(cc.calibration_dict(out)))["presliding_friction"]
    np.testing.assert_allclose(np.asarray(back["presliding_rad"])[3], [0.0, x_true], rtol=1e-6)


def test_hold_requirement_of_the_standing_axis_4(cloos, cloos_data_root):
    """Process 2 (J4 standing): the identified model's torque on axis 4 (std 0.69 Nm, up to 3.2 Nm off its
    mean) against the real controller's error there (0.057 mdeg RMS): about 7e5 Nm/rad."""
    from robident_twin.validation import cloos_wrist4 as w4

    model, real, _, _ = cloos
    k, hold, std, e = w4.hold_requirement(real, model, cloos_data_root)
    assert 0.9e-6 < e < 1.1e-6  # 0.057 mdeg
    assert 0.6 < std < 0.8 and 2.5 < hold < 4.0 and 5e5 < k < 9e5


def test_presliding_reaches_the_twin_and_none_is_the_plain_path(cloos):
    """The switch's field reaches CloosTwin.replay: axis 4 with Dahl friction changes J4 standing on process 2's
    path (the first second); all-zero elements are the plain code path bit for bit."""
    from robident_twin.validation import twin_vs_real as tv

    model, _, recs, cal = cloos
    # the committed twin (axis 4 presliding since session 9) without its presliding axis: the plain path
    cal = dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, presliding=None))
    d = recs["process2_validation"].data
    short = dataclasses.replace(d, q_rad=d.q_rad[:500], dq_rad_s=d.dq_rad_s[:500], ddq_rad_s2=d.ddq_rad_s2[:500],
                                tau_Nm=d.tau_Nm[:500])
    p = np.zeros((6, 2))
    w = np.zeros((6, 2))
    plain = tv.CloosTwin(cal, model).replay(short, 1, 0, averaged=False)
    zero = dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, presliding=presliding.PreslidingParams(p, w)))
    np.testing.assert_array_equal(tv.CloosTwin(zero, model).replay(short, 1, 0, averaged=False).data.tau_Nm, plain.data.tau_Nm)
    p[3, 1], w[3, 1] = 1e-3, 1.0
    dahl = dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, presliding=presliding.PreslidingParams(p, w)))
    run = tv.CloosTwin(dahl, model).replay(short, 1, 0, averaged=False)
    assert np.max(np.abs(run.data.tau_Nm[:, 3] - plain.data.tau_Nm[:, 3])) > 0.05
