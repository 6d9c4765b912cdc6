"""Fault injection (issue 13): every real protocol (LWR4+ FRI, Sunrise FRI, RSI) in command
mode against its emulator serving the twin, under loss, burst loss, delay, jitter, duplicates,
reordering, truncated and oversized packets, counter / IPOC jumps forward and back, mode changes
mid-stream, a controller reporting a position outside the limits, foreign senders and
blackouts. EVERY command that reaches the emulator's socket (``status.wire_commands``, decoded
by the emulator, not the backend's bookkeeping) is checked against the invariant of
:mod:`hal.real.guard`: within one cycle's step of the previous command or the held position,
and inside the joint limits. Plus a property-based test (hypothesis) of the guard itself.

``python benchmarks/fault_injection_table.py`` prints the per-protocol, per-fault counts."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hal.factory import make_robot
from hal.protocol import JointTrajectory
from hal.real.guard import GuardError, StepGuard, plan_rejoin
from hal.sim.mujoco_backend import robot_info
from robident_twin.errors import ConfigError, RobidentError
from robident_twin.model.robot import load_robot

# FRI and Sunrise at 500 Hz (friOpen(2), sendPeriod 2 ms) to keep the suite short; RSI at its 4 ms
PROTOCOLS = {"lwr_fri": ("lwr4p", 500.0), "sunrise_fri": ("iiwa14", 500.0), "rsi": ("kuka_ir361", 250.0)}
STEP_MARGIN = 1.0


def fast_sine(spec, rate):
    """One period of ``home + A (1 - cos wt)^2 / 4`` (at rest with zero acceleration at both
    ends, so the lead-in is short and no lead-out is needed) in which the last joint reaches
    60 % of its velocity limit (a lost cycle's catch-up is then 1.2 steps: what the old guard
    let through) and 80 % of its acceleration limit; the others move a little."""
    v, a = 0.6 * spec.dq_max_rad_s[-1], 0.8 * spec.ddq_max_rad_s2[-1]
    w = a * 0.65 / v  # max |f'| = 0.65 (at wt = 2 pi / 3), max |f''| = 1 (at wt = pi)
    period_s = round(2 * np.pi / w * rate) / rate
    w = 2 * np.pi / period_s
    amp = np.full(spec.n_joints, 0.05)
    amp[-1] = v / (0.65 * w)
    wt = w * (np.arange(int(round(rate * period_s))) / rate)[:, None]
    c, sn = np.cos(wt), np.sin(wt)
    return JointTrajectory(wt[:, 0] / w, spec.home_rad + amp * (1 - c) ** 2 / 4, amp * w * (1 - c) * sn / 2,
                           amp * w**2 * (c - np.cos(2 * wt)) / 2)  # played once: no lead-out


def fault_cases(protocol: str, spec) -> dict[str, dict]:
    """name -> emulator faults. Counter jumps and mode drops happen mid-stream (the stream
    starts after ~20 cycles; the lead-in takes >= 0.5 s)."""
    rate = PROTOCOLS[protocol][1]
    period_s = fast_sine(spec, rate).n_samples / rate
    mid = int(rate * (0.5 + period_s / 3)) + 20  # ready, 0.5 s lead-in, then where the reference is fastest
    out = {"loss 5 %": {"loss": 0.05, "seed": 1},
           "burst loss": {"burst_loss": 0.01, "burst_cycles": 6, "seed": 2},
           "delay": {"delay_prob": 0.01, "delay_s": 0.02, "seed": 3},
           "jitter": {"jitter_s": 0.0015, "seed": 4},
           "duplicates": {"duplicate": 0.1, "seed": 5},
           "reordering": {"reorder": 0.05, "seed": 6},
           "truncated": {"truncate": 0.03, "seed": 7},
           "oversized": {"oversize": 0.03, "seed": 8},
           "malformed": {"malformed": 0.02, "wrong_id": 0.02, "seed": 9},
           "counter +%d" % (150 if protocol == "rsi" else 300):
               {"counter_jump": 150 if protocol == "rsi" else 300, "counter_jump_at_cycles": mid},
           "counter +3": {"counter_jump": 3, "counter_jump_at_cycles": mid},
           "counter -3": {"counter_jump": -3, "counter_jump_at_cycles": mid},
           "counter -300": {"counter_jump": -300, "counter_jump_at_cycles": mid},
           "foreign sender": {"foreign": 0.05, "seed": 10},
           "short blackout": {"blackout_after_cycles": mid, "blackout_cycles": 12},
           "blackout": {"blackout_after_cycles": mid},
           "ready outside limits": {"report_offset_rad": float(spec.q_max_rad[0] - spec.home_rad[0] + 0.5),
                                    "report_offset_joint": 0}}
    if protocol != "rsi":  # RSI has no command/monitor state on the wire
        out["CMD->MON->CMD"] = {"mode_drop_at_cycles": mid, "mode_drop_cycles": 40}
    else:
        out["reply loss 5 %"] = {"reply_loss": 0.05, "seed": 11}
    return out


@dataclasses.dataclass
class Outcome:
    protocol: str
    fault: str
    result: str
    commands_on_wire: int
    beyond_step: int
    outside_limits: int
    worst_step_ratio: float
    guard: dict
    link: dict
    emulator: dict


def wire_check(spec, rate, wire_commands) -> tuple[int, int, float]:
    """(commands beyond one cycle's step of both the position the robot holds and the previous
    command the controller was following, commands outside the joint limits, the worst step
    ratio) of everything on the wire. A command sent while the controller did not follow
    commands (waiting, or dropped out of commanding) is no reference for the next one."""
    step = spec.dq_max_rad_s / rate * STEP_MARGIN
    tol = 2e-6  # float32 on the FRI wire, 6 decimals of a degree on RSI's
    prev = None
    beyond = outside = 0
    worst = 0.0
    for _, state, held, q in wire_commands:
        ratios = [float(np.max((np.abs(q - r) - tol) / step)) for r in (prev, held) if r is not None]
        r = min(ratios) if ratios else 0.0
        worst = max(worst, r)
        beyond += r > 1.0
        outside += bool(np.any(q < spec.q_min_rad - tol) or np.any(q > spec.q_max_rad + tol))
        prev = q if state == "commanding" else None
    return beyond, outside, worst


_CERTIFIED: set = set()
#: the dry run of the fault cases: kinematic and torque checks, no twin run (the emulator runs the twin)
SAFETY = {"dryrun": {"simulate": False}}


def run_case(protocol: str, fault: str, faults: dict, records_dir, periods: int = 1) -> Outcome:
    from robident_twin.design.dryrun import design_checks, dry_run, safety_config

    name, rate = PROTOCOLS[protocol]
    spec = load_robot(name)
    traj = fast_sine(spec, rate)
    key = (protocol, str(records_dir))
    if key not in _CERTIFIED:
        rep = dry_run(traj, spec, safety_config(SAFETY), records_dir=records_dir)
        assert rep.passed, rep.reasons
        _CERTIFIED.add(key)
    cfg = {"name": protocol, "emulate": True, "records_dir": str(records_dir), "mode": "command",
           "watchdog_s": 2.0, "step_margin": STEP_MARGIN, **({} if protocol == "rsi" else {"control_rate_hz": rate}),
           "safety": SAFETY,
           "emulator": {"faults": faults, "reply_timeout_s": 0.05, "hold_after_stop_cycles": 50}}
    robot = make_robot(spec, cfg, {"enabled": False}, seed=0, checks=design_checks(spec, SAFETY, records_dir))
    try:
        try:
            robot.run(traj, periods=periods)
            result = "completed"
        except RobidentError as exc:
            result = type(exc).__name__
        emu = robot.emulator
        emu.wait_idle(5.0)
        st_ = emu.status
        beyond, outside, worst = wire_check(spec, rate, list(st_.wire_commands))
        return Outcome(protocol, fault, result, len(st_.wire_commands), beyond, outside, worst,
                       robot.guard.counts.as_dict(), robot.stats.as_dict(), st_.as_dict())
    finally:
        robot.close()


CASES = [(p, f) for p in PROTOCOLS for f in fault_cases(p, load_robot(PROTOCOLS[p][0]))]


@pytest.mark.parametrize("protocol, fault", CASES, ids=[f"{p}-{f}" for p, f in CASES])
def test_no_command_on_the_wire_breaks_the_invariant(protocol, fault, tmp_path_factory):
    spec = load_robot(PROTOCOLS[protocol][0])
    faults = fault_cases(protocol, spec)[fault]
    out = run_case(protocol, fault, faults, tmp_path_factory.getbasetemp() / f"records_{protocol}")
    print(out.result, out.commands_on_wire, out.worst_step_ratio, out.guard, out.link)
    assert out.beyond_step == 0, \
        f"{out.beyond_step} commands beyond one cycle's step (worst {out.worst_step_ratio:.2f}x)"
    assert out.outside_limits == 0
    g, link, emu = out.guard, out.link, out.emulator
    if fault == "ready outside limits":  # never commanded: refused at the first packet
        assert out.commands_on_wire == 0 and g["aborts"] == 1 and out.result == "GuardError"
        return
    assert out.commands_on_wire > 0.6 * emu["cycles"] - 60  # the stream ran (an abort ends it early)
    if fault == "blackout":
        assert out.result == "CommunicationLost" and emu["stopped"]
    elif fault == "counter -300":  # never answered: the controller stops, the client's watchdog fires
        assert out.result == "CommunicationLost" and g["rejoins"] == 0
    else:
        assert out.result == "completed", out.result
    if fault.startswith("counter +") and fault != "counter +3":
        assert g["rejoins"] >= 1 and g["gaps"] >= 1
    if fault in ("short blackout", "CMD->MON->CMD"):
        assert g["rejoins"] >= 1
    if fault == "CMD->MON->CMD":
        assert g["mode_changes"] == 1 and emu["mode_drops"] == 1
    if fault == "foreign sender":
        assert emu["foreign_sent"] > 0 and link["foreign"] >= emu["foreign_sent"] - 2
    if fault in ("loss 5 %", "burst loss"):
        assert g["gaps"] > 0 and g["rejoins"] > 0  # some catch-ups were beyond one step: re-planned
    assert g["clamped"] == 0 and g["aborts"] == 0  # the re-planned stream never needed the clamp


# --------------------------------------------------------------------------- the guard alone


@pytest.fixture(scope="module")
def info():
    return robot_info(load_robot("lwr4p"), "lwr_fri", 1000.0, is_simulation=False)


def test_guard_refuses_to_be_configured_away(info):
    for bad in (1e9, 0.0, -1.0, float("nan"), 1.5, "1", True):
        with pytest.raises(ConfigError, match="backend.step_margin"):
            StepGuard(info, step_margin=bad)
    with pytest.raises(ConfigError, match="backend.limit_margin_rad"):
        StepGuard(info, limit_margin_rad=-0.1)
    with pytest.raises(ConfigError, match="backend.step_margin"):
        make_robot(load_robot("lwr4p"), {"name": "lwr_fri", "step_margin": 1e9})
    with pytest.raises(ConfigError, match="backend.hold_cycles_on_abort"):
        make_robot(load_robot("lwr4p"), {"name": "lwr_fri", "hold_cycles_on_abort": -5})
    for faults, key in (({"loss": 2.0}, "loss"), ({"delay_s": -1}, "delay_s"), ({"burst_cycles": 0}, "burst_cycles"),
                        ({"jitter_s": float("nan")}, "jitter_s"), ({"blackout_after_cycles": -3},
                                                                    "blackout_after_cycles")):
        with pytest.raises(ConfigError, match=f"backend.emulator.faults.{key}"):
            make_robot(load_robot("lwr4p"), {"name": "lwr_fri", "emulate": True, "emulator": {"faults": faults}})


def test_real_robot_needs_the_controller_address_and_port():
    spec = load_robot("lwr4p")
    with pytest.raises(ConfigError, match="backend.controller_port"):
        make_robot(spec, {"name": "lwr_fri", "emulate": False, "host": "10.0.0.2", "port": 0})
    with pytest.raises(ConfigError, match="backend.host"):
        make_robot(spec, {"name": "sunrise_fri", "emulate": False, "port": 0, "controller_port": 30200})
    with pytest.raises(ConfigError, match="backend.controller_port"):
        make_robot(load_robot("kuka_ir361"), {"name": "rsi", "emulate": False, "host": "10.0.0.2", "port": 49152})


def test_guard_steps_one_cycle_whatever_the_gap(info):
    g = StepGuard(info, step_margin=1.0, limit_margin_rad=0.01)
    q0 = load_robot("lwr4p").home_rad
    g.start(q0)
    step = info.dq_max_rad_s / info.control_rate_hz
    out = g.admit(q0 + 3 * step)  # as if three cycles had passed: still one step
    np.testing.assert_allclose(out, q0 + step)
    assert g.violation and "step" in g.violation and g.counts.clamped == 1
    out = g.admit(np.full(7, np.nan))
    np.testing.assert_array_equal(out, g.last)  # the hold
    np.testing.assert_allclose(out, q0 + step, rtol=0, atol=1e-15)
    assert "non-finite" in g.violation
    with pytest.raises(GuardError, match="outside the limits minus the margin"):
        StepGuard(info).start(np.where(np.arange(7) == 0, info.q_max_rad[0] + 0.5, q0))
    edge = q0.copy()
    edge[0] = info.q_max_rad[0] - 0.005  # inside the limits, inside the margin: clamped by < 1 step
    g2 = StepGuard(info, limit_margin_rad=0.005 + 0.5 * step[0])
    assert g2.start(edge)[0] == pytest.approx(info.q_max_rad[0] - 0.005 - 0.5 * step[0]) and g2.counts.clamped == 1


def test_rejoin_is_smooth_within_a_step_and_meets_the_reference(info):
    spec = load_robot("lwr4p")
    traj = fast_sine(spec, 1000.0)
    g = StepGuard(info)
    q0 = traj.q_rad[100] - 0.05  # held somewhere behind the reference
    g.start(q0)
    q, j = plan_rejoin(g, q0, traj.q_rad, traj.dq_rad_s, traj.ddq_rad_s2, 130)
    path = np.vstack([q0, q, traj.q_rad[j + 1:j + 3]])
    assert np.all(np.abs(np.diff(path, axis=0)) <= g.step_rad)
    np.testing.assert_allclose(q[-1], traj.q_rad[j])
    assert len(q) == j - 130 + 1
    acc = np.diff(path, 2, axis=0) * 1000.0**2
    assert np.all(np.abs(acc) <= info.ddq_max_rad_s2 * 1.01)


@st.composite
def controller_stream(draw):
    n = draw(st.integers(1, 60))
    events = []
    for _ in range(n):
        kind = draw(st.sampled_from(["ref", "jump", "nan", "inf", "outside", "hold", "random", "restart"]))
        events.append((kind, draw(st.floats(-10, 10, allow_nan=False)), draw(st.integers(0, 6)),
                       draw(st.integers(-400, 400))))
    return events


@settings(max_examples=200, deadline=None)
@given(frac=st.lists(st.floats(0, 1), min_size=7, max_size=7),
       bad=st.sampled_from([None, None, None, float("nan"), float("inf"), 0.5, -0.5, 1e-4]),
       bad_joint=st.integers(0, 6), stream=controller_stream(), margin=st.floats(0.01, 1.0),
       stride=st.integers(1, 3))
def test_property_every_admitted_command_keeps_the_invariant(info, frac, bad, bad_joint, stream, margin, stride):
    """Random controller behaviour: held positions incl. NaN / inf / outside the limits, random
    counters, jumps, restarts (mode changes re-anchor on what the controller reports), any
    commands: whatever admit() returns is inside the limits minus the margin and within one
    command cycle's step of the previous output (or of the anchor)."""
    g = StepGuard(info, step_margin=margin, limit_margin_rad=0.01)
    start = info.q_min_rad + np.array(frac) * (info.q_max_rad - info.q_min_rad)  # anywhere inside the limits
    if bad is not None:  # NaN, inf, or beyond a limit (by 0.5 rad or just)
        start[bad_joint] = bad if not np.isfinite(bad) or abs(bad) > 0.1 else info.q_max_rad[bad_joint] + bad
        if abs(bad) == 0.5:
            start[bad_joint] = (info.q_max_rad if bad > 0 else info.q_min_rad)[bad_joint] + bad
    try:
        prev = g.start(start, stride)
    except GuardError:
        assert g.last is None and g.counts.aborts == 1
        return
    step = g.step_rad * (1 + 1e-12)
    for kind, x, j, jump in stream:
        want = prev.copy()
        if kind == "ref":
            want[j] += np.sign(x) * g.step_rad[j] * min(abs(x), 1.0)
        elif kind == "jump":
            want[j] += x
        elif kind in ("nan", "inf"):
            want[j] = np.nan if kind == "nan" else np.inf * np.sign(x or 1)
        elif kind == "outside":
            want[j] = info.q_max_rad[j] + abs(x) + 1e-3
        elif kind == "random":
            want = np.full(7, x) + jump * 1e-3
        elif kind == "restart":  # a controller coming back: re-anchor on what it reports
            try:
                prev = g.start(prev + np.where(np.arange(7) == j, x * 1e-3, 0.0), stride)
            except GuardError:
                continue
            assert np.all(prev >= g.lo) and np.all(prev <= g.hi)
            continue
        out = g.admit(None if kind == "hold" else want)
        assert np.all(np.isfinite(out))
        assert np.all(out >= g.lo) and np.all(out <= g.hi)
        assert np.all(np.abs(out - prev) <= step)
        prev = out


def test_ros2_goal_keeps_the_invariant_before_it_is_sent():
    """ROS 2's guard path (no rclpy needed): the whole goal is checked before it is sent, from the
    robot's current position; a start outside the limits, a jump, a goal starting more than one
    cycle's step away or leaving the limits are refused, a planned run passes."""
    from hal.real import ros2
    from hal.sim.playback import plan_run

    spec = load_robot("lwr4p")
    info = robot_info(spec, "ros2", 500.0, is_simulation=False)
    traj = fast_sine(spec, 500.0)
    plan = plan_run(info, "ros2", traj, spec.home_rad, np.zeros(7), 1, 0)
    ros2.check_commands(StepGuard(info), plan.reference, spec.home_rad)
    outside = spec.home_rad.copy()
    outside[0] = spec.q_max_rad[0] + 0.5
    with pytest.raises(GuardError, match="joint A1 at .* outside the limits"):
        ros2.check_commands(StepGuard(info), plan.reference, outside)
    for k, j, dq, what in ((400, 6, 0.05, "joint A7 step"), (0, 0, 0.01, "joint A1 step"),
                           (300, 1, 3.0, "joint A2 command .* outside the limits")):
        q = plan.reference.q_rad.copy()
        q[k:, j] += dq
        bad = JointTrajectory(plan.reference.t_s, q, plan.reference.dq_rad_s, plan.reference.ddq_rad_s2)
        with pytest.raises(GuardError, match=what):
            ros2.check_commands(StepGuard(info), bad, spec.home_rad)
