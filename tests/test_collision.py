"""Collision detection with the momentum observer (Xu 2020, Table 10) on the iiwa 14 twin:
the observer is checked against the twin's true external joint torque, the identified
parameters give lower collision-free residual peaks than the CAD-like nominal on every
joint, and a simulated contact is detected without false alarms."""
import numpy as np
import pytest

from robident_twin.validation import collision_detection as col
from robident_twin.report import identified_twin as it
from robident_twin.errors import ConfigError

COLLISION = col.Collision(body="link6", force_N=(0.0, 5.0, 0.0), start_s=5.0, duration_s=0.2)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Identify the iiwa 14 (2 periods, default noise), export its identified twin, and run
    the study on the validation trajectory for the nominal, identified and true parameters."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from robident_twin.paths import CONF_DIR
    from robident_twin.pipeline import identify
    from robident_twin.design.stored import reference, resolve_design
    from robident_twin.model.robot import load_robot

    with initialize_config_dir(version_base=None, config_dir=str(CONF_DIR)):
        cfg = OmegaConf.to_container(compose(config_name="config", overrides=["acquisition.periods=2", "twin=ideal"]),
                                     resolve=True)
    res = identify(cfg, out_dir=None)
    spec = res.model.spec
    nominal = it.cad_nominal(spec)
    twin = it.build_identified_twin(res.model, res.estimate.beta, res.estimate.cov, nominal, truth=spec)
    paths = it.export_twin(twin, tmp_path_factory.mktemp("twin"))
    identified = load_robot(paths["yaml"])
    ref = reference(resolve_design(cfg["robot"]["validation"], spec), 1000.0)
    st = col.run_collision_study(spec, {"nominal": nominal, "identified": identified, "true": spec}, ref,
                                 COLLISION, seeds=(1, 2), gain_1_s=50.0, half_window=10, factor=1.2)
    print("\n" + col.format_study(st, spec.joint_names))
    return dict(study=st, spec=spec)


@pytest.mark.slow
def test_identified_residual_peaks_are_lower_than_nominal_on_every_joint(study):
    r = study["study"].results
    nom, ident = r["nominal"].peak_calibration_Nm, r["identified"].peak_calibration_Nm
    assert np.all(ident < nom), (ident, nom)
    # and close to what the true parameters leave (sensor noise and differentiation only)
    assert np.all(ident < 1.5 * r["true"].peak_calibration_Nm + 0.02)


@pytest.mark.slow
def test_collision_detected_quickly_without_false_alarms(study):
    for label in ("nominal", "identified"):
        r = study["study"].results[label]
        assert r.false_alarm_s is None, (label, r.false_alarm_s)
        assert r.early_alarm_s is None, (label, r.early_alarm_s)
        assert r.detected_s is not None, label
        assert 0 <= r.delay_ms < 50.0, (label, r.delay_ms)
    # the lower thresholds of the identified model detect no later than the nominal's
    assert study["study"].results["identified"].delay_ms <= study["study"].results["nominal"].delay_ms


@pytest.mark.slow
def test_observer_tracks_the_true_external_joint_torque(study):
    """With the true parameters the residual is the K_O-filtered external joint torque
    J^T F: check it at the end of the contact against the wrench the twin applied (MuJoCo
    Jacobian at the body's COM, at the twin's true positions)."""
    import mujoco

    from robident_twin.model.builders import mujoco_model

    st, spec = study["study"], study["spec"]
    run = st.runs["true"]["collision"]
    q_true = st.recordings["collision"].metadata["true_q_rad"]
    m = mujoco_model(spec)
    d = mujoco.MjData(m)
    bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, COLLISION.body)
    k = int(np.searchsorted(run.t_s, COLLISION.start_s + COLLISION.duration_s)) - 2  # last sample in contact
    d.qpos[:] = q_true[k]
    mujoco.mj_forward(m, d)
    jac_p, jac_r = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    mujoco.mj_jacBodyCom(m, d, jac_p, jac_r, bid)
    tau_ext = jac_p.T @ np.asarray(COLLISION.force_N)
    err = np.abs(run.r_Nm[k] - tau_ext)
    print(f"\nend of contact: r     {np.round(run.r_Nm[k], 3)}\n                J^T F {np.round(tau_ext, 3)}")
    assert np.abs(tau_ext).max() > 1.0
    # K_O T = 50 x 0.2 s: the first-order transient has decayed (e^-10); what is left is the
    # collision-free level (sensor noise, differentiation)
    assert np.all(err <= 0.02 * np.abs(tau_ext).max() + st.results["true"].peak_calibration_Nm), err
    # without contact the same observer stays at that level: the residual is the contact
    assert np.abs(run.r_Nm[k]).max() > 5 * st.results["true"].peak_calibration_Nm.max()


def test_bad_inputs_give_clear_errors(iiwa):
    with pytest.raises(ConfigError, match="no body 'link9'"):
        col.colliding_twin(iiwa, col.Collision(body="link9"))
    with pytest.raises(ConfigError, match="duration_s"):
        col.Collision(duration_s=0.0)
    with pytest.raises(ConfigError, match="unknown key"):
        col.Collision.from_config({"bodyy": "link3"})
    q = np.zeros((50, 7))
    with pytest.raises(ConfigError, match="gain_1_s"):
        col.momentum_observer(iiwa, q, q, q, 1e-3, gain_1_s=2000.0)
    with pytest.raises(ConfigError, match="channel"):
        col.momentum_observer(iiwa, q, q, q, 1e-3, channel="sensor")
