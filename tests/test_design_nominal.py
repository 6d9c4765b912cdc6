"""A design never reads a twin's truth (issue 16): ``task=design`` on a built-in twin bounds the
CAD-like nominal's torques (``model.nominal.cad_nominal``), not the robot file's."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from robident_twin.design import task as design_task
from robident_twin.design.auto import design_nominal
from robident_twin.design.fourier import load_design
from robident_twin.model import build
from robident_twin.model.robot import load_robot
from robident_twin.paths import CONF_DIR

SMALL = ["robot=kuka_ir361", "design.harmonics=2", "design.base_freq_hz=0.25", "design.starts=1",
         "design.maxiter=25", "design.constraints.torque=true"]


@pytest.fixture(scope="module")
def cfg():
    with initialize_config_dir(version_base=None, config_dir=str(CONF_DIR)):
        return OmegaConf.to_container(compose(config_name="config", overrides=SMALL), resolve=True)


def other_truth(spec):
    """The same robot file with a truth the CAD-like nominal does not carry: ten times the drive
    inertia and large viscous friction (the nominal has neither), so that the truth's drive
    torques exceed the limits where the nominal's do not."""
    joints = tuple(dataclasses.replace(j, drive_inertia_kgm2=10 * j.drive_inertia_kgm2 + 1.0,
                                       fv_motor_Nms_rad=0.6 * j.tau_max_Nm / j.dq_max_rad_s) for j in spec.joints)
    return dataclasses.replace(spec, joints=joints, _cache={})


def coefficients(traj) -> np.ndarray:
    return np.concatenate([traj.q0_rad, traj.a.ravel(), traj.b.ravel()])


def design_with_truth(cfg, truth, out, monkeypatch):
    monkeypatch.setattr(build, "resolve_robot", lambda robot_cfg: truth)
    from robident_twin.config import validate

    path = design_task.run_design_task(validate(cfg), out)  # the task takes the validated RunConfig
    return load_design(path)


def test_design_uses_the_cad_nominal_not_the_twins_truth(cfg, tmp_path, monkeypatch):
    spec = load_robot("kuka_ir361")
    changed = other_truth(spec)
    nominal = design_nominal(spec, cfg["robot"], cfg["export"]["nominal"])
    assert nominal.name == "kuka_ir361_cad" and np.all(nominal.drive_inertia_kgm2 == 0)
    # a user's robot (not the robot group's): its own file is its nominal
    assert design_nominal(spec, {"name": "another_robot"}) is spec

    a = design_with_truth(cfg, spec, tmp_path / "a", monkeypatch)
    b = design_with_truth(cfg, changed, tmp_path / "b", monkeypatch)
    np.testing.assert_array_equal(coefficients(a), coefficients(b))

    # the contrast: a design that reads the truth changes with it (the changed truth binds the torque limits)
    monkeypatch.setattr(design_task, "design_nominal", lambda s, *args: s)
    c = design_with_truth(cfg, spec, tmp_path / "c", monkeypatch)
    d = design_with_truth(cfg, changed, tmp_path / "d", monkeypatch)
    diff = float(np.abs(coefficients(c) - coefficients(d)).max())
    print(f"design from the truth: max coefficient change {diff:.3g} when the truth changes; from the nominal: 0")
    assert diff > 1e-3
