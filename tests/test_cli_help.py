"""`robident-twin --help` explains every task (conf/hydra/help/robident.yaml, Hydra's app help).

The help is the installed entry point's real output; each key of ``cli.TASKS`` must appear as
``  <task>  <description>`` followed by an example command that selects that task, and every
example must compose with the project's configuration (so a renamed key breaks this test).
"""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from robident_twin import cli
from robident_twin.paths import CONF_DIR

_TASKS_HEAD = "== Tasks (task=<task>; default identify) =="


def entry_point() -> list[str]:
    exe = Path(sys.executable).parent / "robident-twin"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]


@pytest.fixture(scope="module")
def help_text(tmp_path_factory) -> str:
    proc = subprocess.run(entry_point() + ["--help"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path_factory.mktemp("help"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def task_entries(text: str) -> dict[str, tuple[str, str]]:
    """task -> (description, example command) from the "Tasks" block of the help."""
    assert _TASKS_HEAD in text, f"--help has no '{_TASKS_HEAD}' block:\n{text[:2000]}"
    block = text.split(_TASKS_HEAD, 1)[1].split("\n== ", 1)[0]
    lines = [ln for ln in block.splitlines() if ln.strip()]
    out: dict[str, tuple[str, str]] = {}
    for i, ln in enumerate(lines):
        m = re.match(r"^ {2}(\w+) {2,}(\S.*)$", ln)
        if m:
            example = lines[i + 1].strip() if i + 1 < len(lines) else ""
            assert m.group(1) not in out, f"task {m.group(1)} listed twice in --help"
            out[m.group(1)] = (m.group(2).strip(), example)
    return out


def test_help_lists_every_task_with_description_and_example(help_text):
    entries = task_entries(help_text)
    missing = [t for t in cli.TASKS if t not in entries]
    assert not missing, (f"task(s) {missing} of robident_twin.cli.TASKS are not documented in --help: add a line "
                         f"'  <task>  <description>' and an example to conf/hydra/help/robident.yaml")
    stale = [t for t in entries if t not in cli.TASKS]
    assert not stale, f"--help documents task(s) {stale} that robident_twin.cli.TASKS does not have"
    for task, (desc, example) in entries.items():
        assert len(desc.split()) >= 5, f"--help: task {task}: description too short: '{desc}'"
        argv = shlex.split(example)
        assert argv[:1] == ["robident-twin"] and f"task={task}" in argv, \
            f"--help: task {task}: the line after its description must be an example 'robident-twin task={task} ...'," \
            f" got '{example}'"
    # Hydra's own parts are still there: the groups and the full config of this run
    assert "== Configuration groups ==" in help_text and "estimator: " in help_text
    assert "acquisition:\n  periods: 5" in help_text


def test_help_examples_compose(help_text):
    """Every example of the help is a valid command line for the project's config."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        for task, (_, example) in task_entries(help_text).items():
            overrides = [a for a in shlex.split(example)[1:] if not a.startswith("-")]
            cfg = compose(config_name="config", overrides=overrides)
            assert cfg.task == task, example
            cli.task_function(cfg.task)  # the task's module and function import


def test_help_is_selected_through_hydra_defaults():
    """The help is Hydra's convention (a hydra/help option chosen in config.yaml), not a patched argv."""
    text = (CONF_DIR / "config.yaml").read_text()
    assert re.search(r"^\s*- override hydra/help: robident\b", text, re.M)
    assert (CONF_DIR / "hydra" / "help" / "robident.yaml").is_file()
