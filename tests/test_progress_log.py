"""Live progress and the run's log (issue 18, Build 1): a progress bar on the terminal only, and
the console output (the parameter table included) kept in the run directory's ``cli.log``."""
from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from robident_twin import progress


def test_cli_log_holds_the_console_output(identify_run):
    """The shared small default run (stdout and stderr captured, so no terminal): cli.log holds
    what the console showed, the parameter table included, and no progress bar was drawn."""
    proc, out, summary = identify_run
    log = (out / "cli.log").read_text()
    assert re.search(r"^parameter\s+estimate\s+std\s+RSD %", log, re.M)
    for p in summary["parameters"]:
        assert re.search(rf"^{re.escape(p['name'])}\s", log, re.M), p["name"]
    assert proc.stdout.strip() and proc.stdout.strip() in log  # everything printed, in order
    assert "identify iiwa14" not in proc.stderr and "stage/s" not in proc.stderr


def _pty(cols: int = 120):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
    return master, slave


def test_progress_is_drawn_only_on_a_terminal_and_only_when_asked(tmp_path):
    master, slave = _pty()
    try:
        with os.fdopen(os.dup(slave), "w") as tty, open(tmp_path / "f", "w") as plain:
            assert progress.enabled(True, tty) and not progress.enabled(False, tty)
            assert not progress.enabled(True, plain)
    finally:
        os.close(master)
        os.close(slave)


def _read_all(master: int, proc: subprocess.Popen) -> tuple[bytes, float | None]:
    import select

    buf, first, t0 = b"", None, time.perf_counter()
    while True:
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            if first is None and b"identify" in chunk:
                first = time.perf_counter() - t0
            buf += chunk
        elif proc.poll() is not None:
            break
    return buf, first


def test_identify_draws_its_stage_bar_on_a_terminal(tmp_path):
    """A run whose stderr is a terminal (a pty, as under `script`) shows the identify bar with
    its stages; stdout (a pipe here) still gets the table and cli.log keeps it."""
    exe = Path(sys.executable).parent / "robident-twin"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]
    out = tmp_path / "run"
    master, slave = _pty()
    # the ideal twin: the same fast twin loop and progress ticker as the default realistic one, at a
    # fraction of its cost (no friction callback per physics step)
    proc = subprocess.Popen(cmd + ["estimator=ols", "twin=ideal", "acquisition.periods=1", "output.plots=false",
                                   "output.report=false", f"hydra.run.dir={out}"],
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, cwd=tmp_path,
                            env=dict(os.environ, ROBIDENT_FORK="1"))  # the idle machine's route: both runs at once
    os.close(slave)
    try:
        tty, first = _read_all(master, proc)
        stdout = proc.stdout.read().decode()
        assert proc.wait(timeout=600) == 0, tty.decode(errors="replace")[-3000:]
    finally:
        os.close(master)
    text = tty.decode(errors="replace")
    print(f"first progress line {first:.2f} s after the start")  # the figure of issue 18 (not asserted)
    assert "identify iiwa14" in text and "7/7" in text, text[-2000:]
    for stage in ("acquisition", "estimation", "validation"):
        assert stage in text
    # both twin runs, live: the validation child's progress beside the excitation run's
    assert re.search(r"acquisition: excitation \d+%, validation \d+%", text), text[-2000:]
    assert "parameter" in stdout and "stage/s" not in stdout  # the bar never lands in stdout or the log
    log = (out / "cli.log").read_text()
    assert re.search(r"^parameter\s+estimate", log, re.M) and "stage/s" not in log
