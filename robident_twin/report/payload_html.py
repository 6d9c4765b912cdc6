"""report.html of ``task=payload`` and the payload section of a two-experiment identification:
the payload's ten parameters with std and, on a twin, against the truth."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Mapping

from robident_twin.atomic import write_text_atomic


def _n(x: Any, fmt: str = ".5g") -> str:
    return "-" if x is None else format(float(x), fmt)


def payload_table_html(parameters, ground_truth: Mapping[str, Any] | None = None) -> str:
    """The parameter table (a row beyond 3 std of the truth is marked)."""
    twin = bool(parameters) and "true" in parameters[0]
    head = ["parameter", "unit", "estimate", "std"] + (["true", "error %", "z"] if twin else [])
    rows = []
    for p in parameters:
        cells = [html.escape(p["name"]), html.escape(p["unit"]), _n(p["estimate"]), _n(p["std"], ".3g")]
        if twin:
            cells += [_n(p["true"]), _n(p.get("error_percent"), ".3f"), _n(p["z"], ".2f")]
        bad = twin and abs(p["z"]) > 3
        cls = ' class="bad"' if bad else ""
        rows.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out = ("<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>")
    if ground_truth:
        g = ground_truth
        out += (f"<p>mass error {_n(g.get('mass_error_percent'), '.3f')} %, first moments (vector) "
                f"{_n(g.get('first_moment_error_percent'), '.3f')} %, inertia max |z| "
                f"{_n(g.get('inertia_max_abs_z'), '.2f')}, max |z| of the ten {_n(g.get('max_abs_z'), '.2f')}</p>")
    return out


def write_payload_report(run_dir: Path, summary: Mapping[str, Any]) -> Path:
    keys = ("robot", "backend", "measurement", "estimator", "robot_model", "robot_model_covariance", "n_samples",
            "n_periods", "cond", "chi2_per_dof")
    kv = "".join(f"<tr><td>{k}</td><td>{html.escape(str(summary.get(k)))}</td></tr>" for k in keys)
    design = summary.get("design") or {}
    kv += f"<tr><td>design</td><td>{html.escape(str(design))}</td></tr>"
    twin = summary.get("twin") or {}
    kv += f"<tr><td>twin</td><td>{html.escape(str(twin.get('name')))} {html.escape(str(twin.get('effects', [])))}</td></tr>"
    text = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>robident-twin payload</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            "padding:2px 8px;text-align:right}tr.bad{background:#fdd}</style></head><body>"
            f"<h1>Payload identification: {html.escape(str(summary.get('robot')))}</h1>"
            f"<h2>Run</h2><table>{kv}</table><h2>The payload's ten parameters (mounting frame)</h2>"
            + payload_table_html(summary["parameters"], summary.get("ground_truth")) + "</body></html>\n")
    path = Path(run_dir) / "report.html"
    write_text_atomic(path, text)
    return path
