"""The CLOOS twin's replay of the process validation files (issue 15, item 4): its record on the
file's clock, acquired at the controller's 2 ms and decimated like the real 100 Hz file
(robident_twin/validation/process_replay.py), and the data fact that motivates the decimation."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import cloos_run
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


def _slow_path(rate_hz, duration_s=3.0, t=None):
    """A smooth 0.5 Hz motion of the main axes about a mid-workspace pose (desired q, dq, ddq), at
    ``rate_hz`` or at the times ``t`` (labelled ``rate_hz``)."""
    t = np.arange(round(duration_s * rate_hz)) / rate_hz if t is None else np.asarray(t, dtype=float)
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


def _path_at_ticks(ticks, factor, acq_hz=500.0):
    """The smooth path of :func:`_slow_path` sampled at the given acquisition ticks (fractional: off the
    tick), labelled with the nominal rate acq_hz / factor (as a file whose clock skipped ticks)."""
    return _slow_path(acq_hz / factor, t=np.asarray(ticks, dtype=float) / acq_hz)


@pytest.mark.parametrize("factor", [5, 1])
def test_file_clock_ticks_reads_skipped_and_early_ticks_from_the_path(factor):
    """Known answer: a 100 Hz (factor 5) or 500 Hz (factor 1) file of a smooth path whose samples sit
    at known acquisition ticks, nominal spacing with some intervals one tick longer (the validation
    files' 12 ms / 4 ms steps) and one a tick shorter, every sample up to 0.2 tick off its tick; the
    ticks are read back exactly. Where the path
    stands still (the 0.5 Hz cosine's reversals, < 0.05 rad/s) the nominal spacing is
    returned, whatever the truth: the tick added near a reversal is not seen."""
    rng = np.random.default_rng(1)
    n = 300 if factor == 5 else 1200
    nominal = _path_at_ticks(np.arange(n) * factor, factor)
    v0 = np.linalg.norm(0.5 * (nominal.dq_rad_s[1:] + nominal.dq_rad_s[:-1]), axis=1)
    s0 = int(np.flatnonzero((v0 < 0.5 * pr.CLOCK_MIN_SPEED_RAD_S) & (np.arange(n - 1) > 5))[0])  # near a reversal
    steps = np.full(n - 1, factor)
    steps[rng.choice(np.flatnonzero(v0 > 3 * pr.CLOCK_MIN_SPEED_RAD_S), 12, replace=False)] += 1
    steps[s0] += 1
    if factor > 1:
        steps[np.flatnonzero(v0 > 3 * pr.CLOCK_MIN_SPEED_RAD_S)[5]] -= 1
    ticks = np.concatenate([[0], np.cumsum(steps)])
    # each sample up to a fifth of a tick off its tick (the real files' 9.9 / 10.1 ms pairs): rounded away
    p = _path_at_ticks(ticks + rng.uniform(-0.2, 0.2, ticks.size), factor)
    got = pr.file_clock_ticks(p.q_rad, p.dq_rad_s, p.sample_rate_hz)
    v = 0.5 * (p.dq_rad_s[1:] + p.dq_rad_s[:-1])
    slow = np.linalg.norm(v, axis=1) <= pr.CLOCK_MIN_SPEED_RAD_S
    assert slow[s0] and (~slow).sum() > 0.8 * slow.size
    np.testing.assert_array_equal(np.diff(got)[~slow], steps[~slow])
    np.testing.assert_array_equal(np.diff(got)[slow], factor)
    # a path on its nominal clock: the nominal ticks
    q = _slow_path(500.0 / factor)
    np.testing.assert_array_equal(pr.file_clock_ticks(q.q_rad, q.dq_rad_s, q.sample_rate_hz),
                                  np.arange(q.q_rad.shape[0]) * factor)


def test_file_clock_ticks_rejects_bad_paths():
    with pytest.raises(ConfigError, match=r"same shape.*\(5, 6\) and \(4, 6\)"):
        pr.file_clock_ticks(np.zeros((5, 6)), np.zeros((4, 6)), 100.0)
    with pytest.raises(ConfigError, match="300.0 Hz"):
        pr.file_clock_ticks(np.zeros((5, 6)), np.zeros((5, 6)), 300.0)


def test_decimate_at_ticks_keeps_the_filtered_samples_there():
    x = _tone(10.0) + _tone(80.0)
    at = np.arange(0, 2000, 5)
    np.testing.assert_array_equal(pr.decimate(x, 5, at=at), pr.decimate(x, 5))
    at2 = np.array([0, 200, 211, 216, 1000, 1999])
    y = pr.decimate(x, 5, at=at2)
    # the 80 Hz tone is filtered out at every kept tick, the 10 Hz tone kept without delay
    np.testing.assert_allclose(y[1:-1], _tone(10.0)[at2][1:-1], atol=5e-3)
    np.testing.assert_array_equal(pr.decimate(x, 1, at=at2), x[at2])


def test_the_file_clock_switch_replays_the_path_on_its_own_clock(quiet_twin):
    """A 500 Hz path recorded with 6 ticks skipped (the file says 2 ms, the path advanced 4 ms there):
    replayed with file_clock=True the twin's record equals, at the kept ticks, the record of the same
    path given at every tick (at a skipped tick the mean of its neighbours, which is what the linear
    interpolation over the 4 ms gap reads); on the nominal clock (the default) the path is replayed
    faster and the record differs by tens of Nm. The default stays the nominal clock."""
    full = np.arange(700)
    skip = np.array([150, 260, 330, 420, 470, 610])  # none at the reversal (t = 1 s), where the clock is not read
    kept = np.setdiff1d(full, skip)
    p_full, p_skip = _path_at_ticks(full, 1), _path_at_ticks(kept, 1)
    for x in (p_full.q_rad, p_full.dq_rad_s, p_full.ddq_rad_s2):
        x[skip] = 0.5 * (x[skip - 1] + x[skip + 1])
    assert quiet_twin.file_clock is False
    ref = quiet_twin.replay(p_full, 1, 0, averaged=False).data.tau_Nm[kept]
    nominal = quiet_twin.replay(p_skip, 1, 0, averaged=False).data.tau_Nm
    clocked = tv.CloosTwin(quiet_twin.cal, (quiet_twin.reg, quiet_twin.base), file_clock=True)
    own = clocked.replay(p_skip, 1, 0, averaged=False).data.tau_Nm
    assert own.shape == nominal.shape == (kept.size, 6)
    inner = slice(100, None)
    err_own = np.sqrt(np.mean((own - ref)[inner, :3] ** 2, axis=0))
    err_nominal = np.sqrt(np.mean((nominal - ref)[inner, :3] ** 2, axis=0))
    assert np.all(err_nominal > 1.0), err_nominal
    assert np.all(err_own < 1e-6 * err_nominal), (err_own, err_nominal)


def test_the_validation_files_skip_acquisition_ticks_and_the_identification_files_do_not(cloos_data_root):
    """The data fact behind ``file_clock``: in the two process VALIDATION files the desired path advances by
    one extra 2 ms acquisition period between some samples (process 1: about 100 of its 10 ms intervals
    span 12 ms; process 2: about 10 of its 2 ms intervals 4 ms), none is shorter than nominal; the process
    IDENTIFICATION files, which the calibration chain replays, are on their nominal clock."""
    counts = {}
    for name in ("process1_validation", "process2_validation", "process1", "process2"):
        d = ds.load(name, cloos_data_root).data
        k = pr.acquisition_factor(d.sample_rate_hz)
        n = np.diff(pr.file_clock_ticks(d.q_rad, d.dq_rad_s, d.sample_rate_hz))
        assert set(np.unique(n)) <= {k, k + 1}, (name, np.unique(n))
        counts[name] = int(np.sum(n == k + 1))
    assert 90 <= counts["process1_validation"] <= 110, counts
    assert 8 <= counts["process2_validation"] <= 12, counts
    assert counts["process1"] == counts["process2"] == 0, counts


@pytest.mark.parametrize("flags", [[], ["--file-clock"]])
def test_run_py_file_clock_reaches_the_twin_and_not_the_calibration(flags, monkeypatch, tmp_path):
    """run.py --file-clock: the calibration chain runs the same steps in the same order, and the twin
    that replays the data is built with file_clock on; without the flag it is built as before."""
    log, history = cloos_run.record_chain(monkeypatch, flags, tmp_path)
    twin = "twin(file_clock)" if flags else "twin"
    assert log == ["calibrate(dissipative=False)", "link", "mode", "with_mode", "loop", twin]
    assert history == ("fit", "link", "with_mode", "loop")
