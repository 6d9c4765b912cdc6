"""Live progress on the terminal, quiet elsewhere, and the console kept in the run directory.

``bar(...)`` is a tqdm bar on stderr that is shown only when the caller asks for progress AND
stderr is a terminal (a log file, a pipe or CI sees nothing). ``tee_stdout(path)`` copies
everything printed on stdout (the parameter table, the result lines) into ``path`` as well
(the run directory's ``cli.log``).
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, TextIO

__all__ = ["enabled", "bar", "tee_stdout", "ticking", "ticker"]


def enabled(flag: bool | None = True, stream: TextIO | None = None) -> bool:
    """Progress is drawn when asked for and the stream (stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(flag) and stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def bar(total: int | None, desc: str, flag: bool | None = True, unit: str = "it", **kw):
    """A tqdm bar on stderr (drawn at once, with rate and ETA) or a silent one off a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=not enabled(flag),
                smoothing=0.1, **kw)


_TICKER = None


@contextmanager
def ticking(fn) -> Iterator[None]:
    """Route the progress a long loop below the caller reports (``ticker()(done, total)``, e.g.
    the twin's engine loop every few thousand control periods) to ``fn`` for the block."""
    global _TICKER
    previous, _TICKER = _TICKER, fn
    try:
        yield
    finally:
        _TICKER = previous


def ticker():
    """The ``fn(done, total)`` a long loop reports its progress to, or None (nobody listens)."""
    return _TICKER


class _Tee:
    def __init__(self, *streams: TextIO):
        self._streams = streams

    def write(self, s: str) -> int:
        for st in self._streams:
            st.write(s)
            st.flush()
        return len(s)

    def flush(self) -> None:
        for st in self._streams:
            st.flush()

    def isatty(self) -> bool:
        return self._streams[0].isatty()

    def fileno(self) -> int:
        return self._streams[0].fileno()

    def __getattr__(self, name):
        return getattr(self._streams[0], name)


@contextmanager
def tee_stdout(path: Path) -> Iterator[None]:
    """Copy stdout into ``path`` (appended; the file is created) for the duration of the block."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = sys.stdout
    with open(path, "a", encoding="utf-8") as fh:
        sys.stdout = _Tee(old, fh)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stdout = old
