"""The package works when installed as a wheel (issue 16): `pip wheel .` (not editable), installed
with --no-deps into a fresh virtual environment whose dependencies come from the test
interpreter's site-packages (a .pth file; no download), runs the default job from its own copy of
conf/ and sim_assets/ (robident_twin/_data, shipped by setup.py)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_install_runs_the_default_job(tmp_path):
    # build from a clean copy of the sources: no stale build/ folder, nothing written into the checkout
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "outputs", "multirun",
                                                             "__pycache__", ".pytest_cache", ".benchmarks", ".venv"))
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(wheels)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("robident_twin-*.whl")

    # no PYTHONPATH: a checkout on it (with the build's egg-info) would make pip skip the wheel
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    venv = tmp_path / "venv"
    # without its own pip (ensurepip cost 4.7 s CPU): the test interpreter's pip installs into it (--python)
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)],
                   check=True, timeout=300)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, env=env, cwd=tmp_path).stdout.strip()
    inst = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert inst.returncode == 0, inst.stderr[-3000:]
    # installed first (else pip sees the test interpreter's robident-twin and skips it); then the
    # dependencies (numpy, pinocchio, mujoco, ...) from the test interpreter, processed as a site dir
    # (their own .pth files, e.g. cmeel's, run); the wheel's package comes first on sys.path
    deps = sysconfig.get_paths()["purelib"]
    (Path(site) / "zz_robident_test_deps.pth").write_text(f"import site; site.addsitedir({deps!r})\n")

    where = subprocess.run([str(py), "-c", "import robident_twin.paths as p; print(p.__file__); print(p.CONF_DIR); "
                            "print(p.SIM_ASSETS_DIR)"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    module, conf, assets = where.stdout.split()
    assert module.startswith(site) and conf.startswith(site) and assets.startswith(site), where.stdout
    assert not conf.startswith(str(ROOT))
    # the compiled passive forces' and control loop's C sources are package data (hal/sim/native.py
    # compiles them on first use)
    for source in ("passive.c", "loop.c"):
        assert (Path(site) / "hal" / "sim" / "native" / source).is_file(), source

    out = tmp_path / "run"
    run = subprocess.run([str(venv / "bin" / "robident-twin"), f"hydra.run.dir={out}", "acquisition.periods=2", "twin=ideal",
                          "output.plots=false"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["robot"] == "iiwa14"
    assert summary["ground_truth"]["fraction_within_3std"] >= 0.95
    # the report's Jinja2 templates are package data of the wheel (pyproject [tool.setuptools.package-data])
    assert '<section id="overview"><h2>Run overview</h2>' in (out / "report.html").read_text()
