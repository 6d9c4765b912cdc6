"""The CLOOS twin's replay of the process validation files (issue 15, item 4): its record on the
file's clock, acquired at the controller's 2 ms and decimated like the real 100 Hz file
(robident_twin/validation/process_replay.py), and the data fact that motivates the decimation."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model
from robident_twin.errors import ConfigError
from robident_twin.processing.signal import IdentificationData
from robident_twin.validation import process_replay as pr
from robident_twin.validation import repetition_noise as rn
from robident_twin.validation import twin_vs_real as tv
from robident_twin.validation.cloos_calibration import load_calibration

CALIBRATION = Path(__file__).resolve().parents[1] / "sim_assets" / "cloos_qrc350" / "twin_calibrated.yaml"


def _tone(f_hz, n=2000, rate=500.0):
    t = np.arange(n) / rate
    return np.column_stack([np.sin(2 * np.pi * f_hz * t), np.cos(2 * np.pi * f_hz * t)])


def test_decimate_passes_the_band_without_delay_and_rejects_what_would_alias():
    # 10 Hz (inside the 40 Hz pass band): gain 1 and no phase shift at the kept samples
    x = _tone(10.0)
    y = pr.decimate(x, 5)
    np.testing.assert_allclose(y[20:-20], x[::5][20:-20], atol=5e-3)
    # constant: unit gain, ends included (reflection padding)
    np.testing.assert_allclose(pr.decimate(np.full((400, 3), 2.5), 5), 2.5, rtol=1e-12)
    # 80 Hz at 500 Hz would alias to 20 Hz at 100 Hz when thinned without a filter: attenuated > 100x
    z = _tone(80.0)
    assert np.abs(z[::5]).max() > 0.9
    assert np.abs(pr.decimate(z, 5)[20:-20]).max() < 1e-2
    # factor 1: the raw record unchanged
    np.testing.assert_array_equal(pr.decimate(x, 1), x)


def test_acquisition_factor_and_bad_rates():
    assert pr.acquisition_factor(100.0) == 5
    assert pr.acquisition_factor(500.0) == 1
    with pytest.raises(ConfigError, match="300.0 Hz"):
        pr.acquisition_factor(300.0)
    with pytest.raises(ConfigError, match="1000.0 Hz"):
        pr.acquisition_factor(1000.0)


def test_reference_times_put_the_recorded_sample_on_the_file_clock():
    # the replay records after step k = (i + 1) substeps - 1; a step reads the reference at its start
    # and records the state at its end, dt later: that must be the sample's own time i substeps dt
    dt, s, n = 1e-3, 5, 7
    t = pr.reference_times(n, s, dt)
    k = (np.arange(n) + 1) * s - 1
    np.testing.assert_allclose(t[k] + dt, np.arange(n) * s * dt, atol=1e-15)
    np.testing.assert_allclose(np.diff(t), dt, rtol=1e-12)


@pytest.fixture(scope="module")
def quiet_twin():
    model = build_model(symmetric=True)
    cal = load_calibration(CALIBRATION)
    return tv.CloosTwin(dataclasses.replace(cal, effects=rn.without_noise(cal.effects)), model)


def _slow_path(rate_hz, duration_s=3.0):
    """A smooth 0.5 Hz motion of the main axes about a mid-workspace pose (desired q, dq, ddq)."""
    t = np.arange(round(duration_s * rate_hz)) / rate_hz
    q0 = np.array([0.2, -0.3, 0.4, 0.0, 0.3, 0.0])
    a = np.array([0.3, 0.2, 0.2, 0.0, 0.0, 0.0])
    w = 2 * np.pi * 0.5
    q = q0 + a * (1 - np.cos(w * t))[:, None]
    dq = a * (w * np.sin(w * t))[:, None]
    ddq = a * (w * w * np.cos(w * t))[:, None]
    return IdentificationData(q_rad=q, dq_rad_s=dq, ddq_rad_s2=ddq, tau_Nm=np.zeros_like(q),
                              sample_rate_hz=rate_hz, measurement="motor_torque", n_periods=1)


def test_a_100_hz_file_is_recorded_at_its_own_sample_times(quiet_twin):
    """The same smooth path given at 500 Hz and at 100 Hz (every fifth sample): the 100 Hz replay's
    record equals the 500 Hz replay's record decimated, sample for sample. Recording one file
    sample late (the session-7 clock: 10 ms at 100 Hz, 2 ms at 500 Hz) leaves an 8 ms offset."""
    p500, p100 = _slow_path(500.0), _slow_path(100.0)
    np.testing.assert_allclose(p500.q_rad[::5], p100.q_rad, atol=1e-12)
    tau500 = quiet_twin.replay(p500, 1, 0, averaged=False).data.tau_Nm
    tau100 = quiet_twin.replay(p100, 1, 0, averaged=False).data.tau_Nm
    ref = pr.decimate(tau500, 5)
    assert tau100.shape == ref.shape == p100.tau_Nm.shape
    inner = slice(50, -20)  # after the start transient, away from the filter's padded end
    diff = np.sqrt(np.mean((tau100 - ref)[inner, :3] ** 2, axis=0))
    # what an 8 ms offset between the two records would give on this path
    rate = np.gradient(ref, 0.01, axis=0)
    offset_8ms = np.sqrt(np.mean((0.008 * rate)[inner, :3] ** 2, axis=0))
    assert np.all(offset_8ms > 0.5), offset_8ms
    assert np.all(diff < 0.2 * offset_8ms), (diff, offset_8ms)


def test_the_record_reads_the_reference_up_to_its_own_sample_time(quiet_twin):
    """Causality on the file's clock: the path stands still until t0 and accelerates from t0 on
    (500 Hz file). Sample t_i holds the state at t_i, after steps that read the reference up to
    t_i - dt; with the loop's actuation delay of d steps the measured torque first moves in the first
    sample with t_i > t0 + (d + 1) dt (here t0 + 4 ms). The session-7 record (one sample late) moved
    at t0 + 2 ms."""
    rate, n, i0 = 500.0, 400, 250
    t = np.arange(n) / rate
    t0 = t[i0]
    u = np.clip(t - t0, 0.0, None)[:, None]
    acc = np.array([2.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    q0 = np.array([0.2, -0.3, 0.4, 0.0, 0.3, 0.0])
    path = IdentificationData(q_rad=q0 + 0.5 * acc * u ** 2, dq_rad_s=acc * u, ddq_rad_s2=acc * (u > 0),
                              tau_Nm=np.zeros((n, 6)), sample_rate_hz=rate, measurement="motor_torque", n_periods=1)
    tau = quiet_twin.replay(path, 1, 0, averaged=False).data.tau_Nm
    moved = np.abs(tau[:, 0] - tau[i0 - 20, 0]) > 1.0  # J1 [Nm]; the standstill drifts by < 0.01 Nm
    d = quiet_twin.cal.effects.actuation_delay_steps
    expected = int(np.flatnonzero(t > t0 + (d + 1) * quiet_twin.dt + 1e-9)[0])
    assert int(np.flatnonzero(moved[i0 - 20:])[0]) + i0 - 20 == expected
    assert abs(tau[expected + 1, 0] - tau[i0, 0]) > 10.0


def test_a_process_file_starts_at_rest_in_the_loops_equilibrium(quiet_twin):
    """A standing reference (500 Hz, 0.5 s): the main axes' torque stays where it starts. Their
    motor encoder starts at the reference and the link sags by the spring's deflection under
    gravity. Starting the link at the reference instead moves the motor by that deflection; on J3
    that is 0.31 deg, and the torque swings by 101 / 277 Nm on J2 / J3."""
    n = 250
    q0 = np.array([0.2, -0.3, 0.4, 0.1, 0.3, 0.2])
    still = IdentificationData(q_rad=np.tile(q0, (n, 1)), dq_rad_s=np.zeros((n, 6)), ddq_rad_s2=np.zeros((n, 6)),
                               tau_Nm=np.zeros((n, 6)), sample_rate_hz=500.0, measurement="motor_torque", n_periods=1)
    run = quiet_twin.replay(still, 1, 0, averaged=False)
    swing = np.ptp(run.data.tau_Nm[:, :3], axis=0)
    assert np.all(swing[1:] < 10.0), swing
    assert np.all(run.tracking_rms_rad[:3] < 1e-5), run.tracking_rms_rad


def test_process1_torque_was_filtered_before_decimation(cloos_data_root):
    """The data fact behind the decimation: the raw 2 ms torque (process 2 validation file) lies on
    the drive's quantisation grid (1.1025 Nm on J1, J2), the 100 Hz process 1 torque on no
    grid raw / k (k <= 200): it was computed by a filter, not thinned or averaged."""
    raw = ds.load("process2_validation", cloos_data_root).data.tau_Nm
    p1 = ds.load("process1_validation", cloos_data_root).data.tau_Nm
    for j in (0, 1):
        g = np.diff(np.unique(raw[:, j])).min()
        np.testing.assert_allclose(g, 1.1025, rtol=1e-6)
        np.testing.assert_allclose(raw[:, j] / g, np.round(raw[:, j] / g), atol=1e-6)
        on_grid = [k for k in range(1, 201) if np.allclose(p1[:, j] * k / g, np.round(p1[:, j] * k / g), atol=1e-3)]
        assert on_grid == [], on_grid
    assert pr.acquisition_factor(ds.load("process1_validation", cloos_data_root).data.sample_rate_hz) == 5
