"""The twin's anti-aliasing filter without scipy.signal (hal/sim/antialias.py): the same
Butterworth design, settled start and filtering as scipy.signal, bit for bit, compiled or not."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.signal as ss

from hal.sim import antialias as aa
from hal.sim import native

CUTOFFS_HZ = [0.3, 7.5, 40.0, 100.0, 200.0, 333.0, 499.0, *np.random.default_rng(7).uniform(0.05, 499.9, 6)]


@pytest.mark.parametrize("order", range(1, 13))
def test_design_and_settled_state_are_scipys_bit_for_bit(order):
    for fc in CUTOFFS_HZ:
        sos = aa.butter_lowpass_sos(order, fc, 1000.0)
        ref = ss.butter(order, fc, fs=1000.0, output="sos")
        np.testing.assert_array_equal(sos, ref, err_msg=f"order {order}, {fc} Hz")
        np.testing.assert_array_equal(aa.sosfilt_zi(ref), ss.sosfilt_zi(ref), err_msg=f"order {order}, {fc} Hz")


@pytest.mark.parametrize("order", [1, 2, 3, 8])
def test_the_design_is_a_butterworth_low_pass(order):
    """Independent of scipy: unit gain at DC, 1/sqrt(2) at the cut-off, monotonic between."""
    fs, fc = 1000.0, 40.0
    sos = aa.butter_lowpass_sos(order, fc, fs)

    def gain(f_hz):
        z = np.exp(-1j * 2 * np.pi * f_hz / fs)
        return abs(np.prod([(s[0] + s[1] * z + s[2] * z * z) / (s[3] + s[4] * z + s[5] * z * z) for s in sos]))

    assert gain(0.0) == pytest.approx(1.0, abs=1e-12)
    assert gain(fc) == pytest.approx(2 ** -0.5, abs=1e-9)
    g = [gain(f) for f in np.linspace(0, 450, 200)]
    assert all(b <= a + 1e-12 for a, b in zip(g, g[1:]))


@pytest.mark.parametrize("order", [1, 2, 3, 8])
@pytest.mark.parametrize("compiled", [True, False])
def test_the_settled_filter_is_scipys_sosfilt_bit_for_bit(order, compiled, monkeypatch):
    if not compiled:
        monkeypatch.setenv("ROBIDENT_NATIVE", "0")
    elif native.library() is None:
        pytest.skip("no C compiler here: the compiled route cannot run")  # the numpy case still runs
    x = np.random.default_rng(order).standard_normal((3000, 7)) * 40 + 5
    sos = ss.butter(order, 40.0, fs=1000.0, output="sos")
    zi = ss.sosfilt_zi(sos)[:, :, None] * x[0][None, None, :]
    expected = ss.sosfilt(sos, x, axis=0, zi=zi)[0]
    x_before = x.copy()
    got = aa.lowpass_settled(x, order, 40.0, 1000.0)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(x, x_before)  # the input is not filtered in place
    assert native.sosfilt(sos, np.zeros((1, 4)), np.zeros((1, sos.shape[0], 2))) is compiled


def test_a_constant_passes_unchanged_from_the_first_sample():
    x = np.tile([1.5, -20.0, 0.0], (500, 1))
    np.testing.assert_allclose(aa.lowpass_settled(x, 2, 200.0, 1000.0), x, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("order, fc", [(0, 40.0), (2.5, 40.0), (2, 0.0), (2, 500.0), (2, 700.0)])
def test_impossible_designs_are_refused(order, fc):
    with pytest.raises(ValueError, match="order|cut-off"):
        aa.butter_lowpass_sos(order, fc, 1000.0)


def test_native_sosfilt_refuses_arrays_it_cannot_write():
    if native.library() is None:
        pytest.skip("no C compiler here")
    sos = ss.butter(2, 40.0, fs=1000.0, output="sos")
    with pytest.raises(ValueError, match="C-ordered float64"):
        native.sosfilt(sos, np.zeros((4, 2)).T, np.zeros((2, 1, 2)))
    with pytest.raises(ValueError, match="shapes"):
        native.sosfilt(sos, np.zeros((2, 4)), np.zeros((2, 2, 2)))


def test_a_realistic_twin_run_does_not_import_scipy_signal():
    """The point of the module: the default run's twin acquisition leaves scipy.signal unimported
    (about 0.5 s per process)."""
    code = """
import sys
from hal.factory import make_robot
from hal.sim import effects as fx
from robident_twin.design.stored import reference, resolve_design
from robident_twin.model.robot import load_robot
from robident_twin.paths import CONF_DIR
spec = load_robot("iiwa14")
traj = resolve_design(str(CONF_DIR / "excitation" / "iiwa14_default.yaml"), spec)
robot = make_robot(spec, {"name": "mujoco"}, None, seed=0, twin_cfg={"name": "realistic", "effects": list(fx.EFFECTS)})
assert robot.twin.params.sensor.antialias_hz > 0
ref = reference(traj, robot.info.control_rate_hz)
rec = robot.run(ref, periods=1)
print("scipy.signal" in sys.modules, rec.tau_motor_Nm.shape[0])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    imported, n = out.stdout.split()
    assert imported == "False" and int(n) > 1000
