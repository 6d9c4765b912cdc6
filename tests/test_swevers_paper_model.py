"""Swevers 1997 Section IV-B on the paper's 21-parameter model of the IR 361 axes 1-3: the stored
c1 design reaches the paper's condition number (4.15) within 25 %; the c2 design has the smaller
covariance determinant (the paper's ordering); what c2's cond misses is stated in
experiments/swevers1997_design/README.md."""
import importlib.util

import numpy as np
import pytest

from robident_twin.paths import ROOT

spec_ = importlib.util.spec_from_file_location("paper_model", ROOT / "experiments/swevers1997_design/paper_model.py")
pm = importlib.util.module_from_spec(spec_)
spec_.loader.exec_module(pm)

PAPER_NAMES = ("ZZ1R", "XX2R", "XY2", "XZ2R", "YZ2", "ZZ2R", "MX2R", "MY2", "XX3R", "XY3", "XZ3", "YZ3", "ZZ3",
               "MX3", "MY3", "Fvm1", "Fvm2", "Fvm3", "Fcm1", "Fcm2", "Fcm3")


def test_paper_model_designs_reach_the_papers_condition_number():
    from robident_twin.design.constraints import check_design
    from robident_twin.design.criteria import covariance_log10_det, design_criterion
    from robident_twin.design.fourier import load_design

    spec, model = pm.paper_model()
    assert model.base.names == PAPER_NAMES  # 15 rigid-body + 6 friction, as the paper's Table I
    tr = {k: load_design(pm.HERE / "designs" / f"kuka_ir361_paper21_{k}.yaml") for k in ("c1", "c2")}
    cond = {k: design_criterion(t, model.regressor, model.base, "cond", pm.NOISE_STD_Nm, 1500) for k, t in tr.items()}
    det = {k: covariance_log10_det(t, model.regressor, model.base, pm.NOISE_STD_Nm, 1500) for k, t in tr.items()}
    print(f"\nSwevers paper model: cond c1 {cond['c1']:.2f} (paper 4.15), c2 {cond['c2']:.2f} (paper 5.94); "
          f"log10 det cov c1 {det['c1']:.2f}, c2 {det['c2']:.2f}")
    assert cond["c1"] == pytest.approx(4.15, rel=0.25)
    assert cond["c1"] < cond["c2"] and det["c2"] < det["c1"]
    for t in tr.values():
        assert not check_design(t, spec, pm.constraints())
    # with the spring, Ia3 and the offsets (our twin's 26 parameters) the same c1 design is far worse
    from robident_twin.model.build import build_model
    from robident_twin.model.regressor import ModelOptions
    from robident_twin.model.robot import load_robot

    full = build_model(load_robot("kuka_ir361"), ModelOptions(measurement="motor_torque"))
    assert full.base.n_base == 26
    assert design_criterion(tr["c1"], full.regressor, full.base, "cond", pm.NOISE_STD_Nm, 1500) > 3 * cond["c1"]
    assert np.isfinite(det["c1"])
