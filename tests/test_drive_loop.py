"""A robot's own drive loop on the realistic twin (hal/sim/drive_loop.py, the CLOOS's twin.yaml
``drive_loop``) on both engines, its strict loading, and the batched twin's loop bandwidth."""
import numpy as np
import pytest

from hal.factory import make_noise, make_robot, make_twin_setup
from hal.protocol import JointTrajectory
from hal.sim import effects as fx
from robident_twin.errors import ConfigError
from robident_twin.model.robot import load_robot

REALISTIC = {"name": "realistic", "effects": list(fx.EFFECTS)}


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_the_cloos_realistic_twin_runs_its_drive_loop_on_the_axis_inertia(engine):
    """The cascade of twin.yaml (P position loop w_p, PI velocity loop w_v on the whole axis
    inertia, zero at integral_hz) in the twin's PD + I terms: kp / kd = w_p, kd = J w_v with J the
    link + drive inertia at home (not the rotor's, though the joints are elastic), ki / kd = 2 pi fi."""
    import pinocchio as pin

    from robident_twin.model.dynamics import TruthModel

    spec = load_robot("cloos_qrc350")
    p = make_twin_setup(spec, REALISTIC).params.drive_loop
    robot = make_robot(spec, {"name": engine}, None, seed=0, twin_cfg=REALISTIC)
    try:
        tm = TruthModel(spec)
        J = np.diag(pin.crba(tm.model, tm.data, spec.home_rad))
        J = J + (spec.drive_inertia_kgm2 if engine == "mujoco" else np.diag(
            spec.coupling_inv.T @ np.diag(spec.drive_inertia_kgm2) @ spec.coupling_inv))
        np.testing.assert_allclose(robot.kp / robot.kd, 2 * np.pi * p.position_bandwidth_hz, rtol=1e-12)
        np.testing.assert_allclose(robot.kd, J * 2 * np.pi * p.velocity_bandwidth_hz, rtol=1e-12)
        np.testing.assert_allclose(robot.loop.ki / robot.kd, 2 * np.pi * p.integral_hz, rtol=1e-12)
        assert robot.elastic and np.all(J > 1.25 * spec.drive_inertia_kgm2)  # the axis, not the rotor
        assert robot.controller.integral_hz == p.integral_hz
    finally:
        robot.close()
    # without the closed-loop effect (or on the ideal twin) the controller config tunes the loop
    plain = make_robot(spec, {"name": engine}, None, seed=0, twin_cfg={"name": "realistic", "effects": ["elasticity"]})
    assert plain.controller.integral_hz == 0.0 and plain.loop.ki is None
    plain.close()


def test_the_drive_loop_holds_a_fast_reference_stably_on_both_engines():
    """The stiff loop with the realistic effects (2 cycles of delay, the 50 Hz velocity filter,
    elastic joints with backlash) stays stable on both engines: along 0.5 s of the validation
    reference without a model the encoder-side error stays bounded (peak under 2 deg; an
    unstable loop diverges) and both engines give the same RMS to within 10 %."""
    from robident_twin.design.stored import reference, resolve_design
    from robident_twin.validation import control as C

    spec = load_robot("cloos_qrc350")
    traj = C.truncated(reference(resolve_design("excitation/cloos_qrc350_validation.yaml", spec), 1000.0), 0.5)
    out = {}
    for engine in ("mujoco", "pybullet"):
        out[engine] = C.run_with_feedforward(
            lambda on, e=engine: make_robot(spec, {"name": e, "controller": {"feedforward": on}}, None, seed=0,
                                            twin_cfg=REALISTIC), engine, None, traj)
    mj, pb = out["mujoco"].max_abs_rad, out["pybullet"].max_abs_rad
    assert np.all(mj < np.radians(2.0)) and np.all(pb < np.radians(2.0)), (np.degrees(mj), np.degrees(pb))
    np.testing.assert_allclose(out["pybullet"].rms_rad, out["mujoco"].rms_rad, rtol=0.1)


def test_a_bad_drive_loop_section_names_file_and_field(tmp_path):
    from pathlib import Path

    import yaml

    spec = load_robot("cloos_qrc350")
    raw = yaml.safe_load((Path(spec.source).parent / "twin.yaml").read_text())
    path = tmp_path / "twin.yaml"

    def load(mutate):
        r = yaml.safe_load(yaml.safe_dump(raw))
        mutate(r["drive_loop"])
        path.write_text(yaml.safe_dump(r))
        return fx.load_twin_params(path, spec.n_joints)

    assert load(lambda d: None).drive_loop.velocity_bandwidth_hz == raw["drive_loop"]["velocity_bandwidth_hz"]["value"]
    with pytest.raises(ConfigError, match=r"twin.yaml: field 'drive_loop.velocity_bandwidth_hz.value': expected a pos"):
        load(lambda d: d["velocity_bandwidth_hz"].update(value=-8.0))
    with pytest.raises(ConfigError, match=r"field 'drive_loop': expected exactly the keys"):
        load(lambda d: d.pop("integral_hz"))
    with pytest.raises(ConfigError, match=r"field 'drive_loop.integral_hz.value': expected below"):
        load(lambda d: d["integral_hz"].update(value=50.0))
    with pytest.raises(ConfigError, match=r"field 'drive_loop.position_bandwidth_hz.source'"):
        load(lambda d: d["position_bandwidth_hz"].update(source=" "))


# ----------------------------------------------------------------------------- the batched twin

def _from_home(spec, seconds: float, rate: float) -> JointTrajectory:
    t = np.arange(int(seconds * rate)) / rate
    w = 2 * np.pi * 1.4
    a = 0.1 * np.ones(spec.n_joints)
    return JointTrajectory(t, spec.home_rad + a * (1 - np.cos(w * t))[:, None], a * (w * np.sin(w * t))[:, None],
                           a * (w * w * np.cos(w * t))[:, None])


@pytest.mark.parametrize("effects", [["closed_loop"], ["closed_loop", "elasticity"]], ids=["rigid", "elastic"])
def test_the_batched_twin_applies_the_loop_bandwidth_cap(effects):
    """At 200 Hz the closed loop's dead time caps the iiwa 14's 5 Hz loop (effects.loop_bandwidth_rad_s);
    the batched twin runs the capped gains and records what the HAL twin records."""
    from hal.sim.batch import BatchTwin

    spec, rate = load_robot("iiwa14"), 200.0
    cfg = {"name": "realistic", "effects": effects}
    setup = make_twin_setup(spec, cfg)
    w = fx.loop_bandwidth_rad_s(setup, 5.0, 1.0, rate)
    assert w < 0.8 * 2 * np.pi * 5.0  # the cap bites here
    noise = fx.realistic_noise(setup, make_noise(spec, {"enabled": True}), {})
    batch = BatchTwin(spec, 2, noise, control_rate_hz=rate, twin=setup)
    hal = make_robot(spec, {"name": "mujoco", "control_rate_hz": rate}, {"enabled": True}, seed=4, twin_cfg=cfg)
    np.testing.assert_allclose(batch.kp, hal.kp, rtol=1e-12)
    np.testing.assert_allclose(batch.kd, hal.kd, rtol=1e-12)
    ref = _from_home(spec, 0.6, rate)
    rec = batch.run(ref, [3, 4])[1]
    h = hal.run(ref)
    for f in ("q_rad", "tau_motor_Nm"):
        np.testing.assert_allclose(getattr(rec, f), getattr(h, f), rtol=0, atol=1e-9, err_msg=f)


def test_the_batched_twin_refuses_the_drive_loop():
    from hal.sim.batch import BatchTwin

    spec = load_robot("cloos_qrc350")
    setup = make_twin_setup(spec, {"name": "realistic", "effects": ["closed_loop"]})
    with pytest.raises(ConfigError, match="drive_loop"):
        BatchTwin(spec, 1, make_noise(spec, None), twin=setup)
