"""docs/tutorial.md works as written: every ```bash block is run, in order, and checked.

Each bash block is followed by an ``<!-- expect: path ... -->`` comment naming the files its
commands must produce. The test runs every command (``robident-twin`` rewritten to this
environment's entry point) in a scratch directory with a timeout, and checks the exit code
and the expected files. The install block (```sh) is the README's install command, which CI
runs itself before the tests (``.ci/run``); the test checks that it is that command.
"""
from __future__ import annotations

import json
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial.md"
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```\n(?:<!-- expect: (.*?) -->)?", re.S | re.M)


@dataclass
class Step:
    line: int  # line of the opening fence in the tutorial
    commands: list[str]
    expect: list[str]


def parse(text: str) -> tuple[list[Step], list[str]]:
    """The bash steps and the sh (install) commands of the tutorial."""
    steps, install = [], []
    for m in _BLOCK.finditer(text):
        lang, body, expect = m.group(1), m.group(2), m.group(3)
        cmds, cur = [], ""
        for raw in body.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.endswith("\\"):
                cur += line[:-1] + " "
                continue
            cmds.append(cur + line)
            cur = ""
        if lang == "bash":
            steps.append(Step(text[:m.start()].count("\n") + 1, cmds, expect.split() if expect else []))
        elif lang == "sh":
            install += cmds
    return steps, install


def entry_point() -> list[str]:
    exe = Path(sys.executable).parent / "robident-twin"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]


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


@pytest.mark.slow
def test_every_tutorial_command_runs(tmp_path):
    steps, _ = parse(TUTORIAL.read_text())
    env = dict(os.environ, MPLBACKEND="Agg", ROBIDENT_DRYRUN_DIR=str(tmp_path / "dryrun_records"))
    timings = []
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    for s in steps:
        for c in s.commands:
            argv = shlex.split(c)
            t0 = time.perf_counter()
            proc = subprocess.run(entry_point() + argv[1:], cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=600)
            timings.append((time.perf_counter() - t0, c))
            assert proc.returncode == 0, (f"docs/tutorial.md line {s.line}: `{c}` exited with {proc.returncode}\n"
                                          f"{proc.stderr[-3000:]}")
        for f in s.expect:
            p = tmp_path / f
            assert p.is_file() and p.stat().st_size > 0, f"docs/tutorial.md line {s.line}: {f} not written"
    for dt, c in timings:
        print(f"{dt:6.1f} s  {c}")
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = cpu.ru_utime + cpu.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    print(f"tutorial total {sum(t for t, _ in timings):.1f} s wall, {cpu_s:.1f} s CPU")

    out = tmp_path / "outputs" / "tutorial"
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
    # step 4: the LWR4+ and the iiwa print the same number of base parameters, as the text says
    lwr = load("lwr4p")
    n = int(re.search(r"Both runs print `(\d+) base parameters`", text).group(1))
    assert base["n_base_parameters"] == lwr["n_base_parameters"] == n == len(lwr["parameters"])
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
