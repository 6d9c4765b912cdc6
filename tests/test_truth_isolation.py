"""The estimators never see the truth: once the twin is built, the robot file's link inertials
(the twin's ground truth) are swapped for other ones (twice the masses and inertias, COMs moved
by 5 cm); the estimate, the SDP with the nominal prior and the Xu retrieval (bounds around the
nominal) come out identical, and only the ground-truth comparison reads the swapped truth."""
import inspect

import numpy as np
import pytest

OVERRIDES = ["robot=iiwa14", "processing.decimate=4", "twin=ideal", "acquisition.periods=2", "acquisition.transient_periods=0",
             "acquisition.save_recordings=false", "output.plots=false", "output.report=false",
             "physical.method=sdp", "physical.prior=nominal"]


def _config(*overrides):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from robident_twin.paths import CONF_DIR

    with initialize_config_dir(version_base=None, config_dir=str(CONF_DIR)):
        cfg = compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)


def _poison(spec):
    """Swap the truth in place (the spec objects are frozen): whoever reads it now gets another robot."""
    from robident_twin.model.robot import LinkInertial

    for j in spec.joints:
        lk = j.link
        object.__setattr__(j, "link", LinkInertial(2 * lk.mass_kg, lk.com_m + 0.05, 2 * lk.inertia_com_kgm2))
    spec._cache.clear()


@pytest.fixture(scope="module")
def runs():
    import hal.factory
    from robident_twin import pipeline
    from robident_twin import forked
    from robident_twin.model.regressor import Regressor

    cfg = _config(*OVERRIDES)
    clean = pipeline.identify(cfg, progress=False)
    readers = []
    original_make, original_true = hal.factory.make_robot, Regressor.true_parameters
    poisoned = {"on": False}

    built = []

    def make_then_poison(spec, *a, **k):
        robot = original_make(spec, *a, **k)
        built.append(robot)
        # a simulator gets a second, fresh twin for the validation run (pipeline.validation_seed)
        if len(built) == (2 if robot.info.replicable else 1):
            _poison(spec)  # the twins exist; from here on the truth is swapped
            poisoned["on"] = True
        return robot

    def spy(self):
        if poisoned["on"] and not self.spec.name.endswith("_cad"):  # the truth, not the CAD-like nominal
            readers.append([f.function for f in inspect.stack()[1:3]])
        return original_true(self)

    mp = pytest.MonkeyPatch()
    mp.setattr(hal.factory, "make_robot", make_then_poison)
    mp.setattr(Regressor, "true_parameters", spy)
    mp.setattr(forked, "ENABLED", False)  # every stage in this process, where the spy sees its reads
    try:
        blind = pipeline.identify(_config(*OVERRIDES), progress=False)
    finally:
        mp.undo()
    return clean, blind, readers


def test_estimators_run_without_the_truth(runs):
    clean, blind, readers = runs
    np.testing.assert_array_equal(blind.estimate.beta, clean.estimate.beta)
    phys_c, phys_b = clean.summary["physical"], blind.summary["physical"]
    for lc, lb in zip(phys_c["links"], phys_b["links"]):
        np.testing.assert_allclose(lb["mass_kg"], lc["mass_kg"], rtol=1e-6)
        # the comparison read the truth, and found the swapped one
        np.testing.assert_allclose(lb["true"]["mass_kg"], 2 * lc["true"]["mass_kg"], rtol=1e-9)
    assert blind.summary["ground_truth"]["max_abs_z"] > 100 * clean.summary["ground_truth"]["max_abs_z"]
    # the only readers of the truth after the twin was built: the ground-truth comparisons
    assert readers and all(r[0] in ("true_base", "_true_links") for r in readers), readers


def test_xu_bounds_come_from_the_nominal(runs):
    """The Xu retrieval's bounds: around the CAD-like nominal (built before the twin) by default,
    not around the (swapped) robot file."""
    from robident_twin.estimation.postprocess import run_physical

    clean, blind, _ = runs
    m, est, data, val = blind.model, blind.estimate, blind.data, blind.validation_data
    W, W_val = m.base_regressor(data), m.base_regressor(val)
    from robident_twin.estimation.postprocess import nominal_model
    from robident_twin.model.robot import load_robot

    nominal = nominal_model(load_robot("iiwa14"))  # a fresh robot file: the CAD-like nominal
    xu = {"method": "xu", "xu": {"n_starts": 2, "maxiter": 30, "seed": 0, "time_limit_s": 20}}
    q_all = np.vstack([data.q_rad, val.q_rad])
    out = run_physical(xu, m, est, W, data.tau_Nm, W_val, val.tau_Nm, q_all, False, nominal=nominal)
    masses = np.array([lk["mass_kg"] for lk in out["links"]])
    nom = np.array([j.link.mass_kg for j in nominal.joints])
    assert np.all(np.isfinite(masses)) and np.all(masses >= 0.5 * nom - 1e-9) and np.all(masses <= 1.5 * nom + 1e-9)
    swapped = np.array([j.link.mass_kg for j in m.spec.joints])  # 2 x the truth: bounds would exclude it
    assert np.any(masses < 0.5 * swapped)
