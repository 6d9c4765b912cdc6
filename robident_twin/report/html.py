"""Self-contained HTML reports: one ``report.html`` per run, readable offline.

Every figure is embedded as a base64 PNG (``data:`` URL) and the style sheet is inline:
no external URL, no script. Three kinds of report, chosen from the files of the directory:

- identification run (``task=identify``, written at the end of every run): sections
  ``overview`` (robot, backend, estimator, measurement, samples, cond, chi2/dof, validation
  errors, timings), ``excitation`` (the design and its dry-run margins, checked without
  simulation), ``validation`` (measured vs predicted torques on the held-out trajectory),
  ``residuals`` (histograms per joint with the fitted Gaussian), ``parameters`` (estimate,
  std, RSD, truth, (est-true)/std, regrouping relation) and ``ground-truth``;
- Monte-Carlo job (``task=montecarlo``): ``mc-overview``, ``mc-bias`` (bias / standard
  error), ``mc-efficiency`` (var / CRLB with the chi-square interval), ``mc-coverage``
  (68 % coverage) and ``mc-table``;
- sweep aggregate (``task=aggregate``): ``agg-overview``, ``agg-plots`` and one
  ``job-<n>`` section per job with the three per-parameter plots.

``robident-twin task=report report.run_dir=<dir>`` rebuilds the report of a finished
run from its files (``summary.json``, ``report_data.npz``, the PNGs; for a sweep,
``aggregate/runs.parquet`` and ``aggregate/parameters.parquet``).
"""
from __future__ import annotations

import base64
import html
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from robident_twin.atomic import atomic_path, write_text_atomic
from robident_twin.errors import ConfigError
from robident_twin.report.plots import (
    _png_via_file,
    plot_mc_bias,
    plot_mc_coverage,
    plot_mc_efficiency,
    plot_residual_histograms,
    plot_z_histogram,
)

REPORT = "report.html"
DATA = "report_data.npz"
#: section ids of each report kind (stable: tests and docs link to them)
IDENTIFY_SECTIONS = ("overview", "excitation", "validation", "residuals", "parameters", "ground-truth")
MONTECARLO_SECTIONS = ("mc-overview", "mc-bias", "mc-efficiency", "mc-coverage", "mc-table")
AGGREGATE_SECTIONS = ("agg-overview", "agg-plots")

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#1d2733;
background:#f6f7f9;line-height:1.4}
header{background:#1f3b57;color:#fff;padding:14px 28px}header h1{margin:0;font-size:1.45em}
header p{margin:4px 0 0;opacity:.85;font-size:.92em}
nav{padding:6px 28px;background:#e3e8ee;font-size:.9em}nav a{margin-right:14px;color:#1f3b57}
main{padding:0 28px 40px;max-width:1400px}
section{background:#fff;border:1px solid #dde2e8;border-radius:6px;margin:18px 0;padding:6px 18px 14px}
h2{font-size:1.2em;border-bottom:1px solid #dde2e8;padding-bottom:4px}
table{border-collapse:collapse;font-size:.84em;margin:6px 0}
th,td{border:1px solid #dde2e8;padding:2px 7px;text-align:right;white-space:nowrap}
th{background:#eef1f5}td.l,th.l{text-align:left}.rel{text-align:left;white-space:normal;font-family:monospace;
font-size:.95em;color:#44505c}td:last-child{white-space:normal}
tr.bad td{background:#fde8e8}.pass{color:#1a7f37;font-weight:bold}.fail{color:#c62828;font-weight:bold}
img{max-width:100%;height:auto;display:block;margin:8px 0}
.kv td:first-child{text-align:left;color:#44505c;white-space:nowrap}.kv td{text-align:left;white-space:normal}
.note{color:#5b6670;font-size:.88em}.scroll{overflow-x:auto}
.row{display:flex;flex-wrap:wrap;gap:10px}.row img{max-width:32%;min-width:300px}
"""


# ----------------------------------------------------------------------------- html helpers

def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(x: Any, fmt: str = ".4g") -> str:
    if x is None:
        return "-"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return _e(x)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return format(v, fmt)


def _img(png: bytes | None, alt: str) -> str:
    if not png:
        return f'<p class="note">({_e(alt)}: no figure)</p>'
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _kv(rows: Sequence[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><td>{_e(k)}</td><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>'


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[int] = (0,),
           bad: Sequence[bool] | None = None) -> str:
    th = "".join(f'<th class="{"l" if i in left else ""}">{_e(h)}</th>' for i, h in enumerate(head))
    out = []
    for r, row in enumerate(rows):
        cls = ' class="bad"' if bad is not None and bad[r] else ""
        tds = "".join(f'<td class="{"l" if i in left else ""}">{c}</td>' for i, c in enumerate(row))
        out.append(f"<tr{cls}>{tds}</tr>")
    return f'<div class="scroll"><table><tr>{th}</tr>{"".join(out)}</table></div>'


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{_e(sid)}"><h2>{_e(title)}</h2>\n{body}\n</section>'


def _page(title: str, subtitle: str, sections: Sequence[tuple[str, str, str]]) -> str:
    nav = "".join(f'<a href="#{_e(s)}">{_e(t)}</a>' for s, t, _ in sections)
    body = "\n".join(_section(s, t, b) for s, t, b in sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body><header><h1>{_e(title)}</h1>"
            f"<p>{_e(subtitle)}</p></header><nav>{nav}</nav><main>\n{body}\n</main></body></html>\n")


def write_html(text: str, path: Path) -> Path:
    """Atomic write: a killed run never leaves a half-written report."""
    return write_text_atomic(path, text, encoding="utf-8")


# ----------------------------------------------------------------------------- identification data

@dataclass
class ReportData:
    """Arrays of an identification run that summary.json does not hold (``report_data.npz``)."""

    t_val_s: np.ndarray  # (n,) time within the averaged validation period, s
    tau_val_meas_Nm: np.ndarray  # (n, c) measured (period-averaged) validation torque
    tau_val_pred_Nm: np.ndarray  # (n, c) torque predicted by the estimate
    residuals_Nm: np.ndarray  # (m, c) estimation residuals on the excitation data
    channels: list[str]  # c channel names

    def save(self, path: Path) -> Path:
        path = Path(path)
        with atomic_path(path, suffix=".npz") as tmp:
            np.savez(tmp, t_val_s=self.t_val_s, tau_val_meas_Nm=self.tau_val_meas_Nm.astype(np.float32),
                     tau_val_pred_Nm=self.tau_val_pred_Nm.astype(np.float32),
                     residuals_Nm=self.residuals_Nm.astype(np.float32), channels=np.array(self.channels))
        return path

    @classmethod
    def load(cls, path: Path) -> "ReportData":
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                d = {k: z[k] for k in z.files}
        except Exception as exc:
            raise ConfigError(f"{path}: not a readable report data file ({exc})") from exc
        need = ("t_val_s", "tau_val_meas_Nm", "tau_val_pred_Nm", "residuals_Nm", "channels")
        missing = [k for k in need if k not in d]
        if missing:
            raise ConfigError(f"{path}: missing array(s) {missing}; expected {list(need)}")
        return cls(d["t_val_s"], d["tau_val_meas_Nm"].astype(float), d["tau_val_pred_Nm"].astype(float),
                   d["residuals_Nm"].astype(float), [str(c) for c in d["channels"]])


def report_data_from_result(result) -> ReportData:
    """The arrays of a :class:`robident_twin.pipeline.IdentificationResult`."""
    from robident_twin.model.build import channel_names

    vd = result.validation_data
    return ReportData(np.arange(vd.n_samples) / vd.sample_rate_hz, vd.tau_Nm, result.tau_val_pred_Nm,
                      result.estimate.residuals_Nm,
                      channel_names(result.model.spec, result.model.regressor.options.measurement))


def _decimated(dry, max_points: int = 1500):
    """The dry-run report with its time series thinned for plotting (margins untouched)."""
    import dataclasses

    n = len(dry.series.get("t_s", ()))
    step = max(1, int(math.ceil(n / max_points)))
    if step == 1:
        return dry
    series = {k: (v[::step] if isinstance(v, np.ndarray) and v.shape[:1] == (n,) else v)
              for k, v in dry.series.items()}
    return dataclasses.replace(dry, series=series)


def _flat_items(d: Mapping[str, Any], prefix: str = "", max_list: int = 30) -> list[tuple[str, str]]:
    """Scalars and short lists of a nested summary entry as (key, html) rows (long lists of
    records, e.g. per-parameter tables, are summarised by their length)."""
    rows: list[tuple[str, str]] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            rows += _flat_items(v, key + ".", max_list)
        elif isinstance(v, (list, tuple)):
            if v and all(isinstance(x, (int, float, str, bool)) or x is None for x in v) and len(v) <= max_list:
                rows.append((key, ", ".join(_num(x) if isinstance(x, float) else _e(x) for x in v)))
            else:
                rows.append((key, f"{len(v)} entries (summary.json)"))
        else:
            rows.append((key, _num(v) if isinstance(v, float) else _e(v)))
    return rows


def _noise_text(noise: Mapping[str, Any] | None) -> str:
    """The run's noise settings in words (keys left null take the robot file's values)."""
    if not noise:
        return "-"
    if not noise.get("enabled", True):
        return "off (perfect sensors)"
    set_ = [f"{k} = {v}" for k, v in noise.items() if k != "enabled" and v not in (None, 0, 0.0, [], {})]
    return _e("the robot file's sensor noise" + (", with " + ", ".join(set_) if set_ else ""))


def _margin_tables(margins) -> str:
    """Joint margins pivoted (one row per joint, one column per kind) and the other items listed."""
    kinds = [k for k in ("position", "velocity", "acceleration", "torque") if any(m.kind == k for m in margins)]
    joints: dict[str, dict[str, Any]] = {}
    other = []
    for m in margins:
        if m.kind in kinds and m.what.startswith("joint "):
            joints.setdefault(m.what[6:], {})[m.kind] = m
        else:
            other.append(m)

    def cell(m) -> str:
        if m is None:
            return "-"
        pct = f" ({100 * m.margin / abs(m.limit):.0f} %)" if m.limit else ""
        txt = f"{m.margin:.4g}{pct} at {m.time_s:.2f} s"
        return f'<span class="fail">{_e(txt)}</span>' if m.margin < 0 else _e(txt)

    units = {k: next(m.unit for m in margins if m.kind == k) for k in kinds}
    rows = [[_e(j)] + [cell(d.get(k)) for k in kinds] for j, d in joints.items()]
    bad = [any(m.margin < 0 for m in d.values()) for d in joints.values()]
    out = _table(["joint"] + [f"{k} [{units[k]}] (% of limit)" for k in kinds], rows, bad=bad)
    if other:
        out += _table(["kind", "item", "margin", "unit", "value", "limit", "t [s]"],
                      [[_e(m.kind), _e(m.what), _num(m.margin), _e(m.unit), _num(m.value), _num(m.limit),
                        _num(m.time_s, ".3f")] for m in other], left=(0, 1), bad=[m.margin < 0 for m in other])
    return out


def _dry_run_of(config: Mapping[str, Any]):
    """Dry run (no simulation) of the run's excitation design with the run's constraints;
    returns (report, spec) or (None, reason)."""
    import dataclasses

    from robident_twin.design.dryrun import DryRunConfig, dry_run
    from robident_twin.design.stored import resolve_design
    from robident_twin.errors import RobidentError
    from robident_twin.model.build import model_options, resolve_robot

    try:
        spec = resolve_robot(config["robot"])
        from robident_twin.design.auto import is_own_robot, robot_design_dir

        traj = resolve_design(config["robot"]["excitation"] if is_own_robot(spec, config["robot"])
                              else robot_design_dir(spec) / "excitation.yaml", spec)  # a user's robot: its own
        dcfg = DryRunConfig.from_config(config.get("design") or {})
        meas = model_options(config["model"], config["robot"]).measurement
        dcfg = dataclasses.replace(dcfg, simulate=False, measurement=meas)
        return dry_run(traj, spec, dcfg, write=False), spec
    except (RobidentError, KeyError, TypeError) as exc:
        return None, f"dry run not available: {exc}"
    except Exception as exc:  # the report still shows everything else, and why this part is missing
        return None, f"dry run failed: {type(exc).__name__}: {exc}"


# ----------------------------------------------------------------------------- identification report

def identify_html(summary: Mapping[str, Any], data: ReportData | None, run_dir: Path | None = None,
                  dry=None, spec=None, dry_note: str = "") -> str:
    """The HTML of an identification run. ``data`` None: the torque and residual figures
    are replaced by a note; ``dry`` (a :class:`DryRunReport`) with its ``spec``."""
    from robident_twin.report.tables import plot_parameters, plot_validation

    s = summary
    cfg = s.get("config") or {}
    params = s["parameters"]
    has_true = all("true" in p for p in params)
    est = np.array([p["estimate"] for p in params], float)
    std = np.array([p["std"] for p in params], float)
    z = (est - np.array([p["true"] for p in params], float)) / np.where(std > 0, std, np.nan) if has_true else None
    val = s["validation"]
    channels = data.channels if data is not None else [f"ch{j + 1}" for j in range(len(val["torque_rmse_Nm"]))]

    # overview
    timings = s.get("timings_s", {})
    rows = [("robot", _e(s["robot"])), ("backend", _e(s["backend"])), ("estimator", _e(s["estimator"])),
            ("measurement", _e(s["measurement"])),
            ("samples", f"{s['n_samples']} per channel x {len(s['residual_rms_Nm'])} channels "
                        f"(average of {s.get('n_periods', '?')} periods)"),
            ("base parameters", _e(s["n_base_parameters"])),
            ("condition number", _num(s["cond"], ".2f")),
            ("chi2 / dof", _num(s["chi2_per_dof"], ".3f")),
            ("seed", _e(cfg.get("seed", "-"))),
            ("sensor noise", _noise_text(cfg.get("noise")) if "ground_truth" in s else "as recorded"),
            ("total stage time", f"{sum(timings.values()):.2f} s")]
    if "ground_truth" in s:
        gt = s["ground_truth"]
        rows.append(("ground truth", f"{100 * gt['fraction_within_3std']:.1f} % within 3 std, "
                                     f"max |est-true|/std {gt['max_abs_z']:.2f}"))
    if s.get("twin") is not None:  # which twin produced the data (hal/sim/effects.py)
        tw = s["twin"]
        rows.append(("twin", _e(tw["name"] + (" with " + ", ".join(tw["effects"]) if tw.get("effects") else ""))))
    if s.get("mismatch") is not None:
        mm = s["mismatch"]
        txt = ("Durbin-Watson " + " ".join(f"{v:.2f}" for v in mm["durbin_watson"]) + " (2: white); lag-1 "
               "autocorrelation " + " ".join(f"{v:.2f}" for v in mm["residual_lag1_autocorrelation"]))
        if "beyond_3std" in mm:
            txt += f"; {len(mm['beyond_3std'])} base parameter(s) beyond 3 std of the truth"
        rows.append(("residual whiteness", _e(txt)))
    if run_dir is not None:
        rows.append(("run directory", _e(run_dir)))
    vrows = [["RMSE [Nm]"] + [_num(v, ".4f") for v in val["torque_rmse_Nm"]],
             ["NRMSE [%]"] + [_num(v, ".3f") for v in val["torque_nrmse_percent"]],
             ["residual RMS [Nm]"] + [_num(v, ".4f") for v in s["residual_rms_Nm"]]]
    if "simulated_noise_std_Nm" in val:
        vrows.append(["simulated noise std [Nm]"] + [_num(v, ".4f") for v in val["simulated_noise_std_Nm"]])
    overview = (_kv(rows) + "<h3>Validation (held-out trajectory) per channel</h3>"
                + _table(["", *channels], vrows)
                + "<h3>Timings per stage [s]</h3>"
                + _table(list(timings), [[_num(v, ".2f") for v in timings.values()]], left=()))

    # excitation + dry run
    if dry is not None:
        from robident_twin.design.dryrun import plot_dry_run

        verdict = '<span class="pass">PASS</span>' if dry.passed else '<span class="fail">FAIL</span>'
        margins_html = _margin_tables(dry.margins)
        excitation = (f"<p>Design <code>{_e(cfg.get('robot', {}).get('excitation', ''))}</code>: dry run "
                      f"{verdict} (content hash {_e(dry.hash[:16])}...; checked without simulation, "
                      f"<code>robident-twin task=dryrun</code> also runs the twin for the tracking error).</p>"
                      + "".join(f"<p class='fail'>{_e(r)}</p>" for r in dry.reasons)
                      + _img(_png_via_file(plot_dry_run, _decimated(dry), spec), "excitation trajectory and limits")
                      + "<h3>Smallest margin per joint (limit minus value; negative = violated)</h3>"
                      + margins_html
                      + "".join(f"<p class='note'>{_e(n)}</p>" for n in dry.notes))
    else:
        excitation = f"<p class='note'>{_e(dry_note or 'dry run not available')}</p>"

    # validation torques (the run's own PNG when it exists)
    vpng = run_dir / "validation_torques.png" if run_dir is not None else None
    if vpng is not None and vpng.is_file():
        validation = _img(vpng.read_bytes(), "measured vs predicted validation torques")
    elif data is not None:
        validation = _img(_png_via_file(plot_validation, data.t_val_s, data.tau_val_meas_Nm, data.tau_val_pred_Nm,
                                        data.channels), "measured vs predicted validation torques")
    else:
        validation = f"<p class='note'>no {DATA} and no validation_torques.png in the run directory</p>"

    # residuals
    if data is not None:
        sig = s.get("noise_std_of_mean_Nm")
        residuals = (_img(plot_residual_histograms(data.residuals_Nm, data.channels, sig), "residual histograms")
                     + "<p class='note'>Red: Gaussian fitted to the residuals (mean, std); dashed: the noise std "
                       "of the period average the estimator assumed.</p>")
    else:
        residuals = f"<p class='note'>no {DATA} in the run directory: residuals not available</p>"

    # parameters
    ppng = run_dir / "parameters.png" if run_dir is not None else None
    pfig = ppng.read_bytes() if ppng is not None and ppng.is_file() else _png_via_file(plot_parameters, s)
    head = ["#", "name", "unit", "estimate", "std", "RSD %"] + (["true", "(est-true)/std"] if has_true else []) \
        + ["regroups"]
    prow, bad = [], []
    for i, p in enumerate(params):
        row = [str(i + 1), _e(p["name"]), _e(p.get("unit", "")), _num(p["estimate"], ".6g"), _num(p["std"], ".3g"),
               _num(p["rsd_percent"], ".3g")]
        if has_true:
            row += [_num(p["true"], ".6g"), _num(z[i], ".2f")]
        row.append(f'<span class="rel">{_e(p.get("regroups", ""))}</span>')
        prow.append(row)
        bad.append(bool(has_true and np.isfinite(z[i]) and abs(z[i]) > 3))
    parameters = (_img(pfig, "base parameter estimates") + _table(head, prow, left=(1, 2, len(head) - 1), bad=bad)
                  + ("<p class='note'>Rows in red: |est-true|/std &gt; 3.</p>" if has_true else ""))

    # ground truth
    if has_true and "ground_truth" in s:
        gt = s["ground_truth"]
        zf = z[np.isfinite(z)]
        worst = np.argsort(-np.abs(np.nan_to_num(z)))[:5]
        ground = (_kv([("within 1 std", f"{100 * np.mean(np.abs(zf) <= 1):.1f} % (Gaussian: 68.3 %)"),
                       ("within 2 std", f"{100 * np.mean(np.abs(zf) <= 2):.1f} % (Gaussian: 95.4 %)"),
                       ("within 3 std", f"{100 * gt['fraction_within_3std']:.1f} % (Gaussian: 99.7 %)"),
                       ("max |est-true|/std", _num(gt["max_abs_z"], ".2f")),
                       ("mean, std of (est-true)/std", f"{np.mean(zf):.2f}, {np.std(zf):.2f} (Gaussian: 0, 1)"),
                       ("largest deviations", ", ".join(f"{_e(params[i]['name'])} {z[i]:+.2f}" for i in worst))])
                  + _img(plot_z_histogram(z), "normalised estimation errors"))
    else:
        ground = "<p class='note'>no ground truth (not a simulation run)</p>"

    sections = [("overview", "Run overview", overview),
                ("excitation", "Excitation trajectory and dry-run margins", excitation),
                ("validation", "Validation: measured vs predicted torques", validation),
                ("residuals", "Residual histograms", residuals),
                ("parameters", "Base parameters", parameters),
                ("ground-truth", "Ground truth", ground)]
    post = [k for k in ("reduction", "physical") if isinstance(s.get(k), Mapping)]
    if post:  # optional stages (reduction.method, physical.method): their scalar results
        sections.append(("postprocess", "Model reduction and physical consistency",
                         "".join(f"<h3>{_e(k)}</h3>" + _kv(_flat_items(s[k])) for k in post)))
    return _page(f"robident-twin identification: {s['robot']}",
                 f"{s['backend']} | {s['estimator']} | {s['measurement']} | {s['n_base_parameters']} base "
                 f"parameters | cond {float(s['cond']):.1f} | chi2/dof {float(s['chi2_per_dof']):.3g}", sections)


def write_identify_report(run_dir: Path, summary: Mapping[str, Any], data: ReportData | None,
                          out_dir: Path | None = None) -> Path:
    """Build ``report.html`` of an identification run in ``out_dir`` (default ``run_dir``; dry run included)."""
    run_dir = Path(run_dir)
    cfg = summary.get("config")
    dry, spec, note = None, None, "the run's config is not in summary.json: dry run not available"
    if cfg:
        dry, spec = _dry_run_of(cfg)
        if dry is None:
            note, spec = spec, None
    return write_html(identify_html(summary, data, run_dir, dry, spec, note), Path(out_dir or run_dir) / REPORT)


def report_identify_run(result, summary: Mapping[str, Any], run_dir: Path) -> Path:
    """End of ``task=identify``: store ``report_data.npz`` and write ``report.html``."""
    data = report_data_from_result(result)
    data.save(Path(run_dir) / DATA)
    return write_identify_report(run_dir, summary, data)


# ----------------------------------------------------------------------------- Monte-Carlo reports

def _mc_param_table(params: Sequence[Mapping[str, Any]]) -> str:
    head = ["#", "name", "true", "mean", "bias/SEM", "bias/CRLB SE", "CRLB std", "emp std", "var/CRLB",
            "in chi2 90 %", "cov68", "RMSE"]
    rows = [[str(i + 1), _e(p["name"]), _num(p["true"]), _num(p["mean"]), _num(p["bias_over_sem"], ".2f"),
             _num(p["bias_over_crlb_sem"], ".2f"), _num(p["crlb_std"], ".3g"), _num(p["emp_std"], ".3g"),
             _num(p["efficiency_ratio"], ".3f"), "yes" if p["ratio_in_chi2_90"] else "no",
             _num(p["coverage68"], ".2f"), _num(p["rmse"], ".3g")] for i, p in enumerate(params)]
    bad = [not p["ratio_in_chi2_90"] or abs(p["bias_over_crlb_sem"]) > 3 for p in params]
    return _table(head, rows, left=(1,), bad=bad) + (
        "<p class='note'>Rows in red: |bias / CRLB standard error| &gt; 3 or var/CRLB outside the chi-square "
        "90 % interval (about 10 % of the rows by chance alone; the tests above control the false-alarm "
        "rate).</p>")


def montecarlo_html(job: Mapping[str, Any], run_dir: Path | None = None) -> str:
    """The HTML of one Monte-Carlo job (the ``summary.json`` that :func:`sweeps.run_job` writes)."""
    summ, tests, row = job["summary"], job.get("tests") or {}, job.get("row") or {}
    params, o = summ["parameters"], summ["overall"]
    n = int(o["n_runs"])
    lo, hi = o["chi2_90_interval"]
    bonf = tuple(tests["ratio_interval"]) if tests.get("ratio_interval") else None
    ok = lambda b: '<span class="pass">ok</span>' if b else '<span class="fail">FAIL</span>'  # noqa: E731
    rows = [("robot", _e(row.get("robot", "-"))), ("mode", _e(row.get("mode", "-"))),
            ("estimator", _e(row.get("estimator", "-"))), ("measurement", _e(row.get("measurement", "-"))),
            ("noise scale", _e(row.get("noise_scale", "-"))), ("friction", _e(row.get("friction", "-"))),
            ("design", _e(row.get("design", "-"))), ("runs x parameters", f"{n} x {o['n_params']}"),
            ("samples per run", _e(row.get("n_samples", "-"))),
            ("means inside their 68 % interval", f"{100 * o['share_means_in_68']:.0f} %"),
            ("var/CRLB inside the chi-square 90 % interval", f"{100 * o['share_ratios_in_chi2_90']:.0f} % "
                                                              f"([{lo:.3f}, {hi:.3f}])"),
            ("mean var/CRLB", _num(o["mean_efficiency_ratio"], ".3f")),
            ("mean 68 % coverage", _num(o["mean_coverage68"], ".3f")),
            ("log10 det(emp cov)/det(CRLB)", f"{_num(o['log10_det_ratio'], '.3f')} (efficient: "
                                              f"{_num(o['log10_det_ratio_expected'], '.3f')})"),
            ("torque NRMS", f"{_num(o['torque_nrms_percent'], '.3f')} %"),
            ("wall time", f"{_num(row.get('wall_s'), '.1f')} s")]
    if tests:
        rows += [("mean-consistency test", f"N d'C^-1 d = {tests['mean_statistic']:.1f} (limit "
                                           f"{tests['mean_threshold']:.1f}, p = {tests['mean_p_value']:.3g}) "
                                           f"{ok(tests['mean_ok'])}"),
                 ("variance-ratio test", f"Bonferroni interval [{bonf[0]:.3f}, {bonf[1]:.3f}] "
                                         f"{ok(tests['variance_ok'])}"
                                         + (f" outside: {_e(', '.join(tests['ratios_outside'][:10]))}"
                                            if tests.get("ratios_outside") else "")),
                 ("false-alarm rate", _e(tests["alpha"]))]
    if run_dir is not None:
        rows.append(("run directory", _e(run_dir)))
    sections = [("mc-overview", "Monte-Carlo overview", _kv(rows)),
                ("mc-bias", "Bias per parameter", _img(plot_mc_bias(params, n), "bias over standard error")),
                ("mc-efficiency", "Efficiency per parameter",
                 _img(plot_mc_efficiency(params, n, bonferroni=bonf), "variance over CRLB")),
                ("mc-coverage", "68 % coverage per parameter", _img(plot_mc_coverage(params, n), "coverage")),
                ("mc-table", "Per-parameter statistics", _mc_param_table(params))]
    verdict = "tests passed" if tests.get("mean_ok") and tests.get("variance_ok") else "tests FAILED" if tests else ""
    return _page(f"robident-twin Monte-Carlo: {row.get('robot', '')} {row.get('mode', '')} {row.get('estimator', '')}",
                 f"{n} runs | {o['n_params']} base parameters | {verdict}", sections)


def write_montecarlo_report(run_dir: Path, out_dir: Path | None = None) -> Path:
    """``report.html`` of a finished Monte-Carlo job directory (from its ``summary.json``), in
    ``out_dir`` (default the job directory)."""
    run_dir = Path(run_dir)
    job = _read_json(run_dir / "summary.json")
    if "summary" not in job:
        raise ConfigError(f"{run_dir / 'summary.json'}: not a Monte-Carlo job summary (no 'summary' key)")
    return write_html(montecarlo_html(job, run_dir), Path(out_dir or run_dir) / REPORT)


def aggregate_html(agg_dir: Path, max_jobs: int = 24) -> str:
    """The HTML of a sweep aggregate (``runs.parquet``, ``parameters.parquet``, the PNGs)."""
    import pandas as pd

    agg_dir = Path(agg_dir)
    runs = pd.read_parquet(agg_dir / "runs.parquet")
    pfile = agg_dir / "parameters.parquet"
    params = pd.read_parquet(pfile) if pfile.is_file() else None
    cols = [c for c in ("job_dir", "robot", "mode", "estimator", "friction", "noise_scale", "runs", "n_params",
                        "share_means_in_68", "share_ratios_in_chi2_90", "mean_coverage68", "mean_efficiency_ratio",
                        "rms_bias_over_crlb_sem", "tests_passed") if c in runs]
    rows = [[_e(v) if not isinstance(v, float) else _num(v) for v in r] for r in runs[cols].itertuples(index=False)]
    bad = [not bool(x) for x in runs["tests_passed"]] if "tests_passed" in runs else None
    overview = (f"<p>{len(runs)} finished job(s) in <code>{_e(agg_dir.parent)}</code>.</p>"
                + _table(cols, rows, left=tuple(range(6)), bad=bad))
    imgs = [_img((agg_dir / f"{n}.png").read_bytes(), n) for n in
            ("bias_vs_noise", "coverage_vs_noise", "efficiency_per_estimator") if (agg_dir / f"{n}.png").is_file()]
    sections = [("agg-overview", "Sweep overview", overview),
                ("agg-plots", "Sweep plots", f'<div class="row">{"".join(imgs)}</div>' if imgs
                 else "<p class='note'>no plots (output.plots=false)</p>")]
    if params is not None:
        for k, (jd, g) in enumerate(params.groupby("job_dir", sort=True)):
            if k >= max_jobs:
                sections.append(("job-more", "More jobs", f"<p class='note'>{params['job_dir'].nunique() - max_jobs} "
                                                           f"more job(s) not shown</p>"))
                break
            r = runs[runs["job_dir"] == jd].iloc[0]
            n = int(r["runs"])
            ps = g.to_dict("records")
            title = f"job {jd}: {r['robot']} {r['mode']} {r['estimator']} noise x{r['noise_scale']:g} {r['friction']}"
            body = (_img(plot_mc_bias(ps, n, f"{title}: bias / standard error"), "bias")
                    + _img(plot_mc_efficiency(ps, n, f"{title}: var / CRLB, chi-square 90 % interval shaded"),
                           "efficiency")
                    + _img(plot_mc_coverage(ps, n, f"{title}: 68 % coverage"), "coverage"))
            sections.append((f"job-{_e(jd).replace('/', '-')}", title, body))
    return _page("robident-twin Monte-Carlo sweep", f"{len(runs)} jobs | {agg_dir}", sections)


def write_aggregate_report(agg_dir: Path, out_dir: Path | None = None) -> Path:
    agg_dir = Path(agg_dir)
    if not (agg_dir / "runs.parquet").is_file():
        raise ConfigError(f"{agg_dir}: no runs.parquet (run `robident-twin task=aggregate "
                          f"montecarlo.sweep_dir=<sweep>` first)")
    return write_html(aggregate_html(agg_dir), Path(out_dir or agg_dir) / REPORT)


# ----------------------------------------------------------------------------- rebuild from files

def robustness_html(table: Mapping[str, Any]) -> str:
    """The HTML of a robustness table (``robustness.json`` of ``task=robustness``): the heat map, one
    table per figure (rows estimators, columns twins) and the best estimator per twin."""
    from robident_twin.report.plots import plot_robustness_heatmap

    cols, ests = list(table["columns"]), list(table["estimators"])
    at = {(c["estimator"], c["column"]): c for c in table["cells"]}
    figures = [("share of parameters with |bias| <= 3 std", lambda c: f"{100 * c['share_within_3std']:.0f} %"),
               ("max |bias| / std", lambda c: _num(c["max_bias_over_std"], ".3g")),
               ("median |bias| / std", lambda c: _num(c["median_bias_over_std"], ".3g")),
               ("median RMSE / Cramer-Rao std", lambda c: _num(c["median_rmse_over_crlb"], ".3g")),
               ("validation torque NRMSE (%)", lambda c: _num(c["val_nrmse_percent"], ".3g")),
               ("bias test", lambda c: "pass" if c["bias_test_passed"] else f"FAIL ({c['bias_test_failing']})")]
    la = table.get("load_average") or [float("nan")]
    info = _kv([("robot", _e(table.get("robot"))), ("measurement", _e(table.get("measurement"))),
                ("runs per cell", _e(table.get("runs"))), ("seed", _e(table.get("seed"))),
                ("position-noise scale", _num(table.get("q_noise_scale"))),
                ("bias test", f"Bonferroni t over {_e(table.get('n_params'))} parameters, false-alarm rate "
                              f"{_num(table.get('alpha'))} per cell"),
                ("wall time", f"{_num(table.get('wall_s'), '.1f')} s (CPU {_num(table.get('cpu_s'), '.1f')} s, load "
                              f"average {_num(la[0], '.1f')})")])
    body = info + _img(plot_robustness_heatmap(table), "robustness heat map")
    for title, fmt in figures:
        rows = [[_e(e)] + [fmt(at[(e, c)]) if (e, c) in at else "-" for c in cols] for e in ests]
        body += f"<h3>{_e(title)}</h3>" + _table(["estimator"] + cols, rows)
    best = table.get("best") or {}
    rows = [[_e(c), _e(b["best"]), _num(b["best_rmse_over_crlb"], ".3g"), _e(b.get("runner_up") or "-"),
             _num(b.get("factor"), ".3g"), _e(", ".join(b["passing"]) or "none"),
             _e(", ".join(b["failing"]) or "none")] for c, b in best.items()]
    body += "<h3>Best estimator per twin</h3>" + _table(
        ["twin", "best", "median RMSE/CR std", "runner-up", "runner-up / best", "bias test passed", "failed"],
        rows, left=(0, 1, 3, 5, 6))
    return _page(f"robident-twin robustness: {table.get('robot', '')}",
                 "every estimator against every twin effect", [("robustness", "Robustness table", body)])


def write_robustness_report(run_dir: Path, out_dir: Path | None = None) -> Path:
    """``report.html`` of a finished ``task=robustness`` run (from its ``robustness.json``), written
    to ``out_dir`` (default ``run_dir``)."""
    run_dir = Path(run_dir)
    return write_html(robustness_html(_read_json(run_dir / "robustness.json")), Path(out_dir or run_dir) / REPORT)


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise ConfigError(f"{path} does not exist")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from exc


def build_report(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """Rebuild ``report.html`` from a finished run's files; the kind is detected from them:
    an identification run (``summary.json`` with ``parameters``), a Monte-Carlo job
    (``summary.json`` with ``summary`` and ``tests``), an aggregate directory
    (``runs.parquet``) or a sweep directory holding ``aggregate/runs.parquet``. Written to
    ``out_dir`` (default ``run_dir``; ``task=report`` gives its own run directory)."""
    d = Path(run_dir)
    if not d.is_dir():
        raise ConfigError(f"report.run_dir: {d} is not a directory")
    if (d / "runs.parquet").is_file():
        return write_aggregate_report(d, out_dir)
    if (d / "aggregate" / "runs.parquet").is_file():
        return write_aggregate_report(d / "aggregate", out_dir)
    if (d / "robustness.json").is_file():
        return write_robustness_report(d, out_dir)
    summary_path = d / "summary.json"
    if not summary_path.is_file():
        failed = d / "FAILED.txt"
        why = f" (the run failed: {failed.read_text().strip()[:300]})" if failed.is_file() else ""
        raise ConfigError(f"report.run_dir: {d} holds no summary.json and no aggregate/runs.parquet{why}")
    s = _read_json(summary_path)
    if "summary" in s and "tests" in s:
        return write_montecarlo_report(d, out_dir)
    if "parameters" not in s or "validation" not in s:
        raise ConfigError(f"{summary_path}: expected an identification summary (keys 'parameters', 'validation') "
                          f"or a Monte-Carlo job summary (keys 'summary', 'tests')")
    data = ReportData.load(d / DATA) if (d / DATA).is_file() else None
    return write_identify_report(d, s, data, out_dir)


def run_report_task(cfg, out: Path) -> Path:
    """``robident-twin task=report report.run_dir=<dir>``: build the report of ``<dir>`` into this
    task's own run directory ``out`` (the source folder is only read)."""
    rd = (cfg.get("report") or {}).get("run_dir")
    if not rd:
        raise ConfigError("report.run_dir: expected the directory of a finished run "
                          "(e.g. report.run_dir=outputs/2026-01-01/12-00-00), got null")
    t0 = time.perf_counter()
    path = build_report(rd, out_dir=out)
    print(f"report: {path} ({time.perf_counter() - t0:.2f} s)")
    return path


# ----------------------------------------------------------------------------- model-based control

def control_section(control: Mapping[str, Any]) -> tuple[str, str, str]:
    """The ``control`` section: Table VII layout (RMS reference error per joint and feed-forward
    model, ratios to no model) and its bar plot."""
    from robident_twin.report.plots import plot_control_rms

    ffs = control["feedforward"]
    names = list(ffs)
    rnames = [n for n in names if n != "none" and "ratio_to_none" in ffs[n]]
    head = ["joint"] + [f"{n} RMS (deg)" for n in names] + [f"{n} / none" for n in rnames]
    rows = [[_e(j)] + [_num(ffs[n]["rms_deg"][i]) for n in names] + [_num(ffs[n]["ratio_to_none"][i], ".3f")
                                                                      for n in rnames]
            for i, j in enumerate(control["joints"])]
    info = control.get("info", {})
    note = (f'<p class="note">{_e(info.get("robot", ""))} on {_e(info.get("backend", ""))}, '
            f'{_e(info.get("trajectory", ""))} trajectory, {_num(info.get("duration_s"))} s; '
            f'controller {_e(info.get("controller", {}))}; error {_e(info.get("error", ""))}</p>')
    return "control", "Model-based feed-forward control", note + _table(head, rows) + _img(plot_control_rms(control), "RMS")


def write_control_report(run_dir: Path, summary: Mapping[str, Any]) -> Path:
    c = summary["control"]
    info = c.get("info", {})
    text = _page("robident-twin model-based control", f"{info.get('robot', '')} | {', '.join(c['feedforward'])}",
                 [control_section(c)])
    return write_html(text, Path(run_dir) / "report.html")
