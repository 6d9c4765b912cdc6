import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def iiwa():
    from robident_twin.robot import load_robot

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
