"""The compiled control loop (hal/sim/native_loop.py, hal/sim/native/loop.c) simulates exactly
what the Python fast loop (hal/sim/fastloop.simulate) does with the same compiled passive-force
callback: every array a run returns, the loop state it leaves (delay line, last measured
position, filtered velocity) and the final MjData state are bit-identical (``np.array_equal``),
on the default run's twin (iiwa 14, realistic) and on every other path it covers. Where it does
not apply, or cannot be loaded, the Python loop runs (one log line saying why); an ``mju_error``
inside MuJoCo becomes the bindings' ``mujoco.FatalError`` instead of ending the process."""
from __future__ import annotations

import ctypes
import logging

import mujoco
import numpy as np
import pytest

from hal.factory import make_noise, make_robot
from hal.sim import effects as fx
from hal.sim import fastloop, native, native_loop
from hal.sim.mujoco_backend import MujocoTwin
from robident_twin import progress
from robident_twin.model.robot import load_robot
from test_fast_twin import reference

REALISTIC = {"name": "realistic", "effects": list(fx.EFFECTS)}


@pytest.fixture(autouse=True)
def native_on(monkeypatch):
    monkeypatch.setenv("ROBIDENT_NATIVE", "1")
    monkeypatch.setattr(native_loop, "_SAID", set())  # each test hears its own log line
    monkeypatch.setattr(fastloop, "TICK_EVERY", 250)  # several C calls per short run, the last one partial


@pytest.fixture
def c_calls(monkeypatch):
    """The chunks the compiled loop ran, as (k0, k1)."""
    calls, real = [], native_loop.CompiledLoop.run

    def run(self, k0, k1):
        calls.append((k0, k1))
        return real(self, k0, k1)

    monkeypatch.setattr(native_loop.CompiledLoop, "run", run)
    return calls


def python_loop(monkeypatch):
    """The Python fast loop for every run from now on (the compiled passive callback stays)."""
    monkeypatch.setattr(native_loop, "USE", False)


def default_twin(spec, cfg, integrator=None):
    if integrator is None:
        return make_robot(spec, {"name": "mujoco"}, None, seed=7, twin_cfg=cfg)
    setup = fx.twin_setup(spec, cfg)  # a realistic twin (as tests/test_fast_twin.py builds one)
    return MujocoTwin(spec, fx.realistic_noise(setup, make_noise(spec, None)), seed=7, integrator=integrator,
                      twin=setup)


def everything(spec, cfg, seconds: float, integrator=None) -> dict:
    """Two runs of one twin, then a direct simulate with a recording window inside the reference
    (starts and ends mid-chunk): every returned array, the loop's state, the progress heard, the
    final MjData state."""
    robot = default_twin(spec, cfg, integrator)
    ref = reference(spec, seconds)
    heard = []
    out = {}
    with progress.ticking(lambda done, total: heard.append((done, total))):
        for r, rec in enumerate(robot.run(ref) for _ in range(2)):
            for f in ("q_rad", "tau_motor_Nm", "tau_joint_Nm", "q_cmd_rad"):
                out[f"run{r}.{f}"] = getattr(rec, f)
            for key, v in rec.metadata.items():
                if isinstance(v, np.ndarray):
                    out[f"run{r}.{key}"] = v
        N = ref.q_rad.shape[0]
        q, act, tau_j = fastloop.simulate(robot, ref, 37, N - 61)
    out.update({"sim.q": q, "sim.act": act, "sim.tau_j": tau_j, "heard": np.array(heard)})
    for key, v in (getattr(robot, "_extras", None) or {}).items():
        out[f"sim.{key}"] = v
    lp = getattr(robot, "loop", None)
    if lp is not None:
        out["loop.queue"] = np.array(lp.queue)
        for key in ("q_prev", "v_f", "last_q_meas", "integral"):
            out[f"loop.{key}"] = getattr(lp, key)
    d = robot.data
    for key in ("qpos", "qvel", "act", "ctrl", "qacc", "time"):
        out[f"data.{key}"] = np.array(getattr(d, key))
    return out


def assert_bit_identical(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        x, y = a[key], b[key]
        assert (x is None) == (y is None), key
        if x is not None:
            assert np.array_equal(x, y), key  # NaN-free: the runs are finite


@pytest.mark.parametrize("robot,cfg,seconds,integrator", [
    ("iiwa14", REALISTIC, 1.2, None),  # the default run's twin: elastic "direct" path, closed loop, delay
    ("iiwa14", {"name": "ideal"}, 0.4, None),  # MujocoTwin.control_step, RK4 samples
    ("iiwa14", {"name": "realistic", "effects": ["closed_loop", "friction_unmodelled", "sensor"]}, 0.4, None),  # rigid
    ("iiwa14", {"name": "realistic", "effects": ["elasticity", "friction_unmodelled"]}, 0.4, None),  # open loop
    ("lwr4p", REALISTIC, 0.4, None),  # elastic, friction on both sides
    ("iiwa14", {"name": "realistic", "effects": ["closed_loop", "sensor"]}, 0.4, "Euler"),  # own mj_forward samples
])
def test_the_compiled_loop_is_bit_identical_to_the_python_loop(robot, cfg, seconds, integrator, monkeypatch, c_calls):
    spec = load_robot(robot)
    compiled = everything(spec, cfg, seconds, integrator)
    n_chunks = len(c_calls)
    N = int(seconds * 1000)
    assert n_chunks >= 3 * -(-N // 250)  # the C loop ran every simulated reference (two runs and simulate)
    assert (min(k1 - k0 for k0, k1 in c_calls) < 250) and max(k1 - k0 for k0, k1 in c_calls) == 250
    python_loop(monkeypatch)
    reference_run = everything(spec, cfg, seconds, integrator)
    assert len(c_calls) == n_chunks  # the Python loop ran this time
    q = compiled["run0.tau_motor_Nm"]
    assert q.shape[0] > 300 and np.ptp(q) > 0.1  # a real motion
    assert len(compiled["heard"]) >= 6  # the progress ticker runs between the C calls
    assert_bit_identical(compiled, reference_run)


@pytest.mark.parametrize("robot,cfg,controller", [
    ("cloos_qrc350", {"name": "ideal"}, None),  # coupled wrist axes: matrix products
    ("iiwa14", {"name": "ideal"}, {"integral_hz": 1.0}),  # the PI velocity loop
    ("iiwa14", {"name": "realistic", "effects": ["closed_loop", "elasticity"]}, {"integral_hz": 1.0}),
])
def test_other_paths_go_through_the_python_loop(robot, cfg, controller, c_calls):
    spec = load_robot(robot)
    twin = make_robot(spec, {"name": "mujoco", "controller": controller} if controller else {"name": "mujoco"},
                      None, seed=7, twin_cfg=cfg)
    rec = twin.run(reference(spec, 0.1))
    assert rec.q_rad.shape[0] >= 100 and not c_calls


def fallback_pair(spec, monkeypatch, c_calls, seconds=0.3, cfg=REALISTIC):
    """A run with the fallback provoked (it must not use the C loop), and the Python loop's run."""
    fallen = default_twin(spec, cfg).run(reference(spec, seconds))
    assert not c_calls
    with monkeypatch.context() as mp:
        python_loop(mp)
        base = default_twin(spec, cfg).run(reference(spec, seconds))
    return fallen, base


def assert_same_run(a, b):
    for f in ("q_rad", "tau_motor_Nm", "tau_joint_Nm"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


def warned(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name in ("hal.sim.native", "hal.sim.native_loop")]


@pytest.mark.parametrize("breakage", ["libmujoco not found", "no log handler setter", "no _address",
                                      "loop source missing"])
def test_without_the_compiled_loop_the_python_loop_runs_with_one_log_line(iiwa, monkeypatch, tmp_path, caplog,
                                                                          c_calls, breakage):
    monkeypatch.setattr(native_loop, "_FUNCS", [])
    if breakage == "libmujoco not found":
        real = native.libmujoco
        monkeypatch.setattr(native, "libmujoco", lambda symbol="mjcb_passive": None if symbol == "mj_step"
                            else real(symbol))
    elif breakage == "no log handler setter":  # a MuJoCo without the bindings' private error interception
        monkeypatch.setitem(native_loop.MUJOCO_FUNCTIONS, "set_tls_log", "_mjPRIVATE_no_such_function")
    elif breakage == "no _address":
        monkeypatch.delattr(mujoco.MjModel, "_address")
    else:
        monkeypatch.setattr(native_loop, "SOURCE", tmp_path / "missing" / "loop.c")
        monkeypatch.setattr(native, "_LIBS", {})
    with caplog.at_level(logging.WARNING):
        fallen, base = fallback_pair(iiwa, monkeypatch, c_calls)
        default_twin(iiwa, {"name": "ideal"}).run(reference(iiwa, 0.05))  # a second twin: no second line
    lines = warned(caplog)
    assert len(lines) == 1 and "the Python loop runs" in lines[0], lines
    assert {"libmujoco not found": "libmujoco", "no log handler setter": "libmujoco", "no _address": "_address",
            "loop source missing": "missing"}[breakage] in lines[0]
    assert_same_run(fallen, base)


def test_robident_native_0_and_no_compiler_run_the_python_loop(iiwa, monkeypatch, tmp_path, caplog, c_calls):
    """ROBIDENT_NATIVE=0: one info line, the Python loop on the numpy callback. No compiler: the
    passive forces' one warning (the loop is not tried without them), the same run."""
    monkeypatch.setenv("ROBIDENT_NATIVE", "0")
    with caplog.at_level(logging.INFO):
        numpy_run, base = fallback_pair(iiwa, monkeypatch, c_calls)
    assert_same_run(numpy_run, base)
    assert [m for m in warned(caplog) if "ROBIDENT_NATIVE=0" in m] == [
        "compiled control loop unavailable, the Python loop runs: ROBIDENT_NATIVE=0"]
    caplog.clear()
    monkeypatch.setenv("ROBIDENT_NATIVE", "1")
    monkeypatch.setenv("ROBIDENT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(native, "_LIBS", {})
    with caplog.at_level(logging.WARNING):
        no_cc = default_twin(iiwa, REALISTIC).run(reference(iiwa, 0.3))
    assert not c_calls
    lines = warned(caplog)
    assert len(lines) == 1 and "no C compiler" in lines[0], lines
    assert_same_run(no_cc, numpy_run)  # the numpy callback and the Python loop, as with ROBIDENT_NATIVE=0


def test_an_mju_error_in_the_compiled_loop_is_the_bindings_fatal_error(iiwa, monkeypatch, c_calls):
    """An invalid integrator makes mj_step call mju_error: from C that would end the process; the
    loop's log handler turns it into mujoco.FatalError with the bindings' message, and leaves
    MuJoCo's handlers as they were (the next run works)."""
    messages = []
    for use_c in (True, False):
        with monkeypatch.context() as mp:
            if not use_c:
                python_loop(mp)
            robot = default_twin(iiwa, REALISTIC)
            robot.model.opt.integrator = 77
            with pytest.raises(mujoco.FatalError) as err:
                fastloop.simulate(robot, reference(iiwa, 0.05), 0)
            messages.append(str(err.value))
    assert c_calls == [(0, 50)]
    assert messages[0] == messages[1] == "mj_step: invalid integrator"
    setter = native.libmujoco("mj_step")._mjPRIVATE_setTlsLogHandler
    setter.restype, setter.argtypes = ctypes.c_void_p, (ctypes.c_void_p,)
    assert setter(None) is None  # this thread's log handler is MuJoCo's again (none), not the loop's
    fine = default_twin(iiwa, {"name": "ideal"}).run(reference(iiwa, 0.05))
    assert len(c_calls) > 1 and np.all(np.isfinite(fine.tau_motor_Nm))


def test_a_mujoco_warning_in_the_compiled_loop_reaches_the_log_handler_once(iiwa, monkeypatch, c_calls):
    """A warning (an unstable velocity: MuJoCo resets the state and goes on) passes the loop's
    error handler on to MuJoCo's active log handler, once, as from the Python loop."""
    lib = native.libmujoco("mju_setLogHandler")
    handler_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    heard = []

    class Message(ctypes.Structure):  # the head of mjLogMessage (mjtype.h)
        _fields_ = [("level", ctypes.c_int), ("topic", ctypes.c_int), ("subject", ctypes.c_char * 1024)]

    def handler(p):
        msg = Message.from_address(p)
        if msg.level == 2:  # mjLOG_WARNING (building a twin logs infos: the compile time)
            heard.append(msg.subject.decode())

    handler = handler_t(handler)
    lib.mju_setLogHandler.restype = ctypes.c_void_p
    lib.mju_setLogHandler.argtypes = (ctypes.c_void_p,)
    previous = lib.mju_setLogHandler(ctypes.cast(handler, ctypes.c_void_p).value)
    try:
        runs = []
        for use_c in (True, False):
            with monkeypatch.context() as mp:
                if not use_c:
                    python_loop(mp)
                robot = default_twin(iiwa, REALISTIC)
                robot.data.qvel[0] = 1e20
                runs.append(fastloop.simulate(robot, reference(iiwa, 0.1), 0))
    finally:
        lib.mju_setLogHandler(previous)
    assert c_calls == [(0, 100)]
    assert len(heard) == 2 and heard[0] == heard[1] and "QVEL" in heard[0], heard
    for a, b in zip(*runs):
        assert np.array_equal(a, b)
