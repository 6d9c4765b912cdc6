"""matplotlib figures as inline SVG for the HTML report, measurable in the browser.

Text stays text (``svg.fonttype = none``), so the rendered font size of every label can be read
in a browser; the axes' data areas and the legends carry ids (``<fig>-data-<k>``,
``<fig>-legend-<k>``) so that a layout test can compare their bounding boxes. Every id of a
figure is prefixed with the figure's own name, so many figures share one page without clashes;
the output is deterministic (fixed hash salt, no date), so a rebuilt report equals the original.
"""
from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from markupsafe import Markup

#: the report's matplotlib style: no offset or scientific multiplier hidden in a corner of an axis
#: (a "1e-13 + 1.0494" axis makes two equal values look like a trend), fonts >= 8 pt (>= 10.7 px at 1:1)
STYLE: dict[str, Any] = {
    "svg.fonttype": "none", "svg.hashsalt": "robident-twin", "axes.formatter.useoffset": False,
    "axes.formatter.limits": (-4, 5), "font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 8, "figure.titlesize": 10,
    "font.family": "DejaVu Sans",
}
MIN_FONT_PT = 8.0


def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    pyplot.rcParams.update(STYLE)
    return pyplot


def _tag_ids(fig) -> None:
    """ids on the data area of every visible axes and on every legend (axes' and figure's)."""
    k = 0
    for ax in fig.axes:
        if ax.axison and ax.get_visible():
            ax.patch.set_gid(f"data-{k}")
            k += 1
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for i, leg in enumerate(legends):
        leg.set_gid(f"legend-{i}")


_HEADER = re.compile(r"^.*?(?=<svg)", re.S)
_META = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_XMLNS = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')
_ID = re.compile(r'\bid="([^"]+)"')


def layout_once(fig) -> None:
    """Run the figure's layout engine (the constrained layout) once, measuring the text as the SVG
    writer does, and fix the result: the axes stay where it put them and the engine is removed.
    ``savefig`` with an engine set draws the whole figure twice (once with drawing disabled, only
    for the layout, and once for real) and again for every further file; after this it draws once
    per file, at the same positions (the SVG is byte-identical to ``savefig``'s own)."""
    engine = fig.get_layout_engine()
    if engine is None:
        return
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    canvas, dpi = fig.canvas, fig.dpi
    FigureCanvasSVG(fig)  # the figure's canvas while the layout measures: the SVG writer's renderer (72 dpi)
    try:
        engine.execute(fig)
    finally:
        fig.set_canvas(canvas)
        fig.dpi = dpi
    import matplotlib

    with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)  # (None, not "none": that leaves a placeholder engine, which draws twice too)


def to_svg(fig, name: str, png_path=None, png_start=None) -> Markup:
    """The figure as an inline ``<svg>`` element (closed afterwards); ids prefixed with ``name``.
    ``png_path``: the same figure also written there as a PNG file (:func:`to_png`), with the layout
    solved for the SVG (:func:`layout_once`: one drawing per file). ``png_start`` (``fn -> None``,
    e.g. a :func:`robident_twin.forked.start` whose handle the caller keeps and waits for): the PNG
    is drawn by ``png_start(fn)`` instead, started once the layout is solved (a forked child draws
    the laid-out figure beside the SVG's drawing here); else here, after the SVG."""
    pyplot = plt()
    _tag_ids(fig)
    layout_once(fig)
    later = None
    if png_path is not None:  # the axes stay where the SVG's layout put them
        def later():
            Path(png_path).write_bytes(to_png(fig))

        if png_start is not None:
            png_start(later)
            later = None
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    if later is not None:
        later()
    pyplot.close(fig)
    text = _META.sub("", _HEADER.sub("", buf.getvalue(), count=1))
    text = _XMLNS.sub("", text)
    ids = set(_ID.findall(text))
    prefix = re.sub(r"[^A-Za-z0-9_-]", "-", name)

    def ren(m: re.Match) -> str:
        return m.group(0).replace(m.group(1), f"{prefix}-{m.group(1)}")

    text = _ID.sub(ren, text)
    text = re.sub(r'(href="#|url\(#)([^")]+)', lambda m: m.group(1) + (f"{prefix}-{m.group(2)}" if m.group(2) in ids
                                                                        else m.group(2)), text)
    text = text.replace("<svg ", f'<svg class="fig" data-fig="{prefix}" ', 1)
    return Markup(text.strip())


def to_png(fig, dpi: int = 90) -> bytes:
    pyplot = plt()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot.close(fig)
    return buf.getvalue()
