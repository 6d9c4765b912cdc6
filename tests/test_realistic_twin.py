"""The realistic twin's effects (hal/sim/effects.py), each alone, on short motions of the iiwa 14."""
import dataclasses

import numpy as np
import pytest

from hal.factory import make_robot
from hal.protocol import JointTrajectory
from hal.sim import effects as fx
from robident_twin.errors import ConfigError
from robident_twin.model.robot import load_robot

RATE = 1000.0


@pytest.fixture(scope="module")
def spec():
    return load_robot("iiwa14")


def short_reference(spec, seconds=1.0):
    """From rest at home: every joint moves by 0.1 (1 - cos) rad at 1.4 Hz (smooth start)."""
    t = np.arange(int(seconds * RATE)) / RATE
    w = 2 * np.pi * 1.4
    a = 0.1 * np.array([1, 0.8, 1, 0.8, 1, 1, 1])
    q = spec.home_rad + a * (1 - np.cos(w * t))[:, None]
    dq = a * (w * np.sin(w * t))[:, None]
    ddq = a * (w * w * np.cos(w * t))[:, None]
    return JointTrajectory(t, q, dq, ddq)


def simulate(spec, effects, noise=None, seed=0, backend="mujoco", params=None):
    """True q, motor and joint torques along the short reference, and the twin."""
    cfg = {"name": "realistic", "effects": effects} if effects else {"name": "ideal"}
    robot = make_robot(spec, {"name": backend}, noise or {"enabled": False}, seed=seed, twin_cfg=cfg)
    if params is not None:  # the test's own magnitudes
        robot.twin = dataclasses.replace(robot.twin, params=params)
        if backend == "mujoco":
            robot._passive = robot._realistic_passive()
            if robot.elastic:  # the gear spring is a MuJoCo tendon per motor
                robot.model.tendon_stiffness[:] = params.elasticity.stiffness_Nm_rad
                robot.model.tendon_damping[:] = params.elasticity.damping_Nms_rad
    ref = short_reference(spec)
    q, tm, tj = robot._simulate(ref, 0)
    return q, tm, tj, robot


def test_every_robot_file_loads_with_sources():
    for name in ("iiwa14", "lwr4p", "kuka_ir361", "cloos_qrc350"):
        s = load_robot(name)
        setup = fx.twin_setup(s, {"name": "realistic", "effects": list(fx.EFFECTS)})
        assert setup.params.elasticity.stiffness_Nm_rad.shape == (s.n_joints,)
        assert all(src for src in setup.params.sources.values())
        te = 0 if setup.params.transmission_error is None else len(fx._TE_KEYS)  # optional section (the CLOOS)
        te += 0 if setup.params.drive_loop is None else 3  # optional drive_loop (the CLOOS)
        assert len(setup.params.sources) == sum(len(k) for k in fx._SCHEMA.values()) + te


def test_twin_yaml_is_strict(tmp_path, spec):
    text = (spec.source.parent / "twin.yaml").read_text()
    bad = tmp_path / "twin.yaml"
    bad.write_text(text.replace("  delay_cycles:", "  delay_cycle:"))
    with pytest.raises(ConfigError, match=r"twin.yaml: field 'closed_loop'.*delay_cycles"):
        fx.load_twin_params(bad, 7)
    import re

    bad.write_text(re.sub(r'velocity_filter_hz: \{value: 100.0, source: "[^"]*"\}',
                          'velocity_filter_hz: {value: 100.0, source: " "}', text))
    with pytest.raises(ConfigError, match=r"closed_loop.velocity_filter_hz.source"):
        fx.load_twin_params(bad, 7)
    bad.write_text(re.sub(r"antialias_order: \{value: 2,", "antialias_order: {value: 0,", text))
    with pytest.raises(ConfigError, match=r"twin.yaml: field 'sensor.antialias_order.value': expected a positive integer"):
        fx.load_twin_params(bad, 7)  # a Butterworth of order 0 is no filter: say so, not a ValueError later
    with pytest.raises(ConfigError, match=r"twin.effects\[0\]: expected one of .*got 'backlash'"):
        fx.twin_setup(spec, {"name": "realistic", "effects": ["backlash"]})
    with pytest.raises(ConfigError, match="twin.name"):
        fx.twin_setup(spec, {"name": "real", "effects": []})


def test_ideal_twin_is_todays_twin(spec):
    """twin=ideal and no twin at all give bit-identical recordings (the exact twin)."""
    a = simulate(spec, [], noise={"enabled": True})
    robot = make_robot(spec, {"name": "mujoco"}, {"enabled": True}, seed=0)
    b = robot._simulate(short_reference(spec), 0)
    for x, y in zip(a[:3], b):
        np.testing.assert_array_equal(x, y)


def test_elasticity_joint_torque_is_the_spring_torque(spec):
    """Without gear damping the joint-torque sensor reads K (theta_m - q): motor and link positions
    differ by tau / K; the motor torque differs from it by the rotor's inertia torque."""
    p = fx.twin_setup(spec, {"name": "realistic", "effects": ["elasticity"]}).params
    el = dataclasses.replace(p.elasticity, damping_Nms_rad=np.zeros(7))
    q, tm, tj, robot = simulate(spec, ["elasticity"], params=dataclasses.replace(p, elasticity=el))
    # re-run sampling the motor positions alongside (the recorded window of _simulate_realistic)
    qm = robot._extras["q_motor_rad"]
    K = el.stiffness_Nm_rad
    np.testing.assert_allclose(qm - q, tj / K, rtol=0, atol=1e-9)
    assert np.max(np.abs(qm - q)) > 1e-3  # deflections of several mrad under gravity
    assert np.max(np.abs(tm - tj)) > 0.05  # the rotor inertia torque lies between the two channels


def test_closed_loop_feeds_the_noise_back(spec):
    """With closed_loop the drive torque reacts to the encoder noise the recording carries (the
    correlation IV and ML exist for); on the ideal twin it does not."""
    ref = short_reference(spec)

    def corr(effects):
        cfg = {"name": "realistic", "effects": effects} if effects else {"name": "ideal"}
        robot = make_robot(spec, {"name": "mujoco"}, {"enabled": True, "q_std_rad": 1e-4}, seed=3, twin_cfg=cfg)
        q, tm, tj = robot._simulate(ref, 0)
        e = (robot._extras["q_loop_rad"] - q) if effects else robot.rng.standard_normal(q.shape) * 1e-4
        de, dt = np.diff(e[:, 1]), np.diff(tm[:, 1])
        lags = range(0, 5)
        return max(abs(np.corrcoef(de[: len(de) - L], dt[L:])[0, 1]) for L in lags)

    c_closed, c_ideal = corr(["closed_loop"]), corr([])
    assert c_closed > 0.3, c_closed
    assert c_ideal < 0.15, c_ideal  # 999 samples: |r| std 0.03, five lags


def test_sensor_delay_shows_at_the_configured_lag(spec):
    p = fx.twin_setup(spec, {"name": "realistic", "effects": ["sensor"]}).params
    n = 7
    sp = dataclasses.replace(p.sensor, torque_delay_cycles=3, antialias_hz=0.0,
                             joint_torque_offset_Nm=np.zeros(n), joint_torque_gain_error=np.zeros(n))
    tau = np.cumsum(np.random.default_rng(0).standard_normal((800, n)), axis=0)
    tm, tj = fx.apply_sensor_effects(sp, RATE, tau, tau, pad=100)
    x, y = np.diff(tau[100:, 0]), np.diff(tj[:, 0])
    xc = [np.dot(x[: len(x) - L], y[L:]) for L in range(10)]
    assert int(np.argmax(xc)) == 3
    # the anti-aliasing filter delays and smooths; offset and gain apply to the joint-torque sensor
    tm2, tj2 = fx.apply_sensor_effects(dataclasses.replace(sp, torque_delay_cycles=0), RATE, tau, tau, pad=100)
    np.testing.assert_allclose(tj2, tau[100:])
    tm3, tj3 = fx.apply_sensor_effects(p.sensor, RATE, tau, tau, pad=100)
    np.testing.assert_allclose(tj3.mean(0) - (1 + p.sensor.joint_torque_gain_error) * tm3.mean(0),
                               p.sensor.joint_torque_offset_Nm, atol=1e-9)


def test_sensor_effect_in_the_twin_run(spec):
    """The recorded joint torque of the twin with ``sensor`` = the ideal twin's torque through
    apply_sensor_effects (same seed; noise off)."""
    ref = short_reference(spec, 1.5)
    recs = {}
    for eff in ([], ["sensor"]):
        cfg = {"name": "realistic", "effects": eff} if eff else {"name": "ideal"}
        r = make_robot(spec, {"name": "mujoco"}, {"enabled": False}, seed=0, twin_cfg=cfg)
        recs[bool(eff)] = r.run(ref)
    assert recs[True].metadata["twin"]["effects"] == ["sensor"]
    d = np.abs(recs[True].tau_joint_Nm - recs[False].tau_joint_Nm).max()
    assert d > 0.01  # offset, gain, delay and filter change the reading


def test_temperature_drift_changes_the_coulomb_level_by_the_fraction(spec):
    p = fx.twin_setup(spec, {"name": "realistic", "effects": ["friction_unmodelled"]}).params.friction_unmodelled
    fe = fx.FrictionEffect(spec, p)
    v = np.full(7, 2.0)  # far above the Stribeck velocity: Coulomb + viscous

    def coulomb(t):  # f(v) = Fc + Fv v above the Stribeck velocity: Fc = 2 f(v) - f(2 v) (ideal part included)
        f = lambda s: (fe.joint_Nm(s * v, t, np.zeros(7)) + spec.fc_link_Nm * np.tanh(s * v / 0.01)
                       + spec.fv_link_Nms_rad * s * v)
        return 2 * f(1) - f(2)

    np.testing.assert_allclose(coulomb(0.0), spec.fc_link_Nm, rtol=1e-9)
    np.testing.assert_allclose(coulomb(p.drift_time_s), (1 + p.drift_fraction) * spec.fc_link_Nm, rtol=1e-9)
    np.testing.assert_allclose(coulomb(p.drift_time_s / 2), (1 + p.drift_fraction / 2) * spec.fc_link_Nm, rtol=1e-9)
    # the MuJoCo callback's fused form equals the ideal law plus the extra friction
    vv, load = np.linspace(-0.3, 0.3, 7), np.linspace(-50, 50, 7)
    ideal = spec.fv_link_Nms_rad * vv + spec.fc_link_Nm * np.tanh(vv / spec.coulomb_smoothing_rad_s)
    np.testing.assert_allclose(fe.link_total_Nm(vv, 600.0, load), ideal + fe.joint_Nm(vv, 600.0, load),
                               rtol=1e-12, atol=1e-12)
    # below the Stribeck velocity the level is higher than Coulomb, and discontinuous at zero
    small = fe.joint_Nm(np.full(7, 1e-4), 0.0, np.zeros(7)) + spec.fc_link_Nm * np.tanh(1e-4 / 0.01)
    assert np.all(small > 0.99 * p.stribeck_ratio * spec.fc_link_Nm)


@pytest.mark.parametrize("effects, tol", [(["friction_unmodelled"], 0.3), (["closed_loop"], 0.3), (["elasticity"], 0.3)])
def test_mujoco_and_pybullet_agree_on_the_effect(spec, effects, tol):
    """Both engines run the effect's shared code: the effect's motor torque (realistic minus ideal
    twin, same engine, same seed) agrees between MuJoCo and PyBullet within ``tol`` of its RMS."""
    noise = {"enabled": True, "q_std_rad": 1e-5} if "closed_loop" in effects else None
    eff = {}
    for backend in ("mujoco", "pybullet"):
        a = simulate(spec, effects, noise=noise, backend=backend)
        i = simulate(spec, [], noise=noise, backend=backend)
        for x in (a[3], i[3]):
            if backend == "pybullet":
                x.close()
        eff[backend] = a[1] - i[1]
    rms = np.sqrt(np.mean(eff["mujoco"] ** 2))
    err = np.sqrt(np.mean((eff["mujoco"] - eff["pybullet"]) ** 2)) / rms
    print(effects, f"effect RMS {rms:.4f} Nm, engine difference {err:.3f} of it")
    assert rms > 0.01 and err < tol, (rms, err)


@pytest.mark.parametrize("effects", [["closed_loop"], ["friction_unmodelled"], ["sensor"]])
def test_batched_twin_reproduces_the_hal_twin(spec, effects):
    """The batched Monte-Carlo path runs the same effect code: each robot of a batch records what
    the HAL twin with its seed records (measured position, both torque channels)."""
    from hal.factory import make_noise, make_twin_setup
    from hal.sim.batch import BatchTwin

    cfg = {"name": "realistic", "effects": effects}
    setup = make_twin_setup(spec, cfg)
    noise = fx.realistic_noise(setup, make_noise(spec, {"enabled": True}), {})
    ref = short_reference(spec)
    recs = BatchTwin(spec, 2, noise, twin=setup).run(ref, [5, 6])
    hal = make_robot(spec, {"name": "mujoco"}, {"enabled": True}, seed=6, twin_cfg=cfg).run(ref)
    assert recs[1].metadata["twin"]["effects"] == effects
    np.testing.assert_allclose(recs[1].q_rad, hal.q_rad, rtol=0, atol=1e-12)
    np.testing.assert_allclose(recs[1].tau_motor_Nm, hal.tau_motor_Nm, rtol=0, atol=1e-9)
    np.testing.assert_allclose(recs[1].tau_joint_Nm, hal.tau_joint_Nm, rtol=0, atol=1e-9)
    assert np.abs(recs[0].q_rad - recs[1].q_rad).max() > 0  # the runs' noise differs


@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_elastic_lwr4p_comes_to_rest_with_the_unmodelled_friction(backend):
    """LWR4+ (motor-side Coulomb 4.7-11.6 Nm, elastic joints): the motor friction's unmodelled
    part acts on the rotor. On the link behind the spring (axis 7: the flange's inertia), its
    Stribeck negative damping kept the link in a limit cycle of ~0.4 rad/s at rest, and the next
    run's approach could not start inside the limits."""
    spec = load_robot("lwr4p")
    robot = make_robot(spec, {"name": backend}, {"enabled": False}, seed=0,
                       twin_cfg={"name": "realistic", "effects": ["elasticity", "friction_unmodelled"]})
    N = int(0.6 * RATE)
    t = np.arange(N) / RATE
    kick = np.where(t < 0.2, 0.02 * np.sin(np.pi * t / 0.2), 0.0)  # a small move out and back, then hold
    q_ref = spec.home_rad + kick[:, None]
    z = np.zeros_like(q_ref)
    q, _, _ = robot._simulate(JointTrajectory(t, q_ref, z, z), 0)
    dq_end = np.abs(np.diff(q[-100:], axis=0)).max(axis=0) * RATE  # link speed over the last 0.1 s
    assert np.all(dq_end < 0.05), dq_end


def test_ir361_closed_elastic_loop_is_stable_at_250_hz():
    """IR 361, 2 cycles of actuation delay at 250 Hz and elastic joints: the loop's bandwidth is
    tuned to its dead time (fx.loop_bandwidth_rad_s); with the configured 5 Hz it diverged."""
    spec = load_robot("kuka_ir361")
    robot = make_robot(spec, {"name": "mujoco", "control_rate_hz": 250.0}, None, seed=0,
                       twin_cfg={"name": "realistic", "effects": ["closed_loop", "elasticity"]})
    rate = 250.0
    t = np.arange(int(2.0 * rate)) / rate
    w = 2 * np.pi * 1.0
    q_ref = spec.home_rad + 0.2 * (1 - np.cos(w * t))[:, None]
    dq = 0.2 * w * np.sin(w * t)[:, None] * np.ones(3)
    ddq = 0.2 * w * w * np.cos(w * t)[:, None] * np.ones(3)
    q, _, _ = robot._simulate(JointTrajectory(t, q_ref, dq, ddq), 0)
    assert np.abs(q - q_ref).max() < 0.02
