"""End-to-end identification of the simulated iiwa 14 through the CLI (the issue's acceptance)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def cli(tmp_path: Path, *overrides: str, name: str = "run", twin: str | None = "ideal"):
    """The CLI on the ideal twin (exact model, for tests of the mathematics) unless ``twin`` is
    None (the default configuration: the realistic twin) or an override names the twin."""
    exe = Path(sys.executable).parent / "robident-twin"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]
    if twin is not None and not any(o.startswith("twin") for o in overrides):
        overrides = (*overrides, f"twin={twin}")
    out = tmp_path / name
    proc = subprocess.run(cmd + [f"hydra.run.dir={out}", *overrides], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)
    return proc, out


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    proc, out = cli(tmp_path_factory.mktemp("default"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, out, json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def realistic_default_run(identify_run):
    """The default configuration as a user runs it: the realistic twin (2 periods, no plots);
    the session's ``identify_run`` (tests/conftest.py) is exactly that run."""
    return identify_run


@pytest.fixture(scope="module")
def noise_free_run(tmp_path_factory):
    """The session's shared noise-free iiwa 14 run on MuJoCo (tests/shared_runs.py: ideal twin,
    noise=none, OLS, one recorded period; also read by test_identify_robots)."""
    from shared_runs import noise_free_summary

    return noise_free_summary(tmp_path_factory, "iiwa14", "mujoco")


def test_summary_has_the_documented_fields(default_run):
    proc, out, s = default_run
    for key in ("robot", "backend", "estimator", "n_samples", "cond", "parameters", "validation", "timings_s"):
        assert key in s
    assert s["robot"] == "iiwa14" and s["backend"] == "mujoco" and s["estimator"] == "wls-period"
    assert s["n_base_parameters"] == len(s["parameters"]) == 57
    for p in s["parameters"]:
        assert {"name", "estimate", "std", "rsd_percent", "true"} <= set(p)
    assert len(s["validation"]["torque_rmse_Nm"]) == 7 and len(s["validation"]["torque_nrmse_percent"]) == 7
    assert (out / "validation_torques.png").stat().st_size > 10_000
    assert (out / "parameters.png").stat().st_size > 10_000
    assert (out / "recording_excitation.npz").exists() and (out / "recording_validation.npz").exists()
    assert "ZZ1R" in proc.stdout and "validation" in proc.stdout  # the table on stdout


def test_default_run_states_its_twin_and_the_mismatch(realistic_default_run):
    """The default run is on the realistic twin with every effect, says so, and reports what the
    mismatch does (chi2/dof, residual whiteness, parameters beyond 3 std) without failing."""
    proc, out, s = realistic_default_run
    assert s["twin"]["name"] == "realistic"
    assert s["twin"]["effects"] == ["closed_loop", "elasticity", "friction_unmodelled", "sensor", "transmission_error"]
    assert "no-op" in s["twin"]["magnitudes"]["transmission_error"]  # the iiwa 14 has no transmission error
    assert s["twin"]["sources"]["elasticity.stiffness_Nm_rad"]
    mm = s["mismatch"]
    assert mm["chi2_per_dof"] == s["chi2_per_dof"] and len(mm["durbin_watson"]) == 7
    beyond = [p["name"] for p in s["parameters"] if abs(p["estimate"] - p["true"]) > 3 * p["std"]]
    assert mm["beyond_3std"] == beyond and beyond  # the realistic twin is not the model: some fail
    # the mismatch colours the residuals: Durbin-Watson below 2 (white) on every joint
    assert all(0 < dw < 1.8 for dw in mm["durbin_watson"])
    assert "twin: realistic with closed_loop, elasticity" in proc.stdout and "beyond 3 std" in proc.stdout


def test_noise_free_run_recovers_every_base_parameter(noise_free_run):
    """Every base parameter within 0.5 % (1e-4 absolute where |true| < 1e-3)."""
    worst_rel, worst_abs = 0.0, 0.0
    for p in noise_free_run["parameters"]:
        err = abs(p["estimate"] - p["true"])
        if abs(p["true"]) < 1e-3:
            worst_abs = max(worst_abs, err)
            assert err <= 1e-4, p
        else:
            worst_rel = max(worst_rel, err / abs(p["true"]))
            assert err <= 5e-3 * abs(p["true"]), p
    print(f"noise-free: worst relative error {100 * worst_rel:.4f} %, worst absolute error on small "
          f"parameters {worst_abs:.2e}")
    nrmse = noise_free_run["validation"]["torque_nrmse_percent"]
    print("noise-free validation NRMSE % per joint:", np.round(nrmse, 5))
    assert max(nrmse) < 0.5


def test_default_noisy_run_is_unbiased_and_predicts_to_the_noise_level(default_run):
    _, _, s = default_run
    z = np.array([(p["estimate"] - p["true"]) / p["std"] for p in s["parameters"]])
    frac = np.mean(np.abs(z) <= 3)
    print(f"default run: {100 * frac:.1f} % of base parameters within 3 std (max |z| {np.max(np.abs(z)):.2f}); "
          f"chi2/dof {s['chi2_per_dof']:.3f}")
    # calibrated: each |z| > 3 with probability 0.27 %, so among 57 parameters two or more beyond
    # 3 std has probability 1.1 % (one: 14 %); and none beyond the Bonferroni bound at 1 %
    assert np.sum(np.abs(z) > 3) <= 1
    assert np.max(np.abs(z)) < 3.8  # P(max |z| > 3.8 of 57 calibrated) = 0.8 %
    rmse = np.array(s["validation"]["torque_rmse_Nm"])
    noise = np.array(s["validation"]["simulated_noise_std_Nm"])
    print("validation RMSE / noise std per joint:", np.round(rmse / noise, 3))
    assert np.all(rmse <= 2 * noise)
    # speed is measured in benchmarks/bench_stages.py (per-stage wall time), not asserted here


def _fails_cleanly(proc, out, pattern):
    import re

    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert re.search(pattern, proc.stderr), proc.stderr[-2000:]
    assert not (out / "summary.json").exists()
    assert (out / "FAILED.txt").exists()


def test_unknown_robot_is_refused(tmp_path):
    proc, out = cli(tmp_path, "robot.name=kuka_kr1000")
    _fails_cleanly(proc, out, r"unknown robot 'kuka_kr1000'.*available robots: .*iiwa14")
    proc, _ = cli(tmp_path, "robot=kuka_kr1000", name="group")
    assert proc.returncode != 0 and "kuka_kr1000" in proc.stderr


def test_non_physical_robot_file_is_refused(tmp_path):
    raw = yaml.safe_load((ROOT / "sim_assets/iiwa14/robot.yaml").read_text())
    raw["joints"][2]["link"]["mass_kg"] = -1.0
    bad = tmp_path / "bad_robot.yaml"
    bad.write_text(yaml.safe_dump(raw))
    proc, out = cli(tmp_path, f"robot.file={bad}")
    _fails_cleanly(proc, out, r"bad_robot\.yaml: field 'joints\[2\]\.link\.mass_kg': expected a positive number")


def test_trajectory_exceeding_a_limit_is_refused(tmp_path):
    from robident_twin.design.fourier import load_design, save_design

    d = load_design(ROOT / "conf/excitation/iiwa14_default.yaml")
    fast = type(d)(d.base_freq_hz, d.q0_rad, d.a * 3, d.b * 3)
    path = tmp_path / "too_fast.yaml"
    save_design(fast, path)
    proc, out = cli(tmp_path, f"robot.excitation={path}")
    _fails_cleanly(proc, out, r"exceeds the (position|velocity|acceleration) limit of joint A\d at t = ")


def test_bad_override_is_refused(tmp_path):
    proc, out = cli(tmp_path, "model.measurement=current")
    _fails_cleanly(proc, out, r"model.measurement: expected one of")
