"""docs/tutorial.md section 7 (a Monte-Carlo study, a noise sweep and its aggregate), run as
written, and the figures its text gives; the rest of the tutorial is in tests/test_tutorial.py."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tutorial_commands import TUTORIAL, run_group


@pytest.mark.slow
def test_tutorial_montecarlo_commands_run(tmp_path):
    out = run_group("montecarlo", tmp_path)
    text = TUTORIAL.read_text()
    # step 7: enough runs for the determinant figure: finite, near the efficient value the text gives
    mc = json.loads((out / "mc" / "summary.json").read_text())["summary"]["overall"]
    assert np.isfinite(mc["log10_det_ratio"]) and np.isfinite(mc["log10_det_ratio_expected"])
    assert f"{mc['log10_det_ratio_expected']:.2f}" in text and mc["n_params"] < mc["n_runs"]
    # the noise sweep: the torque error grows with the noise (the figures the text quotes), the
    # normalised statistics of the linear estimator are the same in both rows
    import pandas as pd

    table = pd.read_csv(out / "aggregate" / "table.csv").sort_values("noise_scale")
    assert list(table["noise_scale"]) == [0.5, 2.0]
    nrms = table["torque_nrms_percent"].to_numpy()
    assert nrms[1] > 3 * nrms[0]
    for v in nrms:
        assert f"{v:.1f} %" in text, (v, "figure not in the tutorial text")
    for col in ("share_means_in_68", "mean_efficiency_ratio", "rms_bias_over_crlb_sem"):
        np.testing.assert_allclose(table[col].iloc[1], table[col].iloc[0], rtol=1e-9)
