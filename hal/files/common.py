"""Shared pieces of the file importers and exporters: the error type, unit conversion,
atomic writes and the construction of a checked :class:`hal.protocol.Recording`.

Every importer reports a bad file as a :class:`FileFormatError` whose message names the
file, the column or channel and the row (1-based line of a text file, 0-based sample
otherwise, said as such) and what was expected.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from robident_twin.errors import RecordingError

from ..protocol import Recording

#: Units accepted per quantity, with the factor to SI (rad, rad/s, rad/s^2, Nm, s, A).
UNITS: dict[str, dict[str, float]] = {
    "time": {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9},
    "angle": {"rad": 1.0, "deg": np.pi / 180.0},
    "velocity": {"rad_s": 1.0, "deg_s": np.pi / 180.0},
    "acceleration": {"rad_s2": 1.0, "deg_s2": np.pi / 180.0},
    "torque": {"Nm": 1.0, "mNm": 1e-3, "kNm": 1e3},
    "current": {"A": 1.0, "mA": 1e-3},
}


class FileFormatError(RecordingError):
    """A recorded file is missing, unreadable or malformed (the message names file, column, row)."""


def unit_factor(path: Path | str, column: str, quantity: str, unit: str) -> float:
    """The factor to SI of ``unit`` for ``quantity``; a FileFormatError naming the column otherwise."""
    table = UNITS[quantity]
    if unit not in table:
        raise FileFormatError(f"{path}: column {column}: unit '{unit}' is not a unit of {quantity}; "
                              f"expected one of {', '.join(table)}")
    return table[unit]


def first_bad(a: np.ndarray) -> tuple[int, int | None] | None:
    """(sample, joint or None) of the first non-finite value, or None."""
    bad = ~np.isfinite(a)
    if not bad.any():
        return None
    idx = np.argwhere(bad)[0]
    return int(idx[0]), (int(idx[1]) if a.ndim == 2 else None)


def check_time(path: Path | str, t_s: np.ndarray, column: str = "t_s", row=lambda k: f"sample {k}") -> None:
    """Refuse non-finite or non-increasing time, naming file, column and row (``row(k)``
    turns a 0-based sample index into the file's own row wording)."""
    bad = first_bad(t_s)
    if bad is not None:
        raise FileFormatError(f"{path}: column {column}, {row(bad[0])}: time is not finite ({t_s[bad[0]]})")
    d = np.diff(t_s)
    if np.any(d <= 0):
        k = int(np.argmax(d <= 0)) + 1
        raise FileFormatError(f"{path}: column {column}, {row(k)}: time is not strictly increasing "
                              f"({t_s[k - 1]!r} then {t_s[k]!r})")


def sample_rate(t_s: np.ndarray) -> float:
    """Sample rate (Hz) from the median step of a time vector."""
    return 1.0 / float(np.median(np.diff(t_s))) if t_s.size > 1 else float("nan")


def gaps(t_s: np.ndarray, rel_tol: float = 0.5) -> list[tuple[int, float]]:
    """Samples where the step exceeds the median step by more than ``rel_tol`` of it:
    (sample index after the gap, step in s)."""
    if t_s.size < 3:
        return []
    d = np.diff(t_s)
    h = float(np.median(d))
    idx = np.nonzero(d > (1.0 + rel_tol) * h)[0]
    return [(int(k) + 1, float(d[k])) for k in idx]


def supports_valid() -> bool:
    """True when this version of Recording has the optional per-sample ``valid`` mask."""
    return any(f.name == "valid" for f in dataclasses.fields(Recording))


def placeholder_supported() -> bool:
    """True when Recording refuses motor-torque models for ``metadata["motor_torque_available"]``
    False (joint-torque-only recordings carry the joint torque in tau_motor_Nm as a placeholder)."""
    z = np.zeros((2, 1))
    try:
        Recording(t_s=np.arange(2.0), q_rad=z, tau_motor_Nm=z, tau_joint_Nm=z, q_cmd_rad=z, sample_rate_hz=1.0,
                  metadata={"motor_torque_available": False}).torque("motor_torque")
    except RecordingError:
        return True
    return False


#: Largest relative difference between a sample rate a file states and the one of its time column.
RATE_RTOL = 1e-3


def numeric_array(path: Path | str, name: str, value: Any) -> np.ndarray:
    """``value`` as a float array; a FileFormatError naming the channel when it is not numeric
    (strings, objects, structs, complex numbers)."""
    a = np.asarray(value)
    if a.dtype.kind not in "biuf":
        raise FileFormatError(f"{path}: channel {name}: expected real numbers, got "
                              f"{'complex numbers' if a.dtype.kind == 'c' else f'values of type {a.dtype}'}")
    return a.astype(float)


def count_field(path: Path | str, field: str, value: Any) -> int | None:
    """A whole number >= 1 stated by a file (``period_samples``, ``n_periods``); None stays None."""
    if value is None:
        return None
    try:
        v = float(np.asarray(value, dtype=float).reshape(-1)[0]) if not isinstance(value, (int, float)) else value
    except (TypeError, ValueError, IndexError):
        raise FileFormatError(f"{path}: field {field}: expected a whole number >= 1, got {value!r}") from None
    if isinstance(v, bool) or not np.isfinite(v) or v != int(v) or v < 1:
        raise FileFormatError(f"{path}: field {field}: expected a whole number >= 1, got {value!r}")
    return int(v)


def check_rate(path: Path | str, t_s: np.ndarray, rate_hz: Any, field: str = "sample_rate_hz",
               time_column: str = "t_s") -> float:
    """The sample rate a file states, checked against its time column (median step): a file whose
    header says 1000 Hz over a 250 Hz time column is refused, naming both values."""
    try:
        rate = float(rate_hz)
    except (TypeError, ValueError):
        raise FileFormatError(f"{path}: field {field}: expected a sample rate in Hz, got {rate_hz!r}") from None
    if not np.isfinite(rate) or rate <= 0:
        raise FileFormatError(f"{path}: field {field}: expected a positive, finite sample rate in Hz, got {rate_hz!r}")
    from_time = sample_rate(t_s)
    if np.isfinite(from_time) and abs(rate - from_time) > RATE_RTOL * from_time:
        raise FileFormatError(f"{path}: field {field} says {rate:.9g} Hz but the time column {time_column} is sampled "
                              f"at {from_time:.9g} Hz (median step {1.0 / from_time:.6g} s); expected them to agree "
                              f"to {RATE_RTOL:g} (relative)")
    return rate


def make_recording(path: Path | str, *, t_s, q_rad, tau_motor_Nm, tau_joint_Nm=None, q_cmd_rad=None,
                   sample_rate_hz: float | None = None, period_samples: int | None = None,
                   n_periods: int | None = None, metadata: dict[str, Any] | None = None,
                   valid=None, row=lambda k: f"sample {k}", columns: dict[str, list[str]] | None = None,
                   rate_field: str = "sample_rate_hz") -> Recording:
    """A checked Recording from imported arrays (samples x joints, SI units).

    Every channel is checked for finite values with the file, the channel's column name
    (``columns[channel][joint]`` if given) and the row named. ``q_cmd_rad`` None: the measured
    position is used and ``metadata["q_cmd_recorded"]`` is False. ``valid`` (per-sample bool) is
    passed on when Recording supports it, else kept in the metadata.
    """
    t_s = numeric_array(path, (columns or {}).get("t_s", ["t_s"])[0], t_s).reshape(-1)
    N = t_s.shape[0]
    if N < 2:
        raise FileFormatError(f"{path}: channel t_s: {N} sample(s); expected at least 2")
    if metadata is not None and not isinstance(metadata, dict):
        raise FileFormatError(f"{path}: field metadata: expected a mapping (a JSON object), got "
                              f"{type(metadata).__name__}")
    arrays = {"q_rad": q_rad, "tau_motor_Nm": tau_motor_Nm, "tau_joint_Nm": tau_joint_Nm, "q_cmd_rad": q_cmd_rad}
    n_joints = None
    for name, a in list(arrays.items()):
        if a is None:
            continue
        a = numeric_array(path, name, a)
        if a.ndim == 1:
            a = a[:, None]
        if a.ndim != 2 or a.shape[0] != N:
            raise FileFormatError(f"{path}: channel {name}: expected {N} samples (the length of the time "
                                  f"channel), got shape {a.shape}")
        if n_joints is None:
            n_joints = a.shape[1]
        elif a.shape[1] != n_joints:
            raise FileFormatError(f"{path}: channel {name}: {a.shape[1]} joints, expected {n_joints}")
        arrays[name] = a
    md = dict(metadata or {})
    if arrays["tau_motor_Nm"] is None and arrays["tau_joint_Nm"] is not None and placeholder_supported():
        # joint-torque sensors only (e.g. an LWR4+ over FRI): the protocol's placeholder convention
        arrays["tau_motor_Nm"] = arrays["tau_joint_Nm"]
        md["motor_torque_available"] = False
        md["tau_motor_note"] = f"{path} has joint-torque channels only"
        if columns and "tau_joint_Nm" in columns:
            columns = dict(columns, tau_motor_Nm=columns["tau_joint_Nm"])
    if arrays["q_rad"] is None or arrays["tau_motor_Nm"] is None:
        missing = "q_rad" if arrays["q_rad"] is None else "tau_motor_Nm"
        raise FileFormatError(f"{path}: channel {missing} is missing")
    check_time(path, t_s, (columns or {}).get("t_s", ["t_s"])[0], row)
    for name, a in arrays.items():
        if a is None:
            continue
        bad = first_bad(a)
        if bad is not None:
            k, j = bad
            col = (columns or {}).get(name, [f"{name}[{i + 1}]" for i in range(a.shape[1])])[j]
            raise FileFormatError(f"{path}: column {col}, {row(k)}: value is not finite ({a[k, j]})")
    md.setdefault("source", str(path))
    md["q_cmd_recorded"] = arrays["q_cmd_rad"] is not None
    q_cmd = arrays["q_cmd_rad"] if arrays["q_cmd_rad"] is not None else arrays["q_rad"].copy()
    tcol = (columns or {}).get("t_s", ["t_s"])[0]
    rate = sample_rate(t_s) if sample_rate_hz is None else check_rate(path, t_s, sample_rate_hz, rate_field, tcol)
    period_samples = count_field(path, "period_samples", period_samples)
    n_periods = count_field(path, "n_periods", n_periods)
    kwargs = {}
    if valid is not None:
        valid = np.asarray(valid).reshape(-1)
        if valid.dtype.kind not in "biuf" or not np.all(np.isin(valid, (0, 1))):
            raise FileFormatError(f"{path}: channel valid: expected 0/1 (or true/false) per sample")
        valid = valid.astype(bool)
        if valid.shape[0] != N:
            raise FileFormatError(f"{path}: channel valid: expected {N} samples, got {valid.shape[0]}")
        if supports_valid():
            kwargs["valid"] = valid
        else:
            md["valid"] = valid
    if period_samples is not None and n_periods is not None and int(period_samples) * int(n_periods) != N:
        raise FileFormatError(f"{path}: {N} samples is not {n_periods} periods of {period_samples} samples "
                              "(metadata period_samples / n_periods)")
    try:
        return Recording(t_s=t_s, q_rad=arrays["q_rad"], tau_motor_Nm=arrays["tau_motor_Nm"],
                         tau_joint_Nm=arrays["tau_joint_Nm"], q_cmd_rad=q_cmd, sample_rate_hz=rate,
                         period_samples=None if period_samples is None else int(period_samples),
                         n_periods=None if n_periods is None else int(n_periods), metadata=md, **kwargs)
    except RecordingError as exc:
        raise FileFormatError(f"{path}: {exc}") from exc


def refuse_near_misses(path: Path | str, names, known, what: str, key=lambda n: n, cutoff: float = 0.8) -> None:
    """Refuse a name the importer would ignore that is a near miss of a known one (``qcmd1_rad``
    for ``q_cmd1_rad``, ``tau_joint_nm`` for ``tau_joint_Nm``): a misspelt optional channel would
    otherwise be dropped silently. ``key(name)`` is the part compared (e.g. without joint and unit)."""
    import difflib

    known = list(known)
    for name in names:
        k = key(name)
        if k in known:
            continue
        close = difflib.get_close_matches(k, known, n=1, cutoff=cutoff)
        if close:
            raise FileFormatError(f"{path}: {what} {name}: unknown name, did you mean '{close[0]}'? (expected one "
                                  f"of {', '.join(known)}; other names are ignored)")


def recording_valid(rec: Recording) -> np.ndarray | None:
    """The per-sample valid mask of a recording (the field, or the metadata copy), or None."""
    v = getattr(rec, "valid", None)
    if v is None:
        v = rec.metadata.get("valid")
    return None if v is None else np.asarray(v, dtype=bool)


def json_metadata(md: dict[str, Any]) -> dict[str, Any]:
    """The JSON-serialisable part of a metadata dict (arrays and odd objects dropped)."""
    out = {}
    for k, v in md.items():
        if isinstance(v, np.ndarray) or k == "valid":
            continue
        try:
            json.dumps(v)
        except (TypeError, ValueError):
            continue
        out[k] = v
    return out


# the project's one atomic write (umask mode), re-exported for the file HAL's modules
from robident_twin.atomic import atomic_path, write_text_atomic  # noqa: E402,F401


_JOINT_RE = re.compile(r"^(?P<base>[A-Za-z_]+?)(?P<joint>\d+)$")


def split_joint(name: str) -> tuple[str, int] | None:
    """``tau_motor3`` -> (``tau_motor``, 3); None when the name has no joint number."""
    m = _JOINT_RE.match(name)
    return (m.group("base"), int(m.group("joint"))) if m else None
