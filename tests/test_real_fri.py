"""KUKA LWR4+ FRI backend against the FRI emulator serving the twin, over real UDP sockets
(issue 6): codec layout, sequence echo and wrap-around, faults, watchdog and stop, safety gate,
command guard, and identification through FRI matching identification on MuJoCo directly."""
from __future__ import annotations

import dataclasses
import socket
import struct

import numpy as np
import pytest

from hal.factory import make_robot
from hal.protocol import JointTrajectory
from hal.real import lwr_fri as fri
from hal.real.base import CommunicationLost, GuardError, ProtocolError, StepGuard
from hal.real.link import SequenceTracker
from hal.safety import SafetyError
from robident_twin.model.robot import load_robot

RATE = 1000.0


@pytest.fixture(scope="module")
def lwr():
    return load_robot("lwr4p")


def sine(spec, period_s=1.0, amp=0.1, rate=RATE):
    t = np.arange(int(rate * period_s)) / rate
    w = 2 * np.pi / period_s
    ph = np.linspace(0, 1, spec.n_joints)
    q = spec.home_rad + amp * np.sin(w * t[:, None] + ph)
    dq = amp * w * np.cos(w * t[:, None] + ph)
    ddq = -amp * w**2 * np.sin(w * t[:, None] + ph)
    return JointTrajectory(t, q, dq, ddq, period_s=period_s)


SAFETY = {"dryrun": {"simulate": False}}  # the backends' safety settings in these tests


def certify(spec, traj, records_dir):
    """A passing dry-run record for the trajectory (kinematic and torque checks, no twin run)."""
    from robident_twin.design.dryrun import dry_run, safety_config

    rep = dry_run(traj, spec, safety_config(SAFETY), records_dir=records_dir)
    assert rep.passed, rep.reasons
    return rep


def real_robot(spec, name, records_dir, noise=None, emulator=None, **cfg):
    """An emulated real backend with the design stage's safety checks injected (as the pipeline does)."""
    from robident_twin.design.dryrun import design_checks

    bc = {"name": name, "emulate": True, "records_dir": str(records_dir), "watchdog_s": 2.0, "safety": SAFETY, **cfg}
    if emulator:
        bc["emulator"] = emulator
    return make_robot(spec, bc, noise if noise is not None else {"enabled": False}, seed=0,
                      checks=design_checks(spec, bc["safety"], records_dir))


def assert_float32_equal(a, b, what):
    """a is b sent as float32: equal to within float32 rounding."""
    tol = np.abs(b) * 2.0**-23 + 1e-30
    assert np.all(np.abs(a - b) <= tol), (what, float(np.max(np.abs(a - b) - tol)))


# --------------------------------------------------------------------------- codec


def test_codec_sizes_offsets_and_round_trip():
    rng = np.random.default_rng(0)
    m = fri.FriMsr(send_seq=65535, refl_seq=17, timestamp_ms=123456, state=fri.STATE_CMD, quality=fri.QUALITY_OK,
                   miss_counter=4, temperature=rng.normal(size=7))
    for name, (off, n) in fri.MSR_FIELDS.items():
        setattr(m, name, rng.normal(size=n))
    m.krl.int[3] = -5
    m.krl.real[15] = 2.5
    buf = fri.encode_msr(m)
    assert len(buf) == 916
    assert struct.unpack_from("<4H", buf, 0) == (65535, 17, 916, 0x2006)
    np.testing.assert_array_equal(struct.unpack_from("<7f", buf, 216), m.msr_jnt_pos.astype(np.float32))
    np.testing.assert_array_equal(struct.unpack_from("<7f", buf, 292), m.cmd_jnt_pos.astype(np.float32))
    np.testing.assert_array_equal(struct.unpack_from("<7f", buf, 444), m.msr_jnt_trq.astype(np.float32))
    np.testing.assert_array_equal(struct.unpack_from("<7f", buf, 472), m.est_ext_jnt_trq.astype(np.float32))
    np.testing.assert_array_equal(struct.unpack_from("<7f", buf, 888), m.gravity.astype(np.float32))
    d = fri.decode_msr(buf)
    assert (d.send_seq, d.refl_seq, d.state, d.quality, d.timestamp_ms, d.miss_counter) == (65535, 17, 2, 2, 123456, 4)
    assert d.krl.int[3] == -5 and d.krl.real[15] == 2.5
    for name in fri.MSR_FIELDS:
        np.testing.assert_array_equal(getattr(d, name), getattr(m, name).astype(np.float32))
    # the emulator's lean encoder writes the same bytes for the same content
    lean = fri.encode_msr_lean(65535, 17, 123456, 2, 2, 0.001, 1.0, 0.0, 4, 0, m.msr_jnt_pos, m.cmd_jnt_pos,
                               m.msr_jnt_trq)
    assert len(lean) == 916 and fri.decode_msr_lean(lean)[0] == 65535
    np.testing.assert_array_equal(fri.decode_msr_lean(lean)[3], d.msr_jnt_pos)
    c = fri.FriCmd(send_seq=3, refl_seq=65535, cmd_flags=fri.CMD_JOINT_POSITION | fri.CMD_JOINT_STIFFNESS,
                   jnt_pos=rng.normal(size=7), add_jnt_trq=rng.normal(size=7), jnt_stiffness=np.full(7, 1000.0))
    cb = fri.encode_cmd(c)
    assert len(cb) == 376 and struct.unpack_from("<4H", cb, 0) == (3, 65535, 376, 0x1005)
    assert struct.unpack_from("<I", cb, 140)[0] == 0x11
    np.testing.assert_array_equal(struct.unpack_from("<7f", cb, 144), c.jnt_pos.astype(np.float32))
    np.testing.assert_array_equal(struct.unpack_from("<7f", cb, 220), c.add_jnt_trq.astype(np.float32))
    dc = fri.decode_cmd(cb)
    assert dc.cmd_flags == 0x11 and dc.refl_seq == 65535
    np.testing.assert_array_equal(dc.jnt_stiffness, np.float32(1000.0))
    refl, q = fri.decode_cmd_lean(fri.encode_cmd_lean(3, 9, fri.CMD_JOINT_POSITION, c.jnt_pos))
    assert refl == 9 and np.array_equal(q, c.jnt_pos.astype(np.float32))
    assert fri.decode_cmd_lean(fri.encode_cmd_lean(3, 9, 0, c.jnt_pos))[1] is None


@pytest.mark.parametrize("mutate, match", [
    (lambda b: b[:500], "500 bytes, expected 916"),
    (lambda b: b + b"\0", "917 bytes"),
    (lambda b: b[:4] + struct.pack("<H", 900) + b[6:], "packetSize 900"),
    (lambda b: b[:6] + struct.pack("<H", 0x1005) + b[8:], "datagramId 0x1005"),
    (lambda b: b[:216] + struct.pack("<f", float("nan")) + b[220:], "non-finite"),
    (lambda b: b[:144] + struct.pack("<H", 7) + b[146:], "invalid state"),
])
def test_malformed_measurements_are_refused(mutate, match):
    buf = fri.encode_msr(fri.FriMsr(msr_jnt_pos=np.ones(7)))
    with pytest.raises(ProtocolError, match=match):
        fri.decode_msr(mutate(buf))
    with pytest.raises(ProtocolError):
        fri.decode_msr_lean(mutate(buf))


def test_sequence_tracker_unwraps_and_classifies():
    tr = SequenceTracker(16)
    kinds = [tr.classify(s) for s in (65533, 65534, 65535, 0, 2, 1, 2, 5)]
    assert [k for k, _ in kinds] == ["new", "new", "new", "new", "new", "reordered", "duplicate", "new"]
    assert [u for _, u in kinds] == [65533, 65534, 65535, 65536, 65538, 65537, 65538, 65541]
    assert tr.lost == 2  # 65539, 65540


def test_command_guard_clamps_nan_limits_and_large_steps_to_one_cycle(lwr):
    from hal.sim.mujoco_backend import robot_info

    info = robot_info(lwr, "lwr_fri", RATE, is_simulation=False)
    g = StepGuard(info, step_margin=1.0, limit_margin_rad=0.01)
    q0 = lwr.home_rad.copy()
    g.start(q0)
    step = info.dq_max_rad_s / RATE
    small = q0 + 0.9 * step
    np.testing.assert_array_equal(g.admit(small), small)
    assert g.violation is None
    bad = small.copy()
    bad[2] = np.nan
    np.testing.assert_array_equal(g.admit(bad), small)  # the hold goes on the wire
    assert "non-finite command for joint A3" in g.violation
    jump = small.copy()
    jump[4] += 1.2 * step[4]
    out = g.admit(jump)
    assert "joint A5 step" in g.violation and out[4] == pytest.approx(small[4] + step[4])
    jump2 = out.copy()
    jump2[4] += 1.5 * step[4]  # as if two cycles had passed: still one step (the old guard allowed two)
    assert g.admit(jump2)[4] == pytest.approx(out[4] + step[4]) and "joint A5 step" in g.violation
    near = g.last.copy()
    near[0] = info.q_max_rad[0] - 0.005  # inside the limits but inside the margin
    assert g.admit(near)[0] <= info.q_max_rad[0] - 0.01 and "outside the limits minus the margin" in g.violation
    assert g.counts.clamped == 4 and g.counts.checked == 5


# --------------------------------------------------------------------------- over sockets


def test_safety_gate_refuses_without_a_passing_dry_run(lwr, tmp_path):
    robot = real_robot(lwr, "lwr_fri", tmp_path)
    try:
        with pytest.raises(SafetyError, match="no dry-run record"):
            robot.run(sine(lwr), periods=1)
        assert robot.emulator.status.sessions == 0 and robot.emulator.status.sent == 0
    finally:
        robot.close()


def test_monitor_mode_records_the_twin_in_float32_with_sequence_wrap(lwr, tmp_path):
    """The emulated controller plays the trajectory itself; the recording equals the MuJoCo
    twin's own run to float32 precision; the counter wraps through 65535 -> 0 on the way."""
    traj = sine(lwr)
    certify(lwr, traj, tmp_path)
    robot = real_robot(lwr, "lwr_fri", tmp_path, emulator={"start_seq": 63000})
    try:
        rec = robot.run(traj, periods=2, transient_periods=1)
        st = robot.emulator.status
    finally:
        robot.close()
    direct = make_robot(lwr, {"name": "mujoco"}, {"enabled": False}, seed=0).run(traj, periods=2, transient_periods=1)
    assert st.cycles > 65536 - 63000  # wrapped
    assert rec.valid is None and rec.n_periods == 2 and rec.period_samples == 1000
    assert_float32_equal(rec.q_rad, direct.q_rad, "q")
    assert_float32_equal(rec.tau_joint_Nm, direct.tau_joint_Nm, "tau_joint")
    np.testing.assert_array_equal(rec.q_cmd_rad, direct.q_cmd_rad)
    link = rec.metadata["link"]
    assert link["lost"] == link["malformed"] == link["duplicated"] == link["reordered"] == 0
    # every packet was answered with reflSeqCount = its sendSeqCount (the emulator accepts nothing else)
    assert st.replies == st.cycles == link["received"] and st.late_replies == st.bad_replies == 0
    assert not st.stopped and [s for _, s in st.states][:3] == ["wait", "ready", "idle"]
    assert rec.metadata["motor_torque_available"] is False
    from robident_twin.errors import RecordingError

    with pytest.raises(RecordingError, match="no motor-torque channel"):
        rec.torque("motor_torque")


def test_command_mode_streams_positions_through_the_guard(lwr, tmp_path):
    traj = sine(lwr)
    certify(lwr, traj, tmp_path)
    robot = real_robot(lwr, "lwr_fri", tmp_path, mode="command")
    try:
        rec = robot.run(traj, periods=1)
        st = robot.emulator.status
    finally:
        robot.close()
    assert "commanding" in [s for _, s in st.states]
    assert st.commands_applied >= rec.q_rad.shape[0]
    assert st.max_command_step_rad <= np.max(lwr.dq_max_rad_s) / RATE * 1.05
    # the twin follows the streamed reference (position-only commands: small tracking lag)
    assert np.max(np.abs(rec.q_rad - traj.q_rad)) < 2e-3


def test_injected_faults_are_counted_and_never_crash_the_client(lwr, tmp_path):
    traj = sine(lwr)
    certify(lwr, traj, tmp_path)
    faults = {"loss": 0.03, "duplicate": 0.02, "reorder": 0.02, "truncate": 0.005, "malformed": 0.005,
              "wrong_id": 0.005, "delay_prob": 0.002, "delay_s": 0.05, "seed": 1}
    robot = real_robot(lwr, "lwr_fri", tmp_path, late_after_s=0.03, emulator={"faults": faults})
    try:
        # garbage from a foreign port of the same host is ignored
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"\x01" * 916, robot.endpoint.address)
        rec = robot.run(traj, periods=2)
        st = robot.emulator.status
    finally:
        robot.close()
    link = rec.metadata["link"]
    print("client", link, "\nemulator", {k: v for k, v in st.as_dict().items() if k != "states"})
    corrupted = st.truncated + st.malformed + st.wrong_id
    assert min(st.dropped, st.duplicated, st.reordered, corrupted, st.delayed) > 0
    # exact up to the last packet or two the controller sent after the client had all it needed
    assert st.malformed + st.truncated + st.wrong_id - 2 <= link["malformed"] <= corrupted
    assert st.duplicated - 2 <= link["duplicated"] <= st.duplicated
    assert st.reordered - 2 <= link["reordered"] <= st.reordered
    # counters that never arrived (reordered ones did arrive)
    assert st.dropped + corrupted - 3 <= link["lost"] <= st.dropped + corrupted
    assert link["late"] >= st.delayed - 2
    assert robot.endpoint.foreign >= 1
    # the recording marks exactly the missing samples as gaps, and stays finite
    assert rec.valid is not None and rec.metadata["lost_samples_in_window"] == int((~rec.valid).sum()) > 0
    assert np.all(np.isfinite(rec.q_rad))


def test_watchdog_on_communication_loss_and_the_emulator_stops_the_robot(lwr, tmp_path):
    traj = sine(lwr)
    certify(lwr, traj, tmp_path)
    robot = real_robot(lwr, "lwr_fri", tmp_path, mode="command", watchdog_s=0.3,
                       emulator={"faults": {"blackout_after_cycles": 600}, "hold_after_stop_cycles": 800})
    try:
        with pytest.raises(CommunicationLost, match="watchdog"):
            robot.run(traj, periods=2)
        st = robot.emulator.status
    finally:
        robot.close()
    assert st.stopped and "no valid answer" in st.stop_reason
    assert st.dq_after_stop_rad_s < 1e-2  # held at the stop position: at rest
    assert [s for _, s in st.states][-2:] == ["stopped", "idle"]


def test_guard_aborts_holds_and_the_bad_command_never_reaches_the_robot(lwr, tmp_path, monkeypatch):
    import hal.real.base as base

    traj = sine(lwr)
    certify(lwr, traj, tmp_path)
    real_plan = base.plan_run

    def plan_with_a_jump(*a, **kw):
        p = real_plan(*a, **kw)
        q = p.reference.q_rad.copy()
        q[300:, 3] += 0.05  # a 0.05 rad jump (limit per cycle ~ 0.002 rad)
        ref = JointTrajectory(p.reference.t_s, q, p.reference.dq_rad_s, p.reference.ddq_rad_s2)
        return dataclasses.replace(p, reference=ref)

    monkeypatch.setattr(base, "plan_run", plan_with_a_jump)
    robot = real_robot(lwr, "lwr_fri", tmp_path, mode="command", emulator={"reply_timeout_s": 0.02})
    try:
        with pytest.raises(GuardError, match="joint A4 step"):
            robot.run(traj, periods=1)
        st = robot.emulator.status
    finally:
        robot.close()
    assert st.max_command_step_rad <= np.max(lwr.dq_max_rad_s) / RATE * 1.05
    assert st.stopped  # the client stopped answering after holding: the controller stopped


# --------------------------------------------------------------------------- identification


@pytest.mark.slow
@pytest.mark.parametrize("robot_name, backend", [("lwr4p", "lwr_fri"), ("iiwa14", "sunrise_fri")])
def test_identification_through_fri_matches_mujoco_and_survives_packet_loss(robot_name, backend, tmp_path):
    """Noise-free identification (joint torque, OLS) from the LWR4+ FRI and the iiwa Sunrise FRI
    recordings equals the one from MuJoCo directly up to float32 rounding (FRI's wire format;
    Sunrise sends doubles); with 5 % packet loss the gaps are marked and per-sample averaging
    over the valid periods still recovers the truth (0.5 %)."""
    lwr = load_robot(robot_name)
    from test_identify_robots import check_truth

    from robident_twin.design.stored import reference, resolve_design
    from robident_twin.estimation.estimators import estimate
    from robident_twin.model.build import build_model, model_options
    from robident_twin.processing.signal import process_periodic

    design = resolve_design(f"excitation/{robot_name}_default.yaml", lwr)
    traj = reference(design, RATE)
    certify(lwr, traj, tmp_path)
    model = build_model(lwr, model_options({"measurement": "joint_torque"}, {}))
    true = model.true_base()

    def identify(rec):
        data = process_periodic(rec, "joint_torque", design.n_harmonics)
        W = model.base_regressor(data)
        est = estimate("ols", W, data.tau_Nm, model.base.names, None, "period")
        params = [{"estimate": float(b), "true": float(t), "unit": u}
                  for b, t, u in zip(est.beta, true, model.base.units)]
        return est.beta, check_truth({"parameters": params})

    direct = make_robot(lwr, {"name": "mujoco"}, {"enabled": False}, seed=0).run(traj, periods=1)
    robot = real_robot(lwr, backend, tmp_path)
    try:
        rec = robot.run(traj, periods=1)
    finally:
        robot.close()
    assert_float32_equal(rec.q_rad, direct.q_rad, "q")
    b_direct, (rel_d, abs_d) = identify(direct)
    b_fri, (rel_f, abs_f) = identify(rec)
    scale = np.maximum(np.abs(b_direct), 1e-3)
    print(f"{backend} vs MuJoCo: largest base-parameter difference {np.max(np.abs(b_fri - b_direct) / scale):.2e} "
          f"(relative, 1e-3 floor); truth: MuJoCo {100 * rel_d:.4f} %, {backend} {100 * rel_f:.4f} %")
    assert np.max(np.abs(b_fri - b_direct) / scale) < 1e-3
    assert rel_f < 0.005 and abs_f < 1.0

    lossy = real_robot(lwr, backend, tmp_path, emulator={"faults": {"loss": 0.05, "seed": 3}})
    try:
        rec5 = lossy.run(traj, periods=2)
    finally:
        lossy.close()
    gaps = int((~rec5.valid).sum())
    print(f"{backend}, 5 % loss: {gaps} of {rec5.valid.size} samples missing ({100 * gaps / rec5.valid.size:.2f} %)")
    assert 0.03 < gaps / rec5.valid.size < 0.07
    _, (rel5, abs5) = identify(rec5)
    print(f"{backend}, 5 % loss: worst relative error {100 * rel5:.4f} %, near-zero {abs5:.2f} x tolerance")
    assert rel5 < 0.005 and abs5 < 1.0


# --------------------------------------------------------------------------- shared pieces


def test_stepper_reproduces_the_twin_run_exactly(lwr, monkeypatch):
    """TwinStepper uses the twin's own per-cycle code: stepping the planned reference with the
    advanced feed-forward gives MujocoTwin.run's samples bit for bit. Both on the numpy
    passive-force callback (``ROBIDENT_NATIVE=0``), which the per-cycle code runs: the compiled
    one equals it to rounding only (tests/test_native_passive.py)."""
    monkeypatch.setenv("ROBIDENT_NATIVE", "0")
    from hal.factory import make_noise
    from hal.sim.playback import plan_run
    from hal.sim.stepper import TwinStepper

    traj = sine(lwr, period_s=0.5, amp=0.03)
    twin = make_robot(lwr, {"name": "mujoco"}, {"enabled": False}, seed=0)
    rec = twin.run(traj, periods=1)
    st = TwinStepper(lwr, make_noise(lwr, {"enabled": False}))
    plan = plan_run(st.info, "mujoco", traj, *st.state(), 1, 0)
    ff = st.feedforward(plan.reference)
    ref = plan.reference
    q, tj = [], []
    res = st.current
    for k in range(plan.stop):
        if k >= plan.start:
            q.append(res.q_true_rad)
            tj.append(res.tau_joint_true_Nm)
        res = st.step(ref.q_rad[k], ref.dq_rad_s[k], ref.ddq_rad_s2[k], tau_ff_Nm=ff[k])
    np.testing.assert_array_equal(np.array(q), rec.q_rad)
    np.testing.assert_array_equal(np.array(tj), rec.tau_joint_Nm)


def test_period_averaging_uses_each_samples_valid_periods():
    from hal.protocol import Recording
    from robident_twin.errors import RecordingError
    from robident_twin.processing.signal import process_periodic

    P, M, n = 200, 3, 2
    rng = np.random.default_rng(0)
    t = np.arange(P * M) / 100.0
    base = np.sin(2 * np.pi * np.arange(P) / P)[:, None] * np.array([1.0, 0.5])
    q = np.tile(base, (M, 1)) + 1e-3 * rng.standard_normal((P * M, n))
    valid = rng.random(P * M) > 0.2
    valid[[10, 10 + P, 10 + 2 * P]] = False  # sample 10 lost in every period
    q_bad = np.where(valid[:, None], q, 50.0)  # a gap's fill-in value must not matter
    rec = Recording(t, q_bad, q_bad.copy(), q_bad.copy(), q_bad.copy(), 100.0, P, M, valid=valid)
    d = process_periodic(rec, "joint_torque", 3)
    qs, vs = q.reshape(M, P, n), valid.reshape(M, P)
    for k in (0, 11, 150):
        np.testing.assert_allclose(d.tau_Nm[k], qs[vs[:, k], k].mean(axis=0), atol=1e-12)
    assert abs(d.tau_Nm[10, 0] - 0.5 * (d.tau_Nm[9, 0] + d.tau_Nm[11, 0])) < 1e-9  # interpolated
    assert np.all(np.isfinite(d.tau_var_sample_Nm2)) and np.max(np.abs(d.tau_Nm - base)) < 5e-3
    with pytest.raises(RecordingError, match="field valid must be a bool array"):
        Recording(t, q, q, q, q, 100.0, P, M, valid=valid.astype(float))


def test_bad_backend_config_is_refused(lwr, tmp_path):
    from robident_twin.errors import ConfigError

    with pytest.raises(ConfigError, match=r"backend.hots: unknown key"):
        make_robot(lwr, {"name": "lwr_fri", "hots": "10.0.0.1"})
    with pytest.raises(ConfigError, match=r"backend.mode: expected one of \['monitor', 'command'\], got 'torque'"):
        make_robot(lwr, {"name": "lwr_fri", "mode": "torque"})
    with pytest.raises(ConfigError, match=r"backend.emulator.los: unknown key"):
        make_robot(lwr, {"name": "lwr_fri", "emulate": True, "emulator": {"los": 0.1}})
    with pytest.raises(ConfigError, match=r"backend.emulator.faults.lost: unknown key"):
        make_robot(lwr, {"name": "lwr_fri", "emulate": True, "emulator": {"faults": {"lost": 0.1}}})
    with pytest.raises(ConfigError, match="emulator serves 127.0.0.1 only"):
        make_robot(lwr, {"name": "lwr_fri", "emulate": True, "host": "192.168.0.10"})
    with pytest.raises(ConfigError, match="FRI carries 7 joints"):
        make_robot(load_robot("kuka_ir361"), {"name": "lwr_fri", "emulate": True})
