"""docs/tutorial.md as runnable steps, shared by tests/test_tutorial*.py.

Each ```bash block is a :class:`Step` (its commands, the files it promises in the
``<!-- expect: ... -->`` comment after it, the tutorial section it belongs to). The sections
form independent groups (:data:`GROUPS`) so that the slow end-to-end runs are spread over three
test files, which pytest-xdist (``--dist loadfile``) can give to different workers; each group's
commands run in the tutorial's order, in one scratch directory per group.
"""
from __future__ import annotations

import os
import re
import resource
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial.md"
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```\n(?:<!-- expect: (.*?) -->)?", re.S | re.M)
_SECTION = re.compile(r"^## (\d+)\. ", re.M)

# tutorial section -> group; a group is one test file's work (test_tutorial.py, *_robots.py, *_montecarlo.py)
GROUPS = {"identify": (2, 3, 6, 8, 9), "robots": (4, 5), "montecarlo": (7,)}


@dataclass
class Step:
    line: int  # line of the opening fence in the tutorial
    commands: list[str]
    expect: list[str]
    section: int = 0  # the number of the "## N." heading above the block


def parse(text: str) -> tuple[list[Step], list[str]]:
    """The bash steps and the sh (install) commands of the tutorial."""
    steps, install = [], []
    heads = [(m.start(), int(m.group(1))) for m in _SECTION.finditer(text)]
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
            section = max((n for pos, n in heads if pos < m.start()), default=0)
            steps.append(Step(text[:m.start()].count("\n") + 1, cmds, expect.split() if expect else [], section))
        elif lang == "sh":
            install += cmds
    return steps, install


def outputs_of(command: str) -> list[str]:
    """The run folders a command writes (hydra.run.dir / hydra.sweep.dir)."""
    return [w.split("=", 1)[1] for w in shlex.split(command) if w.startswith(("hydra.run.dir=", "hydra.sweep.dir="))]


def inputs_of(command: str) -> list[str]:
    """The paths under outputs/ a command reads (every other key=value naming one)."""
    return [v for k, _, v in (w.partition("=") for w in shlex.split(command))
            if v.startswith("outputs/") and k not in ("hydra.run.dir", "hydra.sweep.dir")]


def entry_point() -> list[str]:
    exe = Path(sys.executable).parent / "robident-twin"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_group(group: str, tmp_path: Path) -> Path:
    """Run every command of the group's sections in order in ``tmp_path``, checking the exit code
    and each step's promised files; prints the time per command. Returns outputs/tutorial."""
    steps = [s for s in parse(TUTORIAL.read_text())[0] if s.section in GROUPS[group]]
    assert steps, f"no tutorial step in sections {GROUPS[group]}"
    env = dict(os.environ, MPLBACKEND="Agg", ROBIDENT_DRYRUN_DIR=str(tmp_path / "dryrun_records"))
    timings = []
    cpu0 = _children_cpu_s()
    for s in steps:
        for c in s.commands:
            argv = shlex.split(c)
            t0, c0 = time.perf_counter(), _children_cpu_s()
            proc = subprocess.run(entry_point() + argv[1:], cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=600)
            timings.append((time.perf_counter() - t0, _children_cpu_s() - c0, c))
            assert proc.returncode == 0, (f"docs/tutorial.md line {s.line}: `{c}` exited with {proc.returncode}\n"
                                          f"{proc.stderr[-3000:]}")
        for f in s.expect:
            p = tmp_path / f
            assert p.is_file() and p.stat().st_size > 0, f"docs/tutorial.md line {s.line}: {f} not written"
    for dt, cpu, c in timings:
        print(f"{dt:6.1f} s wall {cpu:6.1f} s CPU  {c}")
    print(f"tutorial ({group}) {sum(t[0] for t in timings):.1f} s wall, {_children_cpu_s() - cpu0:.1f} s CPU")
    return tmp_path / "outputs" / "tutorial"
