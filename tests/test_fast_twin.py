"""The MuJoCo twin's fast engine loop (hal/sim/fastloop.py) simulates exactly what the per-cycle
reference code does: same seed, bit-identical recordings, on the ideal and the realistic twin.

These tests compare the loops with the numpy passive-force callback (``ROBIDENT_NATIVE=0``): the
compiled one (hal/sim/native.py) agrees with it to rounding, not bit for bit (libm's tanh/exp
against numpy's), which tests/test_native_passive.py checks."""
import numpy as np
import pytest

from hal.factory import make_robot
from hal.protocol import JointTrajectory
from hal.sim import effects as fx
from robident_twin.model.robot import load_robot

RATE = 1000.0


@pytest.fixture(autouse=True)
def numpy_passive(monkeypatch):
    """The loop's bit-identity is tested on the numpy passive callback (see the module docstring)."""
    monkeypatch.setenv("ROBIDENT_NATIVE", "0")


def reference(spec, seconds: float) -> JointTrajectory:
    """From rest at home, each joint 0.1 (1 - cos) rad at 1.4 Hz (a smooth start)."""
    t = np.arange(int(seconds * RATE)) / RATE
    w = 2 * np.pi * 1.4
    a = 0.1 * np.ones(spec.n_joints)
    return JointTrajectory(t, spec.home_rad + a * (1 - np.cos(w * t))[:, None], a * (w * np.sin(w * t))[:, None],
                           a * (w * w * np.cos(w * t))[:, None])


def two_runs(spec, twin_cfg, reference_loop: bool, seconds: float, controller=None):
    """Two consecutive runs of one twin (the second starts where the first left the plant, the
    loop's filter and delay line and the generators) with the default sensor noise."""
    backend = {"name": "mujoco", "controller": controller} if controller else {"name": "mujoco"}
    robot = make_robot(spec, backend, None, seed=7, twin_cfg=twin_cfg)
    robot.reference_loop = reference_loop
    ref = reference(spec, seconds)
    return [robot.run(ref) for _ in range(2)]


def assert_identical(fast, slow):
    for a, b in zip(fast, slow):
        for field in ("q_rad", "tau_motor_Nm", "tau_joint_Nm", "q_cmd_rad"):
            x, y = getattr(a, field), getattr(b, field)
            assert (x is None) == (y is None), field
            if x is not None:
                np.testing.assert_array_equal(x, y, err_msg=field)
        for key in ("true_q_rad", "true_q_motor_rad", "true_tau_joint_Nm"):
            assert (key in a.metadata) == (key in b.metadata), key
            if key in a.metadata:
                np.testing.assert_array_equal(a.metadata[key], b.metadata[key], err_msg=key)


@pytest.mark.parametrize("robot,effects,seconds,controller", [
    ("iiwa14", None, 0.5, None),
    ("cloos_qrc350", None, 0.2, None),  # coupled, motor-side friction: the general passive callback
    ("iiwa14", list(fx.EFFECTS), 0.3, None),  # the default run's twin: closed loop, elastic, friction, sensor
    ("iiwa14", ["closed_loop", "friction_unmodelled", "sensor"], 0.3, None),
    ("cloos_qrc350", list(fx.EFFECTS), 0.2, None),  # coupled wrist axes, motor-side friction, transmission
    # error on the rotors, the drive's own PI loop (twin.yaml drive_loop)
    ("cloos_qrc350", ["closed_loop", "sensor", "transmission_error"], 0.2, None),  # rigid: the error on the links
    ("cloos_qrc350", ["elasticity", "transmission_error"], 0.2, None),  # the loop on the true state, its PD
    ("iiwa14", ["closed_loop", "elasticity", "friction_unmodelled"], 0.3, {"integral_hz": 1.0}),  # a PI
])
def test_fast_loop_is_bit_identical_to_the_per_cycle_reference(robot, effects, seconds, controller):
    spec = load_robot(robot)
    cfg = {"name": "realistic", "effects": effects} if effects else {"name": "ideal"}
    fast = two_runs(spec, cfg, False, seconds, controller)
    slow = two_runs(spec, cfg, True, seconds, controller)
    assert fast[0].q_rad.shape[0] > 100 and np.ptp(fast[0].tau_joint_Nm if fast[0].tau_joint_Nm is not None
                                              else fast[0].tau_motor_Nm) > 0.1  # a real motion
    assert_identical(fast, slow)


def test_fast_loop_with_the_pi_velocity_loop():
    """The ideal twin's PI velocity loop (the CLOOS cascade of task=control) in the fast loop."""
    spec = load_robot("iiwa14")
    ctl = {"bandwidth_hz": 5.0, "damping_ratio": 1.0, "integral_hz": 1.0}
    fast = two_runs(spec, {"name": "ideal"}, False, 0.3, ctl)
    slow = two_runs(spec, {"name": "ideal"}, True, 0.3, ctl)
    plain = two_runs(spec, {"name": "ideal"}, False, 0.3)
    assert not np.array_equal(fast[1].tau_motor_Nm, plain[1].tau_motor_Nm)  # the integral acts
    assert_identical(fast, slow)


def test_the_engine_loop_reports_its_progress_without_changing_the_data(monkeypatch):
    """A caller listening (robident_twin.progress.ticking, the identify bar) hears (done, total)
    every TICK_EVERY control periods of each simulated reference; nobody listening: no call."""
    from hal.sim import fastloop
    from robident_twin import progress

    monkeypatch.setattr(fastloop, "TICK_EVERY", 100)
    spec = load_robot("iiwa14")
    heard = []
    with progress.ticking(lambda done, total: heard.append((done, total))):
        loud = two_runs(spec, {"name": "ideal"}, False, 0.3)
    quiet = two_runs(spec, {"name": "ideal"}, False, 0.3)
    assert_identical(loud, quiet)
    totals = {t for _, t in heard}
    assert all(t > 300 for t in totals) and len(heard) >= 2 * 3
    for t in totals:  # per simulated reference: 0, 100, 200, ... below its length
        done = [d for d, tt in heard if tt == t]
        assert done[:3] == [0, 100, 200] and max(done) < t
    assert progress.ticker() is None


def test_fast_loop_with_another_integrator_and_a_move_between_runs():
    """A non-RK4 integrator (the sample then takes its own mj_forward) and move_to (a reference
    simulated with nothing recorded) between runs: still the reference's data and final state."""
    from hal.factory import make_noise
    from hal.sim.mujoco_backend import MujocoTwin

    spec = load_robot("iiwa14")
    out = []
    for reference_loop in (False, True):
        for effects in (list(fx.EFFECTS), ["closed_loop", "sensor"]):  # elastic; rigid (mj_forward samples)
            setup = fx.twin_setup(spec, {"name": "realistic", "effects": effects})
            robot = MujocoTwin(spec, fx.realistic_noise(setup, make_noise(spec, None)), seed=1,
                               integrator="Euler", twin=setup)
            assert robot.model.opt.integrator == 0  # mjINT_EULER
            robot.reference_loop = reference_loop
            ref = reference(spec, 0.3)
            recs = [robot.run(ref)]
            robot.move_to(spec.home_rad + 0.05)
            recs.append(robot.run(ref))
            out.append((recs, robot.state()))
    for fast, slow in zip(out[:2], out[2:]):
        assert_identical(fast[0], slow[0])
        for a, b in zip(fast[1], slow[1]):
            np.testing.assert_array_equal(a, b)
