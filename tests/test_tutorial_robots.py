"""docs/tutorial.md sections 4 and 5 (another robot, the dry run), run as written; the rest of
the tutorial is in tests/test_tutorial.py (which also checks that the groups cover it all)."""
from __future__ import annotations

import json
import re

import pytest

from tutorial_commands import TUTORIAL, run_group


@pytest.mark.slow
def test_tutorial_robot_and_dryrun_commands_run(tmp_path):
    out = run_group("robots", tmp_path)
    lwr = json.loads((out / "lwr4p" / "summary.json").read_text())
    # step 4: the LWR4+ prints the number of base parameters the text gives for both robots (the
    # iiwa's half is in test_tutorial.py)
    n = int(re.search(r"Both runs print `(\d+) base parameters`", TUTORIAL.read_text()).group(1))
    assert lwr["robot"] == "lwr4p" and lwr["n_base_parameters"] == n == len(lwr["parameters"])
    # the ideal twin, as the text says: every base parameter within 3 std of the truth
    assert lwr["twin"]["name"] == "ideal" and lwr["ground_truth"]["fraction_within_3std"] == 1.0
