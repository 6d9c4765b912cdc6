"""The compiled passive-force callback (hal/sim/native.py, hal/sim/native/passive.c) computes the
numpy callback's law (hal/sim/fastloop.lean_passive) to rounding, runs the same simulation, hands
another mjData to the Python callback, and falls back to numpy when it cannot be built.

Tolerance of one call: 4 ulp of the sum of the law's absolute terms. The C code performs numpy's
operations in the same order with IEEE semantics; only libm's ``tanh``/``exp`` may differ from
numpy's in the last bit: that term then differs by at most 1 ulp of the sum, and each of the
(at most four) roundings after it by half an ulp more (observed: 2 ulp at most, in 29 of 707 ideal
and 8 of 707 realistic values; all others bit-equal); the LWR4+ rotors' law: 8 ulp (observed
0.5). A whole 0.3 s iiwa 14 run agrees to 1e-9 Nm / 1e-12 rad (observed: about 1e-11 Nm); the
LWR4+ realistic twin is sensitive to rounding itself (see its test)."""
from __future__ import annotations

import ctypes
import logging

import mujoco
import numpy as np
import pytest

from hal.factory import make_robot
from hal.protocol import JointTrajectory
from hal.sim import effects as fx
from hal.sim import fastloop, native

RATE = 1000.0
IDEAL, REALISTIC = {"name": "ideal"}, {"name": "realistic", "effects": list(fx.EFFECTS)}


@pytest.fixture(autouse=True)
def native_on(monkeypatch):
    monkeypatch.setenv("ROBIDENT_NATIVE", "1")


def twin_of(spec, cfg, seed=7):
    return make_robot(spec, {"name": "mujoco"}, None, seed=seed, twin_cfg=cfg)


def raw_c(cb: native.NativePassive):
    """The compiled function itself (not the bindings' wrapper object, whose Python call runs numpy)."""
    return native._FALLBACK(ctypes.cast(getattr(cb.lib, cb.name), ctypes.c_void_p).value)


def edge_velocities(n: int, vs: float, eps: float, rng) -> np.ndarray:
    """Rows of joint velocities: zero, signed zeros, subnormal, tiny, at the Stribeck and smoothing
    velocities, huge, infinite, NaN, both signs, and random ones."""
    vals = [0.0, -0.0, 5e-324, -5e-324, 1e-300, -1e-300, 1e-12, -1e-12, vs, -vs, eps, -eps, 3 * vs, -3 * vs,
            1e3, -1e3, 1e300, -1e300, np.inf, -np.inf, np.nan]
    rows = [np.resize(np.roll(vals, k), n) for k in range(len(vals))]
    rows += list(rng.normal(0.0, 2.0 * vs, (40, n))) + list(rng.normal(0.0, 1.5, (40, n)))
    return np.array(rows)


def compare_calls(robot, rows_v, times_s, acts, nv=None):
    """qfrc_passive (its first ``nv`` dofs, else the context's n) after the numpy callback and after
    the C function, from the same state (``rows_v``: the first dofs' velocities)."""
    d, m = robot.data, robot.model
    py = fastloop.lean_passive(robot)
    cb = py.native
    assert cb is not None, "the compiled callback was not built"
    fn = raw_c(cb)
    n = nv or cb.ctx.n
    out_np, out_c = [], []
    with robot.physics(py), native.installed(cb), np.errstate(all="ignore"):  # inf, NaN rows
        assert mujoco.get_mjcb_passive() is cb.fn  # MuJoCo would call the C function
        for v, t, a in zip(rows_v, times_s, acts):
            d.qvel[:len(v)], d.time = v, t
            d.act[:len(a)] = a
            d.qfrc_passive[:] = 0.0
            py(m, d)
            out_np.append(d.qfrc_passive[:n].copy())
            d.qfrc_passive[:] = 0.0
            fn(m._address, d._address)
            out_c.append(d.qfrc_passive[:n].copy())
    return np.array(out_np), np.array(out_c), cb


def assert_ulp_close(a, b, magnitude, ulps=4):
    """|a - b| <= ``ulps`` ulp of ``magnitude`` where finite; the same non-finite values elsewhere."""
    fin = np.isfinite(a) & np.isfinite(magnitude)
    np.testing.assert_array_equal(np.isfinite(b), np.isfinite(a))
    np.testing.assert_array_equal(a[~fin], b[~fin])
    err = np.abs(a[fin] - b[fin])
    tol = ulps * np.spacing(np.abs(magnitude[fin]))
    assert np.all(err <= tol), f"max error {err.max():.3g} at ulp-tolerance {tol[np.argmax(err - tol)]:.3g}"


def test_ideal_law_equals_numpy_on_edge_and_random_states(iiwa):
    robot = twin_of(iiwa, IDEAL)
    eps = float(iiwa.coulomb_smoothing_rad_s)
    rng = np.random.default_rng(3)
    V = edge_velocities(robot.data.qvel.size, 0.1, eps, rng)
    a, b, cb = compare_calls(robot, V, np.zeros(len(V)), np.zeros((len(V), 0)))
    fv, fc, off = cb.arrays["fv"], cb.arrays["fc"], cb.arrays["off"]
    with np.errstate(over="ignore", invalid="ignore"):
        mag = np.abs(fv * V) + np.abs(fc) * np.abs(np.tanh(V / eps)) + np.abs(off)
    assert np.any(a != 0.0) and np.isinf(a).any()  # the law acts; infinite velocities give infinite forces
    assert_ulp_close(a, b, mag)


def test_realistic_link_law_equals_numpy_before_during_and_after_the_drift(iiwa):
    robot = twin_of(iiwa, REALISTIC)
    fe = fx.FrictionEffect(iiwa, robot.twin.params.friction_unmodelled)
    vs = float(np.min(1.0 / np.asarray(fe.inv_vs, float)))
    dts = fe.p.drift_time_s
    rng = np.random.default_rng(5)
    n = iiwa.n_joints
    V = edge_velocities(n, vs, float(iiwa.coulomb_smoothing_rad_s), rng)
    # time: before the start, at it, during the drift, at its end, after it
    T = np.resize([-1.0, -0.0, 0.0, 1e-9, 0.37 * dts, dts, np.nextafter(dts, 0), 2 * dts, 1e9], len(V))
    A = np.resize(np.array([0.0, -0.0, -80.0, 80.0, 1e-300, 3.7, -1e6]), (len(V), n))
    A[-40:] = rng.normal(0.0, 40.0, (40, n))
    a, b, cb = compare_calls(robot, V, T, A)
    ar = cb.arrays
    scale = 1.0 + fe.p.drift_fraction * np.clip(T / dts, 0.0, 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        mag = scale[:, None] * (np.abs(ar["fv"] * V) + ar["fc"] + ar["sa"]) + ar["lc"] * np.abs(A)
    assert np.any(a != 0.0) and np.isinf(a).any()
    assert np.any(ar["sa"] > 0) and np.any(ar["lc"] > 0) and fe.p.drift_fraction != 0  # every term is there
    assert_ulp_close(a, b, mag)
    assert np.count_nonzero(a != b) < a.size  # most values are even bit-equal


def test_elastic_motor_side_law_equals_numpy(monkeypatch):
    """The LWR4+ realistic twin (elastic, friction on both sides of the gear; the general numpy
    callback): link and rotor dofs, edge and random states (the rotors' velocities finite: the
    numpy law maps them by the coupling matrix, where 0 x inf is NaN). Tolerance on the rotors:
    8 ulp of the sum of the absolute terms (three libm calls, up to ten roundings after them)."""
    from robident_twin.model.robot import load_robot

    spec = load_robot("lwr4p")
    robot = twin_of(spec, REALISTIC)
    n = spec.n_joints
    fe = fx.FrictionEffect(spec, robot.twin.params.friction_unmodelled)
    vs, dts, eps = 1.0 / float(np.max(fe.inv_vs)), fe.p.drift_time_s, float(spec.coulomb_smoothing_rad_s)
    rng = np.random.default_rng(11)
    link_v = edge_velocities(n, vs, eps, rng)
    rotor_v = np.where(np.isfinite(link_v), link_v, 1e300)[::-1]
    V = np.hstack([link_v, rotor_v])
    T = np.resize([-1.0, 0.0, 0.37 * dts, dts, 2 * dts], len(V))
    A = np.resize(np.array([0.0, -0.0, -80.0, 80.0, 1e-300, 3.7, -1e6]), (len(V), n))
    a, b, cb = compare_calls(robot, V, T, A, nv=2 * n)
    ar = cb.arrays
    scale = (1.0 + fe.p.drift_fraction * np.clip(T / dts, 0.0, 1.0))[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        mag_link = scale * (np.abs(ar["fv"] * link_v) + ar["fc"] + ar["sa"]) + ar["lc"] * np.abs(A)
        w = np.abs(rotor_v)
        mag_rotor = (scale * (ar["fcm"] + ar["sam"]) + ar["lcm"] * np.abs(A) + 2 * ar["fcm"]
                     + (np.abs(scale - 1.0) + 1.0) * ar["fvm"] * w + np.abs(ar["offm"]))
    assert np.all(ar["fcm"] > 0) and np.all(ar["sam"] > 0) and np.all(ar["lcm"] > 0) and np.any(ar["offm"] != 0)
    assert_ulp_close(a[:, :n], b[:, :n], mag_link)
    assert_ulp_close(a[:, n:], b[:, n:], mag_rotor, ulps=8)


def recording_pair(spec, cfg, monkeypatch, seconds=0.3):
    t = np.arange(int(seconds * RATE)) / RATE
    w, amp = 2 * np.pi * 1.4, 0.1 * np.ones(spec.n_joints)
    ref = JointTrajectory(t, spec.home_rad + amp * (1 - np.cos(w * t))[:, None], amp * (w * np.sin(w * t))[:, None],
                          amp * (w * w * np.cos(w * t))[:, None])
    out = []
    for flag in ("1", "0"):
        monkeypatch.setenv("ROBIDENT_NATIVE", flag)
        out.append(twin_of(spec, cfg).run(ref))
    return out


@pytest.mark.parametrize("cfg", [IDEAL, REALISTIC], ids=["ideal", "realistic"])
def test_a_short_run_is_the_numpy_run_to_rounding(iiwa, cfg, monkeypatch):
    fast, ref = recording_pair(iiwa, cfg, monkeypatch)
    assert np.ptp(ref.tau_motor_Nm) > 1.0
    for f in ("tau_motor_Nm", "tau_joint_Nm"):
        np.testing.assert_allclose(getattr(fast, f), getattr(ref, f), rtol=0, atol=1e-9, err_msg=f)
    for key in ("true_q_rad", "true_q_motor_rad"):
        if key in ref.metadata:
            np.testing.assert_allclose(fast.metadata[key], ref.metadata[key], rtol=0, atol=1e-12, err_msg=key)


def test_the_lwr4p_elastic_run_is_the_numpy_run_up_to_its_sensitivity_to_rounding(monkeypatch):
    """The LWR4+ realistic twin is sensitive to rounding: its rotors stick at the unmodelled
    friction's sign step, and a 1e-15 rad/s change of one initial velocity moves its motor torques
    by about 0.1 Nm RMS within 0.3 s. So the compiled run is compared with the numpy run as that
    perturbed numpy run is: the window means per joint agree to 0.02 Nm (rounding: about 0.003)."""
    from robident_twin.model.robot import load_robot

    spec = load_robot("lwr4p")
    t = np.arange(300) / RATE
    w, amp = 2 * np.pi * 1.4, 0.1 * np.ones(spec.n_joints)
    ref = JointTrajectory(t, spec.home_rad + amp * (1 - np.cos(w * t))[:, None], amp * (w * np.sin(w * t))[:, None],
                          amp * (w * w * np.cos(w * t))[:, None])
    runs = {}
    for key, flag, dv in (("compiled", "1", 0.0), ("numpy", "0", 0.0), ("perturbed", "0", 1e-15)):
        monkeypatch.setenv("ROBIDENT_NATIVE", flag)
        robot = twin_of(spec, REALISTIC)
        assert (fastloop.lean_passive(robot) is not None) == (flag == "1")  # numpy: the general callback
        robot.data.qvel[0] += dv
        runs[key] = robot.run(ref)
    base = runs["numpy"]
    rms = np.sqrt(np.mean((runs["perturbed"].tau_motor_Nm - base.tau_motor_Nm) ** 2))
    assert rms > 1e-3  # a bit-level comparison cannot hold on this twin
    for key in ("perturbed", "compiled"):
        for f in ("tau_motor_Nm", "tau_joint_Nm"):
            gap = np.abs(getattr(runs[key], f).mean(axis=0) - getattr(base, f).mean(axis=0))
            assert gap.max() <= 0.02, (key, f, gap)


def test_another_mjdata_gets_the_python_callback(iiwa):
    """With the C function installed, a step of another MjData runs the numpy callback's
    ``dd is not d`` branch (the twin's own callback), exactly as with the numpy callback installed;
    the twin's own data is untouched."""
    robot = twin_of(iiwa, REALISTIC)
    py = fastloop.lean_passive(robot)
    m = robot.model
    results = []
    for use_native in (False, True):
        other = mujoco.MjData(m)
        other.qpos[:], other.act[:] = robot.data.qpos, robot.data.act
        other.qvel[:iiwa.n_joints] = np.linspace(-0.5, 0.6, iiwa.n_joints)
        other.time = 3.0
        before = robot.data.qfrc_passive.copy()
        with robot.physics(py), native.installed(py.native if use_native else None):
            assert (mujoco.get_mjcb_passive() is py.native.fn) == use_native
            mujoco.mj_forward(m, other)
        np.testing.assert_array_equal(robot.data.qfrc_passive, before)
        results.append(other.qfrc_passive.copy())
    assert np.any(results[0][:iiwa.n_joints] != 0.0)
    np.testing.assert_array_equal(results[1], results[0])
    assert mujoco.get_mjcb_passive() is None  # restored


def test_robident_native_0_forces_numpy(iiwa, monkeypatch):
    monkeypatch.setenv("ROBIDENT_NATIVE", "0")
    assert fastloop.lean_passive(twin_of(iiwa, REALISTIC)).native is None


@pytest.mark.parametrize("breakage", ["no compiler", "compile fails", "no source"])
def test_a_failed_build_falls_back_to_numpy_with_one_log_line(iiwa, monkeypatch, tmp_path, caplog, breakage):
    monkeypatch.setenv("ROBIDENT_CACHE", str(tmp_path / "cache"))
    if breakage == "no compiler":
        monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    elif breakage == "compile fails":
        monkeypatch.setenv("CC", "/bin/false")
    else:
        monkeypatch.setattr(native, "SOURCE", tmp_path / "missing" / "passive.c")
    monkeypatch.setattr(native, "_LIBS", {})
    with caplog.at_level(logging.WARNING, logger="hal.sim.native"):
        fallen, numpy_run = recording_pair(iiwa, IDEAL, monkeypatch, seconds=0.1)
        assert fastloop.lean_passive(twin_of(iiwa, IDEAL)).native is None
    lines = [r.getMessage() for r in caplog.records if r.name == "hal.sim.native"]
    assert len(lines) == 1 and "numpy callback runs" in lines[0], lines
    assert {"no compiler": "no C compiler", "compile fails": "exited with 1",
            "no source": "missing"}[breakage] in lines[0]
    np.testing.assert_array_equal(fallen.tau_motor_Nm, numpy_run.tau_motor_Nm)  # it simulated, on numpy
    assert not list((tmp_path / "cache").rglob("*.so"))


def test_the_library_is_cached_once_and_written_atomically(monkeypatch, tmp_path):
    monkeypatch.setenv("ROBIDENT_CACHE", str(tmp_path))
    monkeypatch.setattr(native, "_LIBS", {})
    assert native.library() is not None
    (so,) = (tmp_path / "native").iterdir()  # one library, no temporary file left
    assert so.name.startswith("passive-") and so.suffix == ".so"
    stamp = so.stat().st_mtime_ns
    real_run, commands = native.subprocess.run, []

    def run(cmd, *args, **kwargs):
        commands.append(cmd)
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(native, "_LIBS", {})  # a new process: the cached file is loaded, not compiled
    monkeypatch.setattr(native.subprocess, "run", run)
    assert native.library() is not None
    assert commands and not any("-shared" in c for c in commands), commands
    assert [p.name for p in (tmp_path / "native").iterdir()] == [so.name] and so.stat().st_mtime_ns == stamp


def test_two_processes_building_at_once_leave_one_library(tmp_path):
    """Two xdist workers may compile at once: each writes its own temporary file and renames it
    onto the same name; both load a whole library, and no temporary file is left."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, ROBIDENT_CACHE=str(tmp_path), ROBIDENT_NATIVE="1")
    code = "from hal.sim import native; import sys; sys.exit(0 if native.library() is not None else 3)"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    files = sorted(f.name for f in (tmp_path / "native").iterdir())
    assert len(files) == 1 and files[0].startswith("passive-") and files[0].endswith(".so"), files
