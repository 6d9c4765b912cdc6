"""Layout of every report kind in headless Chromium at 1366 px width (issue 18, Build item 3).

Each page (identification, Monte-Carlo, sweep, robustness, control, CLOOS twin vs real; see
tests/report_samples.py) is opened in the Debian ``chromium`` (the DevTools client of
tests/test_report_browser.py) with a 1366 x 900 viewport, and :data:`LAYOUT_JS` measures the
rendered page. The test fails on

- horizontal overflow: the document wider than the viewport, an element whose right edge is past
  it, or an element whose content is wider than its own box (a table in a scrolling box);
- overlapping legends: a figure legend's bounding box against any data area of its figure (the
  axes' background, ``<fig>-data-<k>``), another legend, or any text outside legends;
- overlapping text inside a figure (e.g. parameter names on an x axis);
- unreadable text: any HTML text or SVG text rendered under 9 px (SVG: the font size times the
  figure's scale on screen).

``test_layout_checks_fail_on_broken_pages`` breaks each check on purpose (a wide table, a 6 px font,
a legend on the data, labels on top of each other) and requires the checker to name it.
Without Chromium the tests skip outside CI and fail with CI=true (fixture ``chromium_exe``).
"""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from report_samples import all_reports
from test_report_browser import BrowserError, Chromium, chromium_exe  # noqa: F401  (the fixture)

WIDTH_PX, HEIGHT_PX = 1366, 900
MIN_FONT_PX = 9.0

#: what the checker measures; returns {"problems": [...], "n_text": .., "n_svg_text": .., "n_legends": ..}
LAYOUT_JS = r"""(async () => {
  await document.fonts.ready;
  const MIN = %(min_font)s, W = document.documentElement.clientWidth, P = [];
  const name = el => { let s = el.tagName.toLowerCase(); if (el.id) s += '#' + el.id;
    const f = el.closest('svg[data-fig]'); if (f) s += ' in figure ' + f.dataset.fig;
    const sec = el.closest('section'); if (sec) s += ' in section #' + sec.id; return s; };
  const sw = document.documentElement.scrollWidth;
  if (sw > W) P.push(`overflow: document ${sw} px wide, viewport ${W} px`);
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('svg') && el.tagName.toLowerCase() !== 'svg') continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > W + 0.5) P.push(`overflow: ${name(el)} ends at ${r.right.toFixed(0)} px > ${W} px`);
    if (el instanceof HTMLElement && getComputedStyle(el).display !== 'inline' && el.scrollWidth > el.clientWidth + 1)
      P.push(`overflow: ${name(el)} content ${el.scrollWidth} px wider than its box ${el.clientWidth} px`);
  }
  // HTML text
  let nText = 0;
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    const t = walk.currentNode, el = t.parentElement;
    if (!t.textContent.trim() || !el || el.closest('svg')) continue;
    const r = el.getBoundingClientRect(); if (r.width === 0 || r.height === 0) continue;
    nText++;
    const fs = parseFloat(getComputedStyle(el).fontSize);
    if (fs < MIN) P.push(`small text: ${fs.toFixed(1)} px "${t.textContent.trim().slice(0, 40)}" (${name(el)})`);
  }
  // figures
  const area = (a, b) => Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left)) *
                         Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
  let nSvgText = 0, nLegends = 0;
  for (const svg of document.querySelectorAll('svg[data-fig]')) {
    const texts = [];
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect(); if (!t.textContent.trim() || r.width === 0) continue;
      const m = t.getScreenCTM(), scale = Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
      const px = parseFloat(getComputedStyle(t).fontSize) * scale;
      nSvgText++;
      if (px < MIN) P.push(`small text: ${px.toFixed(1)} px "${t.textContent.trim().slice(0, 40)}" (${name(t)})`);
      texts.push({t, r, legend: t.closest('[id*="-legend-"]')});
    }
    const legends = Array.from(svg.querySelectorAll('[id*="-legend-"]'), g => ({g, r: g.getBoundingClientRect()}));
    const datas = Array.from(svg.querySelectorAll('[id*="-data-"]'), g => ({g, r: g.getBoundingClientRect()}));
    nLegends += legends.length;
    for (const [i, L] of legends.entries()) {
      for (const D of datas) if (area(L.r, D.r) > 1)
        P.push(`legend overlap: ${name(L.g)} covers data area ${D.g.id} (${area(L.r, D.r).toFixed(0)} px2)`);
      for (const M of legends.slice(i + 1)) if (area(L.r, M.r) > 1)
        P.push(`legend overlap: ${name(L.g)} and ${M.g.id}`);
      for (const T of texts) if (!T.legend && area(L.r, T.r) > 1)
        P.push(`legend overlap: ${name(L.g)} covers text "${T.t.textContent.trim().slice(0, 30)}"`);
    }
    const free = texts.filter(T => !T.legend);
    for (let i = 0; i < free.length; i++) for (let j = i + 1; j < free.length; j++) {
      const a = free[i].r, b = free[j].r, o = area(a, b);
      if (o > 2 && o > 0.1 * Math.min(a.width * a.height, b.width * b.height))
        P.push(`text overlap: "${free[i].t.textContent.trim().slice(0, 30)}" and ` +
               `"${free[j].t.textContent.trim().slice(0, 30)}" (${name(free[i].t)})`);
    }
  }
  return {problems: P, width: W, n_text: nText, n_svg_text: nSvgText, n_legends: nLegends,
          n_figures: document.querySelectorAll('svg[data-fig]').length, height: document.documentElement.scrollHeight};
})()""" % {"min_font": MIN_FONT_PX}


def measure(browser: Chromium, path: Path, screenshot: Path | None = None, max_height_px: int = 2600,
            scale: float = 0.5) -> dict:
    """Open ``path`` in a new tab at WIDTH_PX x HEIGHT_PX, run LAYOUT_JS; optionally save a PNG
    screenshot of the top ``max_height_px`` of the page at ``scale``."""
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    try:
        browser.send("Page.enable", session=session)
        browser.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH_PX, "height": HEIGHT_PX,
                                                            "deviceScaleFactor": 1, "mobile": False}, session=session)
        browser.events = [e for e in browser.events if e.get("sessionId") != session]
        nav = browser.send("Page.navigate", {"url": Path(path).resolve().as_uri()}, session=session)
        if nav.get("errorText"):
            raise BrowserError(f"{path}: navigation failed: {nav['errorText']}")
        browser.wait_event("Page.loadEventFired", session)
        res = browser.send("Runtime.evaluate", {"expression": LAYOUT_JS, "awaitPromise": True, "returnByValue": True},
                           session=session)
        if "exceptionDetails" in res:
            raise BrowserError(f"{path}: layout query failed: {json.dumps(res['exceptionDetails'])[:2000]}")
        out = res["result"]["value"]
        if screenshot is not None:
            h = min(int(out["height"]), max_height_px)
            shot = browser.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": WIDTH_PX, "height": h, "scale": scale}}, session=session)
            Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
        return out
    finally:
        browser.events = []
        try:
            browser.send("Target.closeTarget", {"targetId": target}, timeout_s=5)
        except BrowserError:
            pass


@pytest.fixture(scope="module")
def layout_browser(chromium_exe, tmp_path_factory):  # noqa: F811
    b = Chromium(chromium_exe, tmp_path_factory.mktemp("chromium_layout"))
    yield b
    b.close()


@pytest.fixture(scope="module")
def reports(identify_run, tmp_path_factory):
    """Every kind's report; the identification's is the page identify_run itself wrote (its
    rebuild by task=report is identical: test_html_report), so it is not rebuilt here."""
    _, out, s = identify_run
    return all_reports(tmp_path_factory.mktemp("layout"), out, [p["name"] for p in s["parameters"]],
                       rebuild_identify=False)


@pytest.mark.parametrize("kind", ["identify", "montecarlo", "sweep", "robustness", "control", "twin_vs_real"])
def test_report_fits_1366_px_with_readable_text_and_free_legends(layout_browser, reports, kind):
    m = measure(layout_browser, reports[kind])
    # the checks had something to check (the robustness heat map has a colour bar, no legend)
    assert m["width"] <= WIDTH_PX and m["n_text"] > 10 and m["n_figures"] >= 1 and m["n_svg_text"] > 10, m
    assert m["n_legends"] >= (0 if kind == "robustness" else 1), m
    assert not m["problems"], f"{reports[kind]}:\n" + "\n".join(m["problems"][:40])


BROKEN = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>broken</title>
<style>body{margin:0;font-family:sans-serif}</style></head><body>
<section id="wide"><table><tr>%(cells)s</tr></table></section>
<section id="tiny"><p style="font-size:6px">six pixel text</p></section>
<section id="fig"><svg data-fig="f" width="400" height="200" viewBox="0 0 400 200">
<g id="f-data-0"><rect x="40" y="20" width="340" height="150" fill="#eee"/></g>
<g id="f-legend-0"><rect x="300" y="30" width="70" height="30" fill="#fff"/><text x="305" y="50" style="font:12px sans-serif">legend</text></g>
<text x="10" y="190" style="font:12px sans-serif">label one</text><text x="14" y="192" style="font:12px sans-serif">label two</text>
<text x="200" y="190" style="font:5px sans-serif">tiny tick</text>
</svg></section></body></html>"""


def test_layout_checks_fail_on_broken_pages(layout_browser, tmp_path):
    """Each check fires on a page built to break it, and is silent on the same page mended."""
    bad = tmp_path / "broken.html"
    bad.write_text(BROKEN % {"cells": "".join(f"<td>column_number_{i}_with_a_long_name</td>" for i in range(40))})
    text = "\n".join(measure(layout_browser, bad)["problems"])
    assert "overflow: document" in text and "overflow: table" in text, text
    assert 'small text: 6.0 px "six pixel text"' in text, text
    assert 'small text: 5.0 px "tiny tick"' in text, text
    assert "legend overlap: g#f-legend-0 in figure f in section #fig covers data area f-data-0" in text, text
    assert 'text overlap: "label one" and "label two"' in text, text
    good = tmp_path / "mended.html"
    good.write_text((BROKEN % {"cells": "<td>three</td><td>short</td><td>cells</td>"})
                    .replace("font-size:6px", "font-size:12px").replace('x="300" y="30"', 'x="300" y="172"')
                    .replace('y="50" style', 'y="190" style').replace('x="14" y="192"', 'x="100" y="190"')
                    .replace("font:5px", "font:10px").replace('x="200" y="190"', 'x="180" y="190"'))
    assert measure(layout_browser, good)["problems"] == []
