"""Build step for wheels: ship the repository-root folders conf/ and sim_assets/ (their place is
fixed at the root) inside the package as robident_twin/_data/, where robident_twin.paths finds
them when the package is installed without the repository (``pip install .``, not editable).
Everything else is in pyproject.toml."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_DIRS = ("conf", "sim_assets")


class BuildPyWithData(build_py):
    def run(self):
        super().run()
        root = Path(__file__).resolve().parent
        for name in DATA_DIRS:
            dst = Path(self.build_lib) / "robident_twin" / "_data" / name
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(root / name, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithData})
