"""The transfer estimate of experiments/twin_vs_real_cloos/analyse_motor_mode.py (torque -> motor encoder
at 5-10 Hz, as a share of a rigid axis and a phase), checked on signals with a known transfer."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("analyse_motor_mode", ROOT / "experiments/twin_vs_real_cloos/analyse_motor_mode.py")
amm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(amm)

FS_HZ = 500.0


def _through(tau_Nm, transfer):
    """q = transfer(f) * tau in the frequency domain (one periodic record, as the averaged A file)."""
    f = np.fft.rfftfreq(len(tau_Nm), 1.0 / FS_HZ)
    H = np.zeros(f.size, complex)
    H[1:] = transfer(f[1:])
    return np.fft.irfft(np.fft.rfft(tau_Nm, axis=0) * H[:, None], n=len(tau_Nm), axis=0)


@pytest.fixture(scope="module")
def tau_Nm():
    return np.random.default_rng(0).standard_normal((5000, 1)) * 10.0


def test_a_rigid_axis_is_gain_one_in_phase(tau_Nm):
    J = 81.4
    q = _through(tau_Nm, lambda f: -1.0 / (J * (2 * np.pi * f) ** 2))
    gain, phase, bins = amm.drive_transfer(q, tau_Nm, [J], FS_HZ)[0]
    # a double integrator's response outlasts Welch's 2 s segments: the estimate is 4e-4 / 0.23 deg off
    assert gain == pytest.approx(1.0, abs=2e-3) and abs(phase) < 1.0
    assert len(bins) == 11  # 5, 5.5, ..., 10 Hz


def test_an_elastic_drive_impedance_gives_the_rising_share_with_no_phase(tau_Nm):
    """tau = -k q (a loop that is a pure stiffness): share J w^2 / k, rising with f, phase 0."""
    J, k = 81.4, 81.4 * 4300.0
    q = _through(tau_Nm, lambda f: -1.0 / k + 0 * f)
    gain, phase, bins = amm.drive_transfer(q, tau_Nm, [J], FS_HZ)[0]
    for f, g, p, coh in bins:
        assert g == pytest.approx(J * (2 * np.pi * f) ** 2 / k, rel=1e-9)
        assert abs(p) < 1e-4 and coh == pytest.approx(1.0, abs=1e-9)
    assert 0.3 < gain < 0.8 and abs(phase) < 1e-4


def test_a_damper_lags_by_ninety_degrees(tau_Nm):
    """tau = -c dq (a pure velocity loop): q = -tau / (c j w); against a rigid axis -tau / (J w^2) the
    motion is shifted by -90 deg."""
    c = 81.4 * 100.0
    q = _through(tau_Nm, lambda f: -1.0 / (c * 1j * 2 * np.pi * f))
    _, phase, _ = amm.drive_transfer(q, tau_Nm, [81.4], FS_HZ)[0]
    assert phase == pytest.approx(-90.0, abs=1.0)  # an integrator outlasts the segments too: 0.06 deg


def test_the_mode_shape_reads_ratio_phase_and_coherence(tau_Nm):
    """Axis 3 = 1.8 x axis 2 delayed by 20 deg, axis 5 = -3.5 x axis 2, axis 1 unrelated noise."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5000, 6))
    x[:, 2] = _through(x[:, 1:2], lambda f: 1.8 * np.exp(-1j * np.radians(20.0)) + 0 * f)[:, 0]
    x[:, 4] = -3.5 * x[:, 1]
    (_, _, c1), (r3, p3, c3), (r5, p5, c5) = amm.mode_shape(x, FS_HZ)
    # a constant phase shift (a Hilbert-like response) leaks a little out of Welch's segments: 1e-5, 0.01 deg
    assert r3 == pytest.approx(1.8, rel=1e-3) and p3 == pytest.approx(-20.0, abs=0.1) and c3 == pytest.approx(1.0, abs=1e-3)
    assert r5 == pytest.approx(3.5, rel=1e-9) and abs(p5) == pytest.approx(180.0, abs=1e-6) and c5 == pytest.approx(1.0)
    assert c1 < 0.5


def test_reversal_ringing_finds_each_reversal_and_its_burst():
    """Axis 2 reverses every 2 s (|ddq| 0.785 rad/s^2 there); after reversal k a 7 Hz burst of amplitude
    10 (k + 1) Nm decays."""
    from types import SimpleNamespace

    t = np.arange(0.0, 20.0, 1.0 / FS_HZ)
    dq = np.zeros((t.size, 6))
    dq[:, 1] = 0.5 * np.sin(2 * np.pi * 0.25 * t)
    ddq = np.zeros_like(dq)
    ddq[:, 1] = 0.5 * 2 * np.pi * 0.25 * np.cos(2 * np.pi * 0.25 * t)
    t_rev = np.arange(2.0, 20.0, 2.0)
    r = np.zeros((t.size, 6))
    for k, tk in enumerate(t_rev):
        a = t >= tk
        r[a, 1] += 10.0 * (k + 1) * np.exp(-(t[a] - tk) / 0.3) * np.sin(2 * np.pi * 7.0 * (t[a] - tk))
    acc, peak = amm.reversal_ringing(SimpleNamespace(sample_rate_hz=FS_HZ, dq_rad_s=dq, ddq_rad_s2=ddq), r)
    assert acc.size == t_rev.size
    assert np.allclose(acc, 0.5 * 2 * np.pi * 0.25, rtol=0.02)
    # the peak is proportional to the burst's amplitude (0.67 of it here: the zero-phase band-pass smears
    # the burst's sharp onset), the same factor for every reversal
    ratio = peak / (10.0 * np.arange(1, t_rev.size + 1))
    assert np.ptp(ratio) < 0.01 * ratio.mean() and 0.5 < ratio.mean() <= 1.0
