"""The main axes' mode damping of the CLOOS twin, fitted on Trajectory A and the process
identification files (robident_twin.validation.cloos_calibration.fit_main_mode_damping): its
least-squares step, the adoption rule, and the per-axis damping's way into the YAML and back."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from robident_twin.validation import cloos_calibration as cc, twin_vs_real as tv

CALIBRATION = Path(__file__).resolve().parents[1] / "sim_assets" / "cloos_qrc350" / "twin_calibrated.yaml"
FILES = ("A", "process1", "process2")


def _bands(real, a_share0, a_share1, proc):
    """Band tables (k dampings, files, 3 axes): on A the given share-0/1 RMS; on the process files
    ``proc[k]`` for both shares (their ramps ring whatever the friction share)."""
    k = len(a_share0)
    b0, b1 = np.zeros((k, 3, 3)), np.zeros((k, 3, 3))
    for i in range(k):
        b0[i, 0], b1[i, 0] = a_share0[i], a_share1[i]
        b0[i, 1:], b1[i, 1:] = proc[i], proc[i]
    return real, b0, b1


def test_a_damping_that_trades_trajectory_a_for_the_process_files_is_not_adopted():
    # A reaches its target at 0.1 (share 0.6) but not at 0.6 (share 1 gives half of it); the
    # process files ring 4x the real at 0.1 and 1.2x at 0.6: the least squares pick 0.6, a compromise
    real = np.array([[10.0, 40.0, 20.0], [5.0, 5.0, 3.0], [5.0, 8.0, 4.0]])
    a0 = [np.array([4.0, 8.0, 3.0])] * 3
    a1 = [np.array([16.0, 60.0, 30.0]), np.array([12.0, 35.0, 15.0]), np.array([9.0, 20.0, 10.0])]
    proc = [4.0 * real[1:], 2.0 * real[1:], 1.2 * real[1:]]
    fit = cc.choose_main_mode_damping((0.1, 0.3, 0.6), FILES, *_bands(real, a0, a1, proc))
    assert fit.best == 2 and not fit.adopted
    # the share is A's: at 0.1 the prediction on A is the real band, at 0.6 the share is clipped at 1
    np.testing.assert_allclose(fit.predicted_Nm[0, 0], real[0], rtol=1e-12)
    np.testing.assert_allclose(fit.share[0], np.sqrt((real[0] ** 2 - a0[0] ** 2) / (a1[0] ** 2 - a0[0] ** 2)))
    np.testing.assert_array_equal(fit.share[2], [1.0, 1.0, 1.0])
    np.testing.assert_allclose(fit.misfit[2, 0], np.sum(np.log(a1[2] / real[0]) ** 2))
    np.testing.assert_allclose(fit.misfit[:, 1], 3 * np.log([4.0, 2.0, 1.2]) ** 2)
    cal = tv.Calibration(np.zeros(3), tv.TwinEffects(*(np.zeros((6, 0)),) * 3, np.zeros(6), 0.05, np.zeros(6),
                                                   np.zeros(6)), np.zeros(6))
    assert cc.with_main_mode_fit(cal, fit).effects == cal.effects  # recorded, not applied


def test_a_damping_every_identification_file_agrees_on_is_adopted_on_the_main_axes_only():
    real = np.array([[10.0, 40.0, 20.0], [5.0, 5.0, 3.0], [5.0, 8.0, 4.0]])
    a0 = [np.array([4.0, 8.0, 3.0])] * 3
    a1 = [np.array([16.0, 60.0, 30.0]), np.array([14.0, 50.0, 25.0]), np.array([9.0, 20.0, 10.0])]
    proc = [4.0 * real[1:], 1.1 * real[1:], 0.5 * real[1:]]
    fit = cc.choose_main_mode_damping((0.1, 0.3, 0.6), FILES, *_bands(real, a0, a1, proc))
    assert fit.best == 1 and fit.adopted
    np.testing.assert_allclose(fit.predicted_Nm[1, 0], real[0], rtol=1e-12)  # A still met at 0.3
    cal = cc.load_calibration(CALIBRATION)
    out = cc.with_main_mode_fit(cal, fit)
    z = np.broadcast_to(out.effects.damping_ratio, 6)
    np.testing.assert_array_equal(z[:3], 0.3)
    np.testing.assert_array_equal(z[3:], np.broadcast_to(cal.effects.damping_ratio, 6)[3:])  # the wrist keeps its own
    np.testing.assert_allclose(out.effects.link_friction_share[:3], fit.share[1])
    np.testing.assert_array_equal(out.effects.link_friction_share[3:], cal.effects.link_friction_share[3:])
    assert out.fit["main_mode_fit"] is fit


def test_per_axis_damping_goes_through_the_yaml_and_into_the_replay(tmp_path):
    cal = cc.load_calibration(CALIBRATION)
    z = np.array([0.3, 0.3, 0.3, 0.1, 0.1, 0.1])
    cal2 = dataclasses.replace(cal, effects=dataclasses.replace(cal.effects, damping_ratio=z))
    path = tmp_path / "twin_calibrated.yaml"
    cc.write_calibration_yaml(cal2, path)
    np.testing.assert_array_equal(cc.load_calibration(path).effects.damping_ratio, z)
    cc.write_calibration_yaml(cal, path)  # one damping for every axis stays one number
    assert isinstance(cc.load_calibration(path).effects.damping_ratio, float)
