"""KUKA KRC4 trace recordings: DIAdem ASCII header (``.dat``) + interleaved float64 data (``.r64``).

A trace is a set of file pairs per module, ``<name>_KRCIpo.*`` and ``<name>_NextGenDrive#n.*``;
give one ``.dat`` / ``.r64`` of the set (all ``<name>_*.dat`` beside it are read) or a single
pair with any name. What is read of the DIAdem header (our reading of the documented codes,
checked with the project's own writer in tests/test_files.py, not with controller files):

- ``#BEGINCHANNELHEADER`` ... ``#ENDCHANNELHEADER`` blocks, one per channel, lines ``code,value``;
- 200 channel name, 202 unit, 210 ``EXPLIZIT`` (values in the .r64) or ``IMPLIZIT`` (time
  axis: value k = start + k * step), 211 data file name (default: the .dat's stem + ``.r64``),
  214 data type (``REAL64`` only), 220 length (samples), 221 column of the channel in the
  interleaved data (1-based; default the order of the explicit channels), 240 offset / start,
  241 factor / sampling step: an explicit value is ``240 + 241 * raw``.

Channel names (German, case-insensitive): ``Istposition`` -> q, ``Sollposition`` -> q_cmd,
``Istmoment`` -> motor torque, ``Iststrom`` -> current; the axis is the number after ``A`` /
``Achse`` or at the end of the name, else the ``#n`` of a ``NextGenDrive#n`` file. Units:
position ``Grad`` / ``deg`` / ``°`` (converted) or ``rad``; torque ``Nm``; current ``A``; time
``s`` / ``ms``. Without a time channel ``sample_time_s`` must be given. Without ``Istmoment`` the
torque is ``torque_constant_Nm_per_A * Iststrom`` (a number or one per axis). The current is kept
in ``metadata["current_A"]``. All modules must share the sample count and time base.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..protocol import Recording
from .common import FileFormatError, check_time, first_bad, make_recording

KINDS = {"istposition": "q", "sollposition": "q_cmd", "istmoment": "tau_motor", "iststrom": "current"}
UNIT_SI = {
    "q": {"grad": np.pi / 180, "deg": np.pi / 180, "°": np.pi / 180, "rad": 1.0},
    "q_cmd": {"grad": np.pi / 180, "deg": np.pi / 180, "°": np.pi / 180, "rad": 1.0},
    "tau_motor": {"nm": 1.0},
    "current": {"a": 1.0},
    "time": {"s": 1.0, "ms": 1e-3},
}
_SET_RE = re.compile(r"^(?P<base>.+)_(KRCIpo|NextGenDrive#\d+)$", re.IGNORECASE)
_AXIS_RE = re.compile(r"(?:\bA|Achse\s*|Axis\s*)(\d+)\b|(\d+)\s*$", re.IGNORECASE)


def trace_files(path: str | Path) -> list[Path]:
    """The .dat headers of a trace set (or the single pair) that ``path`` belongs to."""
    p = Path(path)
    if p.suffix.lower() == ".r64":
        p = p.with_suffix(".dat")
    if p.suffix.lower() != ".dat":
        sets = sorted(p.parent.glob(p.name + "_*.dat"))
        if sets:
            return sets
        raise FileFormatError(f"{p}: no trace files {p.name}_*.dat found")
    if not p.is_file():
        raise FileFormatError(f"{p}: file not found")
    m = _SET_RE.match(p.stem)
    if m:
        return sorted(p.parent.glob(m.group("base") + "_*.dat"))
    return [p]


def parse_header(dat: Path) -> list[dict[int, str]]:
    """The channel blocks of a DIAdem header: a list of {code: value}."""
    try:
        lines = dat.read_text(encoding="latin-1").splitlines()
    except OSError as exc:
        raise FileFormatError(f"{dat}: not readable: {exc}") from exc
    blocks, cur = [], None
    for i, line in enumerate(lines, 1):
        s = line.strip()
        if s.upper() == "#BEGINCHANNELHEADER":
            cur = {}
        elif s.upper() == "#ENDCHANNELHEADER":
            if cur is None:
                raise FileFormatError(f"{dat}: line {i}: #ENDCHANNELHEADER without #BEGINCHANNELHEADER")
            blocks.append(cur)
            cur = None
        elif cur is not None and s:
            code, sep, value = s.partition(",")
            if not sep or not code.strip().isdigit():
                raise FileFormatError(f"{dat}: line {i}: expected 'code,value' in a channel header, got {s!r}")
            cur[int(code)] = value.strip()
    if cur is not None:
        raise FileFormatError(f"{dat}: channel header not closed (#ENDCHANNELHEADER missing)")
    if not blocks:
        raise FileFormatError(f"{dat}: no channel headers (#BEGINCHANNELHEADER) - not a DIAdem header")
    return blocks


def _num(dat: Path, ch: dict[int, str], code: int, default: float | None = None) -> float:
    v = ch.get(code)
    if v is None:
        if default is None:
            raise FileFormatError(f"{dat}: channel {ch.get(200, '?')!r}: code {code} missing")
        return default
    try:
        return float(v.replace(",", "."))
    except ValueError:
        raise FileFormatError(f"{dat}: channel {ch.get(200, '?')!r}: code {code} = {v!r} is not a number") from None


def _count(dat: Path, ch: dict[int, str], code: int, what: str, default: int | None = None) -> int:
    """A whole-number code (220 length, 221 column) of a channel header: finite, integral, >= 1."""
    v = _num(dat, ch, code, default)
    if not np.isfinite(v) or v != int(v) or v < 1:
        raise FileFormatError(f"{dat}: channel {ch.get(200, '?')!r}: code {code} ({what}) = {ch.get(code)!r}; "
                              "expected a whole number >= 1")
    return int(v)


def read_module(dat: Path) -> tuple[dict[str, np.ndarray], dict[str, dict[int, str]], np.ndarray | None]:
    """The channels of one .dat/.r64 pair: ({name: values}, {name: header}, time or None)."""
    blocks = parse_header(dat)
    explicit = [b for b in blocks if b.get(210, "EXPLIZIT").upper().startswith("EXPLI")]
    implicit = [b for b in blocks if b.get(210, "").upper().startswith("IMPLI")]
    for b in blocks:
        if 200 not in b:
            raise FileFormatError(f"{dat}: a channel header without a name (code 200)")
    for b in explicit:
        if b.get(214, "REAL64").upper() != "REAL64":
            raise FileFormatError(f"{dat}: channel {b[200]!r}: data type (code 214) {b[214]!r}; only REAL64 is supported")
    lengths = {b[200]: _count(dat, b, 220, "length") for b in blocks}
    n = next(iter(lengths.values()))
    for name, L in lengths.items():
        if L != n:
            raise FileFormatError(f"{dat}: channel {name!r}: length (code 220) {L}, channel {blocks[0][200]!r} has {n}")
    out, heads = {}, {b[200]: b for b in blocks}
    if explicit:
        r64 = dat.parent / explicit[0].get(211, dat.stem + ".r64")
        if not r64.is_file():
            raise FileFormatError(f"{dat}: data file {r64.name} (code 211) not found")
        raw = np.fromfile(r64, dtype="<f8")
        m = len(explicit)
        if raw.size != n * m:
            raise FileFormatError(f"{r64}: {raw.size} float64 values, the header {dat.name} announces {n} samples "
                                  f"x {m} channels = {n * m} (inconsistent lengths)")
        raw = raw.reshape(n, m)
        cols = [_count(dat, b, 221, "column", k + 1) - 1 for k, b in enumerate(explicit)]
        if sorted(cols) != list(range(m)):
            raise FileFormatError(f"{dat}: columns (code 221) {[c + 1 for c in cols]} are not 1..{m}")
        for b, c in zip(explicit, cols):
            out[b[200]] = _num(dat, b, 240, 0.0) + _num(dat, b, 241, 1.0) * raw[:, c]
    t = None
    for b in implicit:
        unit = b.get(202, "s").strip().lower()
        if unit not in UNIT_SI["time"]:
            raise FileFormatError(f"{dat}: channel {b[200]!r}: time unit {b.get(202)!r}; expected s or ms")
        f = UNIT_SI["time"][unit]
        t = (_num(dat, b, 240, 0.0) + _num(dat, b, 241) * np.arange(n)) * f
        check_time(dat, t, b[200], lambda k: f"sample {k} (step, code 241, must be > 0)")
    for name, b in heads.items():
        if name in out and b.get(202, "").strip().lower() in UNIT_SI["time"] and re.search(r"zeit|time", name, re.I):
            t = out.pop(name) * UNIT_SI["time"][b[202].strip().lower()]
            check_time(dat, t, name, lambda k: f"sample {k}")
    return out, heads, t


def _axis(dat: Path, name: str) -> int | None:
    rest = re.sub("|".join(KINDS), "", name, flags=re.IGNORECASE)
    m = _AXIS_RE.search(rest)
    if m:
        return int(m.group(1) or m.group(2))
    fm = re.search(r"NextGenDrive#(\d+)", dat.stem, re.IGNORECASE)
    return int(fm.group(1)) if fm else None


def read_kuka_trace(path: str | Path, sample_time_s: float | None = None,
                    torque_constant_Nm_per_A: float | Sequence[float] | None = None,
                    n_axes: int | None = None) -> Recording:
    """Import a KRC4 trace (see the module docstring); ``n_axes`` limits the axes read."""
    files = trace_files(path)
    chans: dict[tuple[str, int], tuple[np.ndarray, Path, str]] = {}
    t, t_from, n = None, None, None
    for dat in files:
        values, heads, tm = read_module(dat)
        for name, v in values.items():
            if n is None:
                n, n_from = v.size, (dat, name)
            elif v.size != n:
                raise FileFormatError(f"{dat}: channel {name!r} has {v.size} samples, channel {n_from[1]!r} of "
                                      f"{n_from[0].name} has {n} (modules must share the time base)")
            kind = next((k for key, k in KINDS.items() if key in name.lower()), None)
            if kind is None:
                continue
            axis = _axis(dat, name)
            if axis is None:
                raise FileFormatError(f"{dat}: channel {name!r}: no axis number in the name or the file name")
            unit = heads[name].get(202, "").strip().lower()
            table = UNIT_SI[kind]
            if unit not in table:
                raise FileFormatError(f"{dat}: channel {name!r}: unit {heads[name].get(202)!r}; expected one of "
                                      f"{', '.join(table)}")
            bad = first_bad(v)
            if bad is not None:
                raise FileFormatError(f"{dat}: channel {name!r}, sample {bad[0]}: value is not finite ({v[bad[0]]})")
            if (kind, axis) in chans:
                raise FileFormatError(f"{dat}: channel {name!r}: axis {axis} {kind} also in channel "
                                      f"{chans[(kind, axis)][2]!r} of {chans[(kind, axis)][1].name}")
            chans[(kind, axis)] = (v * table[unit], dat, name)
        if tm is not None:
            if t is not None and (tm.size != t.size or not np.allclose(tm, t, rtol=0, atol=1e-9)):
                raise FileFormatError(f"{dat}: time axis differs from that of {t_from.name} (modules must share "
                                      "the time base)")
            t, t_from = tm, dat
    src = files[0] if len(files) == 1 else Path(path)
    axes = sorted({a for k, a in chans if k == "q"})
    if not axes:
        raise FileFormatError(f"{src}: no Istposition channel in {', '.join(f.name for f in files)}")
    naxes = n_axes or max(axes)
    axes = list(range(1, naxes + 1))

    def block(kind: str, required: bool):
        have = [a for a in axes if (kind, a) in chans]
        if not have and not required:
            return None, []
        for a in axes:
            if (kind, a) not in chans:
                raise FileFormatError(f"{src}: channel {kind} of axis A{a} missing (German name "
                                      f"{[k for k, v in KINDS.items() if v == kind][0].capitalize()} A{a})")
        return np.column_stack([chans[(kind, a)][0] for a in axes]), [chans[(kind, a)][2] for a in axes]

    q, qn = block("q", True)
    cur, _ = block("current", False)
    tau, taun = block("tau_motor", False)
    if tau is None:
        if cur is None:
            raise FileFormatError(f"{src}: channel Istmoment A1 missing (and no Iststrom to convert)")
        if torque_constant_Nm_per_A is None:
            raise FileFormatError(f"{src}: channel Istmoment A1 missing; give torque_constant_Nm_per_A to use Iststrom")
        try:
            kt = np.broadcast_to(np.asarray(torque_constant_Nm_per_A, dtype=float), (len(axes),))
        except (TypeError, ValueError):
            raise FileFormatError(f"{src}: option torque_constant_Nm_per_A: expected a number or {len(axes)} numbers "
                                  f"(Nm/A, one per axis), got {torque_constant_Nm_per_A!r}") from None
        if not np.all(np.isfinite(kt)) or np.any(kt == 0):
            raise FileFormatError(f"{src}: option torque_constant_Nm_per_A: expected finite non-zero values, "
                                  f"got {torque_constant_Nm_per_A!r}")
        tau, taun = cur * kt, [f"Iststrom A{a} * kt" for a in axes]
    qc, qcn = block("q_cmd", False)
    if t is None:
        if sample_time_s is None:
            raise FileFormatError(f"{src}: no time channel (IMPLIZIT, code 240/241); give sample_time_s")
        try:
            dt = float(sample_time_s)
        except (TypeError, ValueError):
            dt = float("nan")
        if not np.isfinite(dt) or dt <= 0:
            raise FileFormatError(f"{src}: option sample_time_s: expected a positive time in s, got {sample_time_s!r}")
        t = np.arange(n) * dt
    md: dict[str, Any] = {"source": str(src), "format": "krc4_trace", "files": [str(f) for f in files],
                          "units": {"t": "s", "q": "rad", "tau": "Nm", "current": "A"},
                          "channels": {f"{k}{a}": c[2] for (k, a), c in chans.items()}}
    if cur is not None:
        md["current_A"] = cur
    return make_recording(src, t_s=t, q_rad=q, tau_motor_Nm=tau, q_cmd_rad=qc, metadata=md,
                          row=lambda k: f"sample {k}",
                          columns={"q_rad": qn, "tau_motor_Nm": taun, "q_cmd_rad": qcn})
