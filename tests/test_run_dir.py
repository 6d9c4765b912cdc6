"""Run directories are unique even for runs started in the same second (issue 13): two runs
started at once each keep their own results."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from hal.files import save_recording
from hal.protocol import Recording


def test_two_runs_started_at_once_keep_their_own_run_directories(tmp_path):
    inputs = []
    for k in range(2):
        n = 20 + k  # different inputs: each run's summary shows which run wrote it
        rec = Recording(t_s=np.arange(n) / 100.0, q_rad=np.zeros((n, 2)), tau_motor_Nm=np.ones((n, 2)),
                        tau_joint_Nm=None, q_cmd_rad=np.zeros((n, 2)), sample_rate_hz=100.0)
        inputs.append(save_recording(rec, tmp_path / f"in{k}.csv"))
    exe = Path(sys.executable).parent / "robident-twin"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]
    procs = [subprocess.Popen(cmd + ["task=import", f"files.input={p}"], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for p in inputs]  # no hydra.run.dir: the default
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    dirs = sorted(p.parent for p in (tmp_path / "outputs").rglob("import_summary.json"))
    assert len(dirs) == 2, dirs
    for d in dirs:  # outputs/<date>/<H-M-S-microseconds>_<run id>
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", d.parent.name) and d.parent.parent == tmp_path / "outputs"
        assert re.fullmatch(r"\d{2}-\d{2}-\d{2}-\d{6}_[0-9a-f]{6}", d.name), d.name
    summaries = [json.loads((d / "import_summary.json").read_text()) for d in dirs]
    assert sorted((s["source"], s["n_samples"]) for s in summaries) == [(str(inputs[0]), 20), (str(inputs[1]), 21)]
    for d, s in zip(dirs, summaries):  # each directory holds its own run's converted file, untouched by the other
        assert (d / Path(s["source"]).name).is_file() and not (d / f"in{1 - int(Path(s['source']).stem[-1])}.csv").exists()


def test_run_id_is_drawn_once_per_process():
    from robident_twin import rundir

    code = "from robident_twin import rundir; print(rundir.run_id(), rundir.run_id())"
    ids = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
           for _ in range(2)]
    assert ids[0][0] == ids[0][1] and ids[1][0] == ids[1][1]  # one run, one directory
    assert ids[0][0] != ids[1][0] and re.fullmatch(r"[0-9a-f]{6}", ids[0][0])
    assert rundir.run_id() == rundir.run_id()
