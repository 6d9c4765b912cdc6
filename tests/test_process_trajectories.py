"""Process trajectories (ICMA 2020 in-process identification): pick-and-place and square tracing
via damped-least-squares IK and a time law that respects the limits."""
from __future__ import annotations

import numpy as np
import pytest

from robident_twin.design.dryrun import DryRunConfig, dry_run
from robident_twin.errors import ConfigError, TrajectoryError
from robident_twin.design.geometry import CartesianBounds, EndEffector
from robident_twin.design.constraints import DesignConstraints
from robident_twin.design.process_trajectories import (
    TOOL_DOWN,
    Area,
    InverseKinematics,
    pick_and_place,
    square,
)
from robident_twin.model.robot import load_robot

PICK = Area((0.5, -0.3, 0.2), (0.08, 0.08, 0.02))
PLACE = Area((0.5, 0.3, 0.25), (0.08, 0.08, 0.02))


@pytest.fixture(scope="module")
def spec():
    return load_robot("iiwa14")


@pytest.fixture(scope="module")
def ee(spec):
    return EndEffector(spec)


@pytest.fixture(scope="module")
def sq(spec):
    return square(spec, (0.55, 0.0, 0.35), side_m=0.2, speed_fraction=0.5, points_per_edge=40)


@pytest.fixture(scope="module")
def pp(spec):
    return pick_and_place(spec, PICK, PLACE, n_cycles=2, seed=0, speed_fraction=0.5)


def _within(jt, spec, fraction):
    assert np.all(np.abs(jt.dq_rad_s) <= fraction * spec.dq_max_rad_s * (1 + 1e-9))
    assert np.all(np.abs(jt.ddq_rad_s2) <= fraction * spec.ddq_max_rad_s2 * (1 + 1e-9))
    assert np.all(jt.q_rad >= spec.q_min_rad) and np.all(jt.q_rad <= spec.q_max_rad)


def test_ik_reaches_a_pose_with_the_tool_down(spec, ee):
    ik = InverseKinematics(spec)
    q = ik.solve([0.5, 0.1, 0.3], TOOL_DOWN)
    import pinocchio as pin

    pin.framesForwardKinematics(ee.model, ee.data, q)
    M = ee.data.oMf[ee.fid]
    assert np.allclose(M.translation, [0.5, 0.1, 0.3], atol=1e-6)
    assert np.allclose(M.rotation, TOOL_DOWN, atol=1e-4)


def test_unreachable_target_is_a_clear_error(spec):
    with pytest.raises(TrajectoryError, match=r"target \[2.0, 0.0, 0.5\] m .* not reached"):
        InverseKinematics(spec).solve([2.0, 0.0, 0.5], TOOL_DOWN, max_iter=100)


def test_square_traces_a_horizontal_square_within_the_limits(sq, spec, ee):
    jt = sq.trajectory
    _within(jt, spec, 0.5)
    p = ee.positions(jt.q_rad[::25])
    assert np.allclose(p[:, 2], 0.35, atol=1e-4)  # horizontal
    # every point on the boundary of the square: one coordinate at +-0.1 from the centre
    d = np.abs(p[:, :2] - [0.55, 0.0])
    assert np.all(np.abs(d.max(axis=1) - 0.1) < 1e-4)
    assert np.all(d <= 0.1 + 1e-4)
    # the time law's derivatives are consistent with the positions
    dq_num = np.gradient(jt.q_rad, 1.0 / jt.rate_hz, axis=0)
    assert np.abs(dq_num - jt.dq_rad_s)[2:-2].max() < 1e-3
    # closed loop at rest: one period of a periodic trajectory
    assert np.allclose(jt.q_rad[0], jt.q_rad[-1], atol=1e-5) and np.abs(jt.dq_rad_s[0]).max() < 1e-12
    assert jt.period_s == pytest.approx(jt.n_samples / jt.rate_hz)


def test_pick_and_place_visits_random_points_of_both_areas(pp, spec, ee):
    jt = pp.trajectory
    _within(jt, spec, 0.5)
    picks, places = pp.metadata["picks_m"], pp.metadata["places_m"]
    for pts, area in ((picks, PICK), (places, PLACE)):
        assert np.all(np.abs(pts - area.centre_m) <= np.asarray(area.half_size_m) + 1e-12)
    assert np.allclose(ee.positions(pp.waypoint_q_rad), pp.waypoints_m, atol=1e-5)
    # the trajectory passes through every waypoint at rest
    for q in pp.waypoint_q_rad:
        k = np.argmin(np.abs(jt.q_rad - q).sum(axis=1))
        assert np.abs(jt.q_rad[k] - q).max() < 1e-9 and np.abs(jt.dq_rad_s[k]).max() < 1e-9
    again = pick_and_place(spec, PICK, PLACE, n_cycles=2, seed=0, speed_fraction=0.5)
    other = pick_and_place(spec, PICK, PLACE, n_cycles=2, seed=1, speed_fraction=0.5)
    assert np.array_equal(again.trajectory.q_rad, jt.q_rad)
    assert not np.allclose(other.metadata["picks_m"], picks)


def test_restricted_workspace(spec, ee):
    box = CartesianBounds(box_lo_m=(0.3, -0.45, 0.1), box_hi_m=(0.8, 0.45, 0.6))
    r = pick_and_place(spec, PICK, PLACE, n_cycles=1, seed=2, workspace=box)
    p = ee.positions(r.trajectory.q_rad[::20])
    assert np.all(box.margins(p) >= -1e-6)
    tight = CartesianBounds(box_lo_m=(0.3, -0.2, 0.1), box_hi_m=(0.8, 0.45, 0.6))
    with pytest.raises(TrajectoryError, match=r"outside the restricted workspace \('box y >= -0.2 m'"):
        pick_and_place(spec, PICK, PLACE, n_cycles=1, seed=2, workspace=tight)
    with pytest.raises(TrajectoryError, match="square: corner"):
        square(spec, (0.55, 0.0, 0.35), side_m=0.2, workspace=CartesianBounds(z_min_m=0.4))


def test_bad_settings_are_config_errors(spec):
    with pytest.raises(ConfigError, match="speed_fraction"):
        square(spec, (0.55, 0.0, 0.35), speed_fraction=1.5)
    with pytest.raises(ConfigError, match="n_cycles"):
        pick_and_place(spec, PICK, PLACE, n_cycles=0)


def test_process_trajectory_passes_the_dry_run(sq, spec):
    cfg = DryRunConfig(DesignConstraints(torque=True, cartesian=CartesianBounds(z_min_m=0.3)), simulate=False)
    rep = dry_run(sq.trajectory, spec, cfg, write=False)
    assert rep.passed, rep.reasons
    assert rep.worst("cartesian").margin == pytest.approx(0.05, abs=1e-3)
