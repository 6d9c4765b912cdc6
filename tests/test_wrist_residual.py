"""The real CLOOS wrist residual is not a torque of the wrist pose (issue 15, the twin's missed wrist
bands): the test of robident_twin.validation.residual_candidates finds a synthetic hose-package
torque of the size that would close the twin's J5/J6 residual gap, and finds none in the real files."""
from __future__ import annotations

import numpy as np
import pytest

from robident_twin.datasets.cloos_model import build_model
from robident_twin.validation import residual_candidates as rc
from robident_twin.validation import twin_vs_real as tv

WRIST = [1, 2, 3]  # J4, J5, J6 within rc.JOINTS (J3..J6)


@pytest.fixture(scope="module")
def data(cloos_data_root):
    model = build_model(symmetric=True)
    real, recs = tv.real_statistics(cloos_data_root, model)
    return rc.residual_data(real, recs, model)


def _excess(e):
    """Share of A's residual the basis explains beyond the better of its two same-size controls."""
    return np.asarray(e["share"]) - np.maximum(e["shifted"], e["random"])


def test_a_pose_torque_that_would_close_the_gap_is_found(data):
    """Power: a smooth torque of q4-q6 with an RMS of 0.4 x the real residual's (the twin's J5/J6
    residual ratio 0.63/0.67 needs 0.41/0.34 more to reach 0.75), added to every file's residual, is
    fitted well above both controls on A (excess 0.10-0.15) and lowers the C prediction error on
    J4-J6 (0.95, 0.73, 0.95)."""
    e = rc.evaluate(rc.with_pose_torque(data, 0.4), rc.candidates()["pose q4-q6, order 1"])
    print("share", np.round(e["share"], 3), "excess", np.round(_excess(e), 3), "C", np.round(e["transfer"]["C"], 3))
    assert np.all(_excess(e)[WRIST] > 0.08), _excess(e)
    assert np.all(np.asarray(e["transfer"]["C"])[WRIST] < 0.97), e["transfer"]["C"]


def test_the_real_wrist_residual_has_no_pose_torque(data):
    """The real residual: the pose basis explains no more of A than its controls (excess below 0.04 on
    J4-J6; measured 0.012 / 0.028 / -0.028) and its A fit does not transfer to C (RMS ratio 1.04 / 0.97
    / 1.02, above 0.95), nor does it carry the 100 ms autocorrelation (J4 0.21 -> 0.19, J6 0.32 -> 0.30
    on A)."""
    e = rc.evaluate(data, rc.candidates()["pose q4-q6, order 1"])
    print("share", np.round(e["share"], 3), "excess", np.round(_excess(e), 3), "C", np.round(e["transfer"]["C"], 3),
          "ACF A", np.round(e["acf_A"], 2), "->", np.round(e["acf_A_after"], 2))
    assert np.all(_excess(e)[WRIST] < 0.04), _excess(e)
    assert np.all(np.asarray(e["transfer"]["C"])[WRIST] > 0.95), e["transfer"]["C"]
    assert np.all(np.asarray(e["acf_A_after"])[[1, 3]] > 0.15), e["acf_A_after"]
