"""The bad-input corpus (issue 13): malformed robot files and recordings, written at test time.

Each :class:`Case` writes one malformed input into a directory and names the error it must
raise: the error class and a regular expression that must match the message (the field, the
column, the channel or the key that is wrong, and usually what was expected). The file's name
must appear in the message too (checked by tests/test_bad_inputs.py).

Categories:

- ``robot``: robot files (``sim_assets/<robot>/robot.yaml`` format), loaded with ``load_robot``;
- ``csv``, ``npz``, ``mat``, ``mcap``, ``krc4``: recordings, loaded with ``hal.files.load_recording``;
- ``plausibility``: recordings that load but cannot come from the robot (degrees labelled rad,
  torques x1000, ...), refused by ``robident_twin.processing.plausibility.check_recording`` against
  ``PLAUSIBILITY_ROBOT``.

Nothing here is committed as binary: every file is generated from a valid base by one change.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAUSIBILITY_ROBOT = "kuka_ir361"


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    make: Callable[[Path], tuple[Path, dict]]  # writes the input into a directory: (path, loader options)
    expect: str  # regular expression the message must match
    error: str  # name of the error class (a RobidentError subclass)
    options: dict = field(default_factory=dict)


# =============================================================================== robot files

def _iiwa() -> dict:
    return yaml.safe_load((ROOT / "sim_assets" / "iiwa14" / "robot.yaml").read_text())


def _robot_case(cid: str, mutate: Callable[[dict], Any], expect: str) -> Case:
    def make(d: Path):
        raw = _iiwa()
        mutate(raw)
        p = d / f"{cid}.yaml"
        p.write_text(yaml.safe_dump(raw, sort_keys=False))
        return p, {}

    return Case(cid, "robot", make, expect, "RobotSpecError")


def _robot_text_case(cid: str, data: bytes, expect: str) -> Case:
    def make(d: Path):
        p = d / f"{cid}.yaml"
        p.write_bytes(data)
        return p, {}

    return Case(cid, "robot", make, expect, "RobotSpecError")


def _rename(d: dict, old: str, new: str) -> None:
    d[new] = d.pop(old)


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """A mutation that sets a dotted path (``joints.0.limits.torque_Nm``) to ``value``."""
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]

    def mutate(raw):
        d = raw
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return mutate


def _pop(path: str) -> Callable[[dict], None]:
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]

    def mutate(raw):
        d = raw
        for k in keys[:-1]:
            d = d[k]
        d.pop(keys[-1])
    return mutate


J = r"joints\[{}\]"
INF, NAN = float("inf"), float("nan")
_PAYLOAD = {"mass_kg": 2.0, "com_m": [0, 0, 0.05], "inertia_com_kgm2": {"xx": 0.01, "yy": 0.01, "zz": 0.01}}


def robot_cases() -> list[Case]:
    c = _robot_case
    j0 = J.format(0)
    cases = [
        # unknown / misspelt keys at every level, with the close match suggested
        c("sensor_typo", lambda r: _rename(r["joints"][0], "sensors", "sensor"),
          rf"field '{j0}': unknown key 'sensor' \(at {j0}\.sensor\) \(did you mean 'sensors'\?\)"),
        c("drive_typo", lambda r: _rename(r["joints"][2], "drive", "drvie"),
          r"unknown key 'drvie' \(at joints\[2\]\.drvie\) \(did you mean 'drive'\?\)"),
        c("top_level_typo", lambda r: _rename(r, "gravity_m_s2", "gravity_ms2"),
          r"field '<top level>': unknown key 'gravity_ms2'.*did you mean 'gravity_m_s2'"),
        c("top_level_unknown", _set("colour", "orange"), r"unknown key 'colour' \(at colour\); expected keys there"),
        c("flange_typo", lambda r: r.__setitem__("flange", {"xyz": [0, 0, 0.1]}),
          r"field 'flange': unknown key 'xyz'.*did you mean 'xyz_m'"),
        c("limits_typo", lambda r: _rename(r["joints"][1]["limits"], "torque_Nm", "torque_nm"),
          r"field 'joints\[1\]\.limits': unknown key 'torque_nm'.*did you mean 'torque_Nm'"),
        c("link_typo", lambda r: _rename(r["joints"][3]["link"], "mass_kg", "mass"),
          r"field 'joints\[3\]\.link': unknown key 'mass'.*did you mean 'mass_kg'"),
        c("inertia_typo", lambda r: r["joints"][1]["link"]["inertia_com_kgm2"].__setitem__("ixx", 0.1),
          r"field 'joints\[1\]\.link\.inertia_com_kgm2': unknown key 'ixx'"),
        c("friction_link_typo", lambda r: r["joints"][0]["friction"]["link"].__setitem__("viscous", 0.1),
          rf"field '{j0}\.friction\.link': unknown key 'viscous'.*did you mean 'viscous_Nms_rad'"),
        c("friction_side_unknown", lambda r: r["joints"][4]["friction"].__setitem__("gearbox", {"coulomb_Nm": 1}),
          r"field 'joints\[4\]\.friction': unknown friction side 'gearbox'"),
        c("origin_typo", lambda r: _rename(r["joints"][5]["origin"], "xyz_m", "xyz_mm"),
          r"field 'joints\[5\]\.origin': unknown key 'xyz_mm'.*did you mean 'xyz_m'"),
        c("sensors_typo", lambda r: r["joints"][6].setdefault("sensors", {}).__setitem__("q_std", 1e-4),
          r"field 'joints\[6\]\.sensors': unknown key 'q_std'.*did you mean 'q_std_rad'"),
        c("spring_typo", _set("joints.1.spring", {"force": 100.0, "lever_l_m": 0.1, "lever_r_m": 0.2}),
          r"field 'joints\[1\]\.spring': unknown key 'force'.*did you mean 'force_N'"),
        c("payload_typo", _set("payload", dict(_PAYLOAD, mass=1.0)),
          r"field 'payload': unknown key 'mass'.*did you mean 'mass_kg'"),
        c("joint_level_unknown", _set("joints.2.colour", "red"), r"unknown key 'colour' \(at joints\[2\]\.colour\)"),
        c("numeric_key", lambda r: r["joints"][0].__setitem__(7, 1.0), r"unknown key '7' \(at joints\[0\]\.7\)"),
        # wrong types
        c("friction_number", _set("joints.0.friction", 5), rf"field '{j0}\.friction': expected a mapping"),
        c("friction_list", _set("joints.3.friction", [1, 2]), r"field 'joints\[3\]\.friction': expected a mapping"),
        c("friction_side_number", _set("joints.0.friction.link", 5), rf"field '{j0}\.friction\.link': expected a mapping"),
        c("friction_kind_unknown", _set("joints.0.friction.link.kind", "magic"),
          rf"field '{j0}\.friction\.link\.kind': unknown friction kind 'magic'"),
        c("stribeck_without_level", _set("joints.0.friction.link.kind", "stribeck"),
          rf"field '{j0}\.friction\.link\.stribeck_Nm': missing"),
        c("drive_number", _set("joints.2.drive", 5), r"field 'joints\[2\]\.drive': expected a mapping, got int"),
        c("sensors_string", _set("joints.2.sensors", "noisy"), r"field 'joints\[2\]\.sensors': expected a mapping, got str"),
        c("limits_list", _set("joints.2.limits", [1, 2]), r"field 'joints\[2\]\.limits': expected a mapping"),
        c("joint_is_string", lambda r: r["joints"].__setitem__(1, "A2"), r"field 'joints\[1\]': expected a mapping"),
        c("joints_number", _set("joints", 7), r"field 'joints': expected a non-empty list"),
        c("joints_empty", _set("joints", []), r"field 'joints': expected a non-empty list"),
        c("joints_missing", _pop("joints"), r"field 'joints': missing"),
        c("name_missing", _pop("name"), r"field 'name': missing"),
        c("name_number", _set("name", 5), r"field 'name': expected a non-empty string"),
        c("joint_name_number", _set("joints.0.name", 1), rf"field '{j0}\.name': expected a non-empty string"),
        c("joint_name_missing", _pop("joints.0.name"), rf"field '{j0}\.name': missing"),
        c("joint_names_duplicate", _set("joints.1.name", "A1"), r"field 'joints': joint names must be unique"),
        # infinite / NaN / out-of-range numbers
        c("position_inf", _set("joints.0.limits.position_deg", [-INF, INF]),
          rf"field '{j0}\.limits\.position_deg': expected \[lower, upper\], two finite numbers"),
        c("position_upper_inf", _set("joints.4.limits.position_deg", [-170, INF]),
          r"field 'joints\[4\]\.limits\.position_deg': expected .*finite"),
        c("position_nan", _set("joints.1.limits.position_deg", [NAN, 10]), r"joints\[1\]\.limits\.position_deg'"),
        c("position_reversed", _set("joints.0.limits.position_deg", [10, -10]), r"position_deg'.*lower < upper"),
        c("position_string", _set("joints.0.limits.position_deg", "wide"), r"position_deg'.*expected \[lower, upper\]"),
        c("position_bool", _set("joints.0.limits.position_deg", [True, 5]), r"position_deg'.*expected \[lower, upper\]"),
        c("position_three", _set("joints.0.limits.position_deg", [-1, 0, 1]), r"position_deg'.*expected \[lower, upper\]"),
        c("velocity_inf", _set("joints.0.limits.velocity_deg_s", INF), r"velocity_deg_s'.*expected a finite number"),
        c("velocity_negative", _set("joints.0.limits.velocity_deg_s", -1), r"velocity_deg_s'.*positive"),
        c("velocity_string", _set("joints.0.limits.velocity_deg_s", "fast"), r"velocity_deg_s'.*expected a number"),
        c("acceleration_zero", _set("joints.0.limits.acceleration_rad_s2", 0), r"acceleration_rad_s2'.*positive"),
        c("torque_nan", _set("joints.3.limits.torque_Nm", NAN), r"joints\[3\]\.limits\.torque_Nm'.*finite"),
        c("torque_missing", _pop("joints.3.limits.torque_Nm"), r"joints\[3\]\.limits\.torque_Nm'.*missing"),
        c("mass_negative", _set("joints.1.link.mass_kg", -3.0), r"joints\[1\]\.link\.mass_kg'.*positive.*-3"),
        c("mass_zero", _set("joints.1.link.mass_kg", 0), r"joints\[1\]\.link\.mass_kg'.*positive"),
        c("mass_string", _set("joints.1.link.mass_kg", "heavy"), r"mass_kg'.*expected a number"),
        c("mass_inf", _set("joints.1.link.mass_kg", INF), r"mass_kg'.*finite"),
        c("mass_missing", _pop("joints.2.link.mass_kg"), r"joints\[2\]\.link\.mass_kg'.*missing"),
        c("com_short", _set("joints.5.link.com_m", [0, 0]), r"com_m'.*list of 3 numbers"),
        c("com_nan", _set("joints.5.link.com_m", [0, 0, NAN]), r"com_m'.*finite"),
        c("com_string", _set("joints.5.link.com_m", "centre"), r"com_m'.*list of 3 numbers"),
        c("inertia_not_pd", lambda r: r["joints"][0]["link"]["inertia_com_kgm2"].update(xx=-0.01),
          rf"{j0}\.link\.inertia_com_kgm2'.*not positive definite"),
        c("inertia_triangle", lambda r: r["joints"][4]["link"]["inertia_com_kgm2"].update(xx=0.001, yy=0.001, zz=0.01),
          r"joints\[4\]\.link\.inertia_com_kgm2'.*triangle inequality"),
        c("inertia_missing_xx", _pop("joints.0.link.inertia_com_kgm2.xx"), rf"{j0}\.link\.inertia_com_kgm2\.xx'.*missing"),
        c("gear_ratio_zero", _set("joints.0.drive", {"gear_ratio": 0}), rf"{j0}\.drive\.gear_ratio'.*must not be zero"),
        c("drive_inertia_negative", _set("joints.0.drive", {"inertia_kgm2": -1}), r"drive\.inertia_kgm2'.*non-negative"),
        c("noise_negative", _set("joints.0.sensors", {"q_std_rad": -0.1}), r"sensors\.q_std_rad'.*non-negative"),
        c("viscous_string", _set("joints.6.friction.link.viscous_Nms_rad", "high"), r"viscous_Nms_rad'.*expected a number"),
        c("home_short", _set("home_deg", [0, 0]), r"field 'home_deg': expected a list of 7 numbers"),
        c("home_outside", _set("home_deg", [0, 0, 0, 0, 0, 0, 400]), r"field 'home_deg': .*outside the position limits"),
        c("coupling_singular", _set("coupling_matrix", [[0] * 7 for _ in range(7)]), r"field 'coupling_matrix'.*singular"),
        c("coupling_shape", _set("coupling_matrix", [[1, 0], [0, 1]]), r"field 'coupling_matrix': expected a 7 x 7"),
        c("payload_attached_without_payload", _set("payload_attached", True), r"field 'payload_attached': is true but"),
        c("payload_attached_string", _set("payload_attached", "yes"), r"field 'payload_attached': expected true or false"),
        c("payload_mass_negative", _set("payload", dict(_PAYLOAD, mass_kg=-1)), r"field 'payload\.mass_kg'.*positive"),
        c("sensors_flag_string", _set("has_joint_torque_sensors", "no"), r"has_joint_torque_sensors'.*true or false"),
        c("gravity_short", _set("gravity_m_s2", [0, 0]), r"field 'gravity_m_s2': expected a list of 3 numbers"),
        c("gravity_inf", _set("gravity_m_s2", [0, 0, -INF]), r"field 'gravity_m_s2': expected finite numbers"),
        c("smoothing_zero", _set("coulomb_smoothing_rad_s", 0), r"coulomb_smoothing_rad_s'.*positive"),
        c("spring_equal_levers", _set("joints.1.spring", {"force_N": 100.0, "lever_l_m": 0.1, "lever_r_m": 0.1}),
          r"joints\[1\]\.spring'.*must differ"),
        c("origin_missing_xyz", _pop("joints.3.origin.xyz_m"), r"joints\[3\]\.origin\.xyz_m'.*missing"),
        c("top_level_list", lambda r: None, ""),  # replaced below (needs raw text)
    ]
    cases = [x for x in cases if x.id != "top_level_list"]
    t = _robot_text_case
    cases += [
        t("non_utf8", "name: r\u00e4\n".encode("latin-1"), r"not a UTF-8 text file \(byte 7"),
        t("binary", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", r"not a UTF-8 text file"),
        t("utf16", "name: iiwa\n".encode("utf-16"), r"not a UTF-8 text file"),
        t("invalid_yaml", b"name: [unclosed\njoints: {\n", r"not valid YAML"),
        t("tab_indent", b"name: x\njoints:\n\t- name: A1\n", r"not valid YAML"),
        t("empty", b"", r"expected a mapping at the top level, got NoneType"),
        t("top_level_list", b"- name: A1\n- name: A2\n", r"expected a mapping at the top level, got list"),
        t("top_level_scalar", b"42\n", r"expected a mapping at the top level, got int"),
        t("duplicate_top_key", b"name: a\njoints: []\nname: b\n", r"line 3: key 'name' given twice .*first on line 1"),
        t("duplicate_joint_key", (ROOT / "sim_assets" / "iiwa14" / "robot.yaml").read_bytes().replace(
            b"    sensors:", b"    sensors: {q_std_rad: 0.0}\n    sensors:", 1), r"key 'sensors' given twice"),
    ]
    return cases


# =============================================================================== CSV recordings

CSV_HEAD = "t_s,q1_rad,q2_rad,tau_motor1_Nm,tau_motor2_Nm"
CSV_ROWS = [f"{k * 0.01:.2f},0.1,0.2,1,2" for k in range(6)]


def _csv_case(cid: str, expect: str, head: str = CSV_HEAD, rows: list[str] | None = None,
              comments: list[str] = (), raw: bytes | None = None, options: dict | None = None) -> Case:
    def make(d: Path):
        p = d / f"{cid}.csv"
        if raw is not None:
            p.write_bytes(raw)
        else:
            lines = [f"# {c}" for c in comments] + [head] + list(CSV_ROWS if rows is None else rows)
            p.write_text("\n".join(lines) + "\n")
        return p, dict(options or {})

    return Case(cid, "csv", make, expect, "FileFormatError")


def _rows_with(k: int, row: str) -> list[str]:
    rows = list(CSV_ROWS)
    rows[k] = row
    return rows


def csv_cases() -> list[Case]:
    c = _csv_case
    return [
        c("metadata_list", r"metadata key metadata expects a JSON object.*got a JSON list", comments=["metadata: [1, 2]"]),
        c("metadata_number", r"metadata key metadata expects a JSON object.*got a JSON int", comments=["metadata: 5"]),
        c("metadata_string", r"metadata key metadata expects a JSON object.*got a JSON str", comments=['metadata: "x"']),
        c("metadata_not_json", r"metadata key metadata is not a JSON object", comments=["metadata: {robot: x}"]),
        c("rate_header_disagrees", r"metadata key sample_rate_hz says 1000 Hz but the time column t_s is sampled at 100 Hz",
          comments=["sample_rate_hz: 1000"]),
        c("rate_header_x2", r"metadata key sample_rate_hz says 200 Hz but .*100 Hz", comments=["sample_rate_hz: 200.0"]),
        c("rate_header_text", r"metadata key sample_rate_hz expects a number, got 'fast'", comments=["sample_rate_hz: fast"]),
        c("rate_header_nan", r"metadata key sample_rate_hz: expected a positive, finite sample rate",
          comments=["sample_rate_hz: nan"]),
        c("rate_header_negative", r"metadata key sample_rate_hz: expected a positive", comments=["sample_rate_hz: -100"]),
        c("rate_header_zero", r"metadata key sample_rate_hz: expected a positive", comments=["sample_rate_hz: 0"]),
        c("period_fraction", r"metadata key period_samples expects an integer, got '2.5'", comments=["period_samples: 2.5"]),
        c("period_zero", r"field period_samples: expected a whole number >= 1, got 0",
          comments=["period_samples: 0", "n_periods: 6"]),
        c("n_periods_nan", r"metadata key n_periods expects an integer, got 'nan'", comments=["n_periods: nan"]),
        c("periods_do_not_cover", r"6 samples is not 2 periods of 2 samples",
          comments=["period_samples: 2", "n_periods: 2"]),
        c("missing_q2", r"missing column q2_rad", head="t_s,q1_rad,q3_rad,tau_motor1_Nm,tau_motor2_Nm"),
        c("missing_torque", r"missing column tau_motor1_Nm", head="t_s,q1_rad,q2_rad,x1,x2"),
        c("missing_time", r"missing column t_s", head="time,q1_rad,q2_rad,tau_motor1_Nm,tau_motor2_Nm"),
        c("unit_mm", r"column q2_mm: unit 'mm' is not a unit of angle", head="t_s,q1_rad,q2_mm,tau_motor1_Nm,tau_motor2_Nm"),
        c("unit_amp_torque", r"column tau_motor1_A: unit 'A' is not a unit of torque",
          head="t_s,q1_rad,q2_rad,tau_motor1_A,tau_motor2_Nm"),
        c("unit_time_min", r"column t_min: unit 'min' is not a unit of time",
          head="t_min,q1_rad,q2_rad,tau_motor1_Nm,tau_motor2_Nm"),
        c("no_unit", r"column q1: no unit", head="t_s,q1,q2_rad,tau_motor1_Nm,tau_motor2_Nm"),
        c("duplicate_column", r"column q1_deg appears twice \(also as q1_rad\)",
          head="t_s,q1_rad,q1_deg,tau_motor1_Nm,tau_motor2_Nm"),
        c("extra_joint", r"column tau_motor3_Nm: joint 3 but the recording has 2 joints",
          head="t_s,q1_rad,q2_rad,tau_motor1_Nm,tau_motor2_Nm,tau_motor3_Nm", rows=[r + ",1" for r in CSV_ROWS]),
        c("units_row_length", r"line 2 \(units row\): 3 fields, the header has 5",
          rows=["s,rad,rad"] + CSV_ROWS),
        c("units_row_contradicts", r"column q1_rad: unit suffix 'rad' contradicts the units row 'deg'",
          rows=["s,deg,rad,Nm,Nm"] + CSV_ROWS),
        c("time_backwards", r"column t_s, line 4: time is not strictly increasing",
          rows=_rows_with(2, "0.005,0.1,0.2,1,2")),
        c("time_repeated", r"column t_s, line 3: time is not strictly increasing",
          rows=_rows_with(1, "0.00,0.1,0.2,1,2")),
        c("value_nan", r"column q2_rad, line 3: value is not finite", rows=_rows_with(1, "0.01,0.1,nan,1,2")),
        c("value_inf", r"column tau_motor1_Nm, line 4: value is not finite", rows=_rows_with(2, "0.02,0.1,0.2,inf,2")),
        c("time_nan", r"column t_s, line 4: time is not finite", rows=_rows_with(2, "nan,0.1,0.2,1,2")),
        c("not_a_number", r"column q2_rad, line 4: 'x' is not a number", rows=_rows_with(2, "0.02,0.1,x,1,2")),
        c("empty_field", r"column q1_rad, line 3: '' is not a number", rows=_rows_with(1, "0.01,,0.2,1,2")),
        c("short_row", r"line 3: 4 fields, the header \(line 1\) has 5", rows=_rows_with(1, "0.01,0.1,0.2,1")),
        c("long_row", r"line 5: 6 fields, the header \(line 1\) has 5", rows=_rows_with(3, "0.03,0.1,0.2,1,2,3")),
        c("semicolons", r"line 2 \(units row\): 1 fields, the header has 5",
          rows=[r.replace(",", ";") for r in CSV_ROWS]),
        c("valid_not_01", r"column valid, line 4: expected 0 or 1, got 2",
          head=CSV_HEAD + ",valid", rows=[r + (",2" if k == 2 else ",1") for k, r in enumerate(CSV_ROWS)]),
        c("single_row", r"channel t_s: 1 sample\(s\); expected at least 2", rows=CSV_ROWS[:1]),
        c("header_only", r"no data rows after the header \(line 1\)", rows=[]),
        c("empty_file", r"no header line", raw=b""),
        c("comments_only", r"no header line", raw=b"# robident-twin recording\n# sample_rate_hz: 100\n"),
        c("non_utf8", r"not a readable text file", raw=b"t_s,q1_\xe4\n0,1\n"),
        c("unknown_option", r"bad option for the csv importer", options={"topic": "/joint_states"}),
        c("q_cmd_misspelt", r"column qcmd1_rad: unknown name, did you mean 'q_cmd'\?",
          head=CSV_HEAD + ",qcmd1_rad,qcmd2_rad", rows=[r + ",0.1,0.2" for r in CSV_ROWS]),
        c("tau_joint_misspelt", r"column tau_jont1_Nm: unknown name, did you mean 'tau_joint'\?",
          head=CSV_HEAD + ",tau_jont1_Nm,tau_jont2_Nm", rows=[r + ",1,2" for r in CSV_ROWS]),
    ]


# =============================================================================== NPZ recordings

def _npz_base(N: int = 6, n: int = 2) -> dict[str, Any]:
    t = np.arange(N) * 0.01
    return {"t_s": t, "q_rad": np.full((N, n), 0.1), "tau_motor_Nm": np.ones((N, n)), "q_cmd_rad": np.full((N, n), 0.1),
            "sample_rate_hz": 100.0, "period_samples": -1, "n_periods": -1, "metadata": json.dumps({"robot": "x"})}


def _npz_case(cid: str, expect: str, change: Callable[[dict], Any] | None = None, raw: bytes | None = None) -> Case:
    def make(d: Path):
        p = d / f"{cid}.npz"
        if raw is not None:
            p.write_bytes(raw)
            return p, {}
        z = _npz_base()
        change(z)
        with open(p, "wb") as f:
            np.savez(f, **z)
        return p, {}

    return Case(cid, "npz", make, expect, "FileFormatError")


def _obj(a) -> np.ndarray:
    out = np.empty(len(a), dtype=object)
    out[:] = list(a)
    return out


def _truncated_npz() -> bytes:
    import io

    buf = io.BytesIO()
    np.savez(buf, **_npz_base())
    return buf.getvalue()[: len(buf.getvalue()) // 2]


def npz_cases() -> list[Case]:
    c = _npz_case
    return [
        c("object_q", r"array q_rad: not a plain numeric array", lambda z: z.__setitem__("q_rad", _obj(z["q_rad"]))),
        c("object_time", r"array t_s: not a plain numeric array", lambda z: z.__setitem__("t_s", _obj(z["t_s"]))),
        c("object_metadata", r"array metadata: not a plain numeric array",
          lambda z: z.__setitem__("metadata", np.array({"robot": "x"}, dtype=object))),
        c("missing_time", r"missing array t_s", lambda z: z.pop("t_s")),
        c("missing_q", r"missing array q_rad", lambda z: z.pop("q_rad")),
        c("missing_torque", r"missing array tau_motor_Nm", lambda z: z.pop("tau_motor_Nm")),
        c("metadata_not_json", r"array metadata: expected a JSON object", lambda z: z.__setitem__("metadata", "{robot")),
        c("metadata_list", r"array metadata: expected a JSON object, got list", lambda z: z.__setitem__("metadata", "[1]")),
        c("string_q", r"channel q_rad: expected real numbers, got values of type <U",
          lambda z: z.__setitem__("q_rad", np.full((6, 2), "a"))),
        c("complex_torque", r"channel tau_motor_Nm: expected real numbers, got complex",
          lambda z: z.__setitem__("tau_motor_Nm", z["tau_motor_Nm"] + 1j)),
        c("short_q", r"channel q_rad: expected 6 samples .*got shape \(5, 2\)", lambda z: z.__setitem__("q_rad", z["q_rad"][:5])),
        c("q_3d", r"channel q_rad: expected 6 samples .*got shape \(6, 2, 1\)",
          lambda z: z.__setitem__("q_rad", z["q_rad"][:, :, None])),
        c("joints_differ", r"channel tau_motor_Nm: 3 joints, expected 2",
          lambda z: z.__setitem__("tau_motor_Nm", np.ones((6, 3)))),
        c("nan_q", r"column q_rad\[2\], sample 3: value is not finite",
          lambda z: z["q_rad"].__setitem__((3, 1), np.nan)),
        c("time_backwards", r"column t_s, sample 2: time is not strictly increasing",
          lambda z: z.__setitem__("t_s", np.array([0, 0.01, 0.005, 0.03, 0.04, 0.05]))),
        c("rate_vector", r"array sample_rate_hz: expected one number", lambda z: z.__setitem__("sample_rate_hz", [1.0, 2.0])),
        c("rate_text", r"array sample_rate_hz: expected one number", lambda z: z.__setitem__("sample_rate_hz", "100")),
        c("rate_disagrees", r"field sample_rate_hz says 1000 Hz but the time column t_s is sampled at 100 Hz",
          lambda z: z.__setitem__("sample_rate_hz", 1000.0)),
        c("rate_nan", r"field sample_rate_hz: expected a positive, finite", lambda z: z.__setitem__("sample_rate_hz", np.nan)),
        c("period_fraction", r"field period_samples: expected a whole number >= 1, got 2.5",
          lambda z: z.update(period_samples=2.5, n_periods=2)),
        c("n_periods_nan", r"field n_periods: expected a whole number >= 1, got nan",
          lambda z: z.update(period_samples=3, n_periods=np.nan)),
        c("valid_not_01", r"channel valid: expected 0/1", lambda z: z.__setitem__("valid", np.full(6, 3))),
        c("tau_joint_misspelt", r"array tau_joint_nm: unknown name, did you mean 'tau_joint_Nm'\?",
          lambda z: z.__setitem__("tau_joint_nm", np.ones((6, 2)))),
        c("not_a_zip", r"not a readable \.npz file", raw=b"this is not a zip archive at all"),
        c("truncated_zip", r"not a readable \.npz file|array \w+: unreadable", raw=_truncated_npz()),
    ]


# =============================================================================== MAT recordings

def _mat_base(N: int = 6, n: int = 2) -> dict[str, Any]:
    return {"t_s": np.arange(N) * 0.01, "q_rad": np.full((N, n), 0.1), "tau_motor_Nm": np.ones((N, n))}


def _mat_case(cid: str, expect: str, change: Callable[[dict], Any] | None = None, raw: bytes | None = None,
              options: dict | None = None, error: str = "FileFormatError") -> Case:
    def make(d: Path):
        import scipy.io

        p = d / f"{cid}.mat"
        if raw is not None:
            p.write_bytes(raw)
            return p, dict(options or {})
        m = _mat_base()
        change(m)
        scipy.io.savemat(p, m)
        return p, dict(options or {})

    return Case(cid, "mat", make, expect, error)


def mat_cases() -> list[Case]:
    c = _mat_case
    return [
        c("time_string", r"variable t_s: expected a real numeric array, got text", lambda m: m.__setitem__("t_s", "0:0.01:1")),
        c("q_string", r"variable q_rad: expected a real numeric array, got text", lambda m: m.__setitem__("q_rad", "zeros")),
        c("torque_struct", r"variable tau_motor_Nm: expected a real numeric array, got a mat_struct",
          lambda m: m.__setitem__("tau_motor_Nm", {"a": 1.0})),
        c("q_cell", r"variable q_rad: expected a real numeric array",
          lambda m: m.__setitem__("q_rad", np.array(["a", 1.0], dtype=object))),
        c("q_complex", r"variable q_rad: expected a real numeric array, got complex numbers",
          lambda m: m.__setitem__("q_rad", m["q_rad"] * 1j)),
        c("rate_nan", r"variable sample_rate_hz: expected a positive, finite sample rate",
          lambda m: m.__setitem__("sample_rate_hz", np.nan)),
        c("rate_string", r"variable sample_rate_hz: expected one number, got text",
          lambda m: m.__setitem__("sample_rate_hz", "100 Hz")),
        c("rate_disagrees", r"variable sample_rate_hz says 250 Hz but the time column t_s is sampled at 100 Hz",
          lambda m: m.__setitem__("sample_rate_hz", 250.0)),
        c("rate_vector", r"variable sample_rate_hz: expected one number", lambda m: m.__setitem__("sample_rate_hz", [1.0, 2.0])),
        c("period_nan", r"field period_samples: expected a whole number >= 1, got nan",
          lambda m: m.update(period_samples=np.nan, n_periods=2.0)),
        c("n_periods_fraction", r"field n_periods: expected a whole number >= 1, got 1.5",
          lambda m: m.update(period_samples=4.0, n_periods=1.5)),
        c("missing_time", r"missing variable t_s or t_ms", lambda m: m.pop("t_s")),
        c("missing_q", r"missing variable q_rad or q_deg", lambda m: m.pop("q_rad")),
        c("missing_torque", r"missing variable tau_motor_Nm", lambda m: m.pop("tau_motor_Nm")),
        c("torque_rows", r"variable tau_motor_Nm: 4 samples .*has 6", lambda m: m.__setitem__("tau_motor_Nm", np.ones((4, 2)))),
        c("torque_nan", r"column tau_motor_Nm\(:, 2\), row 4: value is not finite",
          lambda m: m["tau_motor_Nm"].__setitem__((3, 1), np.nan)),
        c("time_backwards", r"column t_s, row 2: time is not strictly increasing",
          lambda m: m.__setitem__("t_s", m["t_s"][::-1].copy())),
        c("time_matrix", r"variable t_s: expected a vector of times, got shape \(2, 3\)",
          lambda m: m.__setitem__("t_s", np.arange(6.0).reshape(2, 3))),
        c("q_3d", r"variable q_rad: expected samples x joints, got shape \(6, 2, 2\)",
          lambda m: m.__setitem__("q_rad", np.zeros((6, 2, 2)))),
        c("tau_joint_misspelt", r"variable tau_joint_nm: unknown name, did you mean 'tau_joint_Nm'\?",
          lambda m: m.__setitem__("tau_joint_nm", np.ones((6, 2)))),
        c("mapped_variable_missing", r"missing variable pos", lambda m: None, options={"variables": {"q_rad": "pos"}}),
        c("garbage", r"not a readable MATLAB \.mat file", raw=b"MATLAB 5.0 MAT-file, but not really" + b"\x00" * 20),
        c("empty", r"not a readable MATLAB \.mat file", raw=b""),
        c("cloos_without_average", r"missing field 'q_meas\.average' \(struct has \['x'\]\)", lambda m: m.update(
            time_vec_save=np.arange(6) * 0.002, q_meas={"x": 1.0}, dq_meas={"x": 1.0}, ddq_meas={"x": 1.0},
            tau_meas={"x": 1.0}), error="RobidentError"),
    ]


# =============================================================================== MCAP recordings

def _good_recording(N: int = 6, n: int = 2):
    from hal.protocol import Recording

    return Recording(t_s=np.arange(N) * 0.01, q_rad=np.full((N, n), 0.1), tau_motor_Nm=np.ones((N, n)), tau_joint_Nm=None,
                     q_cmd_rad=np.full((N, n), 0.1), sample_rate_hz=100.0)


def _write_joint_states(p: Path, msgs: list[dict], meta: dict[str, str] | None = None, topic: str = "/joint_states",
                        extra: list[tuple[str, list[dict]]] = ()) -> None:
    """A bare .mcap of JointState messages, each {stamp_ns, name, position, effort}; ``meta`` the
    ``robident`` metadata record."""
    from hal.files.ros_io import JOINT_STATE, _typestore, _writer

    ts = _typestore()
    JS = ts.types[JOINT_STATE]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    f, w, channel = _writer(p, ts)
    try:
        for tp, ms in [(topic, msgs), *extra]:
            cid = channel(tp, JOINT_STATE)
            for k, m in enumerate(ms):
                ns = m["stamp_ns"]
                msg = JS(header=Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id=""), name=m["name"],
                         position=np.asarray(m["position"], float), velocity=np.zeros(0),
                         effort=np.asarray(m["effort"], float))
                w.add_message(cid, log_time=ns, publish_time=ns, data=bytes(ts.serialize_cdr(msg, JOINT_STATE)), sequence=k)
        if meta is not None:
            w.add_metadata("robident", meta)
        w.finish()
    finally:
        f.close()


def _msgs(N: int = 6, change: Callable[[int, dict], None] | None = None) -> list[dict]:
    out = []
    for k in range(N):
        m = {"stamp_ns": 10**9 + k * 10_000_000, "name": ["joint1", "joint2"], "position": [0.1, 0.2], "effort": [1.0, 2.0]}
        if change:
            change(k, m)
        out.append(m)
    return out


def _mcap_case(cid: str, expect: str, make_file: Callable[[Path], None], options: dict | None = None) -> Case:
    def make(d: Path):
        p = d / f"{cid}.mcap"
        make_file(p)
        return p, dict(options or {})

    return Case(cid, "mcap", make, expect, "FileFormatError")


def _flip_chunk_byte(p: Path) -> None:
    """Write a good recording, then flip one byte inside its first chunk's records."""
    from hal.files import save_recording

    save_recording(_good_recording(N=40), p)
    data = bytearray(p.read_bytes())
    # MCAP: magic (8 bytes), then records of opcode (1) + length (8); the chunk record has opcode 0x06
    pos = 8
    while data[pos] != 0x06:
        pos += 9 + int.from_bytes(data[pos + 1:pos + 9], "little")
    length = int.from_bytes(data[pos + 1:pos + 9], "little")
    data[pos + 9 + length // 2] ^= 0xFF
    p.write_bytes(bytes(data))


def _truncate(p: Path, frac: float) -> None:
    from hal.files import save_recording

    save_recording(_good_recording(N=40), p)
    data = p.read_bytes()
    p.write_bytes(data[: int(len(data) * frac)])


def _trajectory_mcap(p: Path) -> None:
    from hal.files import save_trajectory
    from hal.protocol import JointTrajectory

    t = np.arange(5) * 0.1
    z = np.zeros((5, 2))
    save_trajectory(JointTrajectory(t, z, z, z, period_s=0.5), p)


def _meta(**kw) -> dict[str, str]:
    base = {"kind": "recording", "sample_rate_hz": "100.0", "period_samples": "None", "n_periods": "None",
            "metadata": "{}"}
    base.update(kw)
    return base


def _bag_folder(cid: str, expect: str, fill: Callable[[Path], None]) -> Case:
    def make(d: Path):
        bag = d / cid
        bag.mkdir()
        fill(bag)
        return bag, {}

    return Case(cid, "mcap", make, expect, "FileFormatError")


def mcap_cases() -> list[Case]:
    c = _mcap_case
    w = _write_joint_states
    return [
        _bag_folder("bag_without_metadata", r"a folder that is not a rosbag2 recording \(no metadata\.yaml\)",
                    lambda b: (b / "notes.txt").write_text("x")),
        _bag_folder("bag_metadata_garbage", r"not a readable rosbag2 / MCAP file",
                    lambda b: (b / "metadata.yaml").write_text("rosbag2_bagfile_information: [unclosed\n")),
        c("bit_flipped_chunk", r"topic /joint_states, message 0: unreadable \(damaged chunk", _flip_chunk_byte),
        c("truncated", r"not a readable rosbag2 / MCAP file", lambda p: _truncate(p, 0.6)),
        c("garbage", r"not a readable rosbag2 / MCAP file", lambda p: p.write_bytes(b"\x89MCAP0\r\n" + b"\x01" * 64)),
        c("empty", r"not a readable rosbag2 / MCAP file", lambda p: p.write_bytes(b"")),
        c("topic_missing", r"topic /robot/joint_states not found; topics are /joint_states",
          lambda p: w(p, _msgs()), {"topic": "/robot/joint_states"}),
        c("wrong_message_type", r"topic /joint_trajectory carries trajectory_msgs/msg/JointTrajectory, expected "
          r"sensor_msgs/msg/JointState", _trajectory_mcap, {"topic": "/joint_trajectory"}),
        c("joint_missing", r"topic /joint_states, message 0: joint\(s\) \['elbow'\] missing",
          lambda p: w(p, _msgs()), {"joint_names": ["joint1", "elbow"]}),
        c("position_length", r"topic /joint_states, message 3: field position has 1 values, field name has 2 joints",
          lambda p: w(p, _msgs(change=lambda k, m: m.__setitem__("position", [0.1]) if k == 3 else None))),
        c("effort_nan", r"column /joint_states\.effort\[joint2\], message 2: value is not finite",
          lambda p: w(p, _msgs(change=lambda k, m: m.__setitem__("effort", [1.0, np.nan]) if k == 2 else None))),
        c("stamps_repeat", r"topic /joint_states, message 4: header time is not strictly increasing",
          lambda p: w(p, _msgs(change=lambda k, m: m.__setitem__("stamp_ns", 10**9 + 30_000_000) if k == 4 else None))),
        c("one_message", r"topic /joint_states: 1 message\(s\), need at least 2", lambda p: w(p, _msgs(N=1))),
        c("empty_names", r"topic /joint_states, message 0: field name is empty",
          lambda p: w(p, _msgs(change=lambda k, m: m.update(name=[], position=[], effort=[])))),
        c("meta_rate_text", r"field sample_rate_hz: expected a sample rate in Hz, got 'abc'",
          lambda p: w(p, _msgs(), _meta(sample_rate_hz="abc"))),
        c("meta_rate_disagrees", r"field sample_rate_hz says 1000 Hz but the time column .* 100 Hz",
          lambda p: w(p, _msgs(), _meta(sample_rate_hz="1000.0"))),
        c("meta_period_text", r"field period_samples: expected a whole number >= 1, got 'x'",
          lambda p: w(p, _msgs(), _meta(period_samples="x", n_periods="2"))),
        c("meta_metadata_not_json", r"MCAP metadata record robident, field metadata: expected a JSON object",
          lambda p: w(p, _msgs(), _meta(metadata="{oops"))),
        c("meta_metadata_list", r"field metadata: expected a JSON object, got a JSON list",
          lambda p: w(p, _msgs(), _meta(metadata="[1, 2]"))),
        c("command_stamps_differ", r"topic /joint_commands: 5 messages whose stamps differ from topic /joint_states",
          lambda p: w(p, _msgs(), extra=[("/joint_commands", _msgs(N=5))])),
        c("bad_effort_as", r"effort_as must be motor_torque or joint_torque", lambda p: w(p, _msgs()), {"effort_as": "both"}),
        c("bad_time_source", r"time_source must be header or log", lambda p: w(p, _msgs()), {"time_source": "wall"}),
        c("unknown_option", r"bad option for the mcap importer", lambda p: w(p, _msgs()), {"sample_time_s": 0.01}),
    ]


# =============================================================================== KUKA KRC4 traces

def _diadem(dat: Path, channels, n: int, dt_s: float | None, *, time_lines: list[str] | None = None,
            edit: Callable[[list[str]], list[str]] | None = None, raw: np.ndarray | None = None) -> None:
    """A minimal DIAdem header + .r64: channels = [(name, unit, values)]."""
    head = ["DIAEXTENDED  {@:ENGLISH", "#BEGINGLOBALHEADER", "1,WINDOWS", "#ENDGLOBALHEADER"]
    if dt_s is not None:
        head += ["#BEGINCHANNELHEADER", "200,Zeit", "202,s", "210,IMPLIZIT", f"220,{n}", "240,0", f"241,{dt_s!r}",
                 "#ENDCHANNELHEADER"] if time_lines is None else time_lines
    for k, (name, unit, _) in enumerate(channels):
        head += ["#BEGINCHANNELHEADER", f"200,{name}", f"202,{unit}", "210,EXPLIZIT", f"211,{dat.stem}.r64",
                 "214,REAL64", f"220,{n}", f"221,{k + 1}", "240,0", "241,1", "#ENDCHANNELHEADER"]
    if edit:
        head = edit(head)
    dat.write_text("\n".join(head) + "\n", encoding="latin-1")
    data = np.column_stack([ch[2] for ch in channels]) if raw is None else raw
    np.asarray(data, "<f8").tofile(dat.with_suffix(".r64"))


def _trace_channels(n: int = 8):
    return [("Istposition A1", "Grad", np.linspace(0, 10, n)), ("Istposition A2", "Grad", np.linspace(5, 6, n)),
            ("Istmoment A1", "Nm", np.ones(n)), ("Istmoment A2", "Nm", np.ones(n) * 2)]


def _replace_line(old: str, new: str, nth: int = 0):
    def edit(head):
        idx = [i for i, s in enumerate(head) if s == old]
        head = list(head)
        head[idx[nth]] = new
        return head
    return edit


def _krc4_case(cid: str, expect: str, write: Callable[[Path], None], options: dict | None = None,
               suffix: str = ".dat") -> Case:
    def make(d: Path):
        dat = d / f"{cid}.dat"
        write(dat)
        return dat.with_suffix(suffix), dict(options or {})

    return Case(cid, "krc4", make, expect, "FileFormatError")


def krc4_cases() -> list[Case]:
    c = _krc4_case
    ch = _trace_channels()
    n, dt = 8, 0.004

    def std(**kw):
        return lambda dat: _diadem(dat, kw.pop("channels", ch), kw.pop("n", n), kw.pop("dt", dt), **kw)

    def r64_edit(fn):
        def write(dat):
            _diadem(dat, ch, n, dt)
            r = dat.with_suffix(".r64")
            data = np.fromfile(r, "<f8")
            out = fn(data)
            if isinstance(out, bytes):
                r.write_bytes(out)
            else:
                out.tofile(r)
        return write

    def with_inf(data):
        data[3 * 4 + 2] = np.inf  # sample 3, channel 3 (Istmoment A1)
        return data

    return [
        c("length_nan", r"channel 'Istposition A1': code 220 \(length\) = 'nan'; expected a whole number >= 1",
          std(edit=_replace_line("220,8", "220,nan", 1))),
        c("length_text", r"channel 'Istposition A1': code 220 = 'acht' is not a number",
          std(edit=_replace_line("220,8", "220,acht", 1))),
        c("length_zero", r"code 220 \(length\) = '0'; expected a whole number >= 1", std(edit=_replace_line("220,8", "220,0", 0))),
        c("length_fraction", r"code 220 \(length\) = '7.5'; expected a whole number",
          std(edit=_replace_line("220,8", "220,7.5", 2))),
        c("lengths_differ", r"channel 'Istmoment A1': length \(code 220\) 9, channel 'Zeit' has 8",
          std(edit=_replace_line("220,8", "220,9", 3))),
        c("column_nan", r"channel 'Istposition A2': code 221 \(column\) = 'nan'",
          std(edit=_replace_line("221,2", "221,nan"))),
        c("columns_repeat", r"columns \(code 221\) \[1, 1, 3, 4\] are not 1\.\.4", std(edit=_replace_line("221,2", "221,1"))),
        c("factor_text", r"channel 'Istmoment A2': code 241 = 'x' is not a number",
          std(edit=lambda h: [s if i < len(h) - 3 else ("241,x" if s == "241,1" else s) for i, s in enumerate(h)])),
        c("real32", r"channel 'Istposition A1': data type \(code 214\) 'REAL32'; only REAL64",
          std(edit=_replace_line("214,REAL64", "214,REAL32"))),
        c("r64_truncated", r"\.r64: 29 float64 values, the header .* announces 8 samples x 4 channels",
          r64_edit(lambda d: d[:-3])),
        c("r64_odd_bytes", r"\.r64: 31 float64 values|\.r64.*float64|r64_odd_bytes", r64_edit(lambda d: d.tobytes()[:-12])),
        c("r64_missing", r"data file r64_missing\.r64 \(code 211\) not found",
          lambda dat: (std()(dat), dat.with_suffix(".r64").unlink())),
        c("value_inf", r"channel 'Istmoment A1', sample 3: value is not finite", r64_edit(with_inf)),
        c("position_unit_mm", r"channel 'Istposition A2': unit 'mm'; expected one of grad, deg",
          std(channels=[ch[0], ("Istposition A2", "mm", ch[1][2]), *ch[2:]])),
        c("torque_unit_knm", r"channel 'Istmoment A1': unit 'kNm'; expected one of nm",
          std(channels=[*ch[:2], ("Istmoment A1", "kNm", ch[2][2]), ch[3]])),
        c("time_unit_min", r"channel 'Zeit': time unit 'min'; expected s or ms",
          std(edit=_replace_line("202,s", "202,min"))),
        c("time_step_zero", r"column Zeit, sample 1 \(step, code 241, must be > 0\): time is not strictly increasing",
          std(edit=_replace_line(f"241,{dt!r}", "241,0"))),
        c("time_step_nan", r"column Zeit, sample 0 .*time is not finite", std(edit=_replace_line(f"241,{dt!r}", "241,nan"))),
        c("header_not_closed", r"channel header not closed", std(edit=lambda h: h[:-1])),
        c("end_without_begin", r"line 5: #ENDCHANNELHEADER without #BEGINCHANNELHEADER",
          std(edit=lambda h: h[:4] + ["#ENDCHANNELHEADER"] + h[4:])),
        c("no_channel_headers", r"no channel headers \(#BEGINCHANNELHEADER\) - not a DIAdem header",
          lambda dat: dat.write_text("DIAEXTENDED\n#BEGINGLOBALHEADER\n#ENDGLOBALHEADER\n")),
        c("bad_code_line", r"line 6: expected 'code,value' in a channel header, got 'Name=Zeit'",
          std(edit=_replace_line("200,Zeit", "Name=Zeit"))),
        c("unnamed_channel", r"a channel header without a name \(code 200\)",
          std(edit=lambda h: [s for s in h if s != "200,Istmoment A2"])),
        c("no_position", r"no Istposition channel", std(channels=ch[2:])),
        c("torque_axis_missing", r"channel tau_motor of axis A2 missing \(German name Istmoment A2\)",
          std(channels=ch[:3])),
        c("no_torque_no_current", r"channel Istmoment A1 missing \(and no Iststrom to convert\)", std(channels=ch[:2])),
        c("no_time_no_option", r"no time channel \(IMPLIZIT, code 240/241\); give sample_time_s", std(dt=None)),
        c("sample_time_text", r"option sample_time_s: expected a positive time in s, got 'fast'", std(dt=None),
          {"sample_time_s": "fast"}),
        c("sample_time_negative", r"option sample_time_s: expected a positive time in s, got -0.004", std(dt=None),
          {"sample_time_s": -0.004}),
        c("torque_constant_text", r"option torque_constant_Nm_per_A: expected a number or 2 numbers",
          std(channels=[*ch[:2], ("Iststrom A1", "A", np.ones(n)), ("Iststrom A2", "A", np.ones(n))]),
          {"torque_constant_Nm_per_A": "k"}),
        c("torque_constant_zero", r"option torque_constant_Nm_per_A: expected finite non-zero values",
          std(channels=[*ch[:2], ("Iststrom A1", "A", np.ones(n)), ("Iststrom A2", "A", np.ones(n))]),
          {"torque_constant_Nm_per_A": [1.0, 0.0]}),
        c("duplicate_axis", r"channel 'Istposition 1': axis 1 q also in channel 'Istposition A1'",
          std(channels=[*ch, ("Istposition 1", "Grad", ch[0][2])])),
        c("no_axis_number", r"channel 'Istposition': no axis number in the name or the file name",
          std(channels=[("Istposition", "Grad", ch[0][2]), *ch[2:3]])),
        c("dat_missing", r"dat_missing\.dat: file not found", lambda dat: None),
    ]


# =============================================================================== plausibility

def _plausible(N: int = 200, rate_hz: float = 20.0):
    """A recording of kuka_ir361 that passes the plausibility check: positions inside the
    limits, torques at 30 % of the limits."""
    from robident_twin.model.robot import load_robot

    spec = load_robot(PLAUSIBILITY_ROBOT)
    t = np.arange(N) / rate_hz
    mid, half = (spec.q_min_rad + spec.q_max_rad) / 2, (spec.q_max_rad - spec.q_min_rad) / 2
    q = mid + 0.5 * half * np.sin(2 * np.pi * 0.1 * t)[:, None]
    tau = 0.3 * spec.tau_max_Nm * np.cos(2 * np.pi * 0.1 * t)[:, None]
    return spec, t, q, tau


def _plaus_case(cid: str, expect: str, change: Callable[[dict], None]) -> Case:
    def make(d: Path):
        from hal.files import save_recording
        from hal.protocol import Recording

        spec, t, q, tau = _plausible()
        ch = {"t_s": t, "q_rad": q, "tau_motor_Nm": tau, "tau_joint_Nm": tau.copy(), "q_cmd_rad": q.copy(),
              "sample_rate_hz": 20.0}
        change(ch)
        p = d / f"{cid}.csv"
        save_recording(Recording(**ch), p)
        return p, {}

    return Case(cid, "plausibility", make, expect, "RecordingError")


def plausibility_cases() -> list[Case]:
    c = _plaus_case
    return [
        c("q_in_degrees", r"channel q_rad, joint A1, sample \d+: .* rad is outside the joint limits .*looks like degrees",
          lambda ch: ch.update(q_rad=np.degrees(ch["q_rad"]))),
        c("q_joint2_in_degrees", r"channel q_rad, joint A2, .*looks like degrees",
          lambda ch: ch["q_rad"].__setitem__((slice(None), 1), np.degrees(ch["q_rad"][:, 1]))),
        c("q_cmd_in_degrees", r"channel q_cmd_rad, joint A1, .*looks like degrees",
          lambda ch: ch.update(q_cmd_rad=np.degrees(ch["q_cmd_rad"]))),
        c("q_beyond_limit", r"channel q_rad, joint A3, sample 17: .* outside the joint limits .*expected positions in rad",
          lambda ch: ch["q_rad"].__setitem__((17, 2), 0.3 + ch["q_rad"][17, 2] + np.ptp(ch["q_rad"][:, 2]) * 10)),
        c("torque_x1000", r"channel tau_motor_Nm, joint A\d, sample \d+: .* exceeds 2 x the torque limit .*looks like mNm",
          lambda ch: ch.update(tau_motor_Nm=1000 * ch["tau_motor_Nm"])),
        c("joint_torque_x1000", r"channel tau_joint_Nm, joint A\d, .*looks like mNm",
          lambda ch: ch.update(tau_joint_Nm=1000 * ch["tau_joint_Nm"])),
        c("torque_joint3_x1000", r"channel tau_motor_Nm, joint A3, .*looks like mNm",
          lambda ch: ch["tau_motor_Nm"].__setitem__((slice(None), 2), 1000 * ch["tau_motor_Nm"][:, 2])),
        c("torque_x5", r"channel tau_motor_Nm, joint A\d, .* exceeds 2 x the torque limit",
          lambda ch: ch.update(tau_motor_Nm=5 * ch["tau_motor_Nm"] / 0.3)),
        c("two_joints", r"2 joints; expected the 3 joints of kuka_ir361",
          lambda ch: ch.update({k: v[:, :2] for k, v in ch.items() if isinstance(v, np.ndarray) and v.ndim == 2})),
    ]


def all_cases() -> list[Case]:
    return robot_cases() + csv_cases() + npz_cases() + mat_cases() + mcap_cases() + krc4_cases() + plausibility_cases()
