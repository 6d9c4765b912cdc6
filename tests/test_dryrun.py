"""Dry run and safety gate (issue 4): injected violations of each kind are caught and named,
and a real-controller backend refuses any trajectory without a passing dry run for its hash."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hal.protocol import JointTrajectory
from hal.safety import SafetyError, read_record, require_passing_dry_run
from robident_twin.design.dryrun import DryRunConfig, checks_of, dry_run, to_joint_trajectory
from robident_twin.design.geometry import CartesianBounds, CollisionSettings, EndEffector, Obstacle
from robident_twin.design.constraints import DesignConstraints
from robident_twin.design.fourier import FourierTrajectory
from robident_twin.design.process_trajectories import default_reference
from robident_twin.model.robot import load_robot

F_HZ = 0.5  # 2 s period keeps the twin runs short


@pytest.fixture(scope="module")
def spec():
    return load_robot("iiwa14")


def safe_traj(spec, changes=None) -> FourierTrajectory:
    """Small oscillations (3 harmonics) about a bent pose: far from every limit."""
    n = spec.n_joints
    rng = np.random.default_rng(0)
    a = 0.05 * rng.standard_normal((n, 3))
    b = 0.05 * rng.standard_normal((n, 3))
    q0 = default_reference(spec)
    for (kind, j, l), v in (changes or {}).items():
        {"a": a, "b": b}[kind][j, l] = v
    return FourierTrajectory(F_HZ, q0, a, b)


def config(**kw) -> DryRunConfig:
    c = DesignConstraints(torque=True, cartesian=kw.pop("cartesian", CartesianBounds(z_min_m=0.1)),
                          collision=kw.pop("collision", CollisionSettings()))
    return DryRunConfig(c, **{"simulate": False, **kw})


class FakeRealBackend:
    """A minimal stand-in for a real-controller backend: it must pass the safety gate first."""

    def __init__(self, spec, cfg: DryRunConfig, records_dir):
        self.spec, self.cfg, self.records_dir = spec, cfg, records_dir
        self.moved = []

    def run(self, trajectory: JointTrajectory, periods: int = 1, transient_periods: int = 0):
        required = checks_of(self.spec, self.cfg).required(trajectory, self.spec, trajectory.rate_hz)
        require_passing_dry_run(required, self.records_dir)
        self.moved.append(trajectory)
        return "sent"


# --------------------------------------------------------------------------- verdicts


@pytest.fixture(scope="module")
def passing(spec, tmp_path_factory):
    d = tmp_path_factory.mktemp("records")
    cfg = config(simulate=True)
    rep = dry_run(safe_traj(spec), spec, cfg, records_dir=d, out_dir=d)
    return rep, cfg, d


def test_safe_trajectory_passes_with_margins_and_twin_tracking(passing, spec):
    rep, cfg, d = passing
    assert rep.passed, rep.reasons
    kinds = {m.kind for m in rep.margins}
    assert kinds == {"position", "velocity", "acceleration", "torque", "cartesian", "collision"}
    assert all(m.margin > 0 for m in rep.margins)
    assert len([m for m in rep.margins if m.kind == "torque"]) == spec.n_joints
    assert rep.closest_collision["distance_m"] > 0.01
    assert rep.tracking is not None and rep.tracking["max_rad"] < 1e-3
    assert rep.record_path.is_file() and rep.plot_path.is_file()
    rec = read_record(rep.record_path)
    assert rec.passed is True and rec.content.key == rep.hash and rec.content.simulated


def _single(spec, traj, cfg, kind):
    rep = dry_run(traj, spec, cfg, write=False)
    assert not rep.passed
    bad = [m for m in rep.margins if m.margin < 0]
    assert bad and {m.kind for m in bad} == {kind}, [m.describe() for m in bad]
    return rep, bad


@pytest.mark.parametrize("kind, change, joint", [
    ("velocity", {("a", 4, 0): 2.5}, "A5"),          # 2.5 > 2.27 rad/s, acceleration 7.9 < 12.2
    ("acceleration", {("b", 5, 2): 2.0}, "A6"),      # 3 w = 9.42 rad/s: 18.8 > 15.7 rad/s^2
])
def test_rate_violations_are_named(kind, change, joint, spec):
    rep, bad = _single(spec, safe_traj(spec, change), config(), kind)
    assert bad[0].what == f"joint {joint}"
    assert any(f"{kind} joint {joint}: VIOLATED by" in r and "t = " in r for r in rep.reasons)


def test_position_violation_is_named(spec):
    tr = safe_traj(spec)
    q0 = tr.q0_rad.copy()
    q0[2] = spec.q_max_rad[2] - 0.01
    tr = FourierTrajectory(F_HZ, q0, tr.a, tr.b)
    rep, bad = _single(spec, tr, config(), "position")
    m = bad[0]
    assert m.what == "joint A3" and m.limit == pytest.approx(spec.q_max_rad[2])
    assert m.value - m.limit == pytest.approx(-m.margin)
    assert rep.reasons[0].startswith("position joint A3: VIOLATED by")


def test_torque_violation_is_named(robot_yaml):
    def weak_a2(d):
        d["joints"][1]["limits"]["torque_Nm"] = 5.0
    spec = load_robot(robot_yaml(weak_a2))
    rep, bad = _single(spec, safe_traj(spec), config(), "torque")
    assert bad[0].what == "joint A2" and bad[0].limit == 5.0 and abs(bad[0].value) > 5.0
    assert "torque joint A2: VIOLATED by" in rep.reasons[0] and "N m at t = " in rep.reasons[0]


def test_cartesian_violation_is_named(spec):
    rep, bad = _single(spec, safe_traj(spec), config(cartesian=CartesianBounds(z_max_m=0.3)), "cartesian")
    assert "height z <= 0.3 m" in bad[0].what and bad[0].value > 0.3
    assert "VIOLATED by" in rep.reasons[0] and "t = " in rep.reasons[0]


def test_collision_with_an_obstacle_is_named(spec):
    tr = safe_traj(spec)
    p = EndEffector(spec).positions(tr.evaluate(0.7)[0])[0]
    coll = CollisionSettings(obstacles=(Obstacle("ball", "sphere", tuple(p), (0.05,)),))
    rep, bad = _single(spec, tr, config(collision=coll), "collision")
    assert bad[0].what.startswith("pair ball-link") and bad[0].value < 0
    assert rep.closest_collision["pair"].startswith("ball-link")
    assert abs(rep.closest_collision["time_s"] - 0.7) < 0.3


def test_tracking_error_beyond_the_tolerance_fails(spec):
    rep = dry_run(safe_traj(spec), spec, config(simulate=True, tracking_tol_rad=1e-12), write=False)
    assert not rep.passed
    assert any(r.startswith("tracking: joint A") and "exceeds 1e-12 rad" in r for r in rep.reasons)


def test_twin_runs_at_the_trajectory_rate(spec):
    """A 250 Hz trajectory (an RSI controller's rate) is tracked by a 250 Hz twin, not refused
    for a rate mismatch with the backend's default 1 kHz controller."""
    rep = dry_run(safe_traj(spec), spec, config(simulate=True, rate_hz=250.0), write=False)
    assert rep.passed, rep.reasons
    assert rep.tracking is not None and rep.tracking["max_rad"] < 0.01


def test_kinematic_violation_skips_the_twin(spec):
    rep = dry_run(safe_traj(spec, {("a", 4, 0): 2.5}), spec, config(simulate=True), write=False)
    assert rep.tracking is None and any("twin was not run" in n for n in rep.notes)


# --------------------------------------------------------------------------- the gate


def test_real_backend_refuses_an_unchecked_trajectory(spec, tmp_path):
    backend = FakeRealBackend(spec, config(), tmp_path)
    jt = to_joint_trajectory(safe_traj(spec, {("a", 0, 1): 0.07}))
    with pytest.raises(SafetyError, match="no dry-run record for this exact trajectory"):
        backend.run(jt)
    assert backend.moved == []


def test_real_backend_accepts_exactly_the_checked_trajectory(passing, spec):
    rep, cfg, d = passing
    backend = FakeRealBackend(spec, cfg, d)
    jt = to_joint_trajectory(safe_traj(spec))
    assert backend.run(jt) == "sent"
    # one sample changed by 1e-9 rad: another trajectory
    q = jt.q_rad.copy()
    q[10, 0] += 1e-9
    with pytest.raises(SafetyError, match="no dry-run record"):
        backend.run(JointTrajectory(jt.t_s, q, jt.dq_rad_s, jt.ddq_rad_s2, jt.period_s))
    # same trajectory, another robot configuration (an obstacle added)
    other = config(simulate=True, collision=CollisionSettings(
        obstacles=(Obstacle("box", "box", (2.0, 0.0, 0.0), (0.1, 0.1, 0.1)),)))
    with pytest.raises(SafetyError, match=r"safety settings changed \(collision\)"):
        FakeRealBackend(spec, other, d).run(jt)
    assert checks_of(spec, cfg).required(jt, spec, jt.rate_hz).key == rep.hash


def test_real_backend_refuses_a_failed_dry_run(spec, tmp_path):
    cfg = config(cartesian=CartesianBounds(z_max_m=0.3))
    tr = safe_traj(spec)
    rep = dry_run(tr, spec, cfg, records_dir=tmp_path)
    assert not rep.passed and rep.record_path.is_file()
    with pytest.raises(SafetyError, match=r"its dry run FAILED \(cartesian end effector height z <= 0.3 m"):
        FakeRealBackend(spec, cfg, tmp_path).run(to_joint_trajectory(tr))


def test_a_tampered_record_is_refused(passing, spec, tmp_path):
    rep, cfg, d = passing
    data = json.loads(rep.record_path.read_text())
    data["verdict"]["margins"][0]["margin"] = 123.0  # edited after the dry run
    where = tmp_path / rep.record_path.parent.name
    where.mkdir()
    (where / rep.record_path.name).write_text(json.dumps(data))
    with pytest.raises(SafetyError, match=r"field 'hash'.*does not match the record's content \(.*\): the record was edited"):
        FakeRealBackend(spec, cfg, tmp_path).run(to_joint_trajectory(safe_traj(spec)))


def test_design_group_typed_equals_the_plain_mapping():
    """task=dryrun and the process-trajectory dry run read the typed ``design`` group
    (DryRunConfig.from_design); it gives the settings the plain mapping gives (from_config), and a
    mapping handed to the Python API is validated once with the full key in the error."""
    from robident_twin.config.schema import DesignConfig
    from robident_twin.design.config import as_design
    from robident_twin.errors import ConfigError
    from robident_twin.typed import to_plain

    plain = {"constraints": {"margin": 0.8, "zero_start": True, "torque": False, "torque_margin": 0.7,
                             "resonance_hz": 12.0, "cartesian": {"z_min_m": 0.05, "r_max_m": 0.9},
                             "collision": {"self_collision": True, "radius_m": 0.05, "obstacles": [
                                 {"name": "post", "shape": "box", "pos_m": [0.5, 0, 0.3], "size_m": [0.1, 0.1, 0.3]}]}},
             "dryrun": {"simulate": False, "tracking_tol_rad": 0.02, "rate_hz": 250.0}}
    typed = as_design(plain)
    assert isinstance(typed, DesignConfig) and as_design(typed) is typed
    got = DryRunConfig.from_design(typed)
    assert got == DryRunConfig.from_config(to_plain(typed))
    assert got.constraints.cartesian.z_min_m == 0.05 and got.constraints.collision.obstacles[0].name == "post"
    assert (got.simulate, got.tracking_tol_rad, got.rate_hz, got.constraints.margin) == (False, 0.02, 250.0, 0.8)
    assert DryRunConfig.from_design(None) == DryRunConfig.from_config({})
    with pytest.raises(ConfigError, match=r"design\.dryrun\.tracking_tol_rad"):
        DryRunConfig.from_design({"dryrun": {"tracking_tol_rad": -1}})
