"""The report's page model and its rendering: sections of *blocks* (plain data) turned into HTML by
the Jinja2 templates in ``robident_twin/report/templates/`` (autoescape on).

A block is a dict with a ``kind``: ``kv`` (key-value table), ``table``, ``figure`` (inline SVG),
``p``, ``note``, ``h3``, ``fail``. Text in blocks and table cells is *rich text*: a string, a
``span`` (green/red bold), a ``code`` piece, or a list of these (templates/blocks.html.j2).
"""
from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, Sequence

from robident_twin.atomic import write_text_atomic
from robident_twin.report.svg import to_svg


@functools.lru_cache(maxsize=1)
def _env():
    """The templates' environment (loaded once): package templates, autoescape on, undefined names fail."""
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("robident_twin.report", "templates"), autoescape=True,
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def span(text: Any, ok: bool) -> dict:
    """A green (ok) or red (not ok) bold span."""
    return {"t": str(text), "c": "pass" if ok else "fail"}


def verdict(ok: bool, yes: str = "ok", no: str = "FAIL") -> dict:
    return span(yes if ok else no, ok)


def code(text: Any) -> dict:
    return {"code": str(text)}


def kv(rows: Sequence[tuple[str, Any]]) -> dict:
    return {"kind": "kv", "rows": [(str(k), v) for k, v in rows]}


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], left: Sequence[int] = (0,),
          bad: Sequence[bool] | None = None, rel: Sequence[int] = (), wrap_head: bool = False) -> dict:
    """A table block: ``rows`` of cells (rich text, see templates/blocks.html.j2); ``bad`` rows in red,
    ``left`` columns left-aligned, ``rel`` columns wrapped monospace, ``wrap_head`` wraps long headers."""
    return {"kind": "table", "head": [str(h) for h in head], "rows": [list(r) for r in rows], "left": list(left),
            "bad": list(bad) if bad is not None else None, "rel": list(rel), "wrap_head": wrap_head}


def figure(fig, name: str, alt: str, caption: str = "", png_path: Path | None = None, png_start=None) -> dict:
    """A figure block: the matplotlib figure ``fig`` as inline SVG (None: a note that it is missing);
    ``png_path``: also written there as a PNG file, ``png_start``: by whom
    (:func:`robident_twin.report.svg.to_svg`)."""
    return {"kind": "figure", "svg": to_svg(fig, name, png_path, png_start) if fig is not None else None, "alt": alt,
            "caption": caption}


def row(*figures: dict) -> dict:
    """Figure blocks side by side (wrapping when the page is narrow)."""
    return {"kind": "row", "figures": list(figures)}


def para(*pieces: Any) -> dict:
    return {"kind": "p", "text": list(pieces)}


def note(*pieces: Any) -> dict:
    return {"kind": "note", "text": list(pieces)}


def h3(text: str) -> dict:
    return {"kind": "h3", "text": text}


def section(sid: str, title: str, blocks: Sequence[dict]) -> dict:
    return {"id": sid, "title": title, "blocks": list(blocks)}


def render_page(title: str, subtitle: str, sections: Sequence[dict]) -> str:
    """The whole page (templates/page.html.j2)."""
    return _env().get_template("page.html.j2").render(title=title, subtitle=subtitle, sections=list(sections))


def write_html(text: str, path: Path) -> Path:
    """Atomic write: a killed run never leaves a half-written report."""
    return write_text_atomic(path, text, encoding="utf-8")


def num(x: Any, fmt: str = ".4g") -> str:
    if x is None:
        return "-"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return format(v, fmt)
