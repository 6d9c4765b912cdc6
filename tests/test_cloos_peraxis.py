"""The main axes' own modes per axis (robident_twin.validation.cloos_peraxis; issue 15, item 4, session 9):
the line after an axis's reversals and the decay damping on signals with known answers, the springs
retuned to each axis's own line, and run.py --per-axis-modes reaching the replayed twin."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import cloos_run

from robident_twin.validation import cloos_calibration as cc
from robident_twin.validation import cloos_peraxis as cpa
from robident_twin.validation import twin_vs_real as tv

FS = 500.0
ROOT = Path(__file__).resolve().parents[1]


def _bursts(f_hz, zeta, t_rev, n=5000, amp=1.0):
    """Free decays a e^(-zeta w t) sin(w_d t) starting at each reversal time."""
    t = np.arange(n) / FS
    w = 2 * np.pi * f_hz
    x = np.zeros(n)
    for t0 in t_rev:
        s = np.clip(t - t0, 0.0, None)
        x += np.where(t >= t0, amp * np.exp(-zeta * w * s) * np.sin(w * np.sqrt(1 - zeta ** 2) * s), 0.0)
    return x


def _velocity(t_rev, n=5000):
    """A velocity whose sign changes exactly after the samples nearest t_rev."""
    t = np.arange(n) / FS
    v = np.ones(n)
    for t0 in t_rev:
        v = np.where(t >= t0, -v, v)
    return v


def test_reversal_line_is_the_ringing_after_the_axis_reversals_not_the_stronger_steady_line():
    t_rev = (0.5, 3.0, 6.0, 8.5)
    t = np.arange(5000) / FS
    steady = 0.3 * np.sin(2 * np.pi * 6.9 * t)  # stronger over the record, but not after the reversals
    ring = _bursts(7.4, 0.05, t_rev, amp=1.0)
    r = steady + ring
    dq = _velocity(t_rev)
    assert tv.strongest_line_hz(r[:, None], FS) == pytest.approx(6.9, abs=0.05)
    assert cpa.reversal_line_hz(r, dq, FS) == pytest.approx(7.4, abs=0.1)
    with pytest.raises(ValueError, match="no reversal"):
        cpa.reversal_line_hz(r, np.ones_like(r), FS)


@pytest.mark.parametrize("zeta", [0.02, 0.05, 0.1])
def test_decay_damping_of_free_decays_after_isolated_reversals(zeta):
    t_rev = (0.5, 3.0, 6.0, 8.5)
    r = _bursts(7.0, zeta, t_rev) + 1e-3 * np.random.default_rng(0).standard_normal(5000)
    z = cpa.reversal_decay_damping(r, _velocity(t_rev), FS, 7.0)
    assert z.size == 4  # every reversal isolated (2.5 s apart, the last 1.5 s before the end)
    np.testing.assert_allclose(z, zeta, atol=0.15 * zeta + 0.002)
    # a reversal followed by another within the window is not isolated
    assert cpa.reversal_decay_damping(r, _velocity((0.5, 0.9, 3.0)), FS, 7.0).size == 2


def _calibration():
    fx = tv.TwinEffects(*(np.zeros((6, 0)),) * 3, np.zeros(6), 0.05, np.zeros(6), np.zeros(6),
                        stiffness_Nm_rad=np.array([1e5, 2e5, 3e4, 0, 0, 90.0]), damping_ratio=0.1)
    return tv.Calibration(np.zeros(3), fx, np.zeros(6), mode_hz=6.9, wrist_mode_hz=8.0)


def test_with_per_axis_modes_retunes_only_axes_1_and_3():
    cal = _calibration()
    ev = cpa.PerAxisModes((0, 2), np.array([7.0, 7.3]), np.array([7.2, 7.4]),
                          (np.array([0.05, 0.07]), np.array([0.03, 0.04])), np.array([0.06, 0.035]))
    out = cpa.with_per_axis_modes(cal, ev)
    k0, k = cal.effects.stiffness_Nm_rad, out.effects.stiffness_Nm_rad
    # the locked-motor frequency sqrt(k / J) / 2 pi moves from 6.9 Hz to each axis's own line
    np.testing.assert_allclose(np.sqrt(k[[0, 2]] / k0[[0, 2]]) * 6.9, [7.0, 7.3], rtol=1e-12)
    np.testing.assert_array_equal(k[[1, 3, 4, 5]], k0[[1, 3, 4, 5]])
    assert out.effects.damping_ratio == 0.1 and out.fit["per_axis_modes"] is ev
    outd = cpa.with_per_axis_modes(cal, ev, damping=True)
    np.testing.assert_allclose(outd.effects.damping_ratio, [0.06, 0.1, 0.035, 0.1, 0.1, 0.1])
    # a spring-less axis or a non-positive decay estimate is refused, not silently set
    with pytest.raises(ValueError, match="axis 4"):
        cpa.with_per_axis_modes(cal, dataclasses.replace(ev, axes=(0, 3)))
    with pytest.raises(ValueError, match="axis 3"):
        cpa.with_per_axis_modes(cal, dataclasses.replace(ev, damping_median=np.array([0.06, -0.01])), damping=True)


def test_real_axes_1_and_3_have_their_own_lines_and_the_retuned_springs_sit_there(cloos_data_root):
    """On the real A residual (identification data): J1's and J3's own lines differ from the summed
    residual's (J2's 6.9 Hz); the committed springs, retuned, put each axis's locked-motor mode at the
    start pose on its own line."""
    from robident_twin.datasets.cloos_model import build_model

    model = build_model(symmetric=True)
    real, recs = tv.real_statistics(cloos_data_root, model)
    ev = cpa.real_residual_evidence(real, recs["A"], model)
    np.testing.assert_allclose(ev.line_hz, [7.0, 7.3], atol=0.05)
    np.testing.assert_allclose(ev.reversal_line_hz, [7.2, 7.4], atol=0.05)
    assert all(0.0 < m < 0.1 for m in ev.damping_median)  # lighter than the committed estimate 0.1
    cal = tv.calibrate(real, recs["A"], model)  # every main-axis spring at the summed line
    out = cpa.with_per_axis_modes(cal, ev)
    rigid = dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, stiffness_Nm_rad=np.zeros(6)))
    J = tv.CloosTwin(rigid, model).link_side_inertia(recs["A"].data.q_rad[0])  # as twin_vs_real.calibrate
    f = np.sqrt(out.effects.stiffness_Nm_rad[:3] / J[:3]) / (2 * np.pi)
    np.testing.assert_allclose(f, [ev.line_hz[0], cal.mode_hz, ev.line_hz[1]], rtol=2e-3)
    # the committed twin (session 9: per-axis modes adopted) has these springs
    committed = cc.load_calibration(ROOT / "sim_assets" / "cloos_qrc350" / "twin_calibrated.yaml")
    np.testing.assert_allclose(committed.effects.stiffness_Nm_rad[:3], out.effects.stiffness_Nm_rad[:3], rtol=1e-3)


def test_with_axis_damping_fit_sets_only_the_adopted_axes_with_their_share_from_a():
    """J1: the process files ask for more damping and A still reaches its band (share from A): adopted;
    J3: more damping takes A's ringing away (A's misfit grows): not adopted, J3 keeps 0.1."""
    files = ("A", "process1", "process2")
    j1 = cc.choose_main_mode_damping((0.1, 0.3, 0.6), files, np.array([[10.0], [5.0], [5.0]]),
                                     np.array([[[4.0], [20.0], [20.0]], [[4.0], [10.0], [10.0]], [[4.0], [6.0], [6.0]]]),
                                     np.array([[[16.0], [20.0], [20.0]], [[14.0], [10.0], [10.0]], [[12.0], [6.0], [6.0]]]))
    j3 = cc.choose_main_mode_damping((0.1, 0.3, 0.6), files, np.array([[20.0], [3.0], [4.0]]),
                                     np.array([[[3.0], [9.0], [9.0]], [[3.0], [5.0], [5.0]], [[3.0], [4.0], [4.0]]]),
                                     np.array([[[30.0], [9.0], [9.0]], [[12.0], [5.0], [5.0]], [[9.0], [4.0], [4.0]]]))
    assert (j1.best, j1.adopted) == (2, True) and (j3.best, j3.adopted) == (1, False)
    cal = _calibration()
    cal = dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, link_friction_share=np.full(6, 0.5)))
    out = cpa.with_axis_damping_fit(cal, {0: j1, 2: j3})
    np.testing.assert_allclose(out.effects.damping_ratio, [0.6, 0.1, 0.1, 0.1, 0.1, 0.1])
    np.testing.assert_allclose(out.effects.link_friction_share, [j1.share[2][0], 0.5, 0.5, 0.5, 0.5, 0.5])
    assert np.sqrt(4.0 ** 2 + j1.share[2][0] ** 2 * (12.0 ** 2 - 4.0 ** 2)) == pytest.approx(10.0)  # A met at 0.6
    assert set(out.fit["axis_damping_fit"]) == {0, 2}


def test_per_axis_modes_go_into_the_yaml_and_back(tmp_path):
    import yaml

    cal = cc.load_calibration(ROOT / "sim_assets" / "cloos_qrc350" / "twin_calibrated.yaml")
    ev = cpa.PerAxisModes((0, 2), np.array([7.0, 7.3]), np.array([7.2, 7.4]),
                          (np.array([0.05, 0.07]), np.array([0.03, 0.04])), np.array([0.06, 0.035]))
    out = cpa.with_per_axis_modes(cal, ev, damping=True)
    cc.write_calibration_yaml(out, tmp_path / "c.yaml")
    back = cc.load_calibration(tmp_path / "c.yaml")
    np.testing.assert_allclose(back.effects.stiffness_Nm_rad, out.effects.stiffness_Nm_rad, atol=0.5)
    np.testing.assert_allclose(back.effects.damping_ratio, [0.06, 0.1, 0.035, 0.1, 0.1, 0.1])
    rec = yaml.safe_load((tmp_path / "c.yaml").read_text())["calibrated_from_real_data"]["per_axis_modes"]
    assert rec["axes"] == [1, 3] and rec["line_hz"] == [7.0, 7.3] and rec["damping"] == "decay median"
    # the committed YAML (per-axis modes adopted in session 9) carries the record, lines from the real A residual
    committed = yaml.safe_load((ROOT / "sim_assets" / "cloos_qrc350" / "twin_calibrated.yaml").read_text())
    assert committed["calibrated_from_real_data"]["per_axis_modes"]["axes"] == [1, 3]


@pytest.mark.parametrize("flags", [[], ["--per-axis-modes"], ["--per-axis-modes", "--per-axis-damping", "decay"],
                                   ["--per-axis-modes", "--per-axis-damping", "fit"],
                                   ["--dissipative", "--wrist-loop", "--per-axis-modes"]])
def test_run_py_per_axis_modes_after_the_wrist_loop_before_the_link_friction(flags, monkeypatch, tmp_path):
    """The retuned springs reach every later step and the replayed twin; the flags compose (the steps
    are recorders: the order and the hand-over are the property)."""
    log, history = cloos_run.record_chain(monkeypatch, flags, tmp_path)
    wrist = ["wrist"] if "--wrist-loop" in flags else []
    per = [f"per_axis(damping={'decay' in flags})"] if "--per-axis-modes" in flags else []
    fit = ["axis_fit", "with_axis_fit"] if "fit" in flags else []
    assert log == [f"calibrate(dissipative={'--dissipative' in flags})", *wrist, *per, "link", *fit, "mode", "with_mode",
                   "loop", "twin"]
    assert history == ("fit", *wrist, *(["per_axis"] if per else []), "link", *fit[1:], "with_mode", "loop")

