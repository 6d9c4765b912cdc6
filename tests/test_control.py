"""Model-based feed-forward control (issue 19): ICMA 2020 Table VII from the real control-error
files, and the twin's tracking error with no / nominal / identified feed-forward."""
import functools

import numpy as np
import pytest

from robident_twin.errors import ConfigError


# --------------------------------------------------------------------------- the real robot

def test_table_vii_from_the_real_files_equals_the_paper(cloos_data_root):
    from robident_twin.datasets import cloos_control as cc

    rms = cc.rms_table_deg(1, cloos_data_root)
    for model, paper in cc.PAPER_TABLE_VII_DEG.items():
        assert np.round(rms[model], 4).tolist() == list(paper), model
    # the model roughly halves the reference error (paper: "approximately halves")
    for model in ("model_A", "model_B", "process"):
        assert 0.5 < np.mean(rms[model] / rms["none"]) < 0.7
    rms2 = cc.rms_table_deg(2, cloos_data_root)
    assert all(v.shape == (6,) and np.all(v > 0) for v in rms2.values())


# --------------------------------------------------------------------------- the twins

def _one_period_identification(spec, measurement: str):
    """An identification on the twin as task=identify acquires it (default controller, sensor
    noise), shortened to one period of the stored excitation: Fourier differentiation, OLS."""
    from hal.factory import make_robot
    from robident_twin.design.stored import reference, resolve_design
    from robident_twin.estimation.estimators import ols
    from robident_twin.model.build import build_model, model_options
    from robident_twin.processing.signal import process_periodic

    model = build_model(spec, model_options({}, {"measurement": measurement}), n_samples=150)
    design = resolve_design(f"excitation/{spec.name}_default.yaml", spec)
    rec = make_robot(spec, {"name": "mujoco"}, None, seed=1).run(reference(design, 1000.0))
    data = process_periodic(rec, measurement, n_harmonics=design.n_harmonics, decimate=5)
    est = ols(model.base_regressor(data), data.tau_Nm, model.base.names)
    return model, est.beta


def _compare(spec, model, beta, seconds: float, twin=None):
    from hal.factory import make_robot
    from robident_twin.design.stored import reference, resolve_design
    from robident_twin.model.nominal import cad_nominal
    from robident_twin.validation import control as C

    traj = C.truncated(reference(resolve_design(f"excitation/{spec.name}_validation.yaml", spec), 1000.0), seconds)
    ctrl = {"bandwidth_hz": 5.0, "damping_ratio": 1.0, "integral_hz": C.integral_hz_for(spec.name)}

    def make(ff_on):
        return make_robot(spec, {"name": "mujoco", "controller": dict(ctrl, feedforward=ff_on)}, None, seed=0,
                          twin_cfg=twin)

    sources = {"none": None, "nominal": C.spec_feedforward(cad_nominal(spec)),
               "identified": C.regressor_feedforward(model, beta)}
    res = [C.run_with_feedforward(make, k, f, traj) for k, f in sources.items()]
    return C.ControlComparison(spec.joint_names, res)


@functools.lru_cache(maxsize=1)
def _cloos_identified():
    """The CLOOS's model identified on its ideal twin (shared by the ideal and realistic tests)."""
    from robident_twin.model.robot import load_robot

    spec = load_robot("cloos_qrc350")
    return (spec,) + _one_period_identification(spec, "motor_torque")


def test_cloos_twin_identified_feedforward_reduces_the_tracking_error():
    from robident_twin.validation.control import format_control_table

    spec, model, beta = _cloos_identified()
    cmp = _compare(spec, model, beta, 1.5)
    d = cmp.to_dict()
    print(format_control_table(d))
    ratio = cmp.ratio("identified")
    # the real CLOOS: mean ratio 0.59 (Table VII, model A); the twin's exact model structure
    # does at least as well on every joint, and better than the CAD-like nominal model
    assert np.all(ratio < 0.5), ratio
    assert np.all(cmp.by_name("identified").rms_rad < cmp.by_name("nominal").rms_rad)
    assert np.mean(cmp.ratio("nominal")) < 1.0


def test_cloos_realistic_twin_identified_feedforward_ratio_is_the_real_robots_order():
    """On the realistic CLOOS twin (elastic joints with backlash, the drive's own P / PI loop with
    delay and filtered velocity, unmodelled friction, transmission error, sensor effects), the
    rigid-body model identified on the twin (one period, as above) cuts the encoder-side reference
    error by a factor of the real robot's order (Table VII: 0.60 mean), not to the near-zero
    ratio of a loop so soft that the feed-forward does everything (the rotor-tuned loop: 0.12),
    and better than none on every joint (measured: mean 0.25, per joint 0.38 0.29 0.36 0.06 0.23
    0.19; the task's default, identified on the realistic twin: 0.30)."""
    from robident_twin.validation.control import format_control_table

    spec, model, beta = _cloos_identified()
    twin = {"name": "realistic", "effects": ["closed_loop", "elasticity", "friction_unmodelled", "sensor",
                                             "transmission_error"]}
    cmp = _compare(spec, model, beta, 1.5, twin)
    print(format_control_table(cmp.to_dict()))
    ratio = cmp.ratio("identified")
    assert 0.2 < np.mean(ratio) < 0.85, ratio
    assert np.all(ratio < 1.0), ratio
    assert np.mean(cmp.ratio("nominal")) < 1.0


def test_iiwa_twin_identified_tracks_at_least_as_well_as_nominal(iiwa):
    # motor torques (the iiwa's currents): the model the controller's feed-forward needs, drive
    # inertia included (a joint-torque model cannot see the drives; neither has the CAD-like nominal)
    model, beta = _one_period_identification(iiwa, "motor_torque")
    cmp = _compare(iiwa, model, beta, 1.5)
    from robident_twin.validation.control import format_control_table

    print(format_control_table(cmp.to_dict()))
    ident, nom, none = (cmp.by_name(k).rms_rad for k in ("identified", "nominal", "none"))
    assert np.all(ident <= nom), (ident, nom)
    assert np.all(ident < none), (ident, none)


def test_cloos_controller_has_the_pi_velocity_loop_and_kukas_pd():
    from robident_twin.validation.control import integral_hz_for

    assert integral_hz_for("cloos_qrc350") > 0
    assert integral_hz_for("iiwa14") == 0 and integral_hz_for("kuka_ir361") == 0
    with pytest.raises(ConfigError, match="control.integral_hz"):
        integral_hz_for("iiwa14", -1.0)


def test_feedforward_source_of_the_wrong_shape_is_refused(iiwa):
    from hal.protocol import JointTrajectory
    from hal.sim.playback import feedforward_Nm

    z = np.zeros((5, iiwa.n_joints))
    ref = JointTrajectory(np.arange(5) / 1000.0, z, z, z)
    with pytest.raises(ConfigError, match="feed-forward source"):
        feedforward_Nm(None, ref, True, lambda q, dq, ddq: np.zeros((5, 3)))
    ff = feedforward_Nm(None, ref, True, lambda q, dq, ddq: np.ones_like(q))
    assert ff.shape == z.shape and np.all(ff == 1.0)


@pytest.mark.parametrize("twin", [None, {"name": "realistic", "effects": ["closed_loop", "elasticity", "sensor"]}],
                         ids=["ideal", "realistic"])
def test_the_twin_controller_uses_the_given_feedforward_source(iiwa, twin):
    """The hook is used, on the ideal and on the realistic twin (its elastic path too): a zero
    source tracks exactly as no feed-forward, the truth model as a source exactly as the twin's
    default (the truth), and a CAD-like nominal source differently."""
    from hal.factory import make_robot
    from robident_twin.design.stored import reference, resolve_design
    from robident_twin.model.nominal import cad_nominal
    from robident_twin.validation import control as C

    traj = C.truncated(reference(resolve_design("excitation/iiwa14_validation.yaml", iiwa), 1000.0), 0.2)

    def make(ff_on):
        return make_robot(iiwa, {"name": "mujoco", "controller": {"feedforward": ff_on}}, {"enabled": False}, seed=0,
                          twin_cfg=twin)

    none = C.run_with_feedforward(make, "none", None, traj)
    zero = C.run_with_feedforward(make, "zero", lambda q, dq, ddq: np.zeros_like(q), traj)
    default = C.run_with_feedforward(lambda on: make(True), "truth (default)", None, traj)
    truth = C.run_with_feedforward(make, "truth", C.spec_feedforward(iiwa), traj)
    nominal = C.run_with_feedforward(make, "nominal", C.spec_feedforward(cad_nominal(iiwa)), traj)
    np.testing.assert_array_equal(zero.rms_rad, none.rms_rad)
    np.testing.assert_array_equal(truth.rms_rad, default.rms_rad)
    assert not np.allclose(nominal.rms_rad, truth.rms_rad, rtol=1e-3)


def test_control_task_writes_the_table_summary_and_report(tmp_path):
    import json

    from hydra import compose, initialize_config_dir

    from robident_twin.control_task import run_control_task
    from robident_twin.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=[
            "task=control", "control.duration_s=0.2", "control.feedforwards=[none,nominal]", "noise=none"])
    s = run_control_task(cfg, tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())["control"]
    assert on_disk["feedforward"]["nominal"]["ratio_to_none"] == s["control"]["feedforward"]["nominal"]["ratio_to_none"]
    assert on_disk["feedforward"]["none"]["ratio_to_none"] == [1.0] * 7
    assert "Model-based feed-forward control" in (tmp_path / "report.html").read_text()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        bad = compose(config_name="config", overrides=["control.feedforwards=[none,truth]"])
    with pytest.raises(ConfigError, match="control.feedforwards"):
        run_control_task(bad, tmp_path)


@pytest.mark.parametrize("twin", [None, {"name": "realistic", "effects": ["sensor"]}], ids=["ideal", "realistic"])
def test_the_pi_velocity_loop_removes_the_gravity_sag_the_pd_loop_leaves(twin):
    """Without feed-forward, holding still: the PD loop leaves a steady error (gravity / kp),
    the CLOOS's PI velocity loop integrates it away, on the ideal twin and on the realistic
    twin's loop (hal/sim/effects.py LoopController, which dropped the integral before; with
    closed_loop the CLOOS runs its own drive loop, tests/test_drive_loop.py)."""
    from hal.factory import make_robot
    from hal.protocol import JointTrajectory
    from robident_twin.model.robot import load_robot
    from robident_twin.validation.control import run_with_feedforward

    spec = load_robot("cloos_qrc350")
    N = 2000
    q = np.tile(spec.home_rad, (N, 1))
    z = np.zeros_like(q)
    hold = JointTrajectory(np.arange(N) / 1000.0, q, z, z)

    def make(integral_hz):
        return lambda on: make_robot(spec, {"name": "mujoco", "controller": {"feedforward": on, "integral_hz": integral_hz}},
                                     {"enabled": False}, seed=0, twin_cfg=twin)

    pd = run_with_feedforward(make(0.0), "pd", None, hold)
    pi = run_with_feedforward(make(1.0), "pi", None, hold)
    assert np.max(pd.max_abs_rad) > 1e-3  # the gravity sag of the PD loop
    assert np.max(pi.max_abs_rad) < np.max(pd.max_abs_rad)
    assert np.max(pi.rms_rad) < 0.5 * np.max(pd.rms_rad)


def test_the_emulators_stepper_takes_the_chosen_feedforward_source(iiwa):
    """hal/sim/stepper.py (the controller emulators' twin): with ``feedforward_source`` set, a
    zero source steps exactly as no feed-forward and the truth model as a source exactly as the
    default (the truth); a CAD-like nominal source differently."""
    from hal.factory import make_noise
    from hal.sim.mujoco_backend import ControllerConfig
    from hal.sim.stepper import TwinStepper
    from robident_twin.model.nominal import cad_nominal
    from robident_twin.validation import control as C

    t = np.arange(150) / 1000.0
    q_cmd = 0.05 * np.sin(2 * np.pi * 2.0 * t)[:, None] * np.ones(iiwa.n_joints)

    def track(source, ff_on=True):
        st = TwinStepper(iiwa, make_noise(iiwa, {"enabled": False}), controller=ControllerConfig(feedforward=ff_on))
        if source is not None:
            st.twin.feedforward_source = source
        return np.array([st.step(q).q_true_rad for q in q_cmd])

    default = track(None)
    np.testing.assert_array_equal(track(lambda q, dq, ddq: np.zeros_like(q)), track(None, ff_on=False))
    np.testing.assert_array_equal(track(C.spec_feedforward(iiwa)), default)
    assert not np.allclose(track(C.spec_feedforward(cad_nominal(iiwa))), default, rtol=0, atol=1e-9)


def test_the_approach_search_returns_the_exhaustive_searchs_trajectory():
    """hal.motion.approach screens each candidate duration on every 16th sample before checking
    every sample (the twins' lead-in to a truncated trajectory's moving start tried ~90 durations
    at 15 ms each): it returns what the plain search over the same 5 % duration grid, checking every
    sample, returns (bit for bit), or fails where that one fails."""
    from hal.motion import approach, quintic
    from hal.sim.mujoco_backend import robot_info
    from robident_twin.errors import TrajectoryError
    from robident_twin.model.robot import load_robot

    def exhaustive(info, q0, q1, dq1, ddq1, scale, max_s):
        z = np.zeros_like(q0)
        dt, dist = 1.0 / info.control_rate_hz, np.abs(q1 - q0)
        T = max(0.5, float(np.max(1.9 * dist / (scale * info.dq_max_rad_s))),
                float(np.max(np.sqrt(6 * dist / (scale * info.ddq_max_rad_s2)))))
        while T <= max_s:
            n = int(np.ceil(T / dt))
            T = n * dt
            t = np.arange(n) * dt
            q, dq, ddq = quintic(q0, z, z, q1, dq1, ddq1, T, t)
            if (np.all(np.abs(dq) <= np.maximum(scale * info.dq_max_rad_s, np.abs(dq1) + 1e-12))
                    and np.all(np.abs(ddq) <= np.maximum(scale * info.ddq_max_rad_s2, np.abs(ddq1) + 1e-12))
                    and np.all(q >= info.q_min_rad) and np.all(q <= info.q_max_rad)):
                return t, q, dq, ddq
            T *= 1.05
        return None if scale >= 1.0 else exhaustive(info, q0, q1, dq1, ddq1, 1.0, max_s)

    rng = np.random.default_rng(3)
    found = failed = 0
    for name in ("iiwa14", "cloos_qrc350"):
        spec = load_robot(name)
        info = robot_info(spec, "mujoco", 1000.0, is_simulation=True)
        span = info.q_max_rad - info.q_min_rad
        for _ in range(6):
            q0, q1 = (info.q_min_rad + span * rng.uniform(0.1, 0.9, spec.n_joints) for _ in range(2))
            dq1 = rng.uniform(-1, 1, spec.n_joints) * info.dq_max_rad_s * rng.choice([0.0, 0.3, 0.9])
            ddq1 = rng.uniform(-1, 1, spec.n_joints) * info.ddq_max_rad_s2 * rng.choice([0.0, 0.3, 0.9])
            want = exhaustive(info, q0, q1, dq1, ddq1, 0.8, 10.0)
            if want is None:
                with pytest.raises(TrajectoryError):
                    approach(info, q0, np.zeros_like(q0), np.zeros_like(q0), q1, dq1, ddq1, max_duration_s=10.0)
                failed += 1
                continue
            got = approach(info, q0, np.zeros_like(q0), np.zeros_like(q0), q1, dq1, ddq1, max_duration_s=10.0)
            for a, b in zip((got.t_s, got.q_rad, got.dq_rad_s, got.ddq_rad_s2), want):
                np.testing.assert_array_equal(a, b)
            found += 1
    assert found >= 3 and failed >= 1, (found, failed)  # both outcomes are compared
