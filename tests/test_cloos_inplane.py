"""The main axes' in-plane mode on the wrist's pitch axis (robident_twin.validation.cloos_inplane; issue 15,
item 4, session 10): the drive transfer, the loop bandwidth's interpolation and the mode's shape after
reversals on signals with known answers, the torque -g cos(q4) dd(d2) reaching the replayed twin, the YAML
and run.py --inplane-wrist's place in the calibration chain."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import cloos_run

from robident_twin.processing.signal import IdentificationData
from robident_twin.validation import cloos_calibration as cc
from robident_twin.validation import cloos_inplane as ci

FS = 500.0
ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "sim_assets" / "cloos_qrc350" / "twin_calibrated.yaml"


def _band_noise(n, lo, hi, seed):
    rng = np.random.default_rng(seed)
    X = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1 / FS)
    X[(f < lo) | (f > hi)] = 0.0
    return np.fft.irfft(X, n), X, f


@pytest.mark.parametrize("share, phase_deg", [(0.2, 0.0), (0.6, -28.0)])
def test_rigid_share_known_answer(share, phase_deg):
    """q = -share e^(i phase) tau / (J w^2) in the band: the share and the phase come back."""
    n, J = 20000, 0.33
    tau, T, f = _band_noise(n, 4.0, 11.0, 1)
    H = np.zeros_like(T)
    m = f > 0
    H[m] = -share * np.exp(1j * np.radians(phase_deg)) / (J * (2 * np.pi * f[m]) ** 2)
    q = np.fft.irfft(T * H, n)
    s, p = ci.rigid_share(q, tau, J, FS)
    assert s == pytest.approx(share, rel=0.02)
    assert p == pytest.approx(phase_deg, abs=1.0)


def test_bandwidth_for_share_interpolates_in_log_share():
    bw, sh = (10.0, 20.0, 30.0), (0.5, 0.2, 0.1)
    assert ci.bandwidth_for_share(bw, sh, 0.2) == pytest.approx(20.0)
    assert ci.bandwidth_for_share(bw, sh, np.sqrt(0.5 * 0.2)) == pytest.approx(15.0)  # log midpoint
    assert ci.bandwidth_for_share(bw, sh, 0.9) == 10.0 and ci.bandwidth_for_share(bw, sh, 0.05) == 30.0


def test_gain_for_ratio_is_the_line_through_two_replays():
    assert ci.gain_for_ratio(1.0, 0.02, 0.03, 0.035) == pytest.approx(1.5)
    assert ci.gain_for_ratio(2.0, 0.02, -0.02, 0.0) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        ci.gain_for_ratio(1.0, 0.02, 0.02, 0.03)


def test_burst_shape_recovers_the_wrist_share_over_cos_q4():
    """J2 rings after each of its reversals; J5 carries k cos(q4) of it (q4 held per window) plus
    out-of-band content: the per-window ratios are k cos(q4) and the slope is k."""
    n, k = 6000, 0.034
    t = np.arange(n) / FS
    t_rev = (0.5, 2.5, 4.5, 6.5, 8.5, 10.5)
    dq2 = np.ones(n)
    x2 = np.zeros(n)
    for t0 in t_rev:
        dq2 = np.where(t >= t0, -dq2, dq2)
        s = np.clip(t - t0, 0.0, None)
        x2 += np.where(t >= t0, 50 * np.exp(-0.05 * 2 * np.pi * 7 * s) * np.sin(2 * np.pi * 7 * s), 0.0)
    q4 = np.radians(np.repeat([-13.0, 49.0, 80.0, 100.0, 0.0, 170.0], 1000))
    x5 = np.zeros(n)
    for i, t0 in enumerate(t_rev):  # each burst seen with the cos(q4) of its window
        w = (t >= t0) & (t < t0 + 0.6)
        x5[w] += k * np.cos(q4[w]) * x2[w]
    x5 += 0.5 * np.sin(2 * np.pi * 25 * t)  # outside the band
    x = np.zeros((n, 6))
    x[:, 1], x[:, 4] = x2, x5
    ratio, cos, slope = ci.burst_shape(x, dq2, np.cos(q4), FS)
    assert len(ratio) == 6
    np.testing.assert_allclose(cos, np.cos(np.radians([-13.0, 49.0, 80.0, 100.0, 0.0, 170.0])), atol=1e-12)
    np.testing.assert_allclose(ratio, k * cos, atol=0.002)
    assert slope == pytest.approx(k, rel=0.05)


def _reference(q4_rad, n=400):
    """A short process-like reference at 500 Hz: axis 2 swings (rings the mode), the rest stands; q4 held."""
    t = np.arange(n) / FS
    q = np.zeros((n, 6))
    q[:, 1] = 0.05 * (1 - np.cos(2 * np.pi * 1.5 * t))
    q[:, 2], q[:, 3], q[:, 4] = -0.3, q4_rad, 0.6
    dq = np.gradient(q, 1 / FS, axis=0)
    return IdentificationData(q_rad=q, dq_rad_s=dq, ddq_rad_s2=np.gradient(dq, 1 / FS, axis=0),
                              tau_Nm=np.zeros((n, 6)), sample_rate_hz=FS, measurement="motor_torque", n_periods=1)


@pytest.fixture(scope="module")
def quiet_cal():
    from robident_twin.validation import repetition_noise as rn

    cal = cc.load_calibration(COMMITTED)
    return ci.with_wrist5_loop(dataclasses.replace(cal, effects=rn.without_noise(cal.effects)), 21.6)


def _tau(cal, q4):
    from robident_twin.datasets.cloos_model import build_model
    from robident_twin.validation import twin_vs_real as tv

    return tv.CloosTwin(cal, build_model(symmetric=True)).replay(_reference(q4), 1, 0, averaged=False).data.tau_Nm


def test_inplane_torque_reaches_the_twin_on_axis_5_projected_by_cos_q4(quiet_cal):
    """With g the replayed J5 torque changes by the mode's share (q4 = 0); at q4 = 90 deg the wrist's pitch
    axis is normal to the arm's plane and g changes nothing; g = 0 is the plain twin bit for bit."""
    base = _tau(quiet_cal, 0.0)
    np.testing.assert_array_equal(_tau(ci.with_inplane(quiet_cal, 0.0), 0.0), base)
    on = _tau(ci.with_inplane(quiet_cal, 1.0), 0.0)
    d5 = np.sqrt(np.mean((on[:, 4] - base[:, 4]) ** 2))
    assert d5 > 0.05 * np.sqrt(np.mean(base[:, 4] ** 2))  # the mode's share on the wrist
    side = _tau(quiet_cal, np.pi / 2)
    d5_side = np.sqrt(np.mean((_tau(ci.with_inplane(quiet_cal, 1.0), np.pi / 2)[:, 4] - side[:, 4]) ** 2))
    assert d5_side < 0.01 * d5  # (q4 itself moves a little off 90 deg in the replay)


def test_inplane_goes_into_the_yaml_and_back(tmp_path, quiet_cal):
    out = ci.with_inplane(quiet_cal, 1.7)
    cc.write_calibration_yaml(out, tmp_path / "c.yaml")
    back = cc.load_calibration(tmp_path / "c.yaml")
    np.testing.assert_allclose(back.effects.inplane_kgm2, [0, 0, 0, 0, 1.7, 0])
    assert back.effects.inverter_velocity_bandwidth_hz[4] == pytest.approx(21.6)
    assert cc.load_calibration(COMMITTED).effects.inplane_kgm2 is None  # the committed twin is unchanged


@pytest.mark.parametrize("flags", [["--inplane-wrist"], ["--dissipative", "--wrist4", "--per-axis-modes", "--inplane-wrist"],
                                   ["--dissipative", "--wrist-loop", "--inplane-wrist"]])
def test_run_py_inplane_wrist_after_the_main_mode_before_the_loop_pass(flags, monkeypatch, tmp_path):
    """The in-plane step sees the calibrated main mode and hands its twin to the pass through the loop and
    to the replay; it composes with the other switches (the steps are recorders)."""
    log, history = cloos_run.record_chain(monkeypatch, flags, tmp_path)
    assert log.index("with_mode") < log.index("inplane") < log.index("loop")
    assert history[-3:] == ("with_mode", "inplane", "loop")


def test_run_py_without_the_switch_has_no_inplane_step(monkeypatch, tmp_path):
    log, history = cloos_run.record_chain(monkeypatch, [], tmp_path)
    assert "inplane" not in log and "inplane" not in history


def test_real_wrist_share_follows_cos_q4_after_axis_2_reversals(cloos_data_root):
    """The evidence the model rests on (Trajectory A, identification data): J5/J2 after axis 2's reversals
    grows with cos q4, slope about 0.033, against the twin's inertial coupling alone."""
    from robident_twin.datasets.cloos_model import build_model, design_matrix
    from robident_twin.validation import twin_vs_real as tv

    reg, base = model = build_model(symmetric=True)
    real, recs = tv.real_statistics(cloos_data_root, model)
    d = recs["A"].data
    r = d.tau_Nm - (design_matrix(reg, base, d) @ real.beta).reshape(d.tau_Nm.shape)
    ratio, cos, slope = ci.burst_shape(r, d.dq_rad_s[:, 1], np.cos(d.q_rad[:, 3]), d.sample_rate_hz)
    assert len(ratio) == 6 and np.corrcoef(ratio, cos)[0, 1] > 0.8
    assert 0.025 < slope < 0.04


def test_lowest_mode_of_coupled_springs_known_answers():
    """Uncoupled: sqrt(k / m) per axis, the lowest; coupled: below both (two equal springs k on
    M = [[2m, m], [m, m]]: w^2 = k (3 - sqrt(5)) / (2 m))."""
    k, m = 1.5e5, 70.0
    assert ci.lowest_mode_hz([k, 4 * k], np.diag([m, m])) == pytest.approx(np.sqrt(k / m) / (2 * np.pi))
    w2 = k * (3 - np.sqrt(5)) / (2 * m)
    assert ci.lowest_mode_hz([k, k], [[2 * m, m], [m, m]]) == pytest.approx(np.sqrt(w2) / (2 * np.pi))
    assert ci.lowest_mode_hz([k, k], [[2 * m, m], [m, m]]) < ci.lowest_mode_hz([k, k], np.diag([2 * m, m]))


def test_inplane_springs_put_the_coupled_mode_on_the_real_line(cloos_data_root):
    """Trajectory A (identification data): after the scaling, the median of the coupled axes-2/3 mode over
    the poses of axis 2's reversals is the real J2 line after them; the springs' ratio and axis 1 are kept."""
    from robident_twin.datasets.cloos_model import build_model
    from robident_twin.validation import twin_vs_real as tv

    model = build_model(symmetric=True)
    real, recs = tv.real_statistics(cloos_data_root, model)
    cal = cc.load_calibration(COMMITTED)
    out = ci.calibrate_inplane_springs(cal, model, recs["A"], real)
    f = out.fit["inplane_springs"]
    assert f["line_real_hz"] == pytest.approx(6.8, abs=0.15)
    assert np.median(f["coupled_mode_hz"]) < f["line_real_hz"] - 0.3  # the per-axis rule leaves it low
    k0, k1 = np.asarray(cal.effects.stiffness_Nm_rad), np.asarray(out.effects.stiffness_Nm_rad)
    assert k1[0] == k0[0] and k1[5] == k0[5] and k1[1] / k1[2] == pytest.approx(k0[1] / k0[2])
    tw = tv.CloosTwin(out, model)
    d = recs["A"].data
    poses = d.q_rad[cc.reversal_indices(d.dq_rad_s[:, 1])]
    assert np.median([ci.coupled_mode_hz(tw, q, k1) for q in poses]) == pytest.approx(f["line_real_hz"], rel=1e-6)


@pytest.mark.parametrize("flags", [["--inplane-springs"], ["--dissipative", "--wrist4", "--per-axis-modes", "--inplane-springs",
                                                          "--inplane-wrist"]])
def test_run_py_inplane_springs_after_the_per_axis_modes_before_the_link_share(flags, monkeypatch, tmp_path):
    log, history = cloos_run.record_chain(monkeypatch, flags, tmp_path)
    assert log[log.index("inplane_springs") + 1] == "link"
    if "--per-axis-modes" in flags:
        assert log.index("per_axis(damping=False)") < log.index("inplane_springs")
    assert "inplane_springs" in history and history.index("inplane_springs") < history.index("link")
    assert ("inplane" in history) == ("--inplane-wrist" in flags)
