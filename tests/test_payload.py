"""Payload identification (Jubien 2014; issue 17 item 1): the payload-only regressor against the
truth dynamics, the covariance of task=payload with the robot model's uncertainty, task=payload
and the two-experiment route (model.payload=true) on the LWR4+ twin against the truth, and both
through the file backend from the twin's recordings. Short runs (2 periods, no transient)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from robident_twin.errors import ConfigError

PAYLOAD = {"mass_kg": 3.0, "com_m": [0.01, 0.02, 0.08], "inertia_com_kgm2": {"xx": 0.012, "yy": 0.014, "zz": 0.008,
                                                                            "xy": 0.0005}}
SHORT = ["twin=ideal", "acquisition.periods=2", "acquisition.transient_periods=0", "backend.control_rate_hz=500",
         "output.plots=false", "output.report=false"]


def _no_rate(overrides):
    return [o for o in overrides if not o.startswith("backend.control_rate_hz")]  # a file's rate is its own


def _cfg(overrides):
    from hydra import compose, initialize_config_dir

    from robident_twin.config import as_dictconfig, validate
    from robident_twin.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=list(overrides))
    return as_dictconfig(validate(cfg))


def test_payload_columns_equal_the_truth_dynamics_with_and_without_the_payload(iiwa):
    """W_p(q, dq, ddq) phi_true = tau(robot with payload) - tau(robot without), pinocchio RNEA of the
    twin's truth model (a payload from the config, on a mounting frame that is not the identity)."""
    from robident_twin.model.dynamics import TruthModel
    from robident_twin.model.payload import PayloadRegressor, payload_truth, with_payload_config

    spec = with_payload_config(iiwa, dict(PAYLOAD, mount_xyz_m=[0.02, -0.01, 0.05], mount_rpy_rad=[0.3, -0.2, 0.5]),
                               attached=True)
    reg = PayloadRegressor(spec)
    q, dq, ddq = reg._reg.random_states(20, np.random.default_rng(1))
    d_tau = TruthModel(spec).torques(q, dq, ddq)[0] - TruthModel(spec.with_payload(False)).torques(q, dq, ddq)[0]
    pred = (reg.stack(q, dq, ddq) @ payload_truth(spec)).reshape(d_tau.shape)
    assert np.max(np.abs(pred - d_tau)) < 1e-9 * max(1.0, np.max(np.abs(d_tau)))
    assert np.max(np.abs(d_tau)) > 1.0  # the payload matters (N m)
    assert np.linalg.matrix_rank(reg.stack(q, dq, ddq)) == 10  # all ten identifiable with the robot known


def test_payload_config_errors_name_the_key(iiwa):
    from robident_twin.model.payload import with_payload_config

    with pytest.raises(ConfigError, match="payload: robot iiwa14 .* has no payload; set"):
        with_payload_config(iiwa, {"mass_kg": 2.0})
    with pytest.raises(ConfigError, match="payload.inertia_com_kgm2: principal moments"):
        with_payload_config(iiwa, dict(PAYLOAD, inertia_com_kgm2={"xx": 0.001, "yy": 0.001, "zz": 0.01}))
    with pytest.raises(ConfigError, match="has no payload; define one"):
        with_payload_config(iiwa, None, attached=True)


def test_payload_std_includes_the_robot_models_uncertainty(iiwa):
    """Monte-Carlo over robot-model estimates drawn from their covariance (and torque noise): the
    payload's z-scores are standard normal only when the robot model's covariance is propagated."""
    from robident_twin.estimation.payload import RobotTorqueModel, identify_payload
    from robident_twin.model.build import build_model
    from robident_twin.model.payload import PayloadRegressor, payload_truth, with_payload_config
    from robident_twin.model.regressor import ModelOptions

    spec = with_payload_config(iiwa, PAYLOAD, attached=True)
    model = build_model(spec.with_payload(False), ModelOptions(), n_samples=150)
    rng = np.random.default_rng(0)
    q, dq, ddq = model.regressor.random_states(60, rng)
    W_r = model.base.columns(model.regressor.stack(q, dq, ddq))
    beta = model.true_base()
    preg = PayloadRegressor(spec)
    W_p = preg.stack(q, dq, ddq)
    phi = payload_truth(spec)
    sigma = np.full(7, 0.05)
    C = np.linalg.inv(W_r.T @ W_r) * 0.05**2  # the robot's estimate from a run like this one

    class Cols:
        def stack(self, q, dq, ddq):
            return W_r

    from robident_twin.design.optimise_cond import single_threaded_blas

    L = np.linalg.cholesky(C)
    z = []
    with single_threaded_blas():  # 200 small fits: BLAS threads only slow them down
        z = _draws(200, rng, W_r, W_p, beta, phi, L, C, Cols, preg, q, dq, ddq, sigma)
    z = np.array(z)
    assert np.all(np.abs(z.std(axis=0) - 1) < 0.2), z.std(axis=0)  # 200 draws: std of a std ~ 0.05
    assert np.mean(np.abs(z) <= 3) > 0.99


def _draws(n, rng, W_r, W_p, beta, phi, L, C, Cols, preg, q, dq, ddq, sigma):
    from robident_twin.estimation.payload import RobotTorqueModel, identify_payload

    z = []
    for _ in range(n):
        tau = (W_r @ beta + W_p @ phi).reshape(60, 7) + rng.normal(0, 0.05, (60, 7))
        known = RobotTorqueModel("draw", Cols(), beta + L @ rng.standard_normal(len(beta)), C, "full")
        est = identify_payload(W_p, tau, known, preg.names, q, dq, ddq, "wls", "period", sigma**2)
        z.append((est.beta - phi) / est.std)
    return z


@pytest.fixture(scope="module")
def lwr_runs(tmp_path_factory):
    """An identify run of the LWR4+ (ideal twin, without the payload), then task=payload on it."""
    from robident_twin.cli import run_identify
    from robident_twin.payload_task import run_payload_task

    root = tmp_path_factory.mktemp("payload")
    ident = root / "identify"
    ident.mkdir()
    run_identify(_cfg(["robot=lwr4p", "processing.decimate=10"] + SHORT), ident)
    pl = root / "payload"
    pl.mkdir()
    s = run_payload_task(_cfg(["task=payload", "robot=lwr4p", f"payload.run_dir={ident}"] + SHORT[:4] +
                              ["output.report=true"]), pl)
    return ident, pl, s


def test_task_payload_on_the_lwr4p_twin_meets_the_acceptance(lwr_runs):
    ident, pl, s = lwr_runs
    g = s["ground_truth"]
    assert s["robot_model_covariance"].startswith("full")
    assert g["mass_error_percent"] < 1.0
    assert g["first_moment_error_percent"] < 3.0
    assert g["inertia_max_abs_z"] <= 3.0
    # stronger than the acceptance: all ten calibrated (a robot model 1 % off gives mass 0.88 % but max |z| 76)
    assert g["max_abs_z"] < 3.5
    assert [p["name"][:2] for p in s["parameters"]] == ["XX", "XY", "XZ", "YY", "YZ", "ZZ", "MX", "MY", "MZ", "M8"]
    assert all(p["std"] > 0 for p in s["parameters"])
    assert s["design"]["cond"] < 3  # its own design excites the ten payload parameters evenly
    on_disk = json.loads((pl / "summary.json").read_text())
    assert on_disk["parameters"] == s["parameters"]
    assert "M8" in (pl / "report.html").read_text()


def test_task_payload_through_the_file_backend_equals_the_twin(lwr_runs):
    from robident_twin.payload_task import run_payload_task

    ident, pl, twin = lwr_runs
    out = pl.parent / "payload_file"
    out.mkdir()
    s = run_payload_task(_cfg(["task=payload", "robot=lwr4p", f"payload.run_dir={ident}", "backend=file",
                               f"backend.path={pl / 'recording_payload.npz'}"] + SHORT[1:3]), out)
    assert "ground_truth" not in s and all("true" not in p for p in s["parameters"])  # a file has no truth
    np.testing.assert_allclose([p["estimate"] for p in s["parameters"]],
                               [p["estimate"] for p in twin["parameters"]], rtol=1e-9, atol=1e-12)


def test_two_experiments_identify_the_payload_and_replay_from_files(tmp_path):
    """model.payload=true: the runs without and with the payload, stacked; the payload's ten
    parameters within 3 std of the truth; the same estimate from the three recorded files."""
    from robident_twin.cli import run_identify

    over = ["robot=lwr4p", "model.payload=true", "processing.decimate=10", "estimator.weights=period"] + SHORT
    twin = tmp_path / "twin"
    twin.mkdir()
    s = run_identify(_cfg(over), twin)
    part = s["payload"]
    assert len(part["parameters"]) == 10 and part["within_3std"] == 10, part
    files = tmp_path / "files"
    files.mkdir()
    f = run_identify(_cfg(_no_rate(over) + ["backend=file", f"backend.path={twin / 'recording_excitation.npz'}",
                                  f"backend.validation_path={twin / 'recording_validation.npz'}",
                                  f"payload.recording={twin / 'recording_excitation_payload.npz'}"]), files)
    np.testing.assert_allclose([p["estimate"] for p in f["payload"]["parameters"]],
                               [p["estimate"] for p in part["parameters"]], rtol=1e-9, atol=1e-12)
    # the run without the payload alone does not separate it from the last link: refused by name
    with pytest.raises(ConfigError, match="payload.recording"):
        run_identify(_cfg(_no_rate(over) + ["backend=file", f"backend.path={twin / 'recording_excitation.npz'}",
                                  f"backend.validation_path={twin / 'recording_validation.npz'}"]), tmp_path)


def test_payload_routes_refuse_what_they_cannot_do_by_name(tmp_path):
    """Refused before any acquisition, naming the key: an estimator that rebuilds one run's data in
    the stacked route, and model.payload=true in task=payload (the robot is known there)."""
    from robident_twin.cli import run_identify
    from robident_twin.payload_task import run_payload_task

    with pytest.raises(ConfigError, match="estimator.name: model.payload=true stacks"):
        run_identify(_cfg(["robot=lwr4p", "model.payload=true", "estimator=iv"] + SHORT), tmp_path)
    with pytest.raises(ConfigError, match="model.payload: task=payload identifies the payload alone"):
        run_payload_task(_cfg(["task=payload", "robot=lwr4p", "model.payload=true"] + SHORT), tmp_path)
    with pytest.raises(ConfigError, match="payload.robot_file: .* does not exist"):
        run_payload_task(_cfg(["task=payload", "robot=lwr4p", f"payload.robot_file={tmp_path / 'no.yaml'}"] + SHORT),
                         tmp_path)


def test_a_payload_config_without_the_payload_route_is_refused(tmp_path):
    from robident_twin.cli import run_identify

    with pytest.raises(ConfigError, match="payload.mass_kg: the payload config is used by task=payload"):
        run_identify(_cfg(["robot=lwr4p", "payload.mass_kg=2.0"] + SHORT), tmp_path)


def test_payload_design_settings_read_the_typed_section():
    """task=payload hands the typed payload section to the design; a mapping given to the design's
    Python API is validated once there (payload.design.<key> named)."""
    from robident_twin.design.payload import design_settings
    from robident_twin.model.config import PayloadConfig, PayloadDesignConfig

    typed = PayloadConfig(design=PayloadDesignConfig(harmonics=4, base_freq_hz=0.25, starts=3, maxiter=7, samples=30,
                                                     seed=2))
    want = dict(n_harmonics=4, base_freq_hz=0.25, n_starts=3, maxiter=7, n_samples=30, seed=2)
    assert design_settings(typed) == want
    assert design_settings({"design": {"harmonics": 4, "base_freq_hz": 0.25, "starts": 3, "maxiter": 7,
                                       "samples": 30, "seed": 2}}) == want
    assert design_settings(None)["n_harmonics"] == PayloadDesignConfig().harmonics
    with pytest.raises(ConfigError, match=r"payload\.design\.harmonics"):
        design_settings({"design": {"harmonics": 0}})
