"""Sections of ``twin.yaml`` whose every figure carries its source: ``key: {value: ..., source: ...}``
(every section: the effects' magnitudes, transmission_error, drive_loop; hal/sim/effects.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from robident_twin.errors import ConfigError


def sourced_values(path: Path, body: Any, section: str, keys: tuple[str, ...], sources: dict) -> dict[str, Any]:
    """The raw ``value`` of each key of ``section`` (exactly ``keys``, each ``{value, source}`` with a
    non-empty source), in the order of ``keys``; the sources go to ``sources['<section>.<key>']``.
    The values' own checks are the caller's."""
    if not isinstance(body, dict) or set(body) != set(keys):
        got = sorted(body) if isinstance(body, dict) else body
        raise ConfigError(f"{path}: field '{section}': expected exactly the keys {sorted(keys)}, got {got}")
    raw = {}
    for key in keys:
        entry, where = body[key], f"{section}.{key}"
        if not isinstance(entry, dict) or set(entry) != {"value", "source"}:
            raise ConfigError(f"{path}: field '{where}': expected {{value: ..., source: ...}}, got {entry!r}")
        src = entry["source"]
        if not isinstance(src, str) or not src.strip():
            raise ConfigError(f"{path}: field '{where}.source': expected a reference or 'plausible estimate', "
                              f"got {src!r}")
        sources[where] = src.strip()
        raw[key] = entry["value"]
    return raw
