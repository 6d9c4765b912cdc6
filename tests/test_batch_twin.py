"""The batched MuJoCo twin (hal/sim/batch.py) against the HAL twin: every copy in the batched
model reproduces MujocoTwin's recordings (same controller, friction, springs, coupling, sensor
noise per seed); the HAL twin's motion does not depend on the seed (what the Monte-Carlo's
deterministic path relies on); process noise is drawn per seed, whatever the batch; and the
Monte-Carlo's normal-equation estimator equals the library's QR estimators."""
from __future__ import annotations

import numpy as np
import pytest

from hal.factory import make_noise, make_robot
from hal.protocol import JointTrajectory
from hal.sim.batch import BatchTwin, batch_model
from robident_twin.validation import montecarlo as mc
from robident_twin.design.stored import reference, resolve_design
from robident_twin.model.build import resolve_robot

BACKEND = {"name": "mujoco", "control_rate_hz": 1000.0, "controller": {}}


def _short(spec, samples: int) -> JointTrajectory:
    """The first ``samples`` of the robot's stored design, as a non-periodic reference."""
    ref = reference(resolve_design(f"excitation/{spec.name}_default.yaml", spec), 1000.0)
    s = slice(0, samples)
    return JointTrajectory(ref.t_s[s], ref.q_rad[s], ref.dq_rad_s[s], ref.ddq_rad_s2[s])


def _from_home(spec, samples: int, amplitude_rad: float = 0.2, freq_hz: float = 0.5) -> JointTrajectory:
    """A smooth reference that starts at rest at home: home + a (1 - cos(2 pi f t))."""
    t = np.arange(samples) / 1000.0
    w = 2 * np.pi * freq_hz
    a = amplitude_rad * np.linspace(1.0, 0.5, spec.n_joints)
    c, s = np.cos(w * t)[:, None], np.sin(w * t)[:, None]
    return JointTrajectory(t, spec.home_rad + a * (1 - c), a * w * s, a * w * w * c)


def _assert_same_signals(hal_out, batch_out, robot: int, atol=1e-12):
    for a, b, what in zip(hal_out, batch_out, ("q", "tau_motor", "tau_joint")):
        np.testing.assert_allclose(b[robot], a, rtol=0, atol=atol * max(1.0, np.abs(a).max()), err_msg=what)


def _assert_same(rec_hal, rec_batch, rtol=1e-12):
    for f in ("q_rad", "tau_motor_Nm", "tau_joint_Nm"):
        a, b = getattr(rec_hal, f), getattr(rec_batch, f)
        if a is None:
            assert b is None
            continue
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=0, atol=rtol * max(1.0, np.abs(a).max()), err_msg=f)
    np.testing.assert_allclose(rec_batch.metadata["true_q_rad"], rec_hal.metadata["true_q_rad"], rtol=0,
                               atol=1e-12)


def test_batch_reproduces_the_hal_twin_runs():
    """iiwa 14 through the HAL's run (lead-in, recording window, sensor noise per seed)."""
    spec = resolve_robot({"name": "iiwa14"})
    ref = _short(spec, 1000)
    hal = [make_robot(spec, BACKEND, {"enabled": True}, seed=s).run(ref) for s in (7, 8)]
    batch = BatchTwin(spec, 3, make_noise(spec, {"enabled": True})).run(ref, [8, 7, 8])
    _assert_same(hal[1], batch[0])
    _assert_same(hal[0], batch[1])
    _assert_same(hal[1], batch[2])
    # the HAL twin's motion does not depend on the seed: only the sensor noise does
    np.testing.assert_array_equal(hal[0].metadata["true_q_rad"], hal[1].metadata["true_q_rad"])
    assert not np.allclose(hal[0].q_rad, hal[1].q_rad)


@pytest.mark.parametrize("robot", ["kuka_ir361", "cloos_qrc350", "iiwa14_stribeck"])
def test_batch_reproduces_the_hal_twin_physics(robot):
    """The generic callback: IR 361 (axis-2 spring, motor-side friction and offsets), CLOOS
    (coupled wrist drives through tendons) and an iiwa 14 with Stribeck friction."""
    if robot == "iiwa14_stribeck":
        spec = mc.with_stribeck(resolve_robot({"name": "iiwa14"}), ratio=3.0, velocity_rad_s=0.2)
    else:
        spec = resolve_robot({"name": robot})
    ref = _from_home(spec, 1500)
    hal = make_robot(spec, BACKEND, {"enabled": True}, seed=0)._simulate(ref, record_from=500)
    batch = BatchTwin(spec, 2, make_noise(spec, {"enabled": True})).simulate(ref, record_from=500)
    _assert_same_signals(hal, batch, 0)
    _assert_same_signals(hal, batch, 1)
    threaded = BatchTwin(spec, 3, make_noise(spec, {"enabled": True}), workers=2).simulate(ref, record_from=500)
    for r in range(3):
        _assert_same_signals(hal, threaded, r)
    assert np.abs(hal[0][-1] - spec.home_rad).max() > 0.05  # the robot did move


def test_batch_model_layout_and_bad_input():
    spec = resolve_robot({"name": "iiwa14"})
    m = batch_model(spec, 4)
    assert m.nv == 28 and m.nu == 28 and m.na == 28
    assert m.joint(7).name == f"r1_{spec.joints[0].name}"
    from robident_twin.errors import ConfigError

    with pytest.raises(ConfigError, match="n_robots"):
        batch_model(spec, 0)
    with pytest.raises(ConfigError, match="seeds"):
        BatchTwin(spec, 2).run(_short(spec, 100), [1, 2, 3])
    with pytest.raises(ConfigError, match="process_noise_Nm"):
        BatchTwin(spec, 1).run(_short(spec, 100), [1], process_noise_Nm=-1.0)


def test_process_noise_is_per_seed_and_moves_the_robot():
    """Process noise per seed, whatever the batch or its split into parallel groups."""
    spec = resolve_robot({"name": "iiwa14"})
    ref = _short(spec, 1000)
    noise = make_noise(spec, {"enabled": True})
    a = BatchTwin(spec, 3, noise).run(ref, [1, 2, 1], process_noise_Nm=2.0)
    b = BatchTwin(spec, 1, noise).run(ref, [2], process_noise_Nm=2.0)
    for parallel in ("fork", "thread"):  # two robot groups, two models: the same runs
        split = BatchTwin(spec, 3, noise, workers=2, parallel=parallel).run(ref, [1, 2, 1], process_noise_Nm=2.0)
        for x, y in zip(a, split):
            _assert_same(x, y)
    quiet = BatchTwin(spec, 1, noise).run(ref, [1])
    # the same seed gives the same run in any batch; different seeds move differently
    np.testing.assert_allclose(b[0].metadata["true_q_rad"], a[1].metadata["true_q_rad"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(a[2].metadata["true_q_rad"], a[0].metadata["true_q_rad"], rtol=0, atol=1e-12)
    dq = np.abs(a[0].metadata["true_q_rad"] - a[1].metadata["true_q_rad"]).max()
    assert 1e-7 < dq < 1e-2
    assert np.abs(a[0].metadata["true_q_rad"] - quiet[0].metadata["true_q_rad"]).max() > 1e-7
    # sensor-noise draws are the seed's own, from a generator apart from the process noise: the
    # encoder errors q_meas - q_true of the noisy and the quiet run differ only by quantisation
    ea = a[0].q_rad - a[0].metadata["true_q_rad"]
    eq = quiet[0].q_rad - quiet[0].metadata["true_q_rad"]
    res = noise.encoder_resolution_rad
    assert np.all(np.abs(ea - eq) <= res + 1e-12)
    assert np.all(ea.std(axis=0) > res)


def test_twin_sim_path_selection():
    assert mc.twin_sim_path(BACKEND) == "deterministic"
    assert mc.twin_sim_path(BACKEND, 0.5) == "batch"
    assert mc.twin_sim_path(BACKEND, [0.0] * 7) == "deterministic"
    assert mc.twin_sim_path({"name": "pybullet"}) == "hal"
    from robident_twin.errors import ConfigError

    for kw, key in (({"process_noise_Nm": 0.5, "sim": "deterministic"}, "deterministic"),
                    ({"process_noise_Nm": 0.5, "sim": "hal"}, "process_noise_Nm"),
                    ({"sim": "fast"}, "montecarlo.sim")):
        with pytest.raises(ConfigError, match=key):
            mc.twin_sim_path(BACKEND, kw.get("process_noise_Nm"), kw["sim"])
    with pytest.raises(ConfigError, match="pybullet"):
        mc.twin_sim_path({"name": "pybullet"}, None, "batch")


def test_fast_estimator_equals_the_library_estimators():
    """The Monte-Carlo's normal-equation solver gives the estimates and standard deviations of
    robident_twin.estimation.estimators (QR) on a real twin recording."""
    from robident_twin.model.build import build_model
    from robident_twin.model.regressor import ModelOptions
    from robident_twin.processing.signal import process_periodic

    spec = resolve_robot({"name": "iiwa14"})
    model = build_model(spec, ModelOptions(measurement="joint_torque"))
    traj = resolve_design("excitation/iiwa14_default.yaml", spec)
    rec = BatchTwin(spec, 1, make_noise(spec, {"enabled": True})).run(reference(traj, 1000.0), [5], periods=2)[0]
    data = process_periodic(rec, "joint_torque", traj.n_harmonics, decimate=5)
    W = model.base_regressor(data)
    for name in ("wls", "ols", "wls_residual"):
        ref = mc._estimate(name, W, data.tau_Nm, model.base.names, data.tau_var_Nm2)
        fast = mc._fast_estimate(name, W, data.tau_Nm, model.base.names, data.tau_var_Nm2)
        assert isinstance(fast, mc._Fit), name  # the fast path was taken
        np.testing.assert_allclose(fast.beta, ref.beta, rtol=1e-7, atol=1e-9 * np.abs(ref.beta).max(), err_msg=name)
        np.testing.assert_allclose(fast.std, ref.std, rtol=1e-7, err_msg=name)
        np.testing.assert_allclose(fast.residuals_Nm, ref.residuals_Nm, rtol=0, atol=1e-8, err_msg=name)
