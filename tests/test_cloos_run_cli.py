"""experiments/twin_vs_real_cloos/run.py's command line: what it does before minutes of calibration."""
from __future__ import annotations

import pytest

import cloos_run


class _Reached(Exception):
    pass


def test_write_yaml_folder_is_made_before_the_calibration(tmp_path, monkeypatch):
    """--write-yaml into a folder that does not exist yet: the folder is made at the start, so the YAML
    written after the calibration cannot fail on it (it did, after five minutes of calibration)."""
    run = cloos_run.load("twin_vs_real_run_cli")
    target = tmp_path / "new" / "sub" / "twin.yaml"
    seen = {}

    def build_model(symmetric):
        seen["folder"] = target.parent.is_dir()
        raise _Reached

    monkeypatch.setattr(run, "build_model", build_model)
    with pytest.raises(_Reached):
        run.main(["--write-yaml", str(target), "--out", str(tmp_path / "out")])
    assert seen == {"folder": True}


@pytest.mark.parametrize("value", ["1", "0", "x"])
def test_repetitions_below_two_is_refused_before_the_calibration(value, tmp_path, monkeypatch, capsys):
    """--repetitions 1 used to calibrate for minutes and then fail in the twin's per-sample WLS (no variance
    over one repetition); it is refused at the command line, naming the option and what is expected."""
    run = cloos_run.load("twin_vs_real_run_cli_rep")
    monkeypatch.setattr(run, "build_model", lambda symmetric: (_ for _ in ()).throw(AssertionError("calibrated")))
    with pytest.raises(SystemExit) as e:
        run.main(["--repetitions", value, "--out", str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--repetitions" in err and "expected an integer >= 2" in err, err
