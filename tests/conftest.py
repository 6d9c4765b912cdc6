import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("MPLBACKEND", "Agg")
# One BLAS thread per test process (and per CLI subprocess, which inherits the environment): the
# suite runs as `-n 2` on two cores, and OpenBLAS's spinning worker threads then oversubscribe them;
# a 1400 x 57 QR took 0.3 s CPU with two threads against 0.004 s with one.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
from threadpoolctl import threadpool_limits  # noqa: E402  (numpy may already be loaded by a plugin)

threadpool_limits(limits=int(os.environ["OPENBLAS_NUM_THREADS"]), user_api="blas")


@pytest.fixture(scope="session")
def iiwa():
    from robident_twin.model.robot import load_robot

    return load_robot("iiwa14")


@pytest.fixture
def robot_yaml(tmp_path):
    """Write a modified copy of the iiwa 14 robot file; returns a function(mutator) -> path."""
    raw = yaml.safe_load((ROOT / "sim_assets" / "iiwa14" / "robot.yaml").read_text())

    def make(mutate):
        import copy

        d = copy.deepcopy(raw)
        mutate(d)
        p = tmp_path / "robot.yaml"
        p.write_text(yaml.safe_dump(d))
        return p

    return make


@pytest.fixture(scope="session")
def identify_run(tmp_path_factory):
    """One small default identification run through the installed entry point
    (``acquisition.periods=2 output.plots=false``), shared by tests/test_html_report.py and
    tests/test_report_browser.py: (completed process, run directory, summary.json as dict).
    Made once per session, whichever xdist worker asks first (tests/shared_runs.py)."""
    import json

    from shared_runs import shared_cli_run

    proc, out = shared_cli_run(tmp_path_factory, "identify_run", "acquisition.periods=2", "output.plots=false",
                               timeout_s=600, env={"ROBIDENT_FORK": "1"})  # the forked route, as on an idle machine
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, out, json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="session")
def cloos_data_root():
    """The shared CLOOS ICMA 2020 dataset folder. In CI (CI=true) a missing dataset is a failure;
    elsewhere the tests that need it skip, naming where it was looked for."""
    from robident_twin.datasets import cloos_icma2020 as ds

    if not ds.dataset_available():
        msg = f"CLOOS ICMA 2020 dataset not found at {ds.default_root()} (set {ds.ENV_VAR})"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(msg + " - required in CI")
        pytest.skip(msg)
    return ds.default_root()


@pytest.fixture(scope="session")
def cloos_committed(cloos_data_root):
    """(model, real statistics, real records, committed calibration) of the CLOOS twin: the symmetric
    identification model, the real ICMA 2020 files' statistics and sim_assets/cloos_qrc350/twin_calibrated.yaml
    (read-only: tests derive variants with dataclasses.replace)."""
    from pathlib import Path

    from robident_twin.datasets.cloos_model import build_model
    from robident_twin.validation import cloos_calibration as cc
    from robident_twin.validation import twin_vs_real as tv

    model = build_model(symmetric=True)
    real, recs = tv.real_statistics(cloos_data_root, model)
    path = Path(__file__).resolve().parents[1] / "sim_assets" / "cloos_qrc350" / "twin_calibrated.yaml"
    return model, real, recs, cc.load_calibration(path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``: the test files longest first (tests/xdist_order.py), not in xdist's
    default order of decreasing number of tests, which left the one-test end-to-end files last."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist_order import make_scheduler

    return make_scheduler(config, log)
