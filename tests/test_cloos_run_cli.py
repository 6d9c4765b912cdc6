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
