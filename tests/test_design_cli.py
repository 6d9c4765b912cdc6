"""``robident-twin task=design`` (issue 4): every criterion, constraint, optimiser and Swevers'
iteration on the twin reachable from Hydra, with clear errors for bad keys."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robident_twin.design.fourier import DENSE_CHECK_FACTOR, load_design
from robident_twin.design.constraints import DesignConstraints, check_design, noise_std_Nm
from robident_twin.design.criteria import covariance_log10_det, design_criterion
from robident_twin.model.build import build_model
from robident_twin.model.regressor import ModelOptions
from robident_twin.model.robot import load_robot

SMALL = ("robot=kuka_ir361", "design.harmonics=2", "design.base_freq_hz=0.25", "design.starts=1",
         "design.maxiter=40")


def cli(tmp_path: Path, *overrides: str, name: str = "run"):
    exe = Path(sys.executable).parent / "robident-twin"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]
    out = tmp_path / name
    proc = subprocess.run(cmd + ["task=design", f"hydra.run.dir={out}", *overrides], capture_output=True,
                          text=True, cwd=tmp_path, timeout=600)
    return proc, out


@pytest.fixture(scope="module")
def ir361():
    spec = load_robot("kuka_ir361")
    model = build_model(spec, ModelOptions(measurement="motor_torque", offsets=None))  # as the CLI
    return spec, model.regressor, model.base


def test_dopt_by_differential_evolution_with_zero_start_and_torque_limits(tmp_path, ir361):
    spec, reg, base = ir361
    proc, out = cli(tmp_path, *SMALL, "design.criterion=dopt", "design.method=de", "design.de.maxiter=3",
                    "design.constraints.zero_start=true", "design.constraints.resonance_hz=1.0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    traj = load_design(out / "kuka_ir361_default.yaml")
    meta = traj.metadata
    assert meta["criterion_key"] == "dopt" and meta["method"] == "de"
    assert traj.n_harmonics == 2 and traj.base_freq_hz == 0.25
    summary = json.loads((out / "design_summary.json").read_text())
    assert summary["criterion"] == "dopt" and summary["log10_det_cov"] == pytest.approx(meta["log10_det_cov"])
    # the constraints of the config hold on the dense grid: limits, zero start, motor torques
    c = DesignConstraints(zero_start=True, torque=True, resonance_hz=1.0)
    assert check_design(traj, spec, c, n_grid=DENSE_CHECK_FACTOR * c.n_check) == []
    _, dq0, ddq0 = traj.evaluate(0.0)
    assert np.abs(dq0).max() < 1e-6 and np.abs(ddq0).max() < 1e-6
    # the stored criterion is the covariance bound with the robot file's motor-torque noise
    assert meta["log10_det_cov"] == pytest.approx(
        covariance_log10_det(traj, reg, base, noise_std_Nm(spec, "motor_torque")), rel=1e-9)


@pytest.mark.parametrize("override, message", [
    # refused at the CLI edge (robident_twin.config) before any design work
    ("design.criterion=aopt", "design.criterion: expected one of ['cond', 'dopt', 'eopt', 'goal', 'cond_raw'], got 'aopt'"),
    ("design.method=ga", "design.method: expected one of ['slsqp', 'de'], got 'ga'"),
    ("design.iteration.criterion=goal", "design.iteration.criterion: expected one of ['cond', 'dopt', 'eopt'], got 'goal'"),
    ("design.constraints.resonance_hz=0.4", "not below the lowest resonance 0.4 Hz"),
])
def test_bad_settings_end_with_a_clear_message(tmp_path, override, message):
    proc, out = cli(tmp_path, *SMALL, override)
    assert proc.returncode == 2
    assert message in proc.stderr and message in (out / "FAILED.txt").read_text()


def test_infeasible_cartesian_bound_is_reported_not_a_poor_design(tmp_path):
    proc, out = cli(tmp_path, *SMALL, "design.constraints.cartesian={z_min_m: 5.0}")
    assert proc.returncode == 2
    assert "infeasible" in proc.stderr and "height z >= 5 m" in proc.stderr
    assert not (out / "kuka_ir361_default.yaml").exists()


@pytest.mark.slow
def test_swevers_iteration_on_the_twin_improves_the_bound_at_the_estimate(tmp_path, ir361):
    """Design (cond), acquire on the MuJoCo twin, estimate (WLS), redesign by D-optimality with
    the estimated noise and W beta torques: at that estimate the second design's covariance is not
    worse than the first's, and the estimated noise matches the twin's sensors."""
    spec, reg, base = ir361
    proc, out = cli(tmp_path, *SMALL, "design.iterations=1", "acquisition.periods=2",
                    "acquisition.transient_periods=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((out / "design_summary.json").read_text())
    first, second = s["steps"]
    assert second["log10_det_cov_at_previous_estimate"] <= second["previous_design_at_previous_estimate"] + 1e-9
    # recompute from the written designs at the first estimate's noise
    sd0 = np.array(first["noise_std_Nm"])
    d0, d1 = load_design(first["file"]), load_design(second["file"])
    assert covariance_log10_det(d1, reg, base, sd0) <= covariance_log10_det(d0, reg, base, sd0) + 1e-9
    assert second["previous_design_at_previous_estimate"] == pytest.approx(covariance_log10_det(d0, reg, base, sd0))
    # the noise estimated from the spread between periods is the robot file's motor-torque noise
    assert np.allclose(sd0, spec.tau_motor_std_Nm, rtol=0.25)
    # both designs are feasible (torque limits through the nominal model)
    c = DesignConstraints(torque=True)
    for d in (d0, d1):
        assert check_design(d, spec, c, n_grid=DENSE_CHECK_FACTOR * c.n_check) == []
    final = load_design(out / "kuka_ir361_default.yaml")
    assert np.allclose(final.a, d1.a) and final.metadata["swevers_iterations"] == 1
    assert design_criterion(d1, reg, base, "cond", sd0) < 1e4


def test_design_settings_from_the_typed_group_equal_the_plain_mapping():
    """task=design reads the typed design group (DesignSettings.from_design): the settings equal
    those of its plain form (from_config) with every section set; a mapping is validated once."""
    from robident_twin.design.config import as_design
    from robident_twin.design.task import DesignSettings
    from robident_twin.errors import ConfigError
    from robident_twin.typed import to_plain

    typed = as_design({"criterion": "goal", "method": "de", "harmonics": 3, "base_freq_hz": 0.2, "starts": 2,
                       "seed": 5, "maxiter": 9, "samples": 50, "max_cond": 500.0,
                       "goal": {"goal_cond": 20.0, "k_tau": 0.8, "weak_joints": [1, 3], "cond_criterion": "cond_raw"},
                       "de": {"maxiter": 4, "popsize": 3}, "iterations": 2,
                       "iteration": {"criterion": "eopt", "rel_tol": 0.01},
                       "constraints": {"margin": 0.9, "zero_start": True, "torque_margin": 0.8,
                                       "resonance_hz": 8.0, "cartesian": {"z_min_m": 0.1}}})
    got = DesignSettings.from_design(typed)
    assert got == DesignSettings.from_config(to_plain(typed))
    assert (got.goal.weak_joints, got.de_popsize, got.iteration_criterion, got.constraints.cartesian.z_min_m) == \
        ((1, 3), 3, "eopt", 0.1)
    assert DesignSettings.from_design(None) == DesignSettings.from_config(to_plain(as_design(None)))
    with pytest.raises(ConfigError, match=r"design\.de\.popsize"):
        DesignSettings.from_design({"de": {"popsize": 0}})
