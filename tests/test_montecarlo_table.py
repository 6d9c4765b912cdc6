"""The Monte-Carlo text table never prints nan (issue 18, tutorial): with no more runs than
parameters the determinant figure is reported as not computed, with the reason."""
from __future__ import annotations

import numpy as np

from robident_twin.validation.montecarlo import MonteCarloResult, format_table
from robident_twin.validation.statistics import summarise


def _result(n_runs: int, p: int = 5) -> MonteCarloResult:
    rng = np.random.default_rng(0)
    crlb = np.eye(p) * 0.01**2
    truth = np.arange(1.0, p + 1)
    est = truth + 0.01 * rng.standard_normal((n_runs, p))
    return MonteCarloResult("exact", "wls", tuple(f"P{i}" for i in range(p)), ("u",) * p, truth, crlb, est,
                            np.full((n_runs, p), 0.01), np.full(n_runs, 1.0), np.arange(n_runs),
                            {"robot": "synthetic", "measurement": "joint_torque", "n_samples": 100, "wall_s": 1.0})


def test_too_few_runs_for_the_determinant_is_said_not_nan():
    text = format_table(summarise(_result(4)))
    assert "nan" not in text.lower()
    assert "not computed (4 runs for 5 parameters: needs more runs than parameters)" in text


def test_enough_runs_print_the_determinant_and_its_efficient_value():
    s = summarise(_result(40))
    text = format_table(s)
    o = s["overall"]
    assert f"log10 det(emp cov)/det(CRLB) {o['log10_det_ratio']:.3f} (efficient: {o['log10_det_ratio_expected']:.3f})" in text
    assert np.isfinite(o["log10_det_ratio"]) and "nan" not in text.lower()
