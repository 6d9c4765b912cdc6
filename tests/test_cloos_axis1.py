"""Axis 1's extra friction on all the identification data (robident_twin.validation.cloos_axis1; issue 15,
item 4, session 10): the joint fit's weighting and offsets, the Dahl distance scan on synthetic residuals with
known answers, the calibration step on the real files' paths, and run.py --axis1-friction reaching the twin."""
from __future__ import annotations

import dataclasses

import cloos_run
import numpy as np
import pytest

from robident_twin.validation import cloos_axis1 as ax1
from robident_twin.validation import presliding

EPS = 0.001
VS = 0.05


def _target(name, v, tau_abs, coef, offset=0.0, dt=0.002, periodic=False):
    F = ax1.friction_columns(v, tau_abs, VS, EPS)
    return ax1.FrictionTarget(name, v, F @ coef + offset, F, np.zeros_like(v), np.ones(v.size, bool), v, dt, periodic)


def test_joint_fit_recovers_one_law_with_a_free_offset_per_file():
    """Known answer: two files of one friction law, each with its own static offset; the joint fit returns
    the law and the offsets, and explains each file entirely."""
    rng = np.random.default_rng(0)
    c = np.array([-30.0, 4.0, 0.05])
    a = _target("A", rng.uniform(-2, 2, 800), rng.uniform(0, 400, 800), c, offset=-3.0)
    b = _target("p", rng.uniform(-0.3, 0.3, 300), rng.uniform(0, 100, 300), c, offset=7.5)
    f = ax1.fit_friction([a, b])
    np.testing.assert_allclose(f.coef, c, rtol=1e-9)
    np.testing.assert_allclose(f.offset_Nm, [-3.0, 7.5], rtol=1e-9)
    assert f.files == ("A", "p") and min(f.explained.values()) > 1 - 1e-12


def test_joint_fit_weights_each_file_equally_whatever_its_length():
    """Two files with the same speeds and loads but different laws, one ten times as long (its samples
    repeated): weighted 1 / sample count, the joint law is the mean of the two."""
    rng = np.random.default_rng(1)
    v, t = rng.uniform(-1, 1, 200), rng.uniform(0, 300, 200)
    c1, c2 = np.array([-40.0, 2.0, 0.04]), np.array([0.0, 10.0, 0.0])
    long = _target("long", np.tile(v, 10), np.tile(t, 10), c1)
    short = _target("short", v, t, c2)
    f = ax1.fit_friction([long, short])
    np.testing.assert_allclose(f.coef, (c1 + c2) / 2, rtol=1e-9, atol=1e-12)
    # each file alone gives its own law
    np.testing.assert_allclose(ax1.fit_friction([long, short], ["short"]).coef, c2, atol=1e-9)


def _reversing_speed(n, dt, a_rad_s2, v_max):
    """A triangle-wave speed: ramps of acceleration a_rad_s2 between -v_max and v_max (reversals)."""
    t = np.arange(n) * dt
    period = 4 * v_max / a_rad_s2
    ph = (t % period) / period
    return v_max * np.where(ph < 0.5, 4 * ph - 1, 3 - 4 * ph)


def test_the_scan_finds_the_dahl_distance_shared_by_a_fast_and_a_slow_file():
    """Known answer: a fast periodic path (A-like, 2 rad/s^2) and a slow single run (0.3 rad/s^2) whose target is
    the Dahl friction at 0.4 mrad in place of the tanh step plus v|v| and load terms; the joint scan picks
    0.4 mrad and the coefficients, each file's target explained entirely; the Stribeck form cannot do that."""
    fc, fv, eps_twin, x_true = 76.8, 62.9, 0.005, float(ax1.PRESLIDING_GRID_RAD[8])
    out = []
    for name, dt, a, vmax, periodic in (("A", 0.002, 2.0, 1.5, True), ("slow", 0.01, 0.3, 0.2, False)):
        n = round(2 * 4 * vmax / a / dt)  # two periods of the triangle
        v = _reversing_speed(n, dt, a, vmax)
        v[np.abs(v) < 1e-4] = 1e-4  # no exact zero (the sign of the state's target)
        F = ax1.friction_columns(v, 200 + 100 * np.sin(np.arange(n) * dt), VS, EPS)
        z = presliding.dahl_path(v, dt, x_true, periodic=periodic)
        y = fc * (z - np.tanh(v / eps_twin)) + F[:, 1:] @ np.array([3.0, 0.02])
        out.append(ax1.FrictionTarget(name, v, y, F, np.zeros(n), np.ones(n, bool), v, dt, periodic))
    s = ax1.scan_presliding(out, fc, fv, eps_twin)
    assert s.grid_rad[s.best] == pytest.approx(x_true, rel=1e-12)
    np.testing.assert_allclose(s.coef[s.best], [3.0, 0.02], rtol=1e-6)
    assert min(s.explained.values()) > 1 - 1e-9
    assert max(ax1.fit_friction(out).explained.values()) < 0.99  # the static Stribeck form misses it


@pytest.fixture(scope="module")
def cloos(cloos_committed, cloos_data_root):
    from robident_twin.datasets import cloos_icma2020 as ds

    return (*cloos_committed, ds.load("process2", cloos_data_root).data)


def test_with_presliding_on_the_real_paths_recovers_a_synthetic_axis_1(cloos):
    """Known answer on the real A and process-2 identification paths: the torque made of the identified model,
    the calibrated lines and axis 1's Dahl friction at 0.25 mrad (plus v|v| and load terms) in place of the tanh
    step; with_presliding sets axis 1's element there with those terms and no Stribeck term, keeps axis 4's
    element and every other axis's friction, and the YAML carries it."""
    import yaml

    from robident_twin.datasets.cloos_model import design_matrix
    from robident_twin.validation import cloos_calibration as cc
    from robident_twin.validation import twin_vs_real as tv

    model, real, recs, cal, p2 = cloos
    reg, base = model
    tw = tv.CloosTwin(cal, model)
    x_true = float(ax1.PRESLIDING_GRID_RAD[10])
    files = {}
    for name, d, periodic in (("A", recs["A"].data, True), ("process2", p2, False)):
        qm, dqm, ddqm = (x @ tw.Cinv.T for x in (d.q_rad, d.dq_rad_s, d.ddq_rad_s2))
        tau = (design_matrix(reg, base, d) @ real.beta).reshape(d.tau_Nm.shape)
        J = np.array([tw.link_side_inertia(x)[0] for x in d.q_rad]) + tw.ia[0]
        F = ax1.friction_columns(dqm[:, 0], tau[:, 0], cal.effects.stribeck_vel_rad_s, cal.effects.sign_eps_rad_s)
        z = presliding.dahl_path(dqm[:, 0], 1 / d.sample_rate_hz, x_true, periodic=periodic)
        tau[:, 0] += (ax1.lines_torque_Nm(cal, 0, qm[:, 0], dqm[:, 0], ddqm[:, 0], J)
                      + tw.fc[0] * (z - np.tanh(dqm[:, 0] / tw.eps)) + F[:, 1:] @ np.array([2.0, 0.01]))
        files[name] = dataclasses.replace(d, tau_Nm=tau)
    out = ax1.with_presliding(cal, real, model, files)
    scan = out.fit["axis1_presliding"]
    assert scan.grid_rad[scan.best] == pytest.approx(x_true, rel=1e-12) and min(scan.explained.values()) > 0.999
    fx = out.effects
    np.testing.assert_allclose(fx.presliding.presliding_rad[0], [0.0, x_true])
    np.testing.assert_allclose(fx.presliding.weight[0], [0.0, 1.0])
    np.testing.assert_array_equal(fx.presliding.presliding_rad[3], cal.effects.presliding.presliding_rad[3])
    assert fx.stribeck_Nm[0] == 0.0
    np.testing.assert_allclose([fx.visc2_Nms2_rad2[0], fx.load_coulomb[0]], [2.0, 0.01], rtol=1e-4)
    for k in ("stribeck_Nm", "visc2_Nms2_rad2", "load_coulomb"):
        np.testing.assert_array_equal(getattr(fx, k)[1:], np.asarray(getattr(cal.effects, k))[1:])
    back = yaml.safe_load(yaml.safe_dump(cc.calibration_dict(out)))
    np.testing.assert_allclose(np.asarray(back["presliding_friction"]["presliding_rad"])[0], [0.0, x_true], rtol=1e-6)
    assert "jointly on A, process2" in back["axis1_friction"]["source"]
    assert "axis1_friction" not in cc.calibration_dict(cal)


def test_axis_1_presliding_reaches_the_replay(cloos):
    """The field reaches CloosTwin.replay on the elastic axis 1: its Dahl element changes J1's torque on a
    slow process path (the first 2 s of process 2's identification file) and no other axis's element moves."""
    from robident_twin.validation import twin_vs_real as tv

    model, _, _, cal, p2 = cloos
    short = dataclasses.replace(p2, q_rad=p2.q_rad[:1000], dq_rad_s=p2.dq_rad_s[:1000],
                                ddq_rad_s2=p2.ddq_rad_s2[:1000], tau_Nm=p2.tau_Nm[:1000])
    plain = tv.CloosTwin(cal, model).replay(short, 1, 0, averaged=False).data.tau_Nm
    xc = np.array(cal.effects.presliding.presliding_rad, dtype=float)
    w = np.array(cal.effects.presliding.weight, dtype=float)
    xc[0], w[0] = (0.0, 2e-4), (0.0, 1.0)
    dahl = dataclasses.replace(cal, effects=dataclasses.replace(cal.effects,
                                                                 presliding=presliding.PreslidingParams(xc, w)))
    tau = tv.CloosTwin(dahl, model).replay(short, 1, 0, averaged=False).data.tau_Nm
    assert np.max(np.abs(tau[:, 0] - plain[:, 0])) > 1.0


@pytest.mark.parametrize("flags", [["--axis1-friction", "presliding"],
                                   ["--dissipative", "--wrist4", "--per-axis-modes", "--axis1-friction", "joint"],
                                   ["--dissipative", "--wrist4", "--per-axis-modes"]])
def test_run_py_axis1_friction_after_the_friction_fit_and_wrist4_before_the_springs(flags, monkeypatch, tmp_path):
    """run.py --axis1-friction MODE: the step runs right after the friction fit (and --wrist4) with the chain's
    dissipative switch, before the springs and the link-side share, and its calibration reaches the replayed twin;
    without the flag it is not called (the steps are recorders: the order and the hand-over are the property)."""
    from types import SimpleNamespace

    log_ax = []

    def step(cal, real, model, recA, root, mode, dissipative=True):
        log_ax.append((mode, dissipative))
        return SimpleNamespace(history=cal.history + ("axis1",), effects=cal.effects, fit={})

    monkeypatch.setattr(ax1, "calibrate_axis1_friction", step)
    monkeypatch.setattr(ax1, "summary_line", lambda cal: "")
    _, history = cloos_run.record_chain(monkeypatch, flags, tmp_path)
    mode = flags[flags.index("--axis1-friction") + 1] if "--axis1-friction" in flags else None
    assert log_ax == ([(mode, "--dissipative" in flags)] if mode else [])
    w4 = ["wrist4"] if "--wrist4" in flags else []
    per = ["per_axis"] if "--per-axis-modes" in flags else []
    assert history == ("fit", *w4, *(["axis1"] if mode else []), *per, "link", "with_mode", "loop")


@pytest.mark.parametrize("s_true", [0.16, 0.62])
def test_refine_link_share_solves_axis_1s_band_with_the_other_shares_held(s_true, cloos, monkeypatch):
    """Known answer: a twin whose axis-1 band grows with axis 1's share as 0.6 + 0.4 (s / s_true)^1.5 times the
    real band (so neither linear nor the calibration's quadratic law), the other axes' shares recorded at each
    replay: the refinement lands within 2 % of the real band (so at s_true within 3.3 %), and never moves the other
    shares."""
    from robident_twin.validation import cloos_calibration as cc

    model, real, recs, cal, _ = cloos
    seen = []

    def residual(c, model, recA, n, seed):
        sh = np.asarray(c.effects.link_friction_share, dtype=float)
        seen.append(sh.copy())
        return np.full((10, 6), 0.6 + 0.4 * (sh[0] / s_true) ** 1.5)

    monkeypatch.setattr(cc, "_twin_residual", residual)
    monkeypatch.setattr(cc, "ringing_band_rms", lambda r, fs: np.abs(r).mean(axis=0) if r.shape[0] == 10
                        else np.ones(6))
    out = ax1.refine_link_share(cal, model, recs["A"], real)
    ref = out.fit["axis1_share_refinement"]
    assert ref.real_Nm == 1.0 and abs(ref.band_Nm[ref.shares.index(ref.share)] - 1.0) <= 0.02
    # the band's slope at s_true is 0.6 / s_true: 2 % of the band is 3.3 % of the share
    assert out.effects.link_friction_share[0] == pytest.approx(s_true, rel=0.034)
    np.testing.assert_array_equal(out.effects.link_friction_share[1:], np.asarray(cal.effects.link_friction_share)[1:])
    for sh in seen:
        np.testing.assert_array_equal(sh[1:], np.asarray(cal.effects.link_friction_share)[1:])
    assert len(seen) <= 6


def test_run_py_axis1_share_right_after_the_link_side_share(monkeypatch, tmp_path):
    """run.py --axis1-share: the refinement runs right after the link-side share, its calibration reaches the
    damping fit and the replayed twin (recorders)."""
    from types import SimpleNamespace

    monkeypatch.setattr(ax1, "refine_link_share", lambda c, model, recA, real: SimpleNamespace(
        history=c.history + ("share",), effects=c.effects, fit={}))
    monkeypatch.setattr(ax1, "share_line", lambda cal: "")
    _, history = cloos_run.record_chain(monkeypatch, ["--dissipative", "--wrist4", "--per-axis-modes",
                                                      "--axis1-share"], tmp_path)
    assert history == ("fit", "wrist4", "per_axis", "link", "share", "with_mode", "loop")
