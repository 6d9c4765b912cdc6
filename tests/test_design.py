"""Optimal excitation design (issue 4): criteria, constraints, optimisers, Swevers' iteration.

Small problems (1-2 harmonics, 1-2 starts) keep these fast; the 5-harmonic design is in
benchmarks/bench_design.py."""
from __future__ import annotations

import math

import numpy as np
import pytest

from robident_twin.model.base_params import compute_base_parameters
from robident_twin.errors import ConfigError, TrajectoryError
from robident_twin.design.fourier import DENSE_CHECK_FACTOR
from robident_twin.design.geometry import CartesianBounds, CollisionChecker, CollisionSettings, Obstacle
from robident_twin.design.constraints import (
    DesignConstraints,
    check_design,
    nominal_torque_model,
    noise_std_Nm,
)
from robident_twin.design.criteria import GoalSettings, covariance_log10_det, design_criterion
from robident_twin.design.optimise import _DesignProblem, optimise_design
from robident_twin.design.iteration import swevers_iteration
from robident_twin.model.regressor import ModelOptions, Regressor
from robident_twin.model.robot import load_robot


@pytest.fixture(scope="module")
def spec():
    return load_robot("iiwa14")


@pytest.fixture(scope="module")
def regressor(spec):
    return Regressor(spec, ModelOptions())


@pytest.fixture(scope="module")
def base(regressor):
    return compute_base_parameters(regressor)


ALL = DesignConstraints(
    zero_start=True, resonance_hz=2.0, torque=True, torque_margin=0.9,
    cartesian=CartesianBounds(z_min_m=0.25, r_min_m=0.2, box_lo_m=(-0.9, -0.9, 0.0), box_hi_m=(0.9, 0.9, 1.4)),
    collision=CollisionSettings(obstacles=(Obstacle("post", "box", (0.0, -0.7, 0.4), (0.1, 0.1, 0.4)),)),
    n_check=100, n_check_nonlinear=60)


# --------------------------------------------------------------------------- geometry and settings


def test_cartesian_margins_against_hand_values():
    b = CartesianBounds(z_min_m=0.1, z_max_m=1.0, r_min_m=0.3, box_lo_m=(-1, -1, 0), box_hi_m=(1, 1, 2))
    g = b.margins(np.array([[0.3, 0.4, 0.5]]))[0]  # r = 0.5
    assert np.allclose(g, [0.4, 0.5, 0.2, 1.3, 1.4, 0.5, 0.7, 0.6, 1.5])
    assert len(b.names()) == g.size
    k = CartesianBounds.kolyubin2017()
    assert k.r_min_m == 0.3 and k.z_min_m == -0.2


def test_collision_distance_to_an_obstacle_matches_geometry(spec):
    # link 1's capsule runs along the base z axis from 0.1575 m to 0.36 m whatever q1 is
    cs = CollisionSettings(self_collision=False, radius_m=0.06,
                           obstacles=(Obstacle("ball", "sphere", (0.5, 0.0, 0.25), (0.05,)),))
    cc = CollisionChecker(spec, cs)
    q = np.zeros((3, spec.n_joints))
    q[:, 0] = [0.0, 1.0, -2.0]
    d = cc.distances(q)[:, cc.pair_names.index("ball-link1")]
    assert np.allclose(d, 0.5 - 0.06 - 0.05, atol=1e-9)


def test_self_collision_pairs_fixed_at_home_are_not_checked_and_folding_is_detected(spec):
    cc = CollisionChecker(spec, CollisionSettings())
    assert cc.skipped_pairs  # e.g. link5-link7 are joined through the short link 6
    assert all(d > 0.01 for d in cc.distances(spec.home_rad[None, :])[0])
    folded = spec.home_rad.copy()
    folded[1], folded[3] = 0.0, 2.05  # elbow folded back onto the upper arm
    assert cc.distances(folded[None, :]).min() < cc.distances(spec.home_rad[None, :]).min()


def test_config_parsing_names_the_key():
    c = DesignConstraints.from_config({"torque": True, "cartesian": {"preset": "kolyubin2017"},
                                       "collision": {"obstacles": [{"name": "t", "shape": "box",
                                                                    "pos_m": [1, 0, 0], "size_m": [.1, .1, .1]}]}})
    assert c.torque and c.cartesian.r_min_m == 0.3 and c.collision.obstacles[0].name == "t"
    with pytest.raises(ConfigError, match="design: unknown key"):
        DesignConstraints.from_config({"torqe": True})
    with pytest.raises(ConfigError, match=r"design.cartesian.box_lo_m"):
        DesignConstraints.from_config({"cartesian": {"box_lo_m": [1, 2], "box_hi_m": [3, 4, 5]}})
    with pytest.raises(ConfigError, match="size_m"):
        Obstacle("x", "sphere", (0, 0, 0), (0.1, 0.2))


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("criterion", ["cond", "dopt", "eopt", "cond_raw"])
def test_criterion_gradient_matches_finite_differences(criterion, spec, regressor, base):
    prob = _DesignProblem(spec, regressor, base, 2, 0.2, 40, DesignConstraints(n_check=20),
                          criterion, noise_std_Nm(spec), None)
    rng = np.random.default_rng(4)
    z = prob.random_start(rng, 0.5)
    f, g = prob._evaluate(z)
    for i in rng.choice(prob.nx, 5, replace=False):
        h = 1e-5
        zp, zm = z.copy(), z.copy()
        zp[i] += h
        zm[i] -= h
        fd = (prob.fun(zp) - prob.fun(zm)) / (2 * h)
        assert fd == pytest.approx(g[i], rel=2e-3, abs=1e-4 * max(1.0, abs(f)))


def test_nonlinear_constraint_jacobian_matches_finite_differences(spec, regressor, base):
    prob = _DesignProblem(spec, regressor, base, 1, 0.2, 40, ALL.__class__(**{**vars(ALL), "zero_start": False}),
                          "cond", noise_std_Nm(spec), nominal_torque_model(spec, regressor))
    rng = np.random.default_rng(1)
    z = prob.random_start(rng, 0.4)
    J = prob.nl_jac(z)
    for i in rng.choice(prob.nx, 4, replace=False):
        h = 1e-6
        zp, zm = z.copy(), z.copy()
        zp[i] += h
        zm[i] -= h
        fd = (prob.nl_fun(zp) - prob.nl_fun(zm)) / (2 * h)
        # the collision row is a min over pairs (kinks): compare the smooth rows
        smooth = np.ones(fd.size, bool)
        smooth[prob.cset.m - 1::prob.cset.m] = False
        assert np.allclose(fd[smooth], J[smooth, i], rtol=1e-3, atol=1e-4 * np.abs(fd[smooth]).max() + 1e-6)


# --------------------------------------------------------------------------- designs


@pytest.fixture(scope="module")
def c1_c2(spec, regressor, base):
    kw = dict(n_harmonics=2, base_freq_hz=0.2, n_starts=2, seed=1, maxiter=100,
              constraints=DesignConstraints(n_check=100))
    return (optimise_design(spec, regressor, base, "cond", **kw),
            optimise_design(spec, regressor, base, "dopt", **kw))


def test_dopt_has_smaller_covariance_and_cond_design_smaller_cond(c1_c2, spec, regressor, base):
    """Swevers 1997 Table: each criterion wins on its own measure (iiwa 14)."""
    r1, r2 = c1_c2
    sd = noise_std_Nm(spec)
    cond1 = design_criterion(r1.trajectory, regressor, base, "cond", sd)
    cond2 = design_criterion(r2.trajectory, regressor, base, "cond", sd)
    det1 = covariance_log10_det(r1.trajectory, regressor, base, sd)
    det2 = covariance_log10_det(r2.trajectory, regressor, base, sd)
    assert cond1 < cond2
    assert det2 < det1
    assert r1.trajectory.metadata["criterion_key"] == "cond" and r2.cond == pytest.approx(cond2, rel=1e-6)
    for r in (r1, r2):
        assert not check_design(r.trajectory, spec, DesignConstraints(n_check=100),
                                n_grid=DENSE_CHECK_FACTOR * 100)


@pytest.fixture(scope="module")
def full_design(spec, regressor, base):
    return optimise_design(spec, regressor, base, "cond", ALL, n_harmonics=2, base_freq_hz=0.2,
                           n_starts=1, seed=0, maxiter=80)


def test_design_with_all_constraints_holds_on_a_ten_times_denser_grid(full_design, spec, regressor):
    traj = full_design.trajectory
    tau_fn = nominal_torque_model(spec, regressor)
    dense = DENSE_CHECK_FACTOR * max(ALL.n_check, ALL.n_check_nonlinear)
    assert check_design(traj, spec, ALL, torque_fn=tau_fn, n_grid=dense) == []
    # independent re-check of the nonlinear quantities on the dense grid
    t = traj.time_grid(dense)
    q, dq, ddq = traj.evaluate(t)
    assert np.all(np.abs(tau_fn(q, dq, ddq)) <= spec.tau_max_Nm)
    from robident_twin.design.geometry import EndEffector
    p = EndEffector(spec).positions(q)
    assert p[:, 2].min() >= 0.25 and np.hypot(p[:, 0], p[:, 1]).min() >= 0.2
    assert CollisionChecker(spec, ALL.collision).distances(q).min() >= ALL.collision.clearance_m
    _, dq0, ddq0 = traj.evaluate(0.0)
    assert np.abs(dq0).max() < 1e-6 and np.abs(ddq0).max() < 1e-6  # Xu 2020 eq. 10
    assert traj.n_harmonics * traj.base_freq_hz < ALL.resonance_hz
    assert math.isfinite(full_design.cond) and full_design.cond < 1e3


def test_bandwidth_bound_is_enforced(spec, regressor, base):
    with pytest.raises(ConfigError, match=r"5 harmonics x 0.1 Hz = 0.5 Hz is not below the lowest resonance 0.4 Hz"):
        optimise_design(spec, regressor, base, "cond", DesignConstraints(resonance_hz=0.4), n_harmonics=5,
                        base_freq_hz=0.1)


def test_unreachable_cartesian_bounds_give_a_clear_message(spec, regressor, base):
    c = DesignConstraints(cartesian=CartesianBounds(z_min_m=2.0))
    with pytest.raises(TrajectoryError, match=r"infeasible.*height z >= 2 m"):
        optimise_design(spec, regressor, base, "cond", c, n_harmonics=1, base_freq_hz=0.2, n_starts=1)


def test_differential_evolution_gives_a_feasible_design(spec, regressor, base):
    c = DesignConstraints(n_check=60)
    r = optimise_design(spec, regressor, base, "cond", c, n_harmonics=1, base_freq_hz=0.2, n_starts=1,
                        method="de", de_maxiter=3, de_popsize=2, maxiter=40, seed=2)
    assert r.trajectory.metadata["method"] == "de"
    assert check_design(r.trajectory, spec, c, n_grid=DENSE_CHECK_FACTOR * 60) == []
    assert r.cond < 1e4 and r.history[0]["feasible"]


def test_goal_attainment_excites_the_wrist_more_than_the_cond_design(spec, regressor, base):
    """Kolyubin 2017 eq. 10: with a cond goal just above the cond optimum, the goal design raises
    the mean |tau| of the two weak wrist joints."""
    c = DesignConstraints(torque=True, n_check=80, n_check_nonlinear=40)
    kw = dict(n_harmonics=2, base_freq_hz=0.2, n_starts=1, seed=3, maxiter=60)
    r_cond = optimise_design(spec, regressor, base, "cond", c, **kw)
    goal = GoalSettings(goal_cond=1.3 * r_cond.cond, k_tau=0.9)
    r_goal = optimise_design(spec, regressor, base, "goal", c, goal=goal, initial=r_cond.trajectory, **kw)
    tau_fn = nominal_torque_model(spec, regressor)

    def wrist_mean(traj):
        t = traj.time_grid(200)
        return np.abs(tau_fn(*traj.evaluate(t)))[:, 5:].mean(axis=0)
    assert wrist_mean(r_goal.trajectory).sum() > wrist_mean(r_cond.trajectory).sum()
    assert r_goal.cond <= 1.3 * r_cond.cond * 1.05
    assert check_design(r_goal.trajectory, spec, c, torque_fn=tau_fn) == []


def test_swevers_iteration_redesigns_at_the_new_estimate(spec, regressor, base):
    """Estimate (synthetic noisy torques, OLS and per-joint residual std), then the D-optimal
    redesign with the estimated noise lowers the covariance bound."""
    beta_true = base.from_standard(regressor.true_parameters())
    sd_true = noise_std_Nm(spec)
    rng = np.random.default_rng(0)

    def estimate(traj):
        t = traj.time_grid(200)
        W = base.columns(regressor.stack(*traj.evaluate(t)))
        y = W @ beta_true + (rng.standard_normal((200, spec.n_joints)) * sd_true).ravel()
        beta, *_ = np.linalg.lstsq(W, y, rcond=None)
        res = (y - W @ beta).reshape(200, spec.n_joints)
        return beta, res.std(axis=0) * math.sqrt(200 / (200 - base.n_base / spec.n_joints))

    steps = swevers_iteration(spec, regressor, base, estimate, n_iterations=1,
                              constraints=DesignConstraints(n_check=80), n_harmonics=2,
                              base_freq_hz=0.2, n_starts=1, maxiter=60, seed=0)
    assert len(steps) == 2
    assert steps[1].log10_det_cov < steps[0].log10_det_cov
    assert np.allclose(steps[0].noise_std_Nm, sd_true, rtol=0.3)


def test_ir361_dopt_and_cond_designs_each_win_on_their_own_criterion():
    """Swevers 1997 Section IV-B on the IR 361 twin (axes 1-3, motor torques, spring on axis 2),
    with a Cartesian bound on the end-effector height."""
    from robident_twin.model.build import build_model

    spec = load_robot("kuka_ir361")
    model = build_model(spec, ModelOptions(measurement="motor_torque"))
    reg, base = model.regressor, model.base
    sd = noise_std_Nm(spec, "motor_torque")
    c = DesignConstraints(cartesian=CartesianBounds(z_min_m=0.8), n_check=100)
    kw = dict(n_harmonics=3, base_freq_hz=0.1, n_starts=2, seed=0, maxiter=100)
    r1 = optimise_design(spec, reg, base, "cond", c, **kw)
    r2 = optimise_design(spec, reg, base, "dopt", c, **kw)
    assert design_criterion(r1.trajectory, reg, base, "cond", sd) < design_criterion(r2.trajectory, reg, base, "cond", sd)
    assert covariance_log10_det(r2.trajectory, reg, base, sd) < covariance_log10_det(r1.trajectory, reg, base, sd)
    for r in (r1, r2):
        assert check_design(r.trajectory, spec, c, n_grid=DENSE_CHECK_FACTOR * 100) == []


# --------------------------------------------------------------------------- coupled drives (CLOOS)


def _cloos_with_axis6_limit(limit_Nm: float):
    import dataclasses

    cloos = load_robot("cloos_qrc350")
    joints = list(cloos.joints)
    joints[5] = dataclasses.replace(joints[5], tau_max_Nm=limit_Nm)
    return dataclasses.replace(cloos, joints=tuple(joints))


def test_motor_limit_exceeded_only_through_the_differential_gear_is_caught():
    """CLOOS QRC 350: only joint 5 moves. Joint 6 stands still and carries no torque, but its motor
    turns with qm6 = kDG q5 - q6 (differential wrist gear) and works against its inertia and
    friction: with a 0.5 N m limit on axis 6 the joint torques are all within the limits, the
    motor-6 torque is not, and the check and the dry run name the motor, time and margin."""
    from robident_twin.design.dryrun import DryRunConfig, dry_run
    from robident_twin.model.dynamics import TruthModel, motor_side_friction_Nm
    from robident_twin.design.fourier import FourierTrajectory
    from robident_twin.design.constraints import torque_limit_model

    cloos = _cloos_with_axis6_limit(0.5)
    a = np.zeros((6, 1))
    a[4, 0] = 2.0  # dq5 = 2 cos(w t) rad/s
    traj = FourierTrajectory(0.2, np.zeros(6), a, np.zeros((6, 1)))
    t = traj.time_grid(1000)
    q, dq, ddq = traj.evaluate(t)
    tau_joint, tau_motor = TruthModel(cloos).torques(q, dq, ddq)
    # within every limit joint-side and with the coupling ignored (each motor on its own joint) ...
    assert np.all(np.abs(tau_joint) <= cloos.tau_max_Nm)
    independent = tau_joint + cloos.drive_inertia_kgm2 * ddq + motor_side_friction_Nm(cloos, dq)
    assert np.all(np.abs(independent) <= cloos.tau_max_Nm)
    # ... but motor 6 = -tau6 + Ia6 ddqm6 + f6(dqm6) with qm6 = kDG q5 - q6 exceeds its limit
    kdg = cloos.coupling[5, 4]
    dqm6, ddqm6 = kdg * dq[:, 4], kdg * ddq[:, 4]
    expected_m6 = (-tau_joint[:, 5] + cloos.drive_inertia_kgm2[5] * ddqm6
                   + cloos.fv_motor_Nms_rad[5] * dqm6
                   + cloos.fc_motor_Nm[5] * np.tanh(dqm6 / cloos.coulomb_smoothing_rad_s))
    assert np.allclose(tau_motor[:, 5], expected_m6, atol=1e-9)
    assert np.abs(tau_motor[:, 5]).max() > 1.0
    limit_fn = torque_limit_model(cloos)
    assert limit_fn.side == "motor" and np.allclose(limit_fn(q, dq, ddq), tau_motor)
    c = DesignConstraints(torque=True)
    viol = check_design(traj, cloos, c)
    assert viol and all(v.kind == "torque" and "motor A6" in v.what for v in viol)
    worst = min(viol, key=lambda v: v.margin)
    assert worst.margin == pytest.approx(0.5 - np.abs(tau_motor[:, 5]).max(), abs=2e-3)
    rep = dry_run(traj, cloos, DryRunConfig(c, simulate=False), write=False)
    assert not rep.passed and len(rep.reasons) == 1
    assert "torque motor A6: VIOLATED by 0.5" in rep.reasons[0] and "t = " in rep.reasons[0]
    # the joint-torque model (what the limits were wrongly compared with before) sees nothing
    assert check_design(traj, cloos, c, torque_fn=nominal_torque_model(cloos, measurement="joint_torque")) == []


def test_cloos_design_keeps_the_motor_torques_within_their_limits():
    """A design on the CLOOS twin (motor-torque regressor) with a tight axis-6 limit: the motor
    torques, coupling included, stay within the limits on a ten times denser grid."""
    from robident_twin.model.dynamics import TruthModel
    from robident_twin.model.build import build_model

    cloos = _cloos_with_axis6_limit(3.0)
    model = build_model(cloos, ModelOptions(measurement="motor_torque"))
    c = DesignConstraints(torque=True, n_check=60, n_check_nonlinear=40)
    r = optimise_design(cloos, model.regressor, model.base, "cond", c, n_harmonics=2, base_freq_hz=0.2,
                        n_starts=1, maxiter=40, seed=0)
    traj = r.trajectory
    q, dq, ddq = traj.evaluate(traj.time_grid(DENSE_CHECK_FACTOR * c.n_check))
    tau_motor = TruthModel(cloos).torques(q, dq, ddq)[1]
    assert np.all(np.abs(tau_motor) <= cloos.tau_max_Nm)
    assert np.abs(tau_motor[:, 5]).max() > 0.5 * 3.0  # the motor-6 limit is active, not idle
    assert check_design(traj, cloos, c, n_grid=DENSE_CHECK_FACTOR * c.n_check) == []
