"""Self-contained HTML reports: one ``report.html`` per run, readable offline.

The pages are rendered from Jinja2 templates shipped with the package
(``robident_twin/report/templates/``: ``page.html.j2`` the skeleton, ``blocks.html.j2`` the
macros, ``style.css`` the inline style sheet), with autoescape on. The functions here build plain
data, a list of sections of *blocks* (key-value table, table, figure, paragraph, note, heading),
and the templates turn it into HTML; no markup is written in Python. Figures are inline SVG
(``robident_twin/report/svg.py``): text stays text, legends and data areas carry ids, so the
layout can be measured in a browser (tests/test_report_layout.py). No external URL, no script.
Report kinds, chosen from the files of the directory:

- identification run (``task=identify``, written at the end of every run): sections
  ``overview`` (robot, backend, estimator, measurement, samples, cond, chi2/dof, validation
  errors, timings), ``excitation`` (the design and its dry-run margins, checked without
  simulation), ``validation`` (measured vs predicted torques on the held-out trajectory, the
  error on its own axis), ``residuals`` (histograms per joint with the fitted Gaussian),
  ``parameters`` (estimate, std, RSD, truth, (est-true)/std, regrouping relation) and ``ground-truth``;
- Monte-Carlo job (``task=montecarlo``): ``mc-overview``, ``mc-bias`` (bias / standard
  error), ``mc-efficiency`` (var / CRLB with the chi-square interval), ``mc-coverage``
  (68 % coverage), ``mc-convergence`` (running mean and variance against the number of runs),
  ``mc-histograms`` (the estimates with the Cramer-Rao Gaussian) and ``mc-table``;
- sweep aggregate (``task=aggregate``): ``agg-overview``, ``agg-plots`` and one
  ``job-<n>`` section per job with the three per-parameter plots;
- robustness table (``task=robustness``), model-based control (``task=control``) and the CLOOS
  twin against the real data (``experiments/twin_vs_real_cloos``): robident_twin/report/sections.py.

``robident-twin task=report report.run_dir=<dir>`` rebuilds the report of a finished
run from its files (``summary.json``, ``report_data.npz``; a Monte-Carlo job's ``estimates.npz``;
for a sweep, ``aggregate/runs.parquet`` and ``aggregate/parameters.parquet``; ``robustness.json``;
``twin_vs_real.json``).
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from robident_twin.atomic import atomic_path
from robident_twin.errors import ConfigError
from robident_twin.report.plots import (
    parameters_figure,
    residual_histograms_figure,
    validation_figure,
    z_histogram_figure,
)
from robident_twin.report.plots_mc import (
    mc_bias_figure,
    mc_convergence_figure,
    mc_coverage_figure,
    mc_efficiency_figure,
    mc_histograms_figure,
    sweep_efficiency_figure,
    sweep_metric_figure,
)
from robident_twin.report.page import (
    code,
    figure,
    h3,
    kv,
    note,
    num,
    para,
    render_page,
    row,
    section,
    span,
    table,
    verdict,
    write_html,
)

REPORT = "report.html"
DATA = "report_data.npz"
#: per-run estimates of a Monte-Carlo job (written by validation.sweeps.run_job)
ESTIMATES = "estimates.npz"
#: section ids of each report kind (stable: tests and docs link to them)
IDENTIFY_SECTIONS = ("overview", "excitation", "validation", "residuals", "parameters", "ground-truth")
MONTECARLO_SECTIONS = ("mc-overview", "mc-bias", "mc-efficiency", "mc-coverage", "mc-convergence", "mc-histograms",
                       "mc-table")
AGGREGATE_SECTIONS = ("agg-overview", "agg-plots")
#: results of experiments/twin_vs_real_cloos (robident_twin/report/sections.py)
TWIN_VS_REAL = "twin_vs_real.json"


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
    """Scalars and short lists of a nested summary entry as (key, text) rows (long lists of
    records, e.g. per-parameter tables, are summarised by their length)."""
    rows: list[tuple[str, str]] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            rows += _flat_items(v, key + ".", max_list)
        elif isinstance(v, (list, tuple)):
            if v and all(isinstance(x, (int, float, str, bool)) or x is None for x in v) and len(v) <= max_list:
                rows.append((key, ", ".join(num(x) if isinstance(x, float) else str(x) for x in v)))
            else:
                rows.append((key, f"{len(v)} entries (summary.json)"))
        else:
            rows.append((key, num(v) if isinstance(v, float) else str(v)))
    return rows


def _noise_text(noise: Mapping[str, Any] | None) -> str:
    """The run's noise settings in words (keys left null take the robot file's values)."""
    if not noise:
        return "-"
    if not noise.get("enabled", True):
        return "off (perfect sensors)"
    set_ = [f"{k} = {v}" for k, v in noise.items() if k != "enabled" and v not in (None, 0, 0.0, [], {})]
    return "the robot file's sensor noise" + (", with " + ", ".join(set_) if set_ else "")


def _margin_tables(margins) -> list[dict]:
    """Joint margins pivoted (one row per joint, one column per kind) and the other items listed."""
    kinds = [k for k in ("position", "velocity", "acceleration", "torque") if any(m.kind == k for m in margins)]
    joints: dict[str, dict[str, Any]] = {}
    other = []
    for m in margins:
        if m.kind in kinds and m.what.startswith("joint "):
            joints.setdefault(m.what[6:], {})[m.kind] = m
        else:
            other.append(m)

    def cell(m):
        if m is None:
            return "-"
        pct = f" ({100 * m.margin / abs(m.limit):.0f} %)" if m.limit else ""
        txt = f"{m.margin:.4g}{pct} at {m.time_s:.2f} s"
        return span(txt, False) if m.margin < 0 else txt

    units = {k: next(m.unit for m in margins if m.kind == k) for k in kinds}
    rows = [[j] + [cell(d.get(k)) for k in kinds] for j, d in joints.items()]
    bad = [any(m.margin < 0 for m in d.values()) for d in joints.values()]
    out = [table(["joint"] + [f"{k} [{units[k]}] (% of limit)" for k in kinds], rows, bad=bad)]
    if other:
        out.append(table(["kind", "item", "margin", "unit", "value", "limit", "t [s]"],
                         [[m.kind, m.what, num(m.margin), m.unit, num(m.value), num(m.limit), num(m.time_s, ".3f")]
                          for m in other], left=(0, 1), bad=[m.margin < 0 for m in other]))
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

def _overview_blocks(s: Mapping[str, Any], channels: Sequence[str], run_dir: Path | None) -> list[dict]:
    cfg = s.get("config") or {}
    val = s["validation"]
    timings = s.get("timings_s", {})
    rows = [("robot", s["robot"]), ("backend", s["backend"]), ("estimator", s["estimator"]),
            ("measurement", s["measurement"]),
            ("samples", f"{s['n_samples']} per channel x {len(s['residual_rms_Nm'])} channels "
                        f"(average of {s.get('n_periods', '?')} periods)"),
            ("base parameters", s["n_base_parameters"]),
            ("condition number", num(s["cond"], ".2f")),
            ("chi2 / dof", num(s["chi2_per_dof"], ".3f")),
            ("seed", cfg.get("seed", "-")),
            ("sensor noise", _noise_text(cfg.get("noise")) if "ground_truth" in s else "as recorded"),
            ("total stage time", f"{sum(timings.values()):.2f} s")]
    if "ground_truth" in s:
        gt = s["ground_truth"]
        rows.append(("ground truth", f"{100 * gt['fraction_within_3std']:.1f} % within 3 std, "
                                     f"max |est-true|/std {gt['max_abs_z']:.2f}"))
    if s.get("twin") is not None:  # which twin produced the data (hal/sim/effects.py)
        tw = s["twin"]
        rows.append(("twin", tw["name"] + (" with " + ", ".join(tw["effects"]) if tw.get("effects") else "")))
    if s.get("mismatch") is not None:
        mm = s["mismatch"]
        txt = ("Durbin-Watson " + " ".join(f"{v:.2f}" for v in mm["durbin_watson"]) + " (2: white); lag-1 "
               "autocorrelation " + " ".join(f"{v:.2f}" for v in mm["residual_lag1_autocorrelation"]))
        if "beyond_3std" in mm:
            txt += f"; {len(mm['beyond_3std'])} base parameter(s) beyond 3 std of the truth"
        rows.append(("residual whiteness", txt))
    if run_dir is not None:
        rows.append(("run directory", str(run_dir)))
    vrows = [["RMSE [Nm]"] + [num(v, ".4f") for v in val["torque_rmse_Nm"]],
             ["NRMSE [%]"] + [num(v, ".3f") for v in val["torque_nrmse_percent"]],
             ["residual RMS [Nm]"] + [num(v, ".4f") for v in s["residual_rms_Nm"]]]
    if "simulated_noise_std_Nm" in val:
        vrows.append(["simulated noise std [Nm]"] + [num(v, ".4f") for v in val["simulated_noise_std_Nm"]])
    return [kv(rows), h3("Validation (held-out trajectory) per channel"), table(["", *channels], vrows),
            h3("Timings per stage [s]"), table(list(timings), [[num(v, ".2f") for v in timings.values()]], left=())]


def _excitation_blocks(cfg: Mapping[str, Any], dry, spec, dry_note: str) -> list[dict]:
    if dry is None:
        return [note(dry_note or "dry run not available")]
    from robident_twin.design.dryrun import dry_run_figure

    out = [para("Design ", code(cfg.get("robot", {}).get("excitation", "")), ": dry run ",
                verdict(dry.passed, "PASS", "FAIL"), f" (content hash {dry.hash[:16]}...; checked without "
                "simulation, ", code("robident-twin task=dryrun"), " also runs the twin for the tracking error).")]
    out += [{"kind": "fail", "text": r} for r in dry.reasons]
    out.append(figure(dry_run_figure(_decimated(dry), spec), "excitation", "excitation trajectory and limits"))
    out.append(h3("Smallest margin per joint (limit minus value; negative = violated)"))
    out += _margin_tables(dry.margins)
    # the report's dry run never simulates (said above): the dry run's own note about that is not news here
    out += [note(n) for n in dry.notes if "simulate = false" not in n]
    return out


#: the figures of an identification report by name: :func:`identify_figures` makes any subset of
#: them (``task=identify`` draws them in two processes), :func:`identify_html` places them
IDENTIFY_FIGURES = ("validation", "residuals", "parameters", "z")


def _z_scores(params: Sequence[Mapping[str, Any]]) -> np.ndarray | None:
    """(estimate - true) / std per parameter (NaN where std is 0), None without a ground truth."""
    if not all("true" in p for p in params):
        return None
    est = np.array([p["estimate"] for p in params], float)
    std = np.array([p["std"] for p in params], float)
    return (est - np.array([p["true"] for p in params], float)) / np.where(std > 0, std, np.nan)


def identify_figures(summary: Mapping[str, Any], data: ReportData | None,
                     names: Sequence[str] = IDENTIFY_FIGURES, png: Mapping[str, Path] | None = None,
                     png_start=None) -> dict[str, dict]:
    """The figure blocks ``names`` (of :data:`IDENTIFY_FIGURES`) of an identification report; a
    figure its inputs do not allow (no ``data``, no ground truth) is left out. ``png``: figure name ->
    a PNG file the same drawing is also written to (validation, parameters); ``png_start``: who
    draws those PNGs (:func:`robident_twin.report.svg.to_svg`; the caller waits for them)."""
    s, out, png = summary, {}, png or {}
    if data is not None and "validation" in names:
        out["validation"] = figure(validation_figure(data.t_val_s, data.tau_val_meas_Nm, data.tau_val_pred_Nm,
                                                     data.channels), "validation",
                                   "measured vs predicted validation torques", png_path=png.get("validation"),
                                   png_start=png_start)
    if data is not None and "residuals" in names:
        out["residuals"] = figure(residual_histograms_figure(data.residuals_Nm, data.channels,
                                                             s.get("noise_std_of_mean_Nm")), "residuals",
                                  "residual histograms",
                                  "Red: Gaussian fitted to the residuals (mean, std in the title); dashed: the noise "
                                  "std of the period average the estimator assumed.")
    if "parameters" in names:
        out["parameters"] = figure(parameters_figure(s), "parameters", "base parameter estimates",
                                   png_path=png.get("parameters"), png_start=png_start)
    z = _z_scores(s["parameters"])
    if "z" in names and z is not None and "ground_truth" in s:
        out["z"] = figure(z_histogram_figure(z), "z", "normalised estimation errors")
    return out


def identify_html(summary: Mapping[str, Any], data: ReportData | None, run_dir: Path | None = None,
                  dry=None, spec=None, dry_note: str = "", excitation: list | None = None,
                  figures: Mapping[str, dict] | None = None) -> str:
    """The HTML of an identification run. ``data`` None: the torque and residual figures
    are replaced by a note; ``dry`` (a :class:`DryRunReport`) with its ``spec``; ``excitation``:
    the excitation section's blocks made before (:func:`excitation_blocks`) instead; ``figures``:
    the figure blocks made before (:func:`identify_figures`; the missing ones are made here)."""
    s = summary
    params = s["parameters"]
    has_true = all("true" in p for p in params)
    z = _z_scores(params)
    channels = data.channels if data is not None else [f"ch{j + 1}" for j in range(len(s["validation"]["torque_rmse_Nm"]))]
    figs = dict(figures or {})
    figs.update(identify_figures(s, data, [n for n in IDENTIFY_FIGURES if n not in figs]))

    if data is not None:
        validation = [figs["validation"]]
        residuals = [figs["residuals"]]
    else:
        validation = [note(f"no {DATA} in the run directory: validation torques not available")]
        residuals = [note(f"no {DATA} in the run directory: residuals not available")]

    head = ["#", "name", "unit", "estimate", "std", "RSD %"] + (["true", "(est-true)/std"] if has_true else []) \
        + ["regroups"]
    prow, bad = [], []
    for i, p in enumerate(params):
        row = [str(i + 1), p["name"], p.get("unit", ""), num(p["estimate"], ".6g"), num(p["std"], ".3g"),
               num(p["rsd_percent"], ".3g")]
        if has_true:
            row += [num(p["true"], ".6g"), num(z[i], ".2f")]
        row.append(p.get("regroups", ""))
        prow.append(row)
        bad.append(bool(has_true and np.isfinite(z[i]) and abs(z[i]) > 3))
    parameters = [figs["parameters"],
                  table(head, prow, left=(1, 2, len(head) - 1), bad=bad, rel=(len(head) - 1,))]
    if has_true:
        parameters.append(note("Rows in red: |est-true|/std > 3."))

    if has_true and "ground_truth" in s:
        gt = s["ground_truth"]
        zf = z[np.isfinite(z)]
        worst = np.argsort(-np.abs(np.nan_to_num(z)))[:5]
        ground = [kv([("within 1 std", f"{100 * np.mean(np.abs(zf) <= 1):.1f} % (Gaussian: 68.3 %)"),
                      ("within 2 std", f"{100 * np.mean(np.abs(zf) <= 2):.1f} % (Gaussian: 95.4 %)"),
                      ("within 3 std", f"{100 * gt['fraction_within_3std']:.1f} % (Gaussian: 99.7 %)"),
                      ("max |est-true|/std", num(gt["max_abs_z"], ".2f")),
                      ("mean, std of (est-true)/std", f"{np.mean(zf):.2f}, {np.std(zf):.2f} (Gaussian: 0, 1)"),
                      ("largest deviations", ", ".join(f"{params[i]['name']} {z[i]:+.2f}" for i in worst))]),
                  figs["z"]]
    else:
        ground = [note("no ground truth (not a simulation run)")]

    sections = [section("overview", "Run overview", _overview_blocks(s, channels, run_dir)),
                section("excitation", "Excitation trajectory and dry-run margins",
                        excitation if excitation is not None
                        else _excitation_blocks(s.get("config") or {}, dry, spec, dry_note)),
                section("validation", "Validation: measured vs predicted torques", validation),
                section("residuals", "Residual histograms", residuals),
                section("parameters", "Base parameters", parameters),
                section("ground-truth", "Ground truth", ground)]
    post = [k for k in ("reduction", "physical") if isinstance(s.get(k), Mapping)]
    if post:  # optional stages (reduction.method, physical.method): their scalar results
        sections.append(section("postprocess", "Model reduction and physical consistency",
                                [b for k in post for b in (h3(k), kv(_flat_items(s[k])))]))
    return render_page(f"robident-twin identification: {s['robot']}",
                       f"{s['backend']} | {s['estimator']} | {s['measurement']} | {s['n_base_parameters']} base "
                       f"parameters | cond {float(s['cond']):.1f} | chi2/dof {float(s['chi2_per_dof']):.3g}", sections)


def excitation_blocks(config: Mapping[str, Any] | None) -> list:
    """The report's excitation section of a run's config (its dry run without simulation, the
    margin tables and figure). It depends on the config alone, so ``task=identify`` makes it on
    the second core while the twin runs."""
    from robident_twin.report.svg import plt

    plt()  # the report's style before the dry run's figure is made (it draws with pyplot directly)
    dry, spec, note_ = None, None, "the run's config is not in summary.json: dry run not available"
    if config:
        dry, spec = _dry_run_of(config)
        if dry is None:
            note_, spec = spec, None
    return _excitation_blocks(config or {}, dry, spec, note_)


def write_identify_report(run_dir: Path, summary: Mapping[str, Any], data: ReportData | None,
                          out_dir: Path | None = None, excitation: list | None = None,
                          figures: Mapping[str, dict] | None = None) -> Path:
    """Build ``report.html`` of an identification run in ``out_dir`` (default ``run_dir``; dry run
    included; ``excitation``: that section made before from the same config; ``figures``: figure
    blocks made before, see :func:`identify_html`)."""
    run_dir = Path(run_dir)
    blocks = excitation_blocks(summary.get("config")) if excitation is None else excitation
    return write_html(identify_html(summary, data, run_dir, excitation=blocks, figures=figures),
                      Path(out_dir or run_dir) / REPORT)


# ----------------------------------------------------------------------------- Monte-Carlo reports

def _mc_param_table(params: Sequence[Mapping[str, Any]]) -> list[dict]:
    head = ["#", "name", "true", "mean", "bias/SEM", "bias/CRLB SE", "CRLB std", "emp std", "var/CRLB",
            "in chi2 90 %", "cov68", "RMSE"]
    rows = [[str(i + 1), p["name"], num(p["true"]), num(p["mean"]), num(p["bias_over_sem"], ".2f"),
             num(p["bias_over_crlb_sem"], ".2f"), num(p["crlb_std"], ".3g"), num(p["emp_std"], ".3g"),
             num(p["efficiency_ratio"], ".3f"), "yes" if p["ratio_in_chi2_90"] else "no",
             num(p["coverage68"], ".2f"), num(p["rmse"], ".3g")] for i, p in enumerate(params)]
    bad = [not p["ratio_in_chi2_90"] or abs(p["bias_over_crlb_sem"]) > 3 for p in params]
    return [table(head, rows, left=(1,), bad=bad),
            note("Rows in red: |bias / CRLB standard error| > 3 or var/CRLB outside the chi-square 90 % interval "
                 "(about 10 % of the rows by chance alone; the tests above control the false-alarm rate).")]


def load_estimates(run_dir: Path | None) -> dict | None:
    """A Monte-Carlo job's per-run estimates (``estimates.npz``), or None when the job has none."""
    path = Path(run_dir) / ESTIMATES if run_dir is not None else None
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            d = {k: z[k] for k in z.files}
    except Exception as exc:
        raise ConfigError(f"{path}: not a readable estimates file ({exc})") from exc
    need = ("estimates", "truth", "crlb_std", "names")
    if any(k not in d for k in need) or d["estimates"].ndim != 2 or d["estimates"].shape[1] != d["truth"].size:
        raise ConfigError(f"{path}: expected arrays {list(need)} with estimates of shape (runs, parameters)")
    return d


def montecarlo_html(job: Mapping[str, Any], run_dir: Path | None = None, estimates: dict | None = None) -> str:
    """The HTML of one Monte-Carlo job (the ``summary.json`` that :func:`sweeps.run_job` writes; the
    per-run ``estimates`` (:func:`load_estimates`) for the convergence plots and histograms)."""
    summ, tests, row = job["summary"], job.get("tests") or {}, job.get("row") or {}
    params, o = summ["parameters"], summ["overall"]
    n = int(o["n_runs"])
    lo, hi = o["chi2_90_interval"]
    bonf = tuple(tests["ratio_interval"]) if tests.get("ratio_interval") else None
    rows = [("robot", row.get("robot", "-")), ("mode", row.get("mode", "-")),
            ("estimator", row.get("estimator", "-")), ("measurement", row.get("measurement", "-")),
            ("noise scale", row.get("noise_scale", "-")), ("friction", row.get("friction", "-")),
            ("design", row.get("design", "-")), ("runs x parameters", f"{n} x {o['n_params']}"),
            ("samples per run", row.get("n_samples", "-")),
            ("means inside their 68 % interval", f"{100 * o['share_means_in_68']:.0f} %"),
            ("var/CRLB inside the chi-square 90 % interval", f"{100 * o['share_ratios_in_chi2_90']:.0f} % "
                                                              f"([{lo:.3f}, {hi:.3f}])"),
            ("mean var/CRLB", num(o["mean_efficiency_ratio"], ".3f")),
            ("mean 68 % coverage", num(o["mean_coverage68"], ".3f")),
            ("log10 det(emp cov)/det(CRLB)", f"{num(o['log10_det_ratio'], '.3f')} (efficient: "
                                              f"{num(o['log10_det_ratio_expected'], '.3f')})"),
            ("torque NRMS", f"{num(o['torque_nrms_percent'], '.3f')} %"),
            ("wall time", f"{num(row.get('wall_s'), '.1f')} s")]
    if tests:
        rows += [("mean-consistency test", [f"N d'C^-1 d = {tests['mean_statistic']:.1f} (limit "
                                            f"{tests['mean_threshold']:.1f}, p = {tests['mean_p_value']:.3g}) ",
                                            verdict(tests["mean_ok"])]),
                 ("variance-ratio test", [f"Bonferroni interval [{bonf[0]:.3f}, {bonf[1]:.3f}] ",
                                          verdict(tests["variance_ok"]),
                                          (" outside: " + ", ".join(tests["ratios_outside"][:10])
                                           if tests.get("ratios_outside") else "")]),
                 ("false-alarm rate", tests["alpha"])]
    if run_dir is not None:
        rows.append(("run directory", str(run_dir)))
    if estimates is not None:
        e, names = estimates["estimates"], [str(x) for x in estimates["names"]]
        conv = [figure(mc_convergence_figure(e, estimates["truth"], estimates["crlb_std"], names), "convergence",
                       "running mean and variance against the number of runs",
                       "Left: running mean minus the truth in Cramer-Rao standard deviations, dashed the 95 % funnel "
                       "of an efficient unbiased estimator. Right: running variance over the Cramer-Rao bound, "
                       "shaded the chi-square 90 % band. Lines still drifting at the right end: more runs needed.")]
        hist = [figure(mc_histograms_figure(e, estimates["truth"], estimates["crlb_std"], names), "histograms",
                       "histograms of the estimates",
                       f"{e.shape[0]} estimates per parameter, in Cramer-Rao standard deviations from the truth; "
                       "red: the Cramer-Rao Gaussian N(true, CRLB), which an efficient unbiased estimator follows.")]
    else:
        conv = hist = [note(f"no {ESTIMATES} in the job directory (a job from an older version): "
                            "per-run estimates not available")]
    sections = [section("mc-overview", "Monte-Carlo overview", [kv(rows)]),
                section("mc-bias", "Bias per parameter", [figure(mc_bias_figure(params, n), "bias",
                                                                 "bias over standard error")]),
                section("mc-efficiency", "Efficiency per parameter",
                        [figure(mc_efficiency_figure(params, n, bonferroni=bonf), "efficiency", "variance over CRLB")]),
                section("mc-coverage", "68 % coverage per parameter",
                        [figure(mc_coverage_figure(params, n), "coverage", "coverage")]),
                section("mc-convergence", "Convergence with the number of runs", conv),
                section("mc-histograms", "Histograms of the estimates", hist),
                section("mc-table", "Per-parameter statistics", _mc_param_table(params))]
    verdict_ = "tests passed" if tests.get("mean_ok") and tests.get("variance_ok") else "tests FAILED" if tests else ""
    return render_page(f"robident-twin Monte-Carlo: {row.get('robot', '')} {row.get('mode', '')} "
                       f"{row.get('estimator', '')}", f"{n} runs | {o['n_params']} base parameters | {verdict_}",
                       sections)


def write_montecarlo_report(run_dir: Path, out_dir: Path | None = None) -> Path:
    """``report.html`` of a finished Monte-Carlo job directory (from its ``summary.json`` and
    ``estimates.npz``), in ``out_dir`` (default the job directory)."""
    run_dir = Path(run_dir)
    job = _read_json(run_dir / "summary.json")
    if "summary" not in job:
        raise ConfigError(f"{run_dir / 'summary.json'}: not a Monte-Carlo job summary (no 'summary' key)")
    return write_html(montecarlo_html(job, run_dir, load_estimates(run_dir)), Path(out_dir or run_dir) / REPORT)


#: the sweep table's columns: name in runs.parquet -> (header, format)
SWEEP_COLUMNS = {"job_dir": ("job", None), "robot": ("robot", None), "mode": ("mode", None),
                 "estimator": ("estimator", None), "friction": ("friction", None),
                 "noise_scale": ("noise scale", ".3g"), "runs": ("runs", None), "n_params": ("parameters", None),
                 "share_means_in_68": ("means inside their 68 % interval", "%"),
                 "share_ratios_in_chi2_90": ("var/CRLB inside the chi-square 90 % interval", "%"),
                 "mean_coverage68": ("mean 68 % coverage", ".3f"),
                 "mean_efficiency_ratio": ("mean var / CRLB", ".3f"),
                 "rms_bias_over_crlb_sem": ("RMS bias / CRLB std. error", ".3f"),
                 "tests_passed": ("tests", "verdict")}


def _sweep_cell(v: Any, fmt: str | None):
    if fmt == "verdict":
        return verdict(bool(v), "passed", "FAILED")
    if fmt == "%":
        return f"{100 * float(v):.0f} %"
    if fmt is not None or isinstance(v, float):
        return num(v, fmt or ".4g")
    return str(v)


def aggregate_html(agg_dir: Path, max_jobs: int = 24) -> str:
    """The HTML of a sweep aggregate (``runs.parquet``, ``parameters.parquet``)."""
    import pandas as pd

    agg_dir = Path(agg_dir)
    runs = pd.read_parquet(agg_dir / "runs.parquet")
    pfile = agg_dir / "parameters.parquet"
    params = pd.read_parquet(pfile) if pfile.is_file() else None
    cols = [c for c in SWEEP_COLUMNS if c in runs]
    rows = [[_sweep_cell(v, SWEEP_COLUMNS[c][1]) for c, v in zip(cols, r)] for r in runs[cols].itertuples(index=False)]
    bad = [not bool(x) for x in runs["tests_passed"]] if "tests_passed" in runs else None
    overview = [para(f"{len(runs)} finished job(s) in ", code(agg_dir.parent), "."),
                table([SWEEP_COLUMNS[c][0] for c in cols], rows, left=tuple(range(5)), bad=bad, wrap_head=True)]
    plots = [row(figure(sweep_metric_figure(runs, "rms_bias_over_crlb_sem", "RMS bias / CRLB std. error of the mean"),
                    "sweep-bias", "RMS bias against the noise scale"),
             figure(sweep_metric_figure(runs, "mean_coverage68", "68 % interval coverage", reference=0.68),
                    "sweep-coverage", "coverage against the noise scale"),
             figure(sweep_efficiency_figure(runs), "sweep-efficiency", "efficiency per estimator"))]
    sections = [section("agg-overview", "Sweep overview", overview), section("agg-plots", "Sweep plots", plots)]
    if params is not None:
        for k, (jd, g) in enumerate(params.groupby("job_dir", sort=True)):
            if k >= max_jobs:
                sections.append(section("job-more", "More jobs", [note(f"{params['job_dir'].nunique() - max_jobs} "
                                                                       f"more job(s) not shown")]))
                break
            r = runs[runs["job_dir"] == jd].iloc[0]
            n = int(r["runs"])
            ps = g.to_dict("records")
            title = f"job {jd}: {r['robot']} {r['mode']} {r['estimator']} noise x{r['noise_scale']:g} {r['friction']}"
            sid = f"job-{jd}".replace("/", "-")
            sections.append(section(sid, title, [
                figure(mc_bias_figure(ps, n, "bias / standard error"), f"{sid}-bias", "bias"),
                figure(mc_efficiency_figure(ps, n, "var / CRLB, chi-square 90 % interval shaded"), f"{sid}-eff",
                       "efficiency"),
                figure(mc_coverage_figure(ps, n, "68 % coverage"), f"{sid}-cov", "coverage")]))
    return render_page("robident-twin Monte-Carlo sweep", f"{len(runs)} jobs | {agg_dir}", sections)


def write_aggregate_report(agg_dir: Path, out_dir: Path | None = None) -> Path:
    agg_dir = Path(agg_dir)
    if not (agg_dir / "runs.parquet").is_file():
        raise ConfigError(f"{agg_dir}: no runs.parquet (run `robident-twin task=aggregate "
                          f"montecarlo.sweep_dir=<sweep>` first)")
    return write_html(aggregate_html(agg_dir), Path(out_dir or agg_dir) / REPORT)


# ----------------------------------------------------------------------------- rebuild from files

def write_robustness_report(run_dir: Path, out_dir: Path | None = None) -> Path:
    """``report.html`` of a finished ``task=robustness`` run (from its ``robustness.json``), written
    to ``out_dir`` (default ``run_dir``)."""
    from robident_twin.report.sections import robustness_html

    run_dir = Path(run_dir)
    return write_html(robustness_html(_read_json(run_dir / "robustness.json")), Path(out_dir or run_dir) / REPORT)


def write_twin_vs_real_report(run_dir: Path, out_dir: Path | None = None) -> Path:
    """``report.html`` of the CLOOS twin-vs-real comparison (``twin_vs_real.json`` of
    experiments/twin_vs_real_cloos), written to ``out_dir`` (default ``run_dir``)."""
    from robident_twin.report.sections import twin_vs_real_html

    run_dir = Path(run_dir)
    return write_html(twin_vs_real_html(_read_json(run_dir / TWIN_VS_REAL)), Path(out_dir or run_dir) / REPORT)


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
    if (d / TWIN_VS_REAL).is_file():
        return write_twin_vs_real_report(d, out_dir)
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


def run_report_task(cfg, out: Path, run) -> Path:
    """``robident-twin task=report report.run_dir=<dir>``: build the report of ``<dir>`` into this
    task's own run directory ``out`` (the source folder is only read). ``run``: the RunConfig
    validated at the CLI edge (``cfg``, its DictConfig form, is not read)."""
    rd = run.report.run_dir
    if not rd:
        raise ConfigError("report.run_dir: expected the directory of a finished run "
                          "(e.g. report.run_dir=outputs/2026-01-01/12-00-00), got null")
    t0 = time.perf_counter()
    path = build_report(rd, out_dir=out)
    print(f"report: {path} ({time.perf_counter() - t0:.2f} s)")
    return path


# ----------------------------------------------------------------------------- model-based control

def write_control_report(run_dir: Path, summary: Mapping[str, Any]) -> Path:
    """``report.html`` of ``task=control`` (robident_twin/report/sections.py ``control_section``)."""
    from robident_twin.report.sections import control_section

    c = summary["control"]
    text = render_page("robident-twin model-based control",
                       f"{c.get('info', {}).get('robot', '')} | {', '.join(c['feedforward'])}", [control_section(c)])
    return write_html(text, Path(run_dir) / REPORT)
