"""Command-line runs shared by several test files and by the xdist workers of one session.

A named run is made once per pytest session: the first worker that asks for it runs the
installed entry point under a file lock in the session's common temporary folder; every
other test, in this worker or another, reads the same run directory and the same captured
process. Tests only read a shared run directory (those that change files copy them first).
"""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

# The noise-free run on the ideal twin: OLS, one recorded period after the transient (the
# twin is exactly periodic and noise free, so the period average of one period equals that of
# five: the estimates are bit-identical), no plots, report or recordings (nobody looks at them).
NOISE_FREE = ("twin=ideal", "noise=none", "estimator=ols", "acquisition.periods=1", "output.plots=false",
              "output.report=false", "acquisition.save_recordings=false")


def session_dir(tmp_path_factory) -> Path:
    """The temporary folder of this pytest session, common to its xdist workers (each
    worker's base folder is ``<session>/popen-gwN``)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if base.name.startswith("popen-gw") else base


def entry_point() -> list[str]:
    exe = Path(sys.executable).parent / "robident-twin"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]


def shared_cli_run(tmp_path_factory, name: str, *overrides: str, timeout_s: float = 900,
                   env: dict | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    """``robident-twin hydra.run.dir=<dir> *overrides`` run once per session under ``name``
    (its own working folder ``<session>/shared_runs/<name>``, run directory ``.../run``):
    (completed process, run directory). One name stands for one list of overrides; ``env``:
    variables set for the run on top of the test's environment."""
    root = session_dir(tmp_path_factory) / "shared_runs"
    root.mkdir(exist_ok=True)
    cwd, record = root / name, root / f"{name}.json"
    out = cwd / "run"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not record.exists():
            cwd.mkdir(exist_ok=True)
            proc = subprocess.run(entry_point() + [f"hydra.run.dir={out}", *overrides], capture_output=True,
                                  text=True, cwd=cwd, timeout=timeout_s, check=False,
                                  env=dict(os.environ, **(env or {})))
            record.write_text(json.dumps({"overrides": list(overrides), "args": proc.args,
                                          "returncode": proc.returncode, "stdout": proc.stdout,
                                          "stderr": proc.stderr}))
        r = json.loads(record.read_text())
    assert r["overrides"] == list(overrides), f"shared run {name!r} was made with other overrides: {r['overrides']}"
    return subprocess.CompletedProcess(r["args"], r["returncode"], r["stdout"], r["stderr"]), out


def noise_free_summary(tmp_path_factory, robot: str, backend: str, *extra: str) -> dict:
    """summary.json of the shared noise-free run of ``robot`` on ``backend`` (plus ``extra``
    overrides), asserting that the run succeeded."""
    name = "_".join(["noise_free", robot, backend, *(e.replace("=", "-").replace(".", "-") for e in extra)])
    proc, out = shared_cli_run(tmp_path_factory, name, f"robot={robot}", f"backend={backend}", *NOISE_FREE, *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())
