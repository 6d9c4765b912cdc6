"""The validation run as its own experiment on a simulator (issue 18): a fresh twin with the
seed ``pipeline.validation_seed(seed)``, run in a forked child beside the excitation run when a
core is free. The recordings do not depend on the route; an error in the child surfaces with its
message after the excitation recording is saved; a real backend (here the RSI emulator: one arm
behind one UDP port) keeps one robot and runs the two experiments in sequence."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robident_twin import forked, pipeline

SHORT_DESIGN = Path(__file__).parent / "data" / "kuka_ir361_4s.yaml"
#: the IR 361's realistic twin at 250 Hz on the 4 s design, two recorded periods (WLS): every noise
#: stream, the loop and the drift clock run, in about a second per experiment
SMALL = ["robot=kuka_ir361", "twin=realistic", f"robot.excitation={SHORT_DESIGN}", f"robot.validation={SHORT_DESIGN}",
         "acquisition.periods=2", "acquisition.transient_periods=0", "backend.control_rate_hz=250",
         "output.plots=false", "output.report=false"]


def _config(*overrides):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from robident_twin.paths import CONF_DIR

    with initialize_config_dir(version_base=None, config_dir=str(CONF_DIR)):
        return OmegaConf.to_container(compose(config_name="config", overrides=list(overrides)), resolve=True)


def _arrays(path: Path) -> dict[str, str]:
    """Every array of a recording file, as the SHA-256 of its bytes (equal = bit for bit)."""
    import hashlib

    with np.load(path, allow_pickle=True) as z:
        return {k: hashlib.sha256(z[k].tobytes()).hexdigest() for k in z.files}


def _count_children(monkeypatch) -> list[str]:
    whats = []
    real = forked._Child
    monkeypatch.setattr(forked, "_Child", lambda fn, what: whats.append(what) or real(fn, what))
    return whats


@pytest.fixture(scope="module")
def both_routes(tmp_path_factory):
    """The small run with ROBIDENT_FORK=1 (the validation in a child) and =0 (all here)."""
    mp = pytest.MonkeyPatch()
    runs, children, hooks = {}, {}, {}
    try:
        for mode in ("1", "0"):
            mp.setenv("ROBIDENT_FORK", mode)
            out = tmp_path_factory.mktemp(f"fork{mode}")
            whats = []
            real = forked._Child
            mp.setattr(forked, "_Child", lambda fn, what, w=whats, r=real: w.append(what) or r(fn, what))
            calls = hooks[mode] = []  # after_excitation: once the excitation is recorded, before the validation ends
            hook = lambda c=calls, w=whats: c.append(list(w))  # noqa: E731
            runs[mode] = (pipeline.identify(_config(*SMALL), out, progress=False, after_excitation=hook), out)
            children[mode] = whats
            mp.setattr(forked, "_Child", real)
    finally:
        mp.undo()
    return runs, children, hooks


def test_the_validation_recording_does_not_depend_on_the_route(both_routes):
    runs, children, hooks = both_routes
    assert children == {"1": ["validation acquisition"], "0": []}  # forked once, then not at all
    assert hooks == {"1": [["validation acquisition"]], "0": [[]]}  # called once, the validation child under way
    (r1, out1), (r0, out0) = runs["1"], runs["0"]
    for name in ("recording_excitation.npz", "recording_validation.npz"):
        assert _arrays(out1 / name) == _arrays(out0 / name), name  # bit for bit, every array
    assert np.array_equal(r1.validation_data.tau_Nm, r0.validation_data.tau_Nm)
    assert np.array_equal(r1.tau_val_pred_Nm, r0.tau_val_pred_Nm)
    strip = lambda s: {k: v for k, v in s.items() if k != "timings_s"}  # noqa: E731
    assert strip(r1.summary) == strip(r0.summary)
    assert set(r1.summary["timings_s"]) == set(r0.summary["timings_s"])


def test_each_recording_is_a_fresh_twin_of_its_own_seed(both_routes):
    """The excitation recording is what a fresh twin with ``seed`` records (as before the change);
    the validation recording what a fresh twin with ``validation_seed(seed)`` records: it no longer
    starts from the excitation run's end state, and its noise is another stream."""
    from hal.factory import make_robot
    from robident_twin.config import validate
    from robident_twin.design.auto import robot_designs
    from robident_twin.design.stored import reference
    from robident_twin.model.build import resolve_robot, twin_spec

    runs, _, _ = both_routes
    result, out = runs["1"]
    run = validate(_config(*SMALL))
    spec = resolve_robot(run.robot)
    traj, val_traj = robot_designs(spec, run.robot)
    vs = pipeline.validation_seed(run.seed)
    assert vs != run.seed and vs == pipeline.validation_seed(run.seed)
    recs = {}
    for seed, design, name in ((run.seed, traj, "recording_excitation.npz"), (vs, val_traj, "recording_validation.npz")):
        robot = make_robot(twin_spec(spec, run.friction), run.backend, run.noise, seed=seed, twin_cfg=run.twin)
        assert robot.info.replicable
        recs[name] = rec = robot.run(reference(design, robot.info.control_rate_hz), periods=2, transient_periods=0)
        with np.load(out / name, allow_pickle=True) as z:
            assert np.array_equal(z["tau_motor_Nm"], rec.tau_motor_Nm), name
            assert np.array_equal(z["q_rad"], rec.q_rad), name
    # the estimate reads the excitation only: that fresh twin's recording, processed, is its data
    from robident_twin.processing.signal import process_periodic

    data = process_periodic(recs["recording_excitation.npz"], result.summary["measurement"], int(traj.n_harmonics),
                            decimate=run.processing.decimate)
    assert np.array_equal(data.tau_Nm, result.data.tau_Nm)


def test_an_error_in_the_validation_child_surfaces_after_the_excitation_is_saved(tmp_path, monkeypatch):
    from robident_twin.errors import RecordingError

    real_check = pipeline.check_recording

    def failing(rec, spec, what):
        if what == "validation recording":
            raise RecordingError("validation recording: joint 3 position out of range (injected)")
        return real_check(rec, spec, what)

    monkeypatch.setattr(pipeline, "check_recording", failing)  # the child inherits it through fork
    monkeypatch.setenv("ROBIDENT_FORK", "1")
    whats = _count_children(monkeypatch)
    with pytest.raises(RecordingError, match=r"joint 3 position out of range \(injected\)"):
        pipeline.identify(_config(*SMALL), tmp_path, progress=False)
    assert whats == ["validation acquisition"]  # it was the child's error
    assert (tmp_path / "recording_excitation.npz").is_file()
    assert not (tmp_path / "recording_validation.npz").exists()


def test_a_real_backend_runs_both_experiments_on_one_robot_in_sequence(tmp_path, monkeypatch):
    """The RSI emulator says ``is_simulation`` (it serves a twin) but not ``replicable``: one robot
    is made, the validation run starts where the excitation run ended, and only the excitation's
    fit may go to a child (as before)."""
    import hal.factory

    monkeypatch.setenv("ROBIDENT_DRYRUN_DIR", str(tmp_path / "records"))
    monkeypatch.setenv("ROBIDENT_FORK", "1")
    made, runs = [], []
    real_make = hal.factory.make_robot

    def spy_make(*a, **k):
        robot = real_make(*a, **k)
        made.append(robot.info)
        if robot.info.backend != "rsi":  # the twin the emulator serves, made inside the RSI backend
            return robot
        real_run = robot.run

        def run(traj, **kw):
            runs.append("start")
            rec = real_run(traj, **kw)
            runs.append("end")
            return rec

        robot.run = run
        return robot

    monkeypatch.setattr(hal.factory, "make_robot", spy_make)
    whats = _count_children(monkeypatch)
    cfg = _config("backend=rsi", "robot=kuka_ir361", f"robot.excitation={SHORT_DESIGN}", f"robot.validation={SHORT_DESIGN}",
                  "acquisition.periods=1", "acquisition.transient_periods=0", "noise=none", "estimator=ols",
                  "output.plots=false", "output.report=false", "acquisition.save_recordings=false")
    result = pipeline.identify(cfg, tmp_path, progress=False)
    assert result.summary["backend"] == "rsi"
    (rsi,) = [info for info in made if info.backend == "rsi"]  # one robot
    assert rsi.is_simulation and not rsi.replicable
    assert runs == ["start", "end", "start", "end"]  # one after the other, on the one robot
    assert whats == ["estimation"]  # no validation child


def test_a_failed_excitation_stops_the_validation_child(tmp_path, monkeypatch):
    """The excitation run fails while the validation child runs: the child is stopped (not left
    simulating, or blocked on its pipe, in a long-lived Python session), the error is the parent's."""
    import hal.factory
    from robident_twin.errors import RecordingError

    made = []
    real_make = hal.factory.make_robot

    def make(*a, **k):  # the first robot (the excitation's) fails at once; the validation twin runs
        robot = real_make(*a, **k)
        made.append(robot)
        if len(made) == 1:
            def run(*_, **__):
                raise RecordingError("excitation recording: torque channel 2 saturated (injected)")

            robot.run = run
        return robot

    monkeypatch.setattr(hal.factory, "make_robot", make)
    monkeypatch.setenv("ROBIDENT_FORK", "1")
    handles = []
    real = forked._Child
    monkeypatch.setattr(forked, "_Child", lambda fn, what: handles.append(real(fn, what)) or handles[-1])
    with pytest.raises(RecordingError, match="excitation recording: torque channel 2 saturated"):
        pipeline.identify(_config(*SMALL), tmp_path, progress=False)
    (child,) = handles
    assert child.what == "validation acquisition" and not child._proc.is_alive()
    assert child._proc.exitcode is not None and child._proc.exitcode != 0  # terminated, not finished
    assert not (tmp_path / "recording_validation.npz").exists()
