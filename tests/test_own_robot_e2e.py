"""Bring your own robot end to end (issue 16): the Panda and the UR5 from their URDF through the
CLI: import, automatic designs (stored under the robot, never over another robot's), dry run,
identification on the ideal twin of both engines; and where ``design.install`` may write."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from robident_twin.design.auto import install_target, is_own_robot, robot_design_dir
from robident_twin.design.fourier import load_design, save_design
from robident_twin.errors import ConfigError
from robident_twin.model.robot import load_robot
from robident_twin.paths import CONF_DIR, SIM_ASSETS_DIR

from test_own_robot_import import PANDA_LOCK, erd_robot

ROBOTS = {
    "panda": ("panda_description/urdf/panda.urdf", {"lock": PANDA_LOCK}),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", None),
}
SMALL = ["twin=ideal", "acquisition.periods=2", "output.plots=false", "output.report=false", "acquisition.save_recordings=false"]


def run_cli(tmp: Path, cache: Path, *overrides: str, name: str):
    exe = Path(sys.executable).parent / "robident-twin"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]
    out = tmp / name
    env = dict(os.environ, ROBIDENT_CACHE=str(cache))
    proc = subprocess.run(cmd + [f"hydra.run.dir={out}", *overrides], capture_output=True, text=True,
                          cwd=tmp, timeout=900, env=env)
    return proc, out


@pytest.fixture(scope="session")
def own_robot(tmp_path_factory):
    """Per robot: its URDF, overlay, design cache and the first use (task=dryrun), which
    designs the excitation and validation trajectories."""
    made = {}

    def get(robot: str):
        if robot in made:
            return made[robot]
        tmp = tmp_path_factory.mktemp(robot)
        rel, overlay = ROBOTS[robot]
        args = [f"robot.file={erd_robot(rel)}"]
        if overlay:
            (tmp / "overlay.yaml").write_text(yaml.safe_dump(overlay))
            args.append(f"robot.overlay={tmp / 'overlay.yaml'}")
        conf_before = sorted(p.name for p in (CONF_DIR / "excitation").iterdir())
        proc, out = run_cli(tmp, tmp / "cache", "task=dryrun", *args, name="dryrun")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        assert sorted(p.name for p in (CONF_DIR / "excitation").iterdir()) == conf_before
        made[robot] = (tmp, args, proc)
        return made[robot]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("robot, backend", [("panda", "mujoco"), ("panda", "pybullet"), ("ur5", "mujoco"),
                                            ("ur5", "pybullet")])
def test_own_robot_identifies_on_the_ideal_twin(own_robot, robot, backend):
    tmp, args, dry = own_robot(robot)
    # first use: the import summary with its defaults, then the automatic designs, stored per robot
    assert "defaults used" in dry.stdout and "drive.inertia_kgm2" in dry.stdout
    for kind in ("excitation", "validation"):
        assert f"{kind} design of {robot} stored as {tmp / 'cache' / 'robots'}" in dry.stdout
    assert "dry run" in dry.stdout and "FAILED" not in dry.stdout
    proc, out = run_cli(tmp, tmp / "cache", *args, f"backend={backend}", *SMALL, name=f"id_{backend}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert f"using the stored excitation design of {robot}" in proc.stdout  # reused, not redesigned
    s = json.loads((out / "summary.json").read_text())
    # the report speaks in the user's joint and link names
    first = {"panda": ("panda_joint1", "panda_link1"), "ur5": ("shoulder_pan_joint", "shoulder_link")}[robot]
    assert (s["joint_names"][0], s["link_names"][0]) == first
    # and so do the parameters, in summary.json and in the console table
    names = [p["name"] for p in s["parameters"]]
    assert names[0] == f"ZZ[{first[1]}]R" and f"Fv[{first[0]}]" in names
    assert f"\nZZ[{first[1]}]R " in proc.stdout and f"\nFv[{first[0]}] " in proc.stdout
    frac = s["ground_truth"]["fraction_within_3std"]
    print(f"{robot} on {backend}: {s['n_base_parameters']} base parameters, {100 * frac:.1f} % within 3 std "
          f"(max |z| {s['ground_truth']['max_abs_z']:.2f})")
    assert frac >= 0.95


def test_a_robot_file_of_another_robot_is_not_the_groups_own(iiwa):
    lwr = load_robot(SIM_ASSETS_DIR / "lwr4p" / "robot.yaml")
    group = {"name": "iiwa14", "excitation": "excitation/iiwa14_default.yaml",
             "validation": "excitation/iiwa14_validation.yaml"}
    assert is_own_robot(iiwa, group)
    assert not is_own_robot(lwr, group)  # robot.file=<lwr4p> under robot=iiwa14: never the iiwa's designs
    assert robot_design_dir(lwr) != robot_design_dir(iiwa)


def test_design_install_only_writes_the_design_of_the_robot_in_use(iiwa, tmp_path, monkeypatch):
    monkeypatch.setenv("ROBIDENT_CACHE", str(tmp_path / "cache"))
    lwr = load_robot(SIM_ASSETS_DIR / "lwr4p" / "robot.yaml")
    group = {"name": "iiwa14", "excitation": "excitation/iiwa14_default.yaml"}
    # another robot's file under the iiwa group: its own folder, never conf/excitation/iiwa14_default.yaml
    target = install_target(lwr, group, tmp_path / "conf")
    assert target == robot_design_dir(lwr) / "excitation.yaml" and str(tmp_path / "cache") in str(target)
    # the group's robot: its configured file, unless that file holds another robot's design
    conf = tmp_path / "conf"
    traj = load_design(CONF_DIR / "excitation" / "iiwa14_default.yaml")
    save_design(traj, conf / "excitation" / "iiwa14_default.yaml", {"robot": "iiwa14"})
    assert install_target(iiwa, group, conf) == conf / "excitation" / "iiwa14_default.yaml"
    save_design(traj, conf / "excitation" / "iiwa14_default.yaml", {"robot": "lwr4p"})
    with pytest.raises(ConfigError, match="holds the design of robot 'lwr4p'"):
        install_target(iiwa, group, conf)
