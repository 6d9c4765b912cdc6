"""CSV recordings and trajectories with documented columns and units.

Format: a plain comma-separated table with one header line, as ``pandas.read_csv`` reads it
unchanged::

    t_s,q1_rad,...,q7_rad,tau_motor1_Nm,...,tau_motor7_Nm,tau_joint1_Nm,...,q_cmd1_rad,...,valid
    0,0.1,...

and its metadata in a JSON sidecar ``<file>.meta.json`` (``run.csv`` -> ``run.csv.meta.json``)::

    {"format": "robident-twin recording", "sample_rate_hz": 1000.0, "period_samples": 10000,
     "n_periods": 5, "metadata": {"robot": "iiwa14", ...}}

The older form, the same keys as ``# key: value`` lines before the header, is still read; a key
given in both the ``#`` lines and the sidecar with different values is refused.

Column names are ``<channel><joint>_<unit>`` with joints numbered 1..n without holes:

==============  ==========================  ====================================================
channel         units accepted              meaning
==============  ==========================  ====================================================
``t``           ``s``, ``ms``, ``us``, ns   time (no joint number), strictly increasing
``q``           ``rad``, ``deg``            measured joint position (required)
``tau_motor``   ``Nm``, ``mNm``, ``kNm``    motor torque, joint side (required, see below)
``tau_joint``   as tau_motor                joint-torque-sensor torque (optional, all or none)
``q_cmd``       ``rad``, ``deg``            commanded position (optional)
``dq``          ``rad_s``, ``deg_s``        velocity (required in a trajectory)
``ddq``         ``rad_s2``, ``deg_s2``      acceleration (required in a trajectory)
``current``     ``A``, ``mA``               motor current (optional, kept in the metadata)
``valid``       none                        per-sample 0/1 validity mask (optional)
==============  ==========================  ====================================================

Instead of unit suffixes the line after the header may be a units row: header
``t,q1,q2,tau_motor1,tau_motor2`` then ``s,deg,deg,Nm,Nm``. Degrees are accepted only when
labelled and are converted to radians; an unknown or wrong unit (``q1_mm``, ``tau_motor1_A``)
is refused. Unknown columns are ignored (listed in ``metadata["ignored_columns"]``), except a near
miss of a channel name (``qcmd1_rad``), which is refused as a likely typo.

A recording with ``tau_joint`` columns and no ``tau_motor`` columns (joint-torque sensors only, an
LWR4+ over FRI) carries the joint torque as the motor-torque placeholder with
``metadata["motor_torque_available"] = False``, so motor-torque models are refused.

The metadata keys (sidecar or ``#`` lines) are: ``sample_rate_hz``,
``period_samples``, ``n_periods`` (a periodic recording over whole periods), ``period_s`` (a
trajectory's period) and ``metadata`` (a JSON object merged into the recording's metadata).

Written files use ``%.17g``, so float64 values read back bit for bit. Writes are atomic.
A bad file is refused with a FileFormatError naming the file, the column and the line.
"""
from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from robident_twin.atomic import write_text_atomic

from ..protocol import JointTrajectory, Recording
from .common import (FileFormatError, json_metadata, make_recording, placeholder_supported,
                     recording_valid, refuse_near_misses, unit_factor)

#: channel -> (quantity for the unit table, has a joint number)
CHANNELS: dict[str, tuple[str | None, bool]] = {
    "t": ("time", False), "q": ("angle", True), "q_cmd": ("angle", True), "dq": ("velocity", True),
    "ddq": ("acceleration", True), "tau_motor": ("torque", True), "tau_joint": ("torque", True),
    "current": ("current", True), "valid": (None, False),
}
_NAME_RE = re.compile(r"(?P<ch>tau_motor|tau_joint|q_cmd|ddq|dq|q|current|t|valid)(?P<j>\d*)(?:_(?P<unit>.+))?")
#: SI unit written per channel
SI_UNIT = {"t": "s", "q": "rad", "q_cmd": "rad", "dq": "rad_s", "ddq": "rad_s2", "tau_motor": "Nm",
           "tau_joint": "Nm", "current": "A"}


class _Table:
    """A parsed CSV: float columns by (channel, joint) in SI units plus where they came from."""

    def __init__(self, path: Path, header: dict[str, str], columns: dict[tuple[str, int], np.ndarray],
                 names: dict[tuple[str, int], str], first_data_line: int, ignored: list[str]):
        self.path, self.header, self.columns, self.names = path, header, columns, names
        self.first_data_line, self.ignored = first_data_line, ignored

    def row(self, k: int) -> str:
        return f"line {self.first_data_line + k}"

    def joints(self, ch: str) -> list[int]:
        return sorted(j for c, j in self.columns if c == ch)

    def block(self, ch: str, n_joints: int | None, required: bool) -> tuple[np.ndarray | None, list[str]]:
        """Columns ch1..chn as (samples x n); refuses a hole or a missing column."""
        js = self.joints(ch)
        if not js:
            if required:
                want = f"{ch}1_{SI_UNIT[ch]}"
                raise FileFormatError(f"{self.path}: missing column {want} (channel {ch}); columns are "
                                      f"{', '.join(self.names.values())}")
            return None, []
        n = n_joints if n_joints is not None else max(js)
        for j in range(1, n + 1):
            if (ch, j) not in self.columns:
                raise FileFormatError(f"{self.path}: missing column {ch}{j}_{SI_UNIT[ch]} (channel {ch} has "
                                      f"joints {js}, expected 1..{n})")
        extra = [j for j in js if j > n]
        if extra:
            raise FileFormatError(f"{self.path}: column {self.names[(ch, extra[0])]}: joint {extra[0]} but the "
                                  f"recording has {n} joints")
        return (np.column_stack([self.columns[(ch, j)] for j in range(1, n + 1)]),
                [self.names[(ch, j)] for j in range(1, n + 1)])


def _parse_name(path: Path, name: str, unit: str | None) -> tuple[str, int, float] | None:
    m = _NAME_RE.fullmatch(name)
    if m is None:
        return None
    ch, j, u = m.group("ch"), m.group("j"), m.group("unit")
    quantity, has_joint = CHANNELS[ch]
    if has_joint != bool(j):
        return None
    if unit is not None:
        if u is not None and u != unit:
            raise FileFormatError(f"{path}: column {name}: unit suffix '{u}' contradicts the units row '{unit}'")
        u = unit
    if quantity is None:
        if u not in (None, "", "1", "-"):
            raise FileFormatError(f"{path}: column {name}: expected no unit, got '{u}'")
        return ch, int(j or 0), 1.0
    if not u:
        raise FileFormatError(f"{path}: column {name}: no unit (write {ch}{j}_{SI_UNIT[ch]} or add a units row)")
    return ch, int(j or 0), unit_factor(path, name, quantity, u)


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def read_table(path: str | Path) -> _Table:
    """Parse a CSV file of the documented format (any channels)."""
    path = Path(path)
    if not path.is_file():
        raise FileFormatError(f"{path}: file not found")
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"{path}: not a readable text file: {exc}") from exc
    header: dict[str, str] = {}
    sidecar = read_sidecar(path)
    i = 0
    while i < len(lines) and (lines[i].startswith("#") or not lines[i].strip()):
        key, sep, value = lines[i].lstrip("#").partition(":")
        if sep:
            header[key.strip()] = value.strip()
        i += 1
    for key, value in sidecar.items():
        if key in header and not _same_value(header[key], value):
            raise FileFormatError(f"{path}: metadata key {key}: '# {key}: {header[key]}' in the file contradicts "
                                  f"{value} in {sidecar_path(path)}")
        header[key] = value
    if i >= len(lines):
        raise FileFormatError(f"{path}: no header line (expected e.g. t_s,q1_rad,...,tau_motor1_Nm,...)")
    names = [c.strip() for c in lines[i].split(",")]
    header_line = i + 1
    i += 1
    units: list[str] | None = None
    if i < len(lines):
        first = [c.strip() for c in lines[i].split(",")]
        if first and not _is_number(first[0]):
            units = first
            if len(units) != len(names):
                raise FileFormatError(f"{path}: line {i + 1} (units row): {len(units)} fields, the header has "
                                      f"{len(names)}")
            i += 1
    first_data_line = i + 1
    body = lines[i:]
    while body and not body[-1].strip():
        body.pop()
    rows = [r.split(",") for r in body]
    for k, r in enumerate(rows):
        if len(r) != len(names):
            raise FileFormatError(f"{path}: line {first_data_line + k}: {len(r)} fields, the header (line "
                                  f"{header_line}) has {len(names)}")
    if not rows:
        raise FileFormatError(f"{path}: no data rows after the header (line {header_line})")
    try:
        data = np.array(rows, dtype=float)
    except ValueError:
        for k, r in enumerate(rows):
            for c, s in enumerate(r):
                if not _is_number(s):
                    raise FileFormatError(f"{path}: column {names[c]}, line {first_data_line + k}: "
                                          f"'{s.strip()}' is not a number") from None
        raise
    columns, where, ignored = {}, {}, []
    for c, name in enumerate(names):
        parsed = _parse_name(path, name, None if units is None else units[c])
        if parsed is None:
            ignored.append(name)
            continue
        ch, j, factor = parsed
        if (ch, j) in columns:
            raise FileFormatError(f"{path}: column {name} appears twice (also as {where[(ch, j)]})")
        columns[(ch, j)] = data[:, c] * factor if factor != 1.0 else data[:, c]
        where[(ch, j)] = name
    refuse_near_misses(path, ignored, CHANNELS, "column", key=lambda n: re.sub(r"\d+(_.*)?$", "", n))
    return _Table(path, header, columns, where, first_data_line, ignored)


def _same_value(a: str, b: str) -> bool:
    """Header text and sidecar value agree (as numbers when both are numbers, 100 == 100.0)."""
    if _is_number(a) and _is_number(b):
        return float(a) == float(b)
    return a.strip() == b.strip()


def sidecar_path(path: str | Path) -> Path:
    """The JSON metadata sidecar of a CSV file: ``<file>.meta.json``."""
    path = Path(path)
    return path.with_name(path.name + ".meta.json")


def read_sidecar(path: Path) -> dict[str, str]:
    """The sidecar's keys as the ``#`` header lines would give them (strings; ``metadata`` as JSON
    text); {} without a sidecar."""
    side = sidecar_path(path)
    if not side.is_file():
        return {}
    try:
        raw = json.loads(side.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FileFormatError(f"{side}: metadata sidecar of {path.name}: expected a JSON object: {exc}") from None
    if not isinstance(raw, dict):
        raise FileFormatError(f"{side}: metadata sidecar of {path.name}: expected a JSON object, got a JSON "
                              f"{type(raw).__name__}")
    out = {}
    for k, v in raw.items():
        if k == "metadata":
            out[k] = json.dumps(v)
        elif v is None:
            out[k] = "None"
        elif isinstance(v, (bool, dict, list)) or not isinstance(v, (int, float, str)):
            raise FileFormatError(f"{side}: key {k}: expected a number or a string, got {json.dumps(v)}")
        else:
            out[k] = repr(v) if isinstance(v, float) else str(v)
    return out


def _header_int(table: _Table, key: str) -> int | None:
    v = table.header.get(key)
    if v in (None, "", "None", "null"):
        return None
    try:
        return int(v)
    except ValueError:
        raise FileFormatError(f"{table.path}: metadata key {key} expects an integer, got '{v}'") from None


def _header_float(table: _Table, key: str) -> float | None:
    v = table.header.get(key)
    if v in (None, "", "None", "null"):
        return None
    try:
        return float(v)
    except ValueError:
        raise FileFormatError(f"{table.path}: metadata key {key} expects a number, got '{v}'") from None


def read_recording_csv(path: str | Path) -> Recording:
    """Import a recording CSV (see the module docstring for the columns and units)."""
    table = read_table(path)
    path = table.path
    if ("t", 0) not in table.columns:
        raise FileFormatError(f"{path}: missing column t_s (time); columns are {', '.join(table.names.values())}")
    t = table.columns[("t", 0)]
    q, qn = table.block("q", None, True)
    n = q.shape[1]
    tj, tjn = table.block("tau_joint", n, False)
    # joint-torque columns alone: the motor-torque placeholder of a joint-torque-only recording
    tm, tmn = table.block("tau_motor", n, tj is None or not placeholder_supported())
    qc, qcn = table.block("q_cmd", n, False)
    cur, curn = table.block("current", n, False)
    md: dict[str, Any] = {}
    if "metadata" in table.header:
        try:
            extra = json.loads(table.header["metadata"])
        except json.JSONDecodeError as exc:
            raise FileFormatError(f"{path}: metadata key metadata is not a JSON object: {exc}") from exc
        if not isinstance(extra, dict):
            raise FileFormatError(f"{path}: metadata key metadata expects a JSON object ({{\"key\": value, ...}}), "
                                  f"got a JSON {type(extra).__name__}")
        md.update(extra)
    md.update({"source": str(path), "format": "csv",
               "units": {"t": "s", "q": "rad", "tau": "Nm", "current": "A"},
               "columns": list(table.names.values())})
    if table.ignored:
        md["ignored_columns"] = table.ignored
    if cur is not None:
        md["current_A"] = cur
    valid = table.columns.get(("valid", 0))
    if valid is not None and not np.all(np.isin(valid, (0.0, 1.0))):
        k = int(np.argmax(~np.isin(valid, (0.0, 1.0))))
        raise FileFormatError(f"{path}: column valid, {table.row(k)}: expected 0 or 1, got {valid[k]}")
    return make_recording(path, t_s=t, q_rad=q, tau_motor_Nm=tm, tau_joint_Nm=tj, q_cmd_rad=qc,
                          sample_rate_hz=_header_float(table, "sample_rate_hz"),
                          rate_field="metadata key sample_rate_hz",
                          period_samples=_header_int(table, "period_samples"),
                          n_periods=_header_int(table, "n_periods"), metadata=md, valid=valid, row=table.row,
                          columns={"t_s": [table.names[("t", 0)]], "q_rad": qn, "tau_motor_Nm": tmn,
                                   "tau_joint_Nm": tjn, "q_cmd_rad": qcn})


def read_trajectory_csv(path: str | Path) -> JointTrajectory:
    """Import a trajectory CSV: columns t, q, dq, ddq (header ``# period_s:`` optional)."""
    table = read_table(path)
    path = table.path
    if ("t", 0) not in table.columns:
        raise FileFormatError(f"{path}: missing column t_s (time)")
    from .common import check_time, first_bad

    t = table.columns[("t", 0)]
    check_time(path, t, table.names[("t", 0)], table.row)
    q, qn = table.block("q", None, True)
    n = q.shape[1]
    dq, dqn = table.block("dq", n, True)
    ddq, ddqn = table.block("ddq", n, True)
    for a, cols in ((q, qn), (dq, dqn), (ddq, ddqn)):
        bad = first_bad(a)
        if bad is not None:
            raise FileFormatError(f"{path}: column {cols[bad[1]]}, {table.row(bad[0])}: value is not finite")
    return JointTrajectory(t, q, dq, ddq, period_s=_header_float(table, "period_s"))


def _write(path: Path, meta: dict[str, Any], names: list[str], data: np.ndarray) -> Path:
    """The table as plain CSV and ``meta`` as its JSON sidecar (both atomic; the sidecar first, so
    a complete CSV never stands next to an older sidecar)."""
    buf = io.StringIO()
    buf.write(",".join(names) + "\n")
    np.savetxt(buf, data, fmt="%.17g", delimiter=",")
    write_text_atomic(sidecar_path(path), json.dumps(meta, indent=1) + "\n")
    write_text_atomic(path, buf.getvalue())
    return path


def write_recording_csv(rec: Recording, path: str | Path) -> Path:
    """Export a recording as CSV in SI units (exact float64 round trip); atomic."""
    path = Path(path)
    n = rec.n_joints
    blocks = [("t", rec.t_s[:, None]), ("q", rec.q_rad)]
    if rec.metadata.get("motor_torque_available", True) is not False or rec.tau_joint_Nm is None:
        blocks.append(("tau_motor", rec.tau_motor_Nm))  # not the placeholder of a joint-torque-only recording
    if rec.tau_joint_Nm is not None:
        blocks.append(("tau_joint", rec.tau_joint_Nm))
    if rec.metadata.get("q_cmd_recorded", True):
        blocks.append(("q_cmd", rec.q_cmd_rad))
    cur = rec.metadata.get("current_A")
    if isinstance(cur, np.ndarray) and cur.shape == rec.q_rad.shape:
        blocks.append(("current", cur))
    names = []
    for ch, a in blocks:
        names += ["t_s"] if ch == "t" else [f"{ch}{j}_{SI_UNIT[ch]}" for j in range(1, n + 1)]
    data = np.hstack([a for _, a in blocks])
    valid = recording_valid(rec)
    if valid is not None:
        names.append("valid")
        data = np.hstack([data, valid[:, None].astype(float)])
    md = json_metadata({k: v for k, v in rec.metadata.items() if k not in ("columns", "format", "units")})
    meta = {"format": "robident-twin recording", "sample_rate_hz": rec.sample_rate_hz,
            "period_samples": rec.period_samples, "n_periods": rec.n_periods, "metadata": md}
    return _write(path, meta, names, data)


def write_trajectory_csv(traj: JointTrajectory, path: str | Path) -> Path:
    """Export a trajectory (t, q, dq, ddq in SI units) as CSV; atomic."""
    n = traj.q_rad.shape[1]
    names = ["t_s"] + [f"{ch}{j}_{SI_UNIT[ch]}" for ch in ("q", "dq", "ddq") for j in range(1, n + 1)]
    data = np.hstack([traj.t_s[:, None], traj.q_rad, traj.dq_rad_s, traj.ddq_rad_s2])
    return _write(Path(path), {"format": "robident-twin trajectory", "period_s": traj.period_s,
                               "rate_hz": traj.rate_hz}, names, data)
