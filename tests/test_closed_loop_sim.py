"""The identification model simulated in closed loop (estimation/closed_loop_sim.py) for
IDIM-IV and DIDIM from task=identify, and the model dynamics under it (model_dynamics.py) on
every robot: coupled drives (CLOOS), a spring and motor offsets (IR 361), joint-torque models."""
import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from robident_twin.estimation.closed_loop_sim import LoopController, ModelLoop, loop_controller
from robident_twin.estimation.model_dynamics import ModelDynamics
from robident_twin.model.base_params import compute_base_parameters
from robident_twin.model.build import resolve_robot
from robident_twin.model.regressor import ModelOptions, Regressor
from robident_twin.paths import CONF_DIR

CASES = [("iiwa14", "joint_torque"), ("iiwa14", "both"), ("lwr4p", "motor_torque"),
         ("kuka_ir361", "motor_torque"), ("cloos_qrc350", "motor_torque")]


@pytest.mark.parametrize("robot,measurement", CASES)
def test_model_dynamics_equal_the_regressor(robot, measurement):
    """A(q) ddq + b(q, dq) of the actuated channel equals W_base(q, dq, ddq) beta (the regressor, an
    independent computation) for a perturbed beta, and the ML derivatives equal central differences."""
    spec = resolve_robot({"name": robot})
    reg = Regressor(spec, ModelOptions(measurement=measurement))
    base = compute_base_parameters(reg)
    rng = np.random.default_rng(1)
    beta = base.from_standard(reg.true_parameters()) * (1 + 0.1 * rng.standard_normal(base.n_base))
    dyn = ModelDynamics(reg, base, beta)
    q, dq, ddq = reg.random_states(4, rng)
    W = (base.columns(reg.stack(q, dq, ddq)) @ beta).reshape(4, -1)
    if measurement == "both":
        W = W[:, spec.n_joints:]  # the motor rows drive the plant
    tau = dyn.torque(q, dq, ddq)
    np.testing.assert_allclose(tau, W, atol=1e-10 * np.abs(W).max())
    Dq, Dv, Da = dyn.derivatives(q, dq, ddq)
    e = 1e-6
    for j in range(spec.n_joints):
        d = np.zeros_like(q)
        d[:, j] = e
        fq = (dyn.torque(q + d, dq, ddq) - dyn.torque(q - d, dq, ddq)) / (2 * e)
        fv = (dyn.torque(q, dq + d, ddq) - dyn.torque(q, dq - d, ddq)) / (2 * e)
        fa = (dyn.torque(q, dq, ddq + d) - dyn.torque(q, dq, ddq - d)) / (2 * e)
        scale = 1e-6 * max(1.0, np.abs(tau).max())
        np.testing.assert_allclose(Dq[:, :, j], fq, atol=scale)
        np.testing.assert_allclose(Dv[:, :, j], fv, atol=scale)
        np.testing.assert_allclose(Da[:, :, j], fa, atol=scale)


def test_model_loop_reproduces_the_twin_closed_loop():
    """The IR 361 model (spring, motor offsets) with the true parameters under the twin's own
    controller (gains read from the twin, its feed-forward computed from the model) follows the
    MuJoCo twin's true closed-loop states to 1e-9 rad (the twin's own tracking error is ~1e-6)."""
    import yaml

    from hal.sim.mujoco_backend import MujocoTwin
    from hal.sim.sensors import SensorNoise
    from robident_twin.design.auto import robot_designs
    from robident_twin.design.stored import reference

    spec = resolve_robot({"name": "kuka_ir361"})
    reg = Regressor(spec, ModelOptions(measurement="motor_torque"))
    base = compute_base_parameters(reg)
    traj, _ = robot_designs(spec, yaml.safe_load((CONF_DIR / "robot" / "kuka_ir361.yaml").read_text()))
    rate = 250.0
    twin = MujocoTwin(spec, SensorNoise.from_config(spec, enabled=False), control_rate_hz=rate)
    rec = twin.run(reference(traj, rate), periods=1, transient_periods=1)
    q_twin = rec.metadata["true_q_rad"][::10]
    t = np.arange(rec.period_samples)[::10] / rate
    loop = ModelLoop(reg, base, traj.evaluate, t, loop_controller(twin, {}))
    q, dq, ddq = loop.simulate(base.from_standard(reg.true_parameters()))
    err_twin = np.max(np.abs(q_twin - traj.evaluate(t)[0]))
    print(f"\ntwin tracking error {err_twin:.2e} rad, model loop vs twin {np.max(np.abs(q - q_twin)):.2e} rad")
    assert err_twin > 1e-7  # a real tracking error to reproduce
    np.testing.assert_allclose(q, q_twin, atol=1e-9)
    tau = (loop(base.from_standard(reg.true_parameters())) @ base.from_standard(reg.true_parameters())).reshape(q.shape)
    np.testing.assert_allclose(tau, rec.tau_motor_Nm[::10], atol=1e-6)  # noise-free twin torques


def test_bad_gains_are_refused():
    from robident_twin.errors import ConfigError

    with pytest.raises(ConfigError, match="kp_Nm_rad"):
        LoopController(np.array([1.0, -1.0]), np.array([1.0, 1.0]))
    with pytest.raises(ConfigError, match="estimator.kp_Nm_rad and estimator.kd_Nms_rad"):
        loop_controller(None, {"kp_Nm_rad": [1.0, 2.0]})


def _identify(*overrides):
    from robident_twin.pipeline import identify

    with initialize_config_dir(version_base=None, config_dir=str(CONF_DIR)):
        cfg = compose(config_name="config", overrides=["robot=kuka_ir361", "twin=ideal", "acquisition.periods=2",
                                                       "backend.control_rate_hz=250", "processing.decimate=5",
                                                       "output.plots=false", "output.report=false", *overrides])
    return identify(OmegaConf.to_container(cfg, resolve=True), progress=False)


@pytest.fixture(scope="module")
def ir361_runs():
    return {e: _identify(f"estimator={e}") for e in ("wls", "iv", "didim")}


@pytest.mark.parametrize("method", ["iv", "didim"])
def test_closed_loop_estimators_from_identify_agree_with_wls(ir361_runs, method):
    """task=identify with estimator=iv / didim on the ideal IR 361 twin: the closed-loop model
    simulation converges (change below tol in a few iterations), the estimate agrees with WLS within
    WLS's std, and summary.json carries the iterations and the covariance."""
    w, r = ir361_runs["wls"], ir361_runs[method]
    d = r.summary["estimator_details"]
    diff = np.max(np.abs(r.estimate.beta - w.estimate.beta) / w.estimate.std)
    print(f"\n{method}: {d['iterations']} iterations, change {d['last_relative_change']:.1e}, "
          f"model-loop tracking {d['model_loop_max_tracking_error_rad']:.1e} rad, max |{method} - WLS| / std {diff:.3f}")
    assert d["converged"] and d["iterations"] <= 10
    assert d["model_loop_max_tracking_error_rad"] > 0  # the model really ran in closed loop
    assert diff < 1.0
    np.testing.assert_allclose(np.sqrt(np.diag(np.array(d["covariance"]))), r.estimate.std)
    assert r.summary["estimator"] == method
