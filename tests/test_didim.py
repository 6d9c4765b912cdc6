"""DIDIM (Gautier, Janot, Vandanjon 2013), the closed-loop output-error estimator, on the
iiwa 14 motor-torque model under a PD controller whose feedback sees noisy positions."""
import numpy as np
import pinocchio as pin
import pytest

from robident_twin.design.fourier import load_design
from robident_twin.estimation.estimators import (closed_loop_instruments, estimate, iv, simulate_closed_loop, wls)
from robident_twin.model.base_params import compute_base_parameters
from robident_twin.model.regressor import ModelOptions, Regressor
from robident_twin.paths import CONF_DIR


@pytest.fixture(scope="module")
def loop(iiwa):
    reg = Regressor(iiwa, ModelOptions(measurement="motor_torque"))
    base = compute_base_parameters(reg)
    beta = base.from_standard(reg.true_parameters())  # the truth: simulates the plant, compared at the end
    traj = load_design(CONF_DIR / "excitation" / "iiwa14_default.yaml")
    rate, dec = 200.0, 5
    q_ref, dq_ref, _ = traj.evaluate(np.arange(int(rate * traj.period_s)) / rate)
    J = np.diag(pin.crba(reg.model, reg.data, iiwa.home_rad)) + iiwa.drive_inertia_kgm2
    w = 2 * np.pi * 5.0
    kp, kd = J * w**2, 2 * J * w
    q, dq, ddq, u = simulate_closed_loop(reg, base, beta, q_ref, dq_ref, rate, kp, kd, record_every=dec)
    sim = closed_loop_instruments(reg, base, q_ref, dq_ref, rate, kp, kd, record_every=dec)
    Z_ref = base.columns(reg.stack(*traj.evaluate(np.arange(q.shape[0]) * dec / rate)))
    return dict(reg=reg, base=base, beta=beta, states=(q, dq, ddq), u=u, sim=sim, Z_ref=Z_ref)


def test_didim_converges_to_the_truth_and_agrees_with_wls(loop):
    """Torque noise 0.5 Nm: DIDIM from the dispatcher converges in a few iterations, 57 of 57
    (>= 95 %) parameters within 3 std of the truth, and it agrees with WLS on the exact states
    within WLS's std (max |difference| / std printed)."""
    reg, base, beta = loop["reg"], loop["base"], loop["beta"]
    W = base.columns(reg.stack(*loop["states"]))
    rng = np.random.default_rng(8)
    s2 = np.full(reg.n_joints, 0.25)
    tau = loop["u"] + 0.5 * rng.standard_normal(loop["u"].shape)
    e = estimate("didim", W, tau, base.names, s2, context={"simulated_regressor": loop["sim"]},
                 options={"max_iter": 10})  # tol 1e-8
    ref = wls(W, tau, base.names, s2)
    z = np.abs(e.beta - beta) / e.std
    d = np.max(np.abs(e.beta - ref.beta) / ref.std)
    print(f"\nDIDIM: {e.extra['iterations']} iterations (last change {e.extra['last_relative_change']:.1e}), "
          f"{np.mean(z <= 3) * 100:.1f} % within 3 std of the truth, max |DIDIM - WLS| / std(WLS) {d:.3f}")
    assert e.method == "didim" and e.extra["last_relative_change"] < 1e-8 and e.extra["iterations"] < 10  # converged
    assert np.mean(z <= 3) >= 0.95
    assert d < 1.0
    np.testing.assert_allclose(e.std, ref.std, rtol=0.1)  # its covariance is the WLS one at convergence


def test_didim_is_consistent_where_ols_on_noisy_states_is_not(loop):
    """Positions measured with 2 mrad noise, velocities and accelerations by central differences:
    OLS on that regressor is biased (errors in variables); DIDIM, whose regressor is simulated,
    stays within 3 std of the truth."""
    reg, base, beta = loop["reg"], loop["base"], loop["beta"]
    rng = np.random.default_rng(3)
    q = loop["states"][0] + 2e-3 * rng.standard_normal(loop["states"][0].shape)
    fs = 40.0
    dq = (np.roll(q, -1, 0) - np.roll(q, 1, 0)) * fs / 2
    ddq = (np.roll(q, -1, 0) - 2 * q + np.roll(q, 1, 0)) * fs**2
    Wn = base.columns(reg.stack(q, dq, ddq))
    tau = loop["u"] + 0.5 * rng.standard_normal(loop["u"].shape)
    s2 = np.full(reg.n_joints, 0.25)
    # start from IV with the reference as instruments (the OLS start from noisy states is not simulable)
    beta0 = iv(Wn, tau, base.names, loop["Z_ref"], sigma2_joint_Nm2=s2).beta
    e = estimate("didim", Wn, tau, base.names, s2, context={"simulated_regressor": loop["sim"], "beta0": beta0})
    o = wls(Wn, tau, base.names, s2)
    zo, zd = np.abs(o.beta - beta) / o.std, np.abs(e.beta - beta) / e.std
    print(f"\nnoisy states: OLS {np.mean(zo <= 3) * 100:.0f} % within 3 std (max z {zo.max():.0f}), "
          f"DIDIM {np.mean(zd <= 3) * 100:.0f} % (max z {zd.max():.2f})")
    assert np.mean(zo <= 3) < 0.8
    assert np.mean(zd <= 3) >= 0.95


def test_ml_uses_every_sample_by_default(iiwa):
    """estimator=ml (conf/estimator/ml.yaml) keeps every period-averaged sample unless
    estimator.max_samples is set; a bad max_samples names the key."""
    from types import SimpleNamespace

    import yaml

    from robident_twin.errors import ConfigError
    from robident_twin.estimation.estimators import estimator_context

    cfg = yaml.safe_load((CONF_DIR / "estimator" / "ml.yaml").read_text())
    assert cfg["max_samples"] is None
    P, M, n = 1200, 3, iiwa.n_joints
    rng = np.random.default_rng(0)
    rec = SimpleNamespace(period_samples=P, n_periods=M, sample_rate_hz=100.0,
                          q_rad=rng.normal(size=(P * M, n)), torque=lambda _m: rng.normal(size=(P * M, n)))
    model = SimpleNamespace(spec=iiwa, regressor=None, base=None)
    data = SimpleNamespace(measurement="joint_torque")
    traj = SimpleNamespace(base_freq_hz=0.1, n_harmonics=5)
    assert estimator_context(cfg, model, data, rec, traj)["t_s"].size == P
    assert estimator_context(dict(cfg, max_samples=100), model, data, rec, traj)["t_s"].size == 100
    with pytest.raises(ConfigError, match="estimator.max_samples"):
        estimator_context(dict(cfg, max_samples=0), model, data, rec, traj)
