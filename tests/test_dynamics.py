"""MuJoCo, pinocchio and the regressor agree on the twin's dynamics."""
import mujoco
import numpy as np
import pytest

from robident_twin.model.base_params import compute_base_parameters
from robident_twin.model.builders import mujoco_model
from robident_twin.model.dynamics import TruthModel, link_friction_Nm, motor_side_friction_Nm
from robident_twin.model.regressor import ModelOptions, Regressor


def _states(iiwa, n=100, seed=7):
    return Regressor(iiwa).random_states(n, np.random.default_rng(seed))


def test_mujoco_inverse_dynamics_matches_pinocchio_plus_drive_and_friction(iiwa):
    """MuJoCo inverse dynamics (armature = drive inertia) plus the twin's friction equals
    pinocchio RNEA plus drive inertia plus friction, to 1e-8 relative, on 100 random states."""
    q, dq, ddq = _states(iiwa)
    m = mujoco_model(iiwa)
    d = mujoco.MjData(m)
    truth = TruthModel(iiwa)
    worst = 0.0
    for k in range(q.shape[0]):
        d.qpos[:], d.qvel[:], d.qacc[:] = q[k], dq[k], ddq[k]
        mujoco.mj_inverse(m, d)
        tau_mj = d.qfrc_inverse + link_friction_Nm(iiwa, dq[k]) + motor_side_friction_Nm(iiwa, dq[k])
        tau_pin = truth.torques(q[k], dq[k], ddq[k])[1][0]
        worst = max(worst, np.max(np.abs(tau_mj - tau_pin)) / np.max(np.abs(tau_pin)))
    assert worst < 1e-8


def test_mujoco_forward_dynamics_of_the_twin_matches_truth(iiwa):
    """The twin's passive-force callback and damping reproduce the truth model's friction."""
    from hal.sim.mujoco_backend import MujocoTwin
    from hal.sim.sensors import SensorNoise

    tw = MujocoTwin(iiwa, SensorNoise.from_config(iiwa, enabled=False))
    q, dq, _ = _states(iiwa, 20, seed=3)
    rng = np.random.default_rng(0)
    mujoco.set_mjcb_passive(tw._passive_callback())
    try:
        for k in range(q.shape[0]):
            tw.data.qpos[:], tw.data.qvel[:] = q[k], dq[k]
            tw.data.act[:] = rng.normal(size=7) * 20
            mujoco.mj_forward(tw.model, tw.data)
            tau = tw.truth.torques(q[k], dq[k], tw.data.qacc.copy())[1][0]
            np.testing.assert_allclose(tau, tw.data.act, atol=1e-9 * np.max(np.abs(tau)))
    finally:
        mujoco.set_mjcb_passive(None)


@pytest.mark.parametrize("measurement", ["joint_torque", "motor_torque"])
def test_regressor_times_true_parameters_is_the_truth(iiwa, measurement):
    reg = Regressor(iiwa, ModelOptions(measurement=measurement, offsets=True))
    q, dq, ddq = _states(iiwa)
    tau_j, tau_m = TruthModel(iiwa).torques(q, dq, ddq)
    tau = tau_j if measurement == "joint_torque" else tau_m
    W = reg.stack(q, dq, ddq)
    np.testing.assert_allclose(W @ reg.true_parameters(), tau.reshape(-1), atol=1e-10 * np.abs(tau).max())


def test_khalil_names(iiwa):
    reg = Regressor(iiwa, ModelOptions(measurement="motor_torque"))
    assert reg.names[:10] == ["XX1", "XY1", "XZ1", "YY1", "YZ1", "ZZ1", "MX1", "MY1", "MZ1", "M1"]
    assert reg.names[70:77] == [f"Ia{j}" for j in range(1, 8)]
    assert reg.names[77] == "Fv1" and reg.names[84] == "Fc1"
    chi = dict(zip(reg.names, reg.true_parameters()))
    assert chi["M3"] == 3.5
    # first moment of link 1 about its frame origin: m * com
    assert chi["MZ1"] == pytest.approx(5.76 * 0.12)
    # ZZ about the origin: Izz_com + m (x^2 + y^2)
    assert chi["ZZ1"] == pytest.approx(0.0123 + 5.76 * 0.03**2)


def test_57_base_parameters_as_in_xu2020(iiwa):
    base = compute_base_parameters(Regressor(iiwa, ModelOptions(measurement="joint_torque", drive_inertia=False)))
    assert base.n_base == 57


@pytest.mark.parametrize("options", [ModelOptions(), ModelOptions(measurement="motor_torque", offsets=True)])
def test_base_regressor_reproduces_standard_model_on_fresh_samples(iiwa, options):
    reg = Regressor(iiwa, options)
    base = compute_base_parameters(reg, seed=0)
    chi = np.random.default_rng(11).normal(size=reg.n_params)  # any standard vector, not only the truth
    W = reg.stack(*reg.random_states(200, np.random.default_rng(99)))
    tau = W @ chi
    np.testing.assert_allclose(base.columns(W) @ base.from_standard(chi), tau, atol=1e-10 * np.abs(tau).max())
    assert np.linalg.matrix_rank(base.columns(W)) == base.n_base


def test_base_relations_are_printable(iiwa):
    base = compute_base_parameters(Regressor(iiwa, ModelOptions(measurement="motor_torque")))
    rel = dict(zip(base.names, base.relations()))
    assert rel["ZZ1R"] == "ZZ1R = ZZ1 + YY2 + Ia1"
    assert "XX2R" in rel and "- YY2" in rel["XX2R"]
    assert dict(base.regrouped(base.names.index("ZZ1R"))) == {"ZZ1": 1.0, "YY2": 1.0, "Ia1": 1.0}


def test_rnea_of_a_repeated_reference_equals_row_by_row_rnea_bit_for_bit(iiwa):
    """TruthModel.rnea_links evaluates each distinct state once (a tiled periodic reference): the
    same torques, to the bit, as one pinocchio call per row, in the rows' order."""
    import pinocchio as pin

    from robident_twin.model import dynamics

    truth = TruthModel(iiwa)
    rng = np.random.default_rng(3)
    period = rng.standard_normal((3, 150, iiwa.n_joints))
    lead = rng.standard_normal((3, 40, iiwa.n_joints))
    q, dq, ddq = (np.vstack([lead[i]] + [period[i]] * 4 + [period[i][:7]]) for i in range(3))
    assert q.shape[0] > dynamics.DEDUPE_ROWS
    expected = np.array([pin.rnea(truth.model, truth.data, q[k], dq[k], ddq[k]) for k in range(q.shape[0])])
    np.testing.assert_array_equal(truth.rnea_links(q, dq, ddq), expected)
    first, inverse = dynamics._distinct_rows(q, dq, ddq)
    assert len(first) == 190  # the lead-in and one period
    np.testing.assert_array_equal(q[first][inverse], q)
