"""The self-contained HTML reports (robident_twin/html_report.py): identification runs,
Monte-Carlo jobs and sweep aggregates; written by the tasks and rebuilt by task=report."""
import base64
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from robident_twin.report import html as hr
from robident_twin.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


class _Scan(HTMLParser):
    """Section ids, image sources, every other URL attribute, scripts and flagged rows per section."""

    def __init__(self):
        super().__init__()
        self.sections, self.imgs, self.figs, self.urls, self.scripts = [], [], [], [], 0
        self.bad_rows: dict[str, int] = {}
        self.rows: dict[str, int] = {}
        self._section = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self._section = a.get("id")
            self.sections.append(self._section)
        if tag == "script":
            self.scripts += 1
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag == "svg" and "data-fig" in a:
            self.figs.append(a["data-fig"])
        for k in ("href", "xlink:href", "src", "action"):
            if k in a and tag != "img" and not a[k].startswith("#"):
                self.urls.append(a[k])
        if tag == "tr" and self._section:
            self.rows[self._section] = self.rows.get(self._section, 0) + 1
            if a.get("class") == "bad":
                self.bad_rows[self._section] = self.bad_rows.get(self._section, 0) + 1


def scan(path: Path) -> _Scan:
    text = Path(path).read_text(encoding="utf-8")
    s = _Scan()
    s.feed(text)
    assert "http://" not in text and "https://" not in text, "the report must not reference external URLs"
    assert s.scripts == 0 and not s.urls, (s.scripts, s.urls)
    for src in s.imgs:  # a raster inside a figure is an embedded, decodable PNG
        assert src.startswith("data:image/png;base64,"), src[:60]
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    # every figure is inline SVG with unique ids (many figures share one page)
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1)[:5]
    assert len(s.figs) == len(set(s.figs))
    return s


def cli(cwd: Path, *overrides: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "robident-twin"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]
    return subprocess.run(cmd + list(overrides), capture_output=True, text=True, cwd=cwd, timeout=600)


# ----------------------------------------------------------------------------- identification run
# identify_run (one small default run, acquisition.periods=2): tests/conftest.py, shared with
# tests/test_report_browser.py.

def test_identify_run_writes_a_complete_offline_report(identify_run):
    proc, out, s = identify_run
    assert f"report: {out / 'report.html'}" in proc.stdout
    sc = scan(out / "report.html")
    assert tuple(sc.sections) == hr.IDENTIFY_SECTIONS
    # excitation plot, validation, residuals, parameters, z histogram: all inline SVG although
    # output.plots=false wrote no PNG files into the run directory
    assert sc.figs == ["excitation", "validation", "residuals", "parameters", "z"] and not sc.imgs
    assert not (out / "validation_torques.png").exists()
    # one table row per base parameter (+ header); rows flagged red exactly where |est-true|/std > 3
    assert sc.rows["parameters"] == len(s["parameters"]) + 1
    z = [(p["estimate"] - p["true"]) / p["std"] for p in s["parameters"]]
    assert sc.bad_rows.get("parameters", 0) == sum(abs(v) > 3 for v in z)
    # the dry-run margins: one row per joint (7) + header
    assert sc.rows["excitation"] == 7 + 1
    text = (out / "report.html").read_text()
    assert "dry run <span class=\"pass\">PASS</span>" in text
    for p in s["parameters"][:5]:
        assert f">{p['name']}<" in text and p["regroups"].split(" = ")[0] in text


def _blocks(img: np.ndarray, k: int = 8) -> np.ndarray:
    """Grey level averaged over k x k pixel blocks (a 1-2 px shift of a line hardly moves it)."""
    g = img[..., :3].mean(axis=-1)
    h, w = (g.shape[0] // k) * k, (g.shape[1] // k) * k
    return g[:h, :w].reshape(h // k, k, w // k, k).mean(axis=(1, 3))


def test_the_png_files_are_the_report_figures_drawn_once(identify_run, tmp_path):
    """With output.plots and the report, validation_torques.png and parameters.png are written from
    the report's own drawing of each figure, with the constrained layout that drawing solved: the
    SVG is unchanged by it, and each PNG is the figure a fresh drawing gives: same size; the layout
    solved for the SVG renderer moves axes by up to ~2 px (8 px block means within 0.02 on average,
    measured 0.007-0.009; without the layout 0.07-0.09)."""
    import io

    import matplotlib.image as mpimg

    from robident_twin.report.identify_run import PNG_FILES
    from robident_twin.report.plots import parameters_figure, validation_figure
    from robident_twin.report.svg import to_png

    _, out, s = identify_run
    data = hr.ReportData.load(out / hr.DATA)
    png = {k: tmp_path / v for k, v in PNG_FILES.items()}
    assert hr.identify_figures(s, data, list(PNG_FILES), png) == hr.identify_figures(s, data, list(PNG_FILES))
    fresh = {"validation": validation_figure(data.t_val_s, data.tau_val_meas_Nm, data.tau_val_pred_Nm,
                                             data.channels), "parameters": parameters_figure(s)}
    for k, fig in fresh.items():
        a, b = mpimg.imread(png[k]), mpimg.imread(io.BytesIO(to_png(fig)))
        assert a.shape == b.shape, k
        assert np.abs(_blocks(a) - _blocks(b)).mean() < 0.02, k


def test_report_data_is_consistent_with_the_summary(identify_run):
    """report_data.npz holds the arrays the summary's figures were computed from."""
    _, out, s = identify_run
    d = hr.ReportData.load(out / hr.DATA)
    assert d.channels == ["A1", "A2", "A3", "A4", "A5", "A6", "A7"]
    assert d.residuals_Nm.shape == (s["n_samples"], 7)
    np.testing.assert_allclose(np.sqrt(np.mean(d.residuals_Nm**2, axis=0)), s["residual_rms_Nm"], rtol=1e-5)
    rmse = np.sqrt(np.mean((d.tau_val_meas_Nm - d.tau_val_pred_Nm) ** 2, axis=0))
    np.testing.assert_allclose(rmse, s["validation"]["torque_rmse_Nm"], rtol=1e-5)
    assert d.t_val_s[0] == 0 and np.all(np.diff(d.t_val_s) > 0)


def test_task_report_rebuilds_the_report_from_the_run_files(identify_run, tmp_path):
    """task=report writes into its own run directory; the source run is only read."""
    _, out, s = identify_run
    before = (out / "report.html").read_text()
    listing = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    proc = cli(tmp_path, "task=report", f"report.run_dir={out}", f"hydra.run.dir={tmp_path / 'r'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == listing  # source folder untouched
    sc = scan(tmp_path / "r" / "report.html")
    assert tuple(sc.sections) == hr.IDENTIFY_SECTIONS and len(sc.figs) == 5
    # identical to the page written at the end of the run, figures included (deterministic SVG)
    after = (tmp_path / "r" / "report.html").read_text()
    same = after == before  # (not `assert after == before`: pytest's diff of two 1 MB pages takes minutes)
    at = next((i for i, (x, y) in enumerate(zip(after, before)) if x != y), min(len(after), len(before)))
    assert same, f"rebuilt page differs at character {at}: {after[at - 80:at + 80]!r} vs {before[at - 80:at + 80]!r}"


def test_report_without_report_data_degrades_to_notes(identify_run, tmp_path):
    """An older run without report_data.npz still gets every section (torques/residuals as notes)."""
    _, out, s = identify_run
    d = tmp_path / "old"
    d.mkdir()
    (d / "summary.json").write_text((out / "summary.json").read_text())
    path = hr.build_report(d)
    sc = scan(path)
    assert tuple(sc.sections) == hr.IDENTIFY_SECTIONS
    assert "no report_data.npz" in path.read_text() and sc.figs == ["excitation", "parameters", "z"]


def test_bad_report_dir_errors_name_the_problem(tmp_path):
    with pytest.raises(ConfigError, match="is not a directory"):
        hr.build_report(tmp_path / "missing")
    with pytest.raises(ConfigError, match="holds no summary.json"):
        hr.build_report(tmp_path)
    (tmp_path / "FAILED.txt").write_text("ConfigError: robot.file: nope\n")
    with pytest.raises(ConfigError, match="the run failed: ConfigError: robot.file: nope"):
        hr.build_report(tmp_path)
    (tmp_path / "summary.json").write_text('{"robot": "x"}')
    with pytest.raises(ConfigError, match="expected an identification summary"):
        hr.build_report(tmp_path)
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        hr.build_report(tmp_path)


def test_task_report_without_run_dir_fails_clearly(tmp_path):
    proc = cli(tmp_path, "task=report", f"hydra.run.dir={tmp_path / 'r'}")
    assert proc.returncode == 2
    assert "report.run_dir" in proc.stderr and (tmp_path / "r" / "FAILED.txt").is_file()


# ----------------------------------------------------------------------------- Monte-Carlo reports

def _synthetic_job(out: Path, noise_scale: float, seed: int, biased: str | None = None):
    """A Monte-Carlo job directory as sweeps.run_job writes it, from Gaussian draws with a
    known covariance (optionally one parameter biased by 10 standard errors)."""
    from report_samples import write_mc_job

    from robident_twin.validation.montecarlo import MonteCarloResult

    rng = np.random.default_rng(seed)
    names = ("ZZ1R", "XX2R", "MX2", "Fv1", "Fc1")
    p, n = len(names), 400
    A = rng.standard_normal((p, p))
    crlb = (A @ A.T / p + np.eye(p)) * (0.01 * noise_scale) ** 2
    truth = np.array([1.0, 0.5, 0.2, 0.3, 0.4])
    est = truth + rng.standard_normal((n, p)) @ np.linalg.cholesky(crlb).T
    if biased:
        i = names.index(biased)
        est[:, i] += 10 * np.sqrt(crlb[i, i] / n)
    res = MonteCarloResult("exact", "wls", names, ("u",) * p, truth, crlb, est,
                           np.tile(np.sqrt(np.diag(crlb)), (n, 1)), np.full(n, 1.0), np.arange(n),
                           {"robot": "synthetic", "measurement": "joint_torque", "n_samples": 100, "wall_s": 1.0})
    return write_mc_job(out, res, {"name": "synthetic", "excitation": "none", "validation": "none"}, noise_scale,
                        seed)


def test_montecarlo_histogram_panels_all_carry_the_ticks_at_minus_3_0_3():
    """The histogram panels share their x axis: the ticks at -3, 0, 3 CR std, set once for the
    group, are on every panel that shows data, and the lowest panel of each column labels them."""
    from robident_twin.report.plots_mc import mc_histograms_figure
    from robident_twin.report.svg import plt

    rng = np.random.default_rng(0)
    p = 11
    fig = mc_histograms_figure(rng.standard_normal((40, p)), np.zeros(p), np.ones(p), [f"p{i}" for i in range(p)],
                               cols=4)
    shown = [ax for ax in fig.axes if ax.axison]
    assert len(shown) == p
    for ax in shown:
        assert list(ax.get_xticks()) == [-3, 0, 3] and list(ax.get_yticks()) == []
    labelled = [ax for ax in shown if ax.get_xlabel()]
    assert len(labelled) == 4 and all(ax.xaxis.get_tick_params()["labelbottom"] for ax in labelled)
    plt().close(fig)


def test_montecarlo_report_flags_the_biased_parameter(tmp_path):
    summary, tests = _synthetic_job(tmp_path / "job", 1.0, 1, biased="MX2")
    assert not tests.mean_ok  # 10 standard errors of bias: the mean-consistency test must see it
    path = hr.build_report(tmp_path / "job")
    sc = scan(path)
    assert tuple(sc.sections) == hr.MONTECARLO_SECTIONS
    assert sc.figs == ["bias", "efficiency", "coverage", "convergence", "histograms"]
    flagged = [q["name"] for q in summary["parameters"]
               if not q["ratio_in_chi2_90"] or abs(q["bias_over_crlb_sem"]) > 3]
    assert "MX2" in flagged and sc.bad_rows.get("mc-table", 0) == len(flagged)
    text = path.read_text()
    assert "tests FAILED" in text and '<span class="fail">FAIL</span>' in text


def test_aggregate_report_has_one_section_per_job(tmp_path):
    from robident_twin.validation.sweeps import aggregate

    _synthetic_job(tmp_path / "sweep" / "0", 1.0, 2)
    _synthetic_job(tmp_path / "sweep" / "1", 2.0, 3)
    aggregate(tmp_path / "sweep", plots=True)
    path = hr.build_report(tmp_path / "sweep")  # a sweep directory: its aggregate/ is used
    assert path == tmp_path / "sweep" / "aggregate" / "report.html"
    sc = scan(path)
    assert sc.sections == [*hr.AGGREGATE_SECTIONS, "job-0", "job-1"]
    assert len(sc.figs) == 3 + 2 * 3  # the sweep's three plots + bias, efficiency, coverage per job
    with pytest.raises(ConfigError, match="no runs.parquet"):
        hr.write_aggregate_report(tmp_path / "sweep" / "0")


def test_task_aggregate_writes_into_its_own_run_directory(tmp_path):
    """task=aggregate (robident_twin.cli.run_aggregate) reads the sweep and writes its tables and
    report into the task's own run directory: the sweep folder is left as it was."""
    from hydra import compose, initialize_config_dir

    from robident_twin.cli import run_aggregate
    from robident_twin.config import validate
    from robident_twin.paths import CONF_DIR

    _synthetic_job(tmp_path / "sweep" / "0", 1.0, 2)
    _synthetic_job(tmp_path / "sweep" / "1", 2.0, 3)
    before = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "sweep").rglob("*"))
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        run = validate(compose("config", overrides=["task=aggregate", f"montecarlo.sweep_dir={tmp_path / 'sweep'}",
                                                     "output.plots=false", "output.report=true"]))
    out = tmp_path / "run"
    out.mkdir()
    paths = run_aggregate(run, out)
    assert sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "sweep").rglob("*")) == before
    assert paths["report"] == out / "report.html" and {p.parent for p in paths.values()} == {out}
    assert scan(out / "report.html").sections == [*hr.AGGREGATE_SECTIONS, "job-0", "job-1"]
    assert (out / "runs.parquet").is_file() and (out / "table.csv").is_file()


def test_optional_stages_get_their_own_section(identify_run, tmp_path):
    """summary.json 'reduction' / 'physical' (reduction.method, physical.method) are shown when present."""
    _, out, s = identify_run
    s = dict(s, reduction={"method": "essential", "n_before": 57, "n_after": 40, "removed": ["XY1", "XZ1"],
                           "parameters": [{"name": "ZZ1R"}], "validation": {"torque_nrmse_percent": [1.5, 2.5]}})
    d = tmp_path / "run"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps(s))
    text = hr.build_report(d).read_text()
    sc = scan(d / "report.html")
    assert sc.sections == [*hr.IDENTIFY_SECTIONS, "postprocess"]
    assert "XY1, XZ1" in text and "validation.torque_nrmse_percent" in text and "1 entries" in text


# ----------------------------------------------------------------------------- figures and new sections

def test_running_moments_equal_numpy_on_every_prefix():
    """The convergence plot's running mean and variance equal numpy's mean / var(ddof=1) of each prefix."""
    from robident_twin.report.plots_mc import running_moments

    e = np.random.default_rng(0).normal(3.0, 2.0, (50, 4))
    mean, var = running_moments(e)
    for k in (1, 2, 7, 50):
        np.testing.assert_allclose(mean[k - 1], e[:k].mean(axis=0), rtol=1e-12)
        if k > 1:
            np.testing.assert_allclose(var[k - 1], e[:k].var(axis=0, ddof=1), rtol=1e-9)
    assert np.all(np.isnan(var[0]))


def test_sweep_axis_has_no_offset_and_equal_values_stay_flat():
    """The '1e-13 + 1.0494' axis of the old sweep report: two equal values (up to 1e-13) are drawn on a
    plain axis (no offset text) spanning at least 5 % of the value, so they look equal."""
    import pandas as pd

    from robident_twin.report.plots_mc import sweep_metric_figure
    from robident_twin.report.svg import to_svg

    runs = pd.DataFrame({"robot": "iiwa14", "mode": "exact", "estimator": "wls", "friction": "matched",
                         "noise_scale": [0.5, 2.0], "rms_bias_over_crlb_sem": [1.0494, 1.0494 + 1e-13]})
    fig = sweep_metric_figure(runs, "rms_bias_over_crlb_sem", "RMS bias")
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.yaxis.get_offset_text().get_text() == ""
    lo, hi = ax.get_ylim()
    assert hi - lo >= 0.05 * 1.0494
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert len(labels) == len(set(labels)) >= 3, labels  # distinct, readable ticks
    svg = to_svg(fig, "t")
    assert "1e-13" not in svg and "legend-0" in svg and "data-0" in svg


def test_twin_vs_real_page_marks_every_target(tmp_path):
    """The CLOOS twin-vs-real page (results of experiments/twin_vs_real_cloos) shows one cell per joint and
    target, marked met exactly where the experiment's own compare() says so; task=report rebuilds it."""
    import report_samples as rs

    from robident_twin.validation import twin_vs_real as tv

    d = rs.twin_vs_real(tmp_path / "tvr")
    res = json.loads((d / hr.TWIN_VS_REAL).read_text())
    met = res["met"]
    flags = [m for k in ("residual_rms", "variance_median") for m in met[k]] + \
        [m for g in ("validation", "acf_abs_diff") for v in met[g].values() for m in v]
    assert len(flags) == 6 * (2 + 3 + 2) and 0 < sum(flags) < len(flags)  # both kinds present
    text = hr.build_report(d).read_text()
    n_met = len(re.findall(r'<span class="pass">[0-9.]+ met</span>', text))
    n_missed = len(re.findall(r'<span class="fail">[0-9.]+ missed</span>', text))
    assert (n_met, n_missed) == (sum(flags), len(flags) - sum(flags))
    for lo_hi in ("0.75-1.33", "0.8-1.25", "0.7-1.4", "&lt;= 0.15", "0.67-1.5"):
        assert lo_hi in text
    assert tv.TARGETS["residual_rms"] == tuple(res["targets"]["residual_rms"])
    sc = scan(d / hr.REPORT)
    assert sc.sections == ["twin-vs-real"] and sc.figs == ["twin-vs-real"]


def test_templates_escape_every_text():
    """Autoescape is on: a name from a user's robot file cannot inject markup into the page."""
    from robident_twin.report.page import kv, note, render_page, section, span, table

    evil = '<script>alert("x")</script>'
    text = render_page(evil, evil, [section("s", evil, [kv([(evil, [evil, span(evil, False)])]),
                                                        table([evil], [[evil]]), note(evil)])])
    assert "<script>" not in text and text.count("&lt;script&gt;") == 11  # title x2, subtitle, nav, h2, kv x3, th, td, note
