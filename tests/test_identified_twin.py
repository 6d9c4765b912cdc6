"""The identified twin (issue 7): identified base parameters -> consistent standard parameters
-> robot file, URDF and MJCF that load in pinocchio, MuJoCo and PyBullet and reproduce
W(q, dq, ddq) chi to 1e-6; the per-link diff; the CLI task ``export`` and its errors."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from robident_twin.report import identified_twin as it
from robident_twin.model.builders import to_mjcf, to_urdf
from robident_twin.errors import ConfigError
from robident_twin.estimation.physical import check_consistency
from robident_twin.model.robot import load_robot, parse_robot

ROOT = Path(__file__).resolve().parent.parent


def _config(*overrides):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from robident_twin.paths import CONF_DIR

    with initialize_config_dir(version_base=None, config_dir=str(CONF_DIR)):
        cfg = compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The iiwa 14 identified on its ideal MuJoCo twin (2 periods, default noise, WLS), its
    identified twin exported, and the run directory of that identification."""
    from robident_twin.pipeline import identify
    from robident_twin.report.tables import write_json

    run = tmp_path_factory.mktemp("run")
    cfg = _config("acquisition.periods=2", "acquisition.save_recordings=false", "twin=ideal")
    res = identify(cfg, out_dir=run)
    res.summary["config"] = cfg
    write_json(res.summary, run / "summary.json")
    spec = res.model.spec
    nominal = it.cad_nominal(spec)
    twin = it.build_identified_twin(res.model, res.estimate.beta, res.estimate.cov, nominal, truth=spec)
    out = tmp_path_factory.mktemp("export")
    paths = it.export_twin(twin, out)
    states = it.validation_states(spec, cfg["robot"]["validation"], 300)
    return dict(res=res, twin=twin, paths=paths, states=states, run=run, cfg=cfg)


@pytest.mark.slow
def test_exported_files_reproduce_the_identified_model_in_three_engines(exported):
    twin, paths = exported["twin"], exported["paths"]
    assert check_consistency(twin.regressor, twin.chi).ok
    res = it.check_exports(twin, paths, *exported["states"])
    print("\n" + "\n".join(f"{k}: max rel error {v['max_rel_error']:.2e}, max abs {v['max_abs_error_Nm']:.2e} N m"
                           for k, v in res.items()))
    assert set(res) == {"pinocchio", "mujoco", "pybullet"}
    for eng, r in res.items():
        assert r["max_rel_error"] < 1e-6, (eng, r)
    # the exported URDF and MJCF are exactly what the builders make of the exported robot file
    spec = load_robot(paths["yaml"])
    assert paths["urdf"].read_text() == to_urdf(spec)
    assert paths["mjcf"].read_text() == to_mjcf(spec)
    # identified friction and link inertials are in the file; the joint-torque model's
    # drive inertia is carried over from the robot file (and said so)
    assert "drive.inertia_kgm2" in twin.carried_over
    np.testing.assert_allclose(spec.drive_inertia_kgm2, exported["res"].model.spec.drive_inertia_kgm2)
    idx = {n: i for i, n in enumerate(twin.regressor.names)}
    np.testing.assert_allclose(spec.fv_link_Nms_rad, [twin.chi[idx[f"Fv{j}"]] for j in range(1, 8)], rtol=1e-12)


@pytest.mark.slow
def test_the_engine_check_detects_a_wrong_file(exported, tmp_path):
    """The check is not vacuous: 10 % more mass on link 3 in the URDF shows up far above 1e-6."""
    paths = dict(exported["paths"])
    spec = load_robot(paths["yaml"])
    m3 = spec.joints[2].link.mass_kg
    text = paths["urdf"].read_text().replace(f'<mass value="{m3!r}"/>', f'<mass value="{1.1 * m3!r}"/>', 1)
    assert text != paths["urdf"].read_text()
    bad = tmp_path / "bad.urdf"
    bad.write_text(text)
    paths["urdf"] = bad
    res = it.check_exports(exported["twin"], paths, *exported["states"], engines=("pinocchio", "pybullet"))
    assert res["pinocchio"]["max_rel_error"] > 1e-3 and res["pybullet"]["max_rel_error"] > 1e-3


@pytest.mark.slow
def test_identified_twin_predicts_true_torques_better_than_the_nominal(exported):
    """The exported twin (rigid body + link friction) against the ground truth on the
    held-out validation trajectory: far closer than the CAD-like nominal model."""
    from robident_twin.model.dynamics import TruthModel

    q, dq, ddq = exported["states"]
    truth = TruthModel(exported["res"].model.spec).torques(q, dq, ddq)[0]

    def nrmse(spec):
        pred = TruthModel(spec).torques(q, dq, ddq)[0]
        return 100 * np.sqrt(np.mean((pred - truth) ** 2, axis=0)) / np.sqrt(np.mean(truth**2, axis=0))

    ident = nrmse(load_robot(exported["paths"]["yaml"]))
    nom = nrmse(exported["twin"].nominal)
    print(f"\nNRMSE vs truth [%]: identified {np.round(ident, 2)}\n                    nominal    {np.round(nom, 2)}")
    assert np.all(ident < nom)
    assert np.all(ident < 5.0)


@pytest.mark.slow
def test_link_diff_table(exported):
    twin, paths = exported["twin"], exported["paths"]
    d = json.loads(paths["diff_json"].read_text())
    rows = d["links"]
    assert len(rows) == 7 and d["measurement"] == "joint_torque"
    spec = load_robot(paths["yaml"])
    for i, r in enumerate(rows):
        assert r["identified"]["mass_kg"] == pytest.approx(spec.joints[i].link.mass_kg, rel=1e-12)
        assert r["nominal"]["mass_kg"] == pytest.approx(twin.nominal.joints[i].link.mass_kg, rel=1e-12)
        assert r["true"]["mass_kg"] == pytest.approx(twin.truth.joints[i].link.mass_kg, rel=1e-12)
        np.testing.assert_allclose(r["identified_minus_nominal"]["com_m"],
                                   np.subtract(r["identified"]["com_m"], r["nominal"]["com_m"]), atol=1e-15)
        dI = r["identified_minus_nominal"]["inertia_com_kgm2"]
        assert dI["zz"] == pytest.approx(r["identified"]["inertia_com_kgm2"]["zz"] - r["nominal"]["inertia_com_kgm2"]["zz"])
    txt = paths["diff_txt"].read_text()
    assert txt.count("id - nom") == 7 and "mass kg" in txt
    # the nominal is CAD-like: every link differs from the truth, no drive inertia, no friction
    nom = twin.nominal
    assert all(a.link.mass_kg != b.link.mass_kg for a, b in zip(nom.joints, twin.truth.joints))
    assert not np.any(nom.drive_inertia_kgm2) and not np.any(nom.fv_link_Nms_rad) and not np.any(nom.fc_link_Nm)


@pytest.mark.parametrize("robot", ["iiwa14", "kuka_ir361", "cloos_qrc350"])
def test_robot_file_writer_round_trips(robot, tmp_path):
    spec = load_robot(robot)
    p = it.write_robot_yaml(spec, tmp_path / "r.yaml", header="round trip")
    back = load_robot(p)
    assert to_urdf(back) == to_urdf(spec) and to_mjcf(back) == to_mjcf(spec)
    assert back.spring_joints == spec.spring_joints and back.is_coupled == spec.is_coupled
    assert parse_robot(yaml.safe_load(p.read_text()), p).name == spec.name


def _cli(tmp_path, *overrides):
    exe = Path(sys.executable).parent / "robident-twin"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]
    out = tmp_path / "export_run"
    proc = subprocess.run(cmd + [f"hydra.run.dir={out}", "task=export", *overrides], capture_output=True,
                          text=True, cwd=tmp_path, timeout=600)
    return proc, out


@pytest.mark.slow
def test_cli_export_from_a_finished_run(exported, tmp_path):
    proc, out = _cli(tmp_path, f"export.run_dir={exported['run']}", "export.check_samples=100")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for suffix in (".yaml", ".urdf", ".xml", "_diff.json", "_diff.txt"):
        assert (out / f"identified_iiwa14{suffix}").is_file()
    rep = json.loads((out / "export.json").read_text())
    assert all(v["max_rel_error"] < 1e-6 for v in rep["engine_check"].values())
    assert "id - nom" in proc.stdout and "max relative error" in proc.stdout
    # from the summary (diagonal covariance) the twin still fits the identified base parameters
    spec = load_robot(out / "identified_iiwa14.yaml")
    assert spec.name == "identified_iiwa14"


def test_bad_export_input_gives_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="is not a directory"):
        it.load_run(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "FAILED.txt").write_text("ConfigError: something\n")
    with pytest.raises(ConfigError, match=r"summary\.json does not exist.*the run failed: ConfigError"):
        it.load_run(empty)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.json").write_text(json.dumps({"parameters": [], "measurement": "joint_torque"}))
    with pytest.raises(ConfigError, match=r"field 'config' missing"):
        it.load_run(bad)
    (bad / "summary.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        it.load_run(bad)
    # through the CLI: exit code 2, the reason on stderr and in FAILED.txt
    proc, out = _cli(tmp_path, f"export.run_dir={tmp_path / 'nope'}")
    assert proc.returncode == 2
    assert "export.run_dir" in proc.stderr and "is not a directory" in (out / "FAILED.txt").read_text()


@pytest.mark.slow
def test_bad_summary_values_name_the_field(exported, tmp_path):
    s = json.loads((exported["run"] / "summary.json").read_text())
    s["parameters"][3]["estimate"] = None
    d = tmp_path / "run"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps(s))
    with pytest.raises(ConfigError, match=r"parameters\[3\]\.estimate"):
        it.load_run(d)
    s = json.loads((exported["run"] / "summary.json").read_text())
    s["parameters"] = s["parameters"][:-1]
    (d / "summary.json").write_text(json.dumps(s))
    with pytest.raises(ConfigError, match="do not match the model"):
        it.load_run(d)


@pytest.mark.parametrize("robot,measurement", [("kuka_ir361", "motor_torque"), ("cloos_qrc350", "motor_torque"),
                                               ("lwr4p", "both")])
def test_export_of_springs_coupled_drives_payload_and_stacked_channels(robot, measurement, tmp_path):
    """Exact base parameters of the other robots (IR 361 spring, CLOOS differential wrist
    gear through MuJoCo tendons and payload, LWR4+ joint and motor channels stacked): the
    exports reproduce W chi in all three engines."""
    from robident_twin.model.build import build_model
    from robident_twin.model.regressor import ModelOptions

    spec = load_robot(robot)
    model = build_model(spec, ModelOptions(measurement=measurement, offsets=None))
    beta = model.true_base()
    std = 1e-4 * np.maximum(np.abs(beta), 1e-2)
    twin = it.build_identified_twin(model, beta, np.diag(std**2), it.cad_nominal(spec), truth=spec)
    paths = it.export_twin(twin, tmp_path)
    states = model.regressor.random_states(60, np.random.default_rng(0))
    res = it.check_exports(twin, paths, *states)
    assert all(r["max_rel_error"] < 1e-6 for r in res.values()), res
    exported = load_robot(paths["yaml"])
    assert exported.spring_joints == spec.spring_joints and exported.is_coupled == spec.is_coupled
    if spec.payload_attached:  # identified with the last link: not mounted a second time
        assert not exported.payload_attached and "payload" in twin.carried_over
