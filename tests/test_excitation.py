"""Tests of robident_twin.design.excitation_cli: Fourier series, storage, limits, criterion, optimiser."""
from __future__ import annotations

import dataclasses
import math
import os
import stat

import numpy as np
import pytest
import yaml

from robident_twin.model.base_params import compute_base_parameters
from robident_twin.errors import TrajectoryError
from robident_twin.design.fourier import DENSE_CHECK_FACTOR, FourierTrajectory, load_design, save_design
from robident_twin.design.limits import assert_within_limits, check_limits
from robident_twin.design.criteria import condition_number
from robident_twin.design.excitation_cli import main
from robident_twin.design.optimise_cond import optimise_condition
from robident_twin.paths import CONF_DIR
from robident_twin.model.regressor import ModelOptions, Regressor
from robident_twin.model.robot import load_robot

DEFAULT_DESIGN = CONF_DIR / "excitation" / "iiwa14_default.yaml"
VALIDATION_DESIGN = CONF_DIR / "excitation" / "iiwa14_validation.yaml"


@pytest.fixture(scope="module")
def spec():
    return load_robot("iiwa14")


@pytest.fixture(scope="module")
def regressor(spec):
    return Regressor(spec, ModelOptions())


@pytest.fixture(scope="module")
def base(regressor):
    return compute_base_parameters(regressor)


def random_trajectory(n=7, H=4, f_hz=0.2, seed=3, amp=0.3) -> FourierTrajectory:
    rng = np.random.default_rng(seed)
    return FourierTrajectory(f_hz, rng.uniform(-0.5, 0.5, n), amp * rng.standard_normal((n, H)),
                             amp * rng.standard_normal((n, H)))


# --------------------------------------------------------------------------- the series


def test_analytic_derivatives_match_central_differences():
    traj = random_trajectory()
    t = np.linspace(0.0, 2 * traj.period_s, 97)
    h = 1e-5
    q, dq, ddq = traj.evaluate(t)
    q_p, dq_p, _ = traj.evaluate(t + h)
    q_m, dq_m, _ = traj.evaluate(t - h)
    assert q.shape == dq.shape == ddq.shape == (97, 7)
    np.testing.assert_allclose(dq, (q_p - q_m) / (2 * h), atol=1e-8, rtol=1e-7)
    np.testing.assert_allclose(ddq, (dq_p - dq_m) / (2 * h), atol=1e-8, rtol=1e-7)


def test_series_matches_the_formula_at_one_time():
    traj = random_trajectory(n=2, H=3)
    t = 1.234
    w = 2 * math.pi * traj.base_freq_hz
    q_expected = [traj.q0_rad[j] + sum(traj.a[j, l - 1] / (w * l) * math.sin(w * l * t)
                                       - traj.b[j, l - 1] / (w * l) * math.cos(w * l * t)
                                       for l in range(1, 4)) for j in range(2)]
    np.testing.assert_allclose(traj.evaluate(t)[0][0], q_expected, rtol=1e-12)


def test_series_is_periodic_and_sampled_over_exactly_one_period():
    traj = random_trajectory()
    t = np.linspace(0.0, traj.period_s, 53)
    for x, y in zip(traj.evaluate(t), traj.evaluate(t + traj.period_s)):
        np.testing.assert_allclose(x, y, atol=1e-10)
    t_s, q, dq, ddq = traj.sample(100.0)
    assert len(t_s) == round(traj.period_s * 100) == q.shape[0]
    np.testing.assert_allclose(np.diff(t_s), 0.01)
    assert t_s[0] == 0.0 and t_s[-1] < traj.period_s
    with pytest.raises(TrajectoryError, match="integer number of samples"):
        traj.sample(33.3)  # 5 s x 33.3 Hz = 166.5 samples


def test_properties_and_immutability():
    traj = random_trajectory(n=3, H=2, f_hz=0.25)
    assert (traj.n_joints, traj.n_harmonics, traj.period_s) == (3, 2, 4.0)
    with pytest.raises(ValueError):
        traj.a[0, 0] = 1.0


# --------------------------------------------------------------------------- storage


def test_to_dict_from_dict_round_trip(tmp_path):
    traj = random_trajectory().with_metadata(robot="iiwa14", cond=12.5, seed=7)
    d = yaml.safe_load(yaml.safe_dump(traj.to_dict()))
    back = FourierTrajectory.from_dict(d, source="roundtrip")
    assert back.base_freq_hz == traj.base_freq_hz
    for name in ("q0_rad", "a", "b"):
        np.testing.assert_array_equal(getattr(back, name), getattr(traj, name))
    assert back.metadata == {"robot": "iiwa14", "cond": 12.5, "seed": 7}

    path = save_design(traj, tmp_path / "sub" / "design.yaml", {"criterion": "test"})
    loaded = load_design(path)
    np.testing.assert_array_equal(loaded.a, traj.a)
    assert loaded.metadata["criterion"] == "test" and loaded.metadata["robot"] == "iiwa14"
    assert [p.name for p in path.parent.iterdir()] == ["design.yaml"]  # no temporary file left
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("field, value, message", [
    ("b", [[0.1, 0.2, 0.3]] * 7, r"field 'b'.*expected shape \(7, 4\).*got \(7, 3\)"),  # H = 3 instead of 4
    ("a", [[0.1] * 4] * 6, r"field 'a'.*7 rows"),  # one joint too few
    ("q0_rad", [[0.0] * 7], r"field 'q0_rad'"),  # not a list of numbers
    ("a", [[0.1] * 4] * 6 + [[0.1, 0.1, float("nan"), 0.1]], r"field 'a'.*finite"),
    ("base_freq_hz", -0.1, r"field 'base_freq_hz'.*positive"),
])
def test_from_dict_rejects_bad_fields_naming_source_and_field(field, value, message):
    d = random_trajectory().to_dict()
    d[field] = value
    with pytest.raises(TrajectoryError, match=r"my_design\.yaml: " + message):
        FourierTrajectory.from_dict(d, source="my_design.yaml")


def test_from_dict_rejects_missing_field():
    d = random_trajectory().to_dict()
    del d["q0_rad"]
    with pytest.raises(TrajectoryError, match=r"src: field 'q0_rad': missing"):
        FourierTrajectory.from_dict(d, source="src")


def test_load_design_reports_missing_file(tmp_path):
    with pytest.raises(TrajectoryError, match="does not exist"):
        load_design(tmp_path / "nope.yaml")


# --------------------------------------------------------------------------- stored designs


@pytest.mark.parametrize("path", [DEFAULT_DESIGN, VALIDATION_DESIGN], ids=["default", "validation"])
def test_stored_designs_load_and_satisfy_limits_on_a_dense_grid(path, spec, regressor, base):
    traj = load_design(path)
    meta = traj.metadata
    assert meta["robot"] == "iiwa14"
    assert traj.n_joints == spec.n_joints and traj.n_harmonics == meta["harmonics"] == 5
    assert traj.base_freq_hz == pytest.approx(0.1)
    n_dense = DENSE_CHECK_FACTOR * int(meta["n_check"])
    assert check_limits(traj, spec, n_grid=n_dense) == []
    assert_within_limits(traj, spec, n_grid=n_dense, name=str(path))
    # the stored cond is what the criterion gives, and it is small (well-conditioned)
    cond = condition_number(traj, regressor, base, n_samples=int(meta["n_samples"]))
    assert cond == pytest.approx(meta["cond"], rel=1e-5)
    assert cond < 20
    # ... and the design also is well-conditioned between the criterion samples
    assert condition_number(traj, regressor, base, n_samples=1000) < 1.5 * cond


def test_stored_designs_differ():
    d, v = load_design(DEFAULT_DESIGN), load_design(VALIDATION_DESIGN)
    assert d.metadata["seed"] != v.metadata["seed"]
    assert not np.allclose(d.a, v.a) and not np.allclose(d.b, v.b)
    q_d = d.evaluate(d.time_grid(200))[0]
    q_v = v.evaluate(v.time_grid(200))[0]
    assert np.max(np.abs(q_d - q_v)) > 0.1


# --------------------------------------------------------------------------- limits


def test_check_limits_detects_injected_violations(spec):
    traj = load_design(DEFAULT_DESIGN)
    a, b, q0 = traj.a.copy(), traj.b.copy(), traj.q0_rad.copy()
    a[3] *= 1.5  # A4: velocity (and position) well beyond the limits
    b[3] *= 1.5
    q0[0] = spec.q_min_rad[0] - 0.05  # A1: below its lower position limit everywhere
    bad = FourierTrajectory(traj.base_freq_hz, q0, a, b)
    violations = check_limits(bad, spec)
    found = {(v.joint, v.kind) for v in violations}
    assert ("A4", "velocity") in found and ("A1", "position") in found
    assert all(v.joint in ("A1", "A4") for v in violations)
    vel = next(v for v in violations if v.joint == "A4" and v.kind == "velocity")
    assert abs(vel.value) > vel.limit == pytest.approx(spec.dq_max_rad_s[3]) and vel.excess > 0
    # the reported time is where the speed is largest
    t = bad.time_grid(2000)
    dq = bad.evaluate(t)[1][:, 3]
    assert vel.time_s == pytest.approx(t[np.argmax(np.abs(dq))])
    with pytest.raises(TrajectoryError) as exc:
        assert_within_limits(bad, spec, name="scaled design")
    msg = str(exc.value)
    assert "joint A4 velocity" in msg and "joint A1 position" in msg
    assert f"t = {vel.time_s:.4f} s" in msg and f"{vel.limit:.6g} rad/s" in msg


def test_check_limits_margin(spec):
    traj = load_design(DEFAULT_DESIGN)
    assert check_limits(traj, spec, margin=1.0) == []
    tight = check_limits(traj, spec, margin=0.8)
    assert tight and all(v.margin == 0.8 for v in tight)


# --------------------------------------------------------------------------- optimiser


def test_small_optimisation_reduces_cond_and_is_feasible(spec, regressor, base):
    res = optimise_condition(spec, regressor, base, n_harmonics=2, base_freq_hz=0.1, n_starts=1,
                             seed=5, maxiter=15, progress=False)
    (h,) = res.history
    assert h["feasible"] and res.n_starts == 1
    assert res.cond == pytest.approx(h["cond"]) and res.cond < 0.5 * h["cond_start"]
    assert res.cond == pytest.approx(condition_number(res.trajectory, regressor, base))
    assert check_limits(res.trajectory, spec, n_grid=DENSE_CHECK_FACTOR * 150) == []


def test_zero_start_gives_rest_at_t0(spec, regressor, base):
    res = optimise_condition(spec, regressor, base, n_harmonics=3, n_starts=1, seed=2, maxiter=10,
                             zero_start=True, progress=False)
    _, dq0, ddq0 = res.trajectory.evaluate(0.0)
    np.testing.assert_allclose(dq0, 0.0, atol=1e-9)
    np.testing.assert_allclose(ddq0, 0.0, atol=1e-9)
    assert check_limits(res.trajectory, spec) == []


def test_tiny_velocity_limits_raise_instead_of_a_poor_design(spec, regressor, base):
    tiny = dataclasses.replace(
        spec, joints=tuple(dataclasses.replace(j, dq_max_rad_s=1e-4) for j in spec.joints))
    with pytest.raises(TrajectoryError, match=r"too tight.*excite the 57 base parameters"):
        optimise_condition(tiny, regressor, base, n_harmonics=2, n_starts=1, maxiter=10,
                           progress=False)


def test_zero_start_with_one_harmonic_is_impossible(spec, regressor, base):
    # dq(0) = ddq(0) = 0 with one harmonic forces a = b = 0: a constant, unexciting trajectory
    with pytest.raises(TrajectoryError, match=r"cond inf.*dq\(0\) = ddq\(0\) = 0"):
        optimise_condition(spec, regressor, base, n_harmonics=1, n_starts=1, maxiter=5,
                           zero_start=True, progress=False)


def test_command_line_writes_a_design(tmp_path, spec):
    out = tmp_path / "design.yaml"
    rc = main(["--robot", "iiwa14", "--out", str(out), "--seed", "3", "--harmonics", "2",
               "--base-freq", "0.2", "--starts", "1", "--maxiter", "8", "--no-progress"])
    assert rc == 0
    traj = load_design(out)
    assert traj.n_harmonics == 2 and traj.base_freq_hz == 0.2
    assert {"robot", "cond", "criterion", "seed", "harmonics"} <= set(traj.metadata)
    assert traj.metadata["seed"] == 3 and traj.metadata["robot"] == "iiwa14"
    assert check_limits(traj, spec) == []
