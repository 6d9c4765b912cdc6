"""Maximum likelihood (Swevers 1997, errors in variables) on the robots it used to refuse: the
IR 361 (gravity-compensation spring on axis 2, motor offsets) and the CLOOS QRC 350 (coupled wrist
drives, 10.6 kg payload). A small twin Monte-Carlo per robot must pass the zero-bias test.

Test sizes (kept small for CI): 8 runs of 2 periods on the ideal MuJoCo twin, ML on at most 400
period-averaged samples per run (``estimator.max_samples``; the default keeps every sample). The
bias test is Bonferroni over the base parameters at a false-alarm rate of 1 %: an unbiased
estimator fails it with probability <= 0.01 (Student t with 7 degrees of freedom per parameter)."""
import numpy as np
import pytest
import yaml

from robident_twin.paths import CONF_DIR

BACKEND = {"name": "mujoco", "control_rate_hz": 250.0, "controller": {}}


def _ml_montecarlo(robot: str, runs: int = 8, seed: int = 3):
    from tqdm import tqdm

    from robident_twin.design.auto import robot_designs
    from robident_twin.design.stored import reference
    from robident_twin.estimation.estimators import estimate, estimator_context
    from robident_twin.model.build import build_model, model_options, resolve_robot
    from robident_twin.processing.signal import process_periodic
    from robident_twin.validation.montecarlo import _twin_recordings, run_seeds
    from robident_twin.validation.statistics import MonteCarloResult, bias_test

    rcfg = yaml.safe_load((CONF_DIR / "robot" / f"{robot}.yaml").read_text())
    spec = resolve_robot(rcfg)
    model = build_model(spec, model_options({"measurement": None}, rcfg))
    traj, _ = robot_designs(spec, rcfg)
    seeds = run_seeds(seed, runs)
    p = model.base.n_base
    est, std = np.empty((runs, p)), np.empty((runs, p))
    cfg = {"name": "ml", "max_samples": 400}
    with tqdm(total=None, disable=True) as bar:
        for r, rec in _twin_recordings("batch", spec, BACKEND, {"enabled": True}, reference(traj, 250.0), seeds, 2,
                                       1, None, runs, bar, 1, None):
            data = process_periodic(rec, model.regressor.options.measurement, traj.n_harmonics)
            W = model.base_regressor(data)
            e = estimate("ml", W, data.tau_Nm, model.base.names, data.tau_var_Nm2,
                         context=estimator_context(cfg, model, data, rec, traj), options={"max_nfev": 30})
            est[r], std[r] = e.beta, e.std
    truth = model.true_base()
    res = MonteCarloResult("twin", "ml", tuple(model.base.names), tuple(model.base.units), truth,
                           np.diag(np.mean(std, axis=0) ** 2), est, std, np.zeros(runs), seeds, {})
    return model, res, bias_test(res, alpha=0.01)


@pytest.mark.parametrize("robot", ["kuka_ir361", "cloos_qrc350"])
def test_ml_passes_the_bias_test(robot):
    model, res, bt = _ml_montecarlo(robot)
    spec = model.spec
    z = np.abs(res.estimates.mean(axis=0) - res.truth) / (res.estimates.std(axis=0, ddof=1) / np.sqrt(res.n_runs))
    print(f"\n{robot}: ML, {res.n_runs} runs, {model.base.n_base} base parameters; bias test "
          f"{'pass' if bt.passed else 'FAIL'}, max |t| {bt.max_abs_t:.2f} (threshold {bt.threshold:.2f}); "
          f"coupled {spec.is_coupled}, springs {list(spec.spring_joints)}, payload {spec.payload_attached}")
    if robot == "kuka_ir361":
        assert spec.spring_joints and any(n.startswith("OFF") for n in model.base.names)
    else:
        assert spec.is_coupled and spec.payload_attached
    assert bt.passed, (bt.failing, bt.max_abs_t)
    assert np.max(z) == pytest.approx(bt.max_abs_t)
    # the reported (Cramer-Rao) std describes the spread between runs (within a factor of 2)
    ratio = np.median(res.estimates.std(axis=0, ddof=1) / np.mean(res.reported_std, axis=0))
    assert 0.5 < ratio < 2.0, ratio
