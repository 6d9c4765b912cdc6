"""The report's figures drawn without repeated work (robident_twin/report/svg.py, plots.py): the
layout solved once and fixed, a time axis per panel instead of one shared axis; each cut leaves the
written SVG and PNG byte-identical to the drawing it replaces."""
import io

import numpy as np
import pytest

from robident_twin.report import plots
from robident_twin.report.svg import layout_once, plt


def _figure():
    """A small figure of the report's kind: constrained layout, a legend outside the axes, a title."""
    pyplot = plt()
    fig, axes = pyplot.subplots(2, 2, figsize=(6.0, 3.2), layout="constrained")
    for k, ax in enumerate(axes.flat):
        ax.plot([0.0, 1.0, 2.0], [0.0, 1.0, 4.0 * (k + 1)], label="measured")
        ax.set_ylabel(f"joint {k + 1} torque [Nm]")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside upper center")
    fig.suptitle("a title")
    return fig


def _save(fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, metadata={"Date": None, "Creator": None} if fmt == "svg" else None, dpi=90)
    return buf.getvalue()


def _draws(fig) -> list:
    seen = []
    fig.canvas.mpl_connect("draw_event", lambda ev: seen.append(1))
    return seen


def test_the_layout_solved_once_gives_savefigs_own_svg_and_png_with_one_drawing_per_file():
    """savefig of a figure with the constrained layout draws it twice (once only to lay it out); the
    layout solved once as the SVG writer measures text, then removed, gives the same SVG bytes and the
    same PNG bytes as the route it replaces (SVG with the engine, then the PNG with the engine set to
    "none"), with one drawing per file."""
    pyplot = plt()
    ref = _figure()
    ref_draws = _draws(ref)
    ref_svg = _save(ref, "svg")
    assert len(ref_draws) == 2  # matplotlib's own route: the layout's drawing, then the file's
    ref.set_layout_engine("none")
    ref_png = _save(ref, "png")
    pyplot.close(ref)

    fig = _figure()
    before = [ax.get_position().bounds for ax in fig.axes]
    draws = _draws(fig)
    layout_once(fig)
    assert fig.get_layout_engine() is None
    assert [ax.get_position().bounds for ax in fig.axes] != before  # the layout did move the axes
    assert _save(fig, "svg") == ref_svg
    assert _save(fig, "png") == ref_png
    assert len(draws) == 2  # one per file
    pyplot.close(fig)


def test_layout_once_leaves_a_figure_without_layout_engine_alone():
    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(3.0, 2.0))
    ax.plot([0, 1], [1, 0])
    pos = ax.get_position().bounds
    layout_once(fig)
    assert ax.get_position().bounds == pos and fig.get_layout_engine() is None
    pyplot.close(fig)


def test_validation_figure_draws_the_time_axes_a_shared_axis_would():
    """The validation figure's panels share no x axis (a shared one measures every panel's tick labels
    for each panel's axis label: n^2 work); the figure is byte-identical to the one with
    ``sharex=True``: same limits, ticks, and tick labels on the bottom row only."""
    rng = np.random.default_rng(0)
    n, m = 3, 400
    t = np.arange(m) / 100.0
    meas = np.cumsum(rng.normal(size=(m, n)), axis=0)
    pred = meas + rng.normal(scale=0.1, size=(m, n))
    names = [f"A{j + 1}" for j in range(n)]

    class SharedX:  # pyplot whose subplots share the x axis, as the figure was drawn before
        def __init__(self, pyplot):
            self._p = pyplot

        def __getattr__(self, k):
            return getattr(self._p, k)

        def subplots(self, *a, **kw):
            return self._p.subplots(*a, sharex=True, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plots, "plt", lambda: SharedX(plt()))
        shared = plots.validation_figure(t, meas, pred, names)
    assert shared.axes[0].get_shared_x_axes().joined(shared.axes[0], shared.axes[-1])
    own = plots.validation_figure(t, meas, pred, names)
    assert not own.axes[0].get_shared_x_axes().joined(own.axes[0], own.axes[-1])
    for a, b in zip(shared.axes, own.axes):
        assert a.get_xlim() == b.get_xlim()
    for fmt in ("svg", "png"):
        layout_once(shared)
        layout_once(own)
        assert _save(own, fmt) == _save(shared, fmt), fmt
    plt().close(shared)
    plt().close(own)


def test_the_png_drawn_in_a_forked_child_equals_the_one_drawn_here(identify_run, tmp_path, monkeypatch):
    """task=identify's report on the forked route: the other half of the figures in one child, and the
    PNG of each figure drawn here in a further child forked once that figure is laid out (beside its
    SVG's drawing). report.html and the PNG files equal those of the route without children."""
    from robident_twin import forked
    from robident_twin.report import html as hr
    from robident_twin.report import identify_run as ir

    _, run, summary = identify_run
    data = hr.ReportData.load(run / hr.DATA)
    monkeypatch.setattr(ir, "report_data_from_result", lambda result: data)  # the run's stored arrays
    monkeypatch.setenv("ROBIDENT_FORK", "1")
    whats = []
    real = forked._Child
    monkeypatch.setattr(forked, "_Child", lambda fn, what: whats.append(what) or real(fn, what))
    excitation = hr.excitation_blocks(summary.get("config"))
    files = {}
    for route, start in (("forked", lambda fn: forked.start(fn, "report figures")), ("here", None)):
        out = tmp_path / route
        out.mkdir()
        page = ir.begin_identify_report(None, summary, out, start=start, pngs=True)(excitation)
        files[route] = {"page": page.read_text().replace(str(out), "<run>").encode()}
        files[route].update({k: (out / v).read_bytes() for k, v in ir.PNG_FILES.items()})
    # the other half's child, then the PNG of each figure drawn here with one (parameters)
    drawn_here = [k for k in ir.PNG_FILES if k not in ir.ELSEWHERE]
    assert drawn_here and whats == ["report figures"] * (1 + len(drawn_here))
    for k in files["here"]:
        assert files["forked"][k] == files["here"][k], k
