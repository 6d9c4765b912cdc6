"""Hydra on the command line (issue 18, Build 6): tab completion of task= lists every task, the
removed Ray launcher is refused with a message naming the install extra."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from robident_twin.cli import REMOVED_LAUNCHERS, TASKS

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robident_twin.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=300)


def test_tab_completion_of_task_lists_every_task():
    """What bash completion gets from Hydra (``robident-twin -sc query=bash``, the query the
    installed completion script sends for ``robident-twin task=<TAB>``)."""
    proc = _cli("-sc", "query=bash", env={"COMP_LINE": "robident-twin task="})
    assert proc.returncode == 0, proc.stderr[-2000:]
    offered = {w.split("=", 1)[1] for w in proc.stdout.split() if w.startswith("task=")}
    assert offered == set(TASKS), (sorted(offered), sorted(TASKS))
    assert {p.stem for p in (ROOT / "conf" / "task").glob("*.yaml")} == set(TASKS)


def test_a_task_chosen_by_the_group_sets_the_task_key():
    proc = _cli("task=export_trajectory", "--cfg", "job")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "\ntask: export_trajectory\n" in "\n" + proc.stdout


def test_an_unknown_task_is_refused_with_exit_2():
    proc = _cli("task=identfy")
    assert proc.returncode == 2 and "task" in proc.stderr and "identfy" in proc.stderr


def test_ray_launcher_is_refused_naming_the_extra():
    assert "mc_ray" not in {p.stem for p in (ROOT / "conf" / "hydra" / "launcher").glob("*.yaml")}
    proc = _cli("-m", "hydra/launcher=mc_ray", "task=montecarlo")
    assert proc.returncode == 2
    assert "pip install robident-twin[ray]" in proc.stderr and "validation.sweeps ray" in proc.stderr
    assert "Traceback" not in proc.stderr and "mc_ray" in REMOVED_LAUNCHERS
    extras = (ROOT / "pyproject.toml").read_text()
    assert 'ray = ["ray>=' in extras  # the extra the message names exists


def test_one_key_for_the_torque_channel():
    """model.measurement is the key; robot.measurement on the command line is refused naming it."""
    proc = _cli("robot.measurement=motor_torque")
    assert proc.returncode == 2
    assert "model.measurement" in proc.stderr and "Use model.measurement=" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = _cli("model.measurement=motor_torque", "--cfg", "job")  # the key to use still works
    assert proc.returncode == 0 and "measurement: motor_torque" in proc.stdout
