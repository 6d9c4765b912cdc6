"""Where the project's data folders are (the design card fixes them at the repository root)."""
from __future__ import annotations

import os
from pathlib import Path

#: Repository root: the folder holding ``robident_twin/``, ``conf/`` and ``sim_assets/``.
ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = ROOT / "conf"
SIM_ASSETS_DIR = ROOT / "sim_assets"


def shared_dir() -> Path:
    """The ``shared/`` folder beside the project (override with ``ROBIDENT_SHARED``)."""
    return Path(os.environ.get("ROBIDENT_SHARED", ROOT.parent / "shared"))
