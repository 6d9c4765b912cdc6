"""The dry-run gate (issue 13, Build 2): a dry-run record is tied to everything that decides
whether a motion is safe, and every bypass found in the issue is refused with a message naming
what changed; the lead-in planned from the measured pose is re-checked with the dry run's
constraints before the first command; the HAL imports no pipeline stage."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from hal.factory import make_robot
from hal.protocol import JointTrajectory
from hal.safety import (
    DryRunRecord,
    SafetyError,
    read_record,
    record_dir,
    trajectory_sha256,
)
from robident_twin.design.dryrun import design_checks, dry_run, safety_config
from robident_twin.design.geometry import EndEffector
from robident_twin.paths import ROOT
from robident_twin.design.process_trajectories import default_reference
from robident_twin.model.robot import load_robot

RATE = 1000.0
NO_SIM = {"dryrun": {"simulate": False}}  # kinematic + torque checks, no twin run (fast)


def sine(spec, centre, amp=0.05, period_s=1.0) -> JointTrajectory:
    """One period of a small sine about ``centre`` at 1 kHz."""
    t = np.arange(round(period_s * RATE)) / RATE
    w = 2 * np.pi / period_s
    ph = np.linspace(0, 1, spec.n_joints)
    return JointTrajectory(t, centre + amp * np.sin(w * t[:, None] + ph), amp * w * np.cos(w * t[:, None] + ph),
                           -amp * w**2 * np.sin(w * t[:, None] + ph), period_s=period_s)


def backend(spec, records, safety=NO_SIM, mode="command", **kw):
    """An emulated Sunrise FRI backend with the design stage's checks injected (as the pipeline does)."""
    bc = {"name": "sunrise_fri", "emulate": True, "records_dir": str(records), "watchdog_s": 2.0, "mode": mode,
          "safety": safety, "emulator": {"reply_timeout_s": 0.02, "hold_after_stop_cycles": 20}, **kw}
    return make_robot(spec, bc, {"enabled": False}, seed=0, checks=design_checks(spec, safety, records))


def refused(robot, traj, match):
    """The run is refused with ``match`` and no position command was ever sent: every answer the
    backend wrote to the socket (the ready phase's) carried none (the protocol then echoes the
    controller's own held position) and the emulated robot was not moved."""
    sent = []
    reply = robot._reply

    def spy(pkt, q_cmd_rad):
        sent.append(q_cmd_rad)
        return reply(pkt, q_cmd_rad)

    robot._reply = spy
    programs = []
    robot.emulator.start_program = lambda *a, **k: programs.append(a)  # monitor mode: the program never starts
    try:
        with pytest.raises(SafetyError, match=match) as exc:
            robot.run(traj, periods=1)
        assert all(q is None for q in sent), "a position command was sent"
        assert programs == [] and robot.emulator.status.max_command_step_rad < 1e-12
        return str(exc.value)
    finally:
        robot.close()


@pytest.fixture(scope="module")
def iiwa14():
    return load_robot("iiwa14")


# --------------------------------------------------------------------------- what a record certifies


def test_a_payload_that_fails_does_not_share_the_record_of_the_detached_pass(robot_yaml, tmp_path):
    """iiwa 14 with a 40 kg payload at the flange: detached, the trajectory passes; attached, its
    dry run fails on torque. The attached robot is refused, naming the payload change (and the
    attached dry run's failure), although robot file and trajectory are the same."""
    def with_payload(d):
        d["payload"] = {"mass_kg": 40.0, "com_m": [0.0, 0.0, 0.1],
                        "inertia_com_kgm2": {"xx": 0.2, "yy": 0.2, "zz": 0.2, "xy": 0.0, "xz": 0.0, "yz": 0.0}}
        d["payload_attached"] = False

    detached = load_robot(robot_yaml(with_payload))
    attached = detached.with_payload(True)
    traj = sine(detached, default_reference(detached))
    cfg = safety_config(NO_SIM)
    ok = dry_run(traj, detached, cfg, records_dir=tmp_path)
    assert ok.passed, ok.reasons
    bad = dry_run(traj, attached, cfg, write=False)
    assert not bad.passed and any(r.startswith("torque joint A2") for r in bad.reasons), bad.reasons
    assert bad.hash != ok.hash
    # the attached robot finds only the detached pass: refused, naming the payload
    msg = refused(backend(attached, tmp_path), traj, r"payload changed \(certified: detached \(40 kg available\); "
                                                     r"now: attached, 40 kg\)")
    assert "torque-check parameters changed" in msg  # the torque model differs with the payload too
    # with the failing attached record written as well, both records are named
    dry_run(traj, attached, cfg, records_dir=tmp_path)
    msg = refused(backend(attached, tmp_path), traj, "payload changed")
    assert "its dry run FAILED (torque joint A2" in msg
    # and the detached robot still passes the gate on its own record
    rob = backend(detached, tmp_path)
    try:
        assert rob.gate(traj).content.payload["attached"] is False
    finally:
        rob.close()


def test_a_record_without_simulation_does_not_satisfy_a_backend_that_requires_it(iiwa14, tmp_path):
    traj = sine(iiwa14, default_reference(iiwa14))
    rep = dry_run(traj, iiwa14, safety_config(NO_SIM), records_dir=tmp_path)
    assert rep.passed and read_record(rep.record_path).content.simulated is False
    # the backend asks for simulation (the task=dryrun default): refused, naming it
    refused(backend(iiwa14, tmp_path, safety=None), traj, r"not simulated \(the dry run was made with simulate = false")
    refused(backend(iiwa14, tmp_path, safety={"dryrun": {"simulate": True}}), traj, "not simulated")


def test_a_zero_estimate_torque_check_fails_and_is_not_the_nominal_record(iiwa14, tmp_path):
    """A dry run against an all-zero estimate: its torque check would pass anything. It fails with
    a named reason, its content differs from the nominal model's, and a backend (which requires
    the robot model's torque check) refuses it naming the torque-check parameters."""
    from robident_twin.model.build import build_model
    from robident_twin.model.regressor import ModelOptions

    model = build_model(iiwa14, ModelOptions(measurement="joint_torque"), n_samples=60)
    traj = sine(iiwa14, default_reference(iiwa14))
    cfg = safety_config(NO_SIM)
    zero = dry_run(traj, iiwa14, cfg, regressor=model.regressor, base=model.base,
                   beta=np.zeros(len(model.base.names)), records_dir=tmp_path)
    nominal = dry_run(traj, iiwa14, cfg, write=False)
    assert nominal.passed and not zero.passed
    assert "torque check: every parameter of the estimate is zero" in zero.reasons[-1]
    assert zero.hash != nominal.hash
    tc = read_record(zero.record_path).content.torque_check
    assert tc["source"] == "estimate" and tc["all_zero"] is True
    refused(backend(iiwa14, tmp_path), traj, r"torque-check parameters changed \(certified: estimate "
                                             r"\(parameters [0-9a-f]{12}\.\.\.\), every parameter zero; "
                                             r"required: robot model")
    # even if it had been recorded as a pass, the gate compares the parameters, not the verdict
    forged = DryRunRecord(read_record(zero.record_path).content, True, ())
    from hal.safety import write_record

    write_record(forged, tmp_path)
    refused(backend(iiwa14, tmp_path), traj, "torque-check parameters changed")


def test_a_bare_hash_file_is_not_a_record(iiwa14, tmp_path):
    traj = sine(iiwa14, default_reference(iiwa14))
    d = record_dir(iiwa14.name, trajectory_sha256(traj), tmp_path)
    d.mkdir(parents=True)
    (d / "forged.json").write_text(json.dumps({"hash": "0" * 64, "passed": True}))
    refused(backend(iiwa14, tmp_path), traj, r"forged.json: not a complete dry-run record: missing field\(s\) "
                                             r"\['version', 'content', 'verdict'\]")


def test_a_nan_margin_fails_the_dry_run(robot_yaml, tmp_path):
    """A link centre of mass at 1e200 m: the nominal torques overflow. Before, ``margin < 0`` was
    False for NaN and the robot PASSED; now the non-finite margin fails, named."""
    def far_com(d):
        d["joints"][3]["link"]["com_m"] = [1e200, 0.0, 0.0]

    spec = load_robot(robot_yaml(far_com))
    traj = sine(spec, default_reference(spec))
    rep = dry_run(traj, spec, safety_config(NO_SIM), records_dir=tmp_path)
    assert not rep.passed
    bad = [r for r in rep.reasons if "margin not finite" in r]
    assert bad and all(r.startswith("torque joint ") and "VIOLATED" in r for r in bad), rep.reasons
    # the record says FAIL and the gate names it
    refused(backend(spec, tmp_path), traj, r"its dry run FAILED \(torque joint A\d: VIOLATED \(margin not finite")
    # a record claiming a pass with a non-finite margin cannot be made or read
    content = read_record(rep.record_path).content
    with pytest.raises(SafetyError, match="non-finite margin"):
        DryRunRecord(content, True, (), ({"kind": "torque", "what": "joint A1", "margin": float("nan")},))


def test_other_changes_are_named(iiwa14, tmp_path):
    """Safety settings, the robot file and the rate are part of the content."""
    traj = sine(iiwa14, default_reference(iiwa14))
    dry_run(traj, iiwa14, safety_config(NO_SIM), records_dir=tmp_path)
    floor = {"dryrun": {"simulate": False}, "constraints": {"cartesian": {"z_min_m": 0.1}}}
    refused(backend(iiwa14, tmp_path, safety=floor), traj, r"safety settings changed \(cartesian\)")
    # the 1 kHz samples certified, sent to a controller running at 250 Hz (4 x faster motion)
    refused(backend(iiwa14, tmp_path, control_rate_hz=250.0), traj,
            r"rate changed \(certified at 1000 Hz, the controller runs at 250 Hz\)")


# --------------------------------------------------------------------------- the motion planned at run time


@pytest.mark.parametrize("what", ["cartesian", "collision", "torque"])
def test_a_lead_in_that_violates_the_constraints_is_refused_before_the_first_command(iiwa14, robot_yaml, tmp_path,
                                                                                     what):
    """The twin stands upright (home, flange at z = 1.31 m); the trajectory swings about the
    bent reference pose (flange near z = 0.69 m). A ceiling at z <= 0.9 m, a ball a third of the
    way along the lead-in's flange path, or an A4 torque limit between the trajectory's peak
    (25.2 N m) and the lead-in's (26.5 N m) is kept by the trajectory (its dry run passes) but not
    by the lead-in the backend plans from the measured pose: refused, nothing commanded."""
    from hal.motion import lead_in
    from hal.sim.mujoco_backend import robot_info
    from robident_twin.design.constraints import torque_limit_model

    traj = sine(iiwa14, default_reference(iiwa14))
    app = lead_in(robot_info(iiwa14, "sunrise_fri", RATE, is_simulation=True), traj, iiwa14.home_rad,
                  np.zeros(iiwa14.n_joints))
    k = app.n_samples // 3
    mid = EndEffector(iiwa14).positions(app.q_rad[k][None])[0]
    spec = iiwa14
    if what == "torque":
        tau = torque_limit_model(iiwa14, measurement="joint_torque")
        peak_app = np.abs(tau(app.q_rad, app.dq_rad_s, app.ddq_rad_s2)[:, 3]).max()
        peak_traj = np.abs(tau(traj.q_rad, traj.dq_rad_s, traj.ddq_rad_s2)[:, 3]).max()
        assert peak_app > peak_traj + 1.0  # (26.5 vs 25.2 N m)

        def a4_limit(d):
            d["joints"][3]["limits"]["torque_Nm"] = float(0.5 * (peak_app + peak_traj))

        spec = load_robot(robot_yaml(a4_limit))
    cons = {"cartesian": {"cartesian": {"z_max_m": 0.9}}, "torque": {},
            "collision": {"collision": {"obstacles": [{"name": "ball", "shape": "sphere", "pos_m": mid.tolist(),
                                                       "size_m": [0.05]}]}}}[what]
    safety = {"dryrun": {"simulate": False}, "constraints": cons}
    rep = dry_run(traj, spec, safety_config(safety), records_dir=tmp_path)
    assert rep.passed, rep.reasons
    robot = backend(spec, tmp_path, safety=safety)
    assert robot.gate(traj).passed  # the record certifies the trajectory ...
    expect = {"cartesian": r"height z <= 0.9 m: VIOLATED by 0.406 m at t = 0.000 s",
              "torque": r"torque joint A4: VIOLATED by [0-9.]+ N m at t = (\d+\.\d+) s",
              "collision": r"collision pair ball-link\w*: VIOLATED by [0-9.]+ m at t = (\d+\.\d+) s"}[what]
    msg = refused(robot, traj, r"the lead-in from the measured pose \(start \[.*\] rad\) violates the dry run's "
                               r"constraints: .*" + expect)  # ... the lead-in is not
    assert msg.endswith("nothing was commanded")
    if what != "cartesian":  # inside the lead-in, not at its ends
        import re

        t_hit = float(re.search(expect, msg).group(1))
        assert 0.05 * app.t_s[-1] < t_hit < 0.95 * app.t_s[-1], (t_hit, app.t_s[-1])
    # monitor mode: the controller program is never started
    robot = backend(spec, tmp_path, safety=safety, mode="monitor")
    refused(robot, traj, "the lead-in from the measured pose")


#: a real controller needs its address and port (nothing listens there in this test)
CONTROLLER = {"host": "127.0.0.1", "controller_port": 30200}


def test_a_real_controller_refuses_to_run_without_the_injected_checks(iiwa14, tmp_path):
    """Not emulated (nothing listens): the gate refuses before any socket traffic."""
    robot = make_robot(iiwa14, {"name": "sunrise_fri", "emulate": False, "port": 0, "records_dir": str(tmp_path),
                                **CONTROLLER})
    try:
        with pytest.raises(SafetyError, match="without the design stage's safety checks"):
            robot.run(sine(iiwa14, default_reference(iiwa14)), periods=1)
        assert robot.stats.replies == 0
    finally:
        robot.close()
    with pytest.raises(SafetyError, match="built for another model"):
        make_robot(iiwa14, {"name": "sunrise_fri", "emulate": False, "port": 0, **CONTROLLER},
                   checks=design_checks(load_robot("lwr4p"), NO_SIM))


# --------------------------------------------------------------------------- layering

MODEL_LAYER = {"model", "errors", "paths", "atomic", "progress", "typed"}  # the floor of test_architecture.BOTTOM: atomic
# (the one atomic file write), progress (the live progress hook; imports only the standard library)


def _stage_imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("robident_twin"):
            mods = [node.module] if node.module != "robident_twin" else [f"robident_twin.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            mods = [a.name for a in node.names if a.name.startswith("robident_twin")]
        else:
            continue
        out += [f"{path.relative_to(ROOT)}: {m}" for m in mods if m.split(".")[1] not in MODEL_LAYER]
    return out


def test_the_gate_and_the_real_backends_import_no_pipeline_stage():
    """hal/safety.py, hal/factory.py and everything under hal/real, hal/emulators and hal/sim import
    only the model layer (robident_twin.model, errors, paths, atomic, progress); tests/test_architecture.py checks
    the whole import graph."""
    files = [ROOT / "hal" / "safety.py", ROOT / "hal" / "factory.py"]
    for sub in ("real", "emulators", "sim"):
        files += sorted((ROOT / "hal" / sub).glob("*.py"))
    assert len(files) > 15
    bad = [x for f in files for x in _stage_imports(f)]
    assert bad == []
