"""The project's one atomic file write: a temporary file in the target's folder, given the mode
the umask gives a new file (``0o666 & ~umask``, not the 0600 of ``tempfile.mkstemp``), then
``os.replace`` onto the target. A killed writer leaves either the old file or the new one, never
half a file; on an error the temporary file is removed.

Everyone may import this module (it sits with ``errors`` and ``paths`` at the bottom of the
import graph, below the HAL and every stage).
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["atomic_path", "write_text_atomic", "write_bytes_atomic", "file_mode"]


def _umask() -> int:
    """The process umask, read without changing it where Linux allows (/proc), else by set-and-restore."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file under the current umask."""
    return 0o666 & ~_umask()


@contextmanager
def atomic_path(path: Path | str, suffix: str | None = None, fsync: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path`` for the caller to write; on success it gets the
    umask's mode and replaces ``path`` atomically, on error it is removed. ``suffix`` is the
    temporary file's ending (libraries such as ``np.savez`` and matplotlib choose the format
    from it); ``fsync`` flushes the data to disk before the rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix or ".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if fsync:
            with open(tmp_path, "rb+") as fh:
                os.fsync(fh.fileno())
        os.chmod(tmp_path, file_mode())
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path | str, text: str, fsync: bool = False, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see the module docstring)."""
    with atomic_path(path, fsync=fsync) as tmp:
        tmp.write_text(text, encoding=encoding)
    return Path(path)


def write_bytes_atomic(path: Path | str, data: bytes, fsync: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (see the module docstring)."""
    with atomic_path(path, fsync=fsync) as tmp:
        tmp.write_bytes(data)
    return Path(path)
