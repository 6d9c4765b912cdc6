"""The bad-input corpus (issue 13, tests/bad_inputs/corpus.py): every malformed robot file and
recording is refused with its named error - the file, the field and what was expected - never
a traceback and never silently accepted; a selection also through the CLI (exit code 2, a
FAILED.txt, no traceback)."""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from bad_inputs import corpus
from hal.files import load_recording, save_recording
from robident_twin import errors
from robident_twin.processing.plausibility import check_recording
from robident_twin.model.robot import load_robot

CASES = corpus.all_cases()
BACKSTOP = re.compile(r"not a readable \w+ recording \(")  # load_recording's catch-all: names no field


def _load(case, path, options):
    if case.category == "robot":
        return load_robot(path)
    rec = load_recording(path, **options)
    if case.category == "plausibility":
        check_recording(rec, load_robot(corpus.PLAUSIBILITY_ROBOT))
    return rec


def test_corpus_size_per_category():
    counts = Counter(c.category for c in CASES)
    print("\nbad-input corpus:", dict(counts), "total", len(CASES))
    assert len({c.category + c.id for c in CASES}) == len(CASES)  # ids unique
    assert len(CASES) >= 130 and counts["robot"] >= 40 and all(counts[k] >= 8 for k in
                                                                ("csv", "npz", "mat", "mcap", "krc4", "plausibility"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.category}-{c.id}" for c in CASES])
def test_bad_input_is_refused_with_a_named_error(case, tmp_path):
    path, options = case.make(tmp_path)
    if case.category == "plausibility":  # the importer accepts it: only the check against the robot can refuse
        load_recording(path, **options)
    with pytest.raises(errors.RobidentError) as info:
        _load(case, path, options)
    err, msg = info.value, str(info.value)
    assert isinstance(err, getattr(errors, case.error, None) or __import__("hal.files", fromlist=[case.error]).__dict__[
        case.error]), f"{type(err).__name__}: {msg}"
    assert path.stem in msg, f"the file is not named: {msg}"
    assert re.search(case.expect, msg), f"expected /{case.expect}/ in: {msg}"
    assert not BACKSTOP.search(msg), f"refused only by the catch-all, naming no field: {msg}"


def test_the_valid_bases_of_the_corpus_are_accepted(tmp_path):
    """Each case is one change to a valid input: the unchanged input loads (so the refusal is the change's)."""
    import scipy.io

    raw = corpus._iiwa()
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    assert load_robot(tmp_path / "r.yaml").n_joints == 7
    (tmp_path / "b.csv").write_text("\n".join([corpus.CSV_HEAD, *corpus.CSV_ROWS]) + "\n")
    assert load_recording(tmp_path / "b.csv").n_joints == 2
    with open(tmp_path / "b.npz", "wb") as f:
        np.savez(f, **corpus._npz_base())
    assert load_recording(tmp_path / "b.npz").sample_rate_hz == 100.0
    scipy.io.savemat(tmp_path / "b.mat", dict(corpus._mat_base(), sample_rate_hz=100.0, period_samples=3.0,
                                              n_periods=2.0))
    assert load_recording(tmp_path / "b.mat").n_periods == 2
    corpus._write_joint_states(tmp_path / "b.mcap", corpus._msgs(), corpus._meta())
    assert load_recording(tmp_path / "b.mcap").sample_rate_hz == 100.0
    save_recording(corpus._good_recording(N=40), tmp_path / "g.mcap")
    assert load_recording(tmp_path / "g.mcap").t_s.size == 40
    corpus._diadem(tmp_path / "b.dat", corpus._trace_channels(), 8, 0.004)
    assert load_recording(tmp_path / "b.dat").sample_rate_hz == pytest.approx(250.0)
    spec, t, q, tau = corpus._plausible()
    rec = load_recording(save_recording(
        corpus._good_recording().__class__(t_s=t, q_rad=q, tau_motor_Nm=tau, tau_joint_Nm=tau, q_cmd_rad=q,
                                           sample_rate_hz=20.0), tmp_path / "p.csv"))
    check_recording(rec, spec)


def test_plausibility_of_in_memory_recordings():
    """Backends other than files: a stated rate that disagrees with the time column, a NaN, time going back."""
    spec, t, q, tau = corpus._plausible()
    Rec = corpus._good_recording().__class__
    rec = Rec(t_s=t, q_rad=q, tau_motor_Nm=tau, tau_joint_Nm=None, q_cmd_rad=q, sample_rate_hz=250.0,
              metadata={"source": "rsi"})
    with pytest.raises(errors.RecordingError, match=r"rsi: sample_rate_hz is 250 Hz but the time column t_s is "
                                                    r"sampled at 20 Hz"):
        check_recording(rec, spec)
    rec.sample_rate_hz = 20.0
    check_recording(rec, spec)
    rec.tau_motor_Nm = tau.copy()
    rec.tau_motor_Nm[5, 1] = np.nan
    with pytest.raises(errors.RecordingError, match=r"channel tau_motor_Nm, joint A2, sample 5: value nan is not finite"):
        check_recording(rec, spec)
    rec.tau_motor_Nm = tau
    rec.t_s = t.copy()
    rec.t_s[9] = rec.t_s[8]
    with pytest.raises(errors.RecordingError, match=r"channel t_s, sample 9: .* expected strictly increasing"):
        check_recording(rec, spec)
    # within the tolerances: 0.01 rad beyond a limit, 1.9 x the torque limit
    rec.t_s = t
    rec.q_rad = q.copy()
    rec.q_rad[3, 0] = spec.q_max_rad[0] + 0.01
    rec.tau_motor_Nm = tau.copy()
    rec.tau_motor_Nm[4, 2] = 1.9 * spec.tau_max_Nm[2]
    check_recording(rec, spec)


# ------------------------------------------------------------------------------ through the CLI
def _cli(tmp_path, name, *args):
    exe = Path(sys.executable).parent / "robident-twin"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]
    out = tmp_path / f"run_{name}"
    p = subprocess.run(cmd + list(args) + [f"hydra.run.dir={out}"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=300)
    return p, out


BY_ID = {f"{c.category}-{c.id}": c for c in CASES}
CLI_IMPORT = ["csv-metadata_list", "csv-rate_header_disagrees", "npz-object_q", "mat-time_string", "mat-period_nan",
              "mcap-bit_flipped_chunk", "krc4-length_nan"]
CLI_ROBOT = ["robot-sensor_typo", "robot-friction_number", "robot-non_utf8", "robot-position_inf"]


def _file_backend_recording(tmp_path, change):
    """A recording of kuka_ir361 made with its stored excitation at 20 Hz (two periods), changed by ``change``;
    unchanged, it identifies to an ordinary summary (exit 0)."""
    from hal.protocol import Recording
    from robident_twin.design.stored import reference, resolve_design

    spec = load_robot("kuka_ir361")
    ref = reference(resolve_design("excitation/kuka_ir361_default.yaml", spec), 20.0)
    t = np.arange(2 * ref.n_samples) / 20.0  # two periods
    q = np.vstack([ref.q_rad, ref.q_rad])
    tau = 0.3 * spec.tau_max_Nm * np.cos(2 * np.pi * t / ref.period_s)[:, None]
    tau = tau + np.random.default_rng(0).normal(scale=0.01, size=tau.shape)
    ch = {"t_s": t, "q_rad": q, "tau_motor_Nm": tau, "tau_joint_Nm": None, "q_cmd_rad": q.copy(),
          "sample_rate_hz": 20.0, "period_samples": ref.n_samples, "n_periods": 2}
    change(ch)
    return save_recording(Recording(**ch), tmp_path / "recorded.csv")


@pytest.mark.parametrize("name", CLI_IMPORT + CLI_ROBOT + ["file-degrees", "file-torque_x1000"])
def test_bad_input_through_the_cli_exits_2_with_failed_txt(tmp_path, name):
    base = ["acquisition.periods=2", "acquisition.transient_periods=0", "output.plots=false", "output.report=false"]
    if name in CLI_IMPORT:
        case = BY_ID[name]
        path, options = case.make(tmp_path)
        p, out = _cli(tmp_path, name, "task=import", f"files.input={path}")
        expect = case.expect
    elif name in CLI_ROBOT:
        case = BY_ID[name]
        path, _ = case.make(tmp_path)
        p, out = _cli(tmp_path, name, "task=export_trajectory", "robot=kuka_ir361", f"robot.file={path}")
        expect = case.expect
    elif name == "file-degrees":
        path = _file_backend_recording(tmp_path, lambda ch: ch.update(  # no command recorded: files used in order
            q_rad=np.degrees(ch["q_rad"]), metadata={"q_cmd_recorded": False}))
        p, out = _cli(tmp_path, name, "robot=kuka_ir361", "backend=file", f"backend.path={path}",
                      "backend.check_command=false", *base)
        expect = r"excitation recording .*recorded\.csv: channel q_rad, joint A\d, sample \d+: .*looks like degrees"
    else:
        path = _file_backend_recording(tmp_path, lambda ch: ch.update(tau_motor_Nm=1000 * ch["tau_motor_Nm"]))
        p, out = _cli(tmp_path, name, "robot=kuka_ir361", "backend=file", f"backend.path={path}", *base)
        expect = r"excitation recording .*recorded\.csv: channel tau_motor_Nm, joint A\d, .*looks like mNm"
    assert p.returncode == 2, p.stdout[-1500:] + p.stderr[-3000:]
    assert "Traceback" not in p.stderr and "Traceback" not in (out / "FAILED.txt").read_text()
    assert re.search(expect, p.stderr), p.stderr
    assert re.search(expect, (out / "FAILED.txt").read_text())
    assert not (out / "summary.json").exists()


def test_a_plausible_recording_through_the_file_backend_identifies(tmp_path):
    """The control of the two file-backend cases above: the same recording unchanged passes the
    plausibility check and ends with an ordinary summary (exit 0)."""
    path = _file_backend_recording(tmp_path, lambda ch: None)
    p, out = _cli(tmp_path, "plausible", "robot=kuka_ir361", "backend=file", f"backend.path={path}",
                  "backend.check_command=false",  # one file for both trajectories
                  "acquisition.periods=2", "acquisition.transient_periods=0", "output.plots=false", "output.report=false")
    assert p.returncode == 0, p.stderr[-3000:]
    assert (out / "summary.json").is_file() and not (out / "FAILED.txt").exists()
