"""docs/tutorial.md works as written: every ```bash block is run, in order, and checked.

Each bash block is followed by an ``<!-- expect: path ... -->`` comment naming the files its
commands must produce. The tests run every command (``robident-twin`` rewritten to this
environment's entry point) in a scratch directory with a timeout, and check the exit code
and the expected files. The install block (```sh) is the README's install command, which CI
runs itself before the tests (``.ci/run``); the test checks that it is that command.

The sections form three independent groups (tests/tutorial_commands.py ``GROUPS``), one per test
file so that pytest-xdist can run them on different workers: this file runs sections 2, 3, 6, 8
and 9 (the default robot's run and what is built on it), test_tutorial_robots.py sections 4 and 5,
test_tutorial_montecarlo.py section 7. The structure test checks that the groups cover every
section and that no group reads a folder another group writes.
"""
from __future__ import annotations

import json
import re
import shlex

import numpy as np
import pytest

from tutorial_commands import GROUPS, ROOT, TUTORIAL, inputs_of, outputs_of, parse, run_group


def test_tutorial_structure():
    steps, install = parse(TUTORIAL.read_text())
    assert len(steps) >= 10
    for s in steps:
        assert s.commands, f"docs/tutorial.md line {s.line}: empty bash block"
        assert s.expect, f"docs/tutorial.md line {s.line}: bash block without <!-- expect: ... -->"
        for c in s.commands:
            assert shlex.split(c)[0] == "robident-twin", f"line {s.line}: not a robident-twin command: {c}"
    readme = (ROOT / "README.md").read_text()
    assert install and install[0] in readme, "the tutorial's install line must be the README's"
    used = {w.split("=", 1)[1] for s in steps for c in s.commands for w in shlex.split(c) if w.startswith("task=")}
    assert {"report", "dryrun", "montecarlo", "aggregate", "import", "export"} <= used
    # every command is run by exactly one group, and a group reads only what it wrote itself (earlier)
    grouped = [n for g in GROUPS.values() for n in g]
    assert len(grouped) == len(set(grouped)), GROUPS
    for s in steps:
        assert s.section in grouped, f"docs/tutorial.md line {s.line}: section {s.section} is in no test group"
    for group, sections in GROUPS.items():
        written: list[str] = []
        for s in (s for s in steps if s.section in sections):
            for c in s.commands:
                for path in inputs_of(c):
                    assert any(path == w or path.startswith(w + "/") for w in written), \
                        f"docs/tutorial.md line {s.line}: `{c}` reads {path}, not written before in group {group}"
                written += outputs_of(c)


@pytest.mark.slow
def test_every_tutorial_command_runs(tmp_path):
    """Sections 2, 3, 6, 8 and 9 and the figures the text gives for them."""
    out = run_group("identify", tmp_path)
    load = lambda d: json.loads((out / d / "summary.json").read_text())  # noqa: E731
    base, noisy, files = load("iiwa14"), load("iiwa14_noisy"), load("from_files")
    # step 8: identification from the recorded files gives the estimate of step 2 (same data)
    np.testing.assert_allclose([p["estimate"] for p in files["parameters"]],
                               [p["estimate"] for p in base["parameters"]], rtol=1e-8, atol=1e-12)
    assert files["backend"] == "file" and "ground_truth" not in files
    # step 6: 0.6 N m on every joint (>= 2x the file's std) makes every standard deviation larger
    assert noisy["validation"]["simulated_noise_std_Nm"] == pytest.approx([0.6] * 7)
    assert all(n["std"] > b["std"] for n, b in zip(noisy["parameters"], base["parameters"]))
    # the realistic twin's model mismatch: the fractions within 3 std the text quotes, larger when noisier
    text = TUTORIAL.read_text()
    fb, fn = base["ground_truth"]["fraction_within_3std"], noisy["ground_truth"]["fraction_within_3std"]
    assert f"{100 * fb:.0f} % of the base parameters lie within 3 std" in text and f"{100 * fn:.0f} % here" in text
    assert fn > fb
    # step 4 (the LWR4+ half in test_tutorial_robots.py): the iiwa prints the number the text gives
    n = int(re.search(r"Both runs print `(\d+) base parameters`", text).group(1))
    assert base["n_base_parameters"] == n == len(base["parameters"])
