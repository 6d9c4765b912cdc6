"""Where the project's data folders are (the design card fixes them at the repository root)."""
from __future__ import annotations

import os
from pathlib import Path

#: Repository root: the folder holding ``robident_twin/``, ``conf/`` and ``sim_assets/``.
ROOT = Path(__file__).resolve().parent.parent
#: An installed wheel has no repository: its build step (setup.py) ships conf/ and sim_assets/ here.
PACKAGE_DATA_DIR = Path(__file__).resolve().parent / "_data"
_IN_REPO = (ROOT / "conf" / "config.yaml").is_file()
CONF_DIR = (ROOT if _IN_REPO else PACKAGE_DATA_DIR) / "conf"
SIM_ASSETS_DIR = (ROOT if _IN_REPO else PACKAGE_DATA_DIR) / "sim_assets"


def shared_dir() -> Path:
    """The ``shared/`` folder beside the project (override with ``ROBIDENT_SHARED``)."""
    return Path(os.environ.get("ROBIDENT_SHARED", ROOT.parent / "shared"))



def cache_dir() -> Path:
    """The user cache (designs of a new robot, base parameters): ``ROBIDENT_CACHE`` when set, else
    ``$XDG_CACHE_HOME/robident_twin``, else ``~/.cache/robident_twin``."""
    own = os.environ.get("ROBIDENT_CACHE")
    if own:
        return Path(own)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "robident_twin"
