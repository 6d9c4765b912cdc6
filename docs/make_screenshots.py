"""Screenshots of every report kind for the README (docs/img/report_<kind>.png).

    PYTHONPATH=. python docs/make_screenshots.py [--identify-run DIR] [--montecarlo-run DIR]
        [--twin-vs-real DIR] [--out docs/img]

Renders each page in the Debian ``chromium`` (headless, DevTools protocol; the client and the layout
measurement of tests/test_report_browser.py and tests/test_report_layout.py) at 1366 px width and
saves the top of the page at 0.7 scale (PNG < 300 kB, a 256-colour palette when needed). The page is measured as the layout test
measures it, and a page with layout problems is refused (exit code 1) rather than photographed.

The identification report comes from a real default run (``--identify-run``, else a short one,
``acquisition.periods=2``, is made); the Monte-Carlo job from a real ``task=montecarlo`` run
(``--montecarlo-run``, else ``montecarlo.runs=100`` is run); the CLOOS twin against the real data
from a folder written by experiments/twin_vs_real_cloos/run.py (``--twin-vs-real``); the sweep,
robustness, control (and without ``--twin-vs-real`` the twin-vs-real) pages from the small synthetic
inputs of tests/report_samples.py (their figures are draws, not results: they show the layout).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

#: kind -> (file name, height of the page's top shown, px at 1366 px width)
SHOTS = {"identify": ("report_identify.png", 2300), "montecarlo": ("report_montecarlo.png", 2300),
         "sweep": ("report_sweep.png", 2000), "robustness": ("report_robustness.png", 1900),
         "control": ("report_control.png", 900), "twin_vs_real": ("report_twin_vs_real.png", 1700)}
MAX_BYTES = 300_000


def _cli(*overrides: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "robident_twin.cli", *overrides], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"robident-twin {' '.join(overrides)} failed:\n{proc.stderr[-3000:]}")


def _shrink(path: Path) -> None:
    """Re-encode a screenshot with the best PNG compression; above MAX_BYTES, as a 256-colour
    palette (fast octree: keeps the few saturated colours, e.g. red markers, a median cut greys out)."""
    from PIL import Image

    with Image.open(path) as im:
        rgb = im.convert("RGB")
    rgb.save(path, optimize=True)
    if path.stat().st_size > MAX_BYTES:
        rgb.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(path, optimize=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--identify-run", default=None, help="a finished identification run directory")
    ap.add_argument("--montecarlo-run", default=None, help="a finished task=montecarlo run directory")
    ap.add_argument("--twin-vs-real", default=None, help="a folder holding twin_vs_real.json")
    ap.add_argument("--out", default=str(ROOT / "docs" / "img"))
    a = ap.parse_args(argv)

    import json

    import report_samples as rs
    from test_report_browser import Chromium, find_browser
    from test_report_layout import measure

    from robident_twin.report import html as hr

    exe = find_browser()
    if exe is None:
        raise SystemExit("no Chromium on PATH (Debian package `chromium`)")
    tmp = Path(tempfile.mkdtemp(prefix="robident_shots_"))
    ident = Path(a.identify_run) if a.identify_run else tmp / "identify_run"
    if not a.identify_run:
        _cli(f"hydra.run.dir={ident}", "acquisition.periods=2", "output.plots=false")
    mc = Path(a.montecarlo_run) if a.montecarlo_run else tmp / "mc_run"
    if not a.montecarlo_run:
        _cli("task=montecarlo", "montecarlo.runs=100", f"hydra.run.dir={mc}")
    names = [p["name"] for p in json.loads((ident / "summary.json").read_text())["parameters"]]
    (tmp / "identify").mkdir()
    (tmp / "tvr_page").mkdir()
    pages = {"identify": hr.build_report(ident, tmp / "identify"),
             "montecarlo": mc / hr.REPORT,
             "sweep": hr.build_report(rs.sweep(tmp / "sweep", names)),
             "robustness": hr.build_report(rs.robustness(tmp / "robustness")),
             "control": rs.control(tmp / "control") / hr.REPORT,
             "twin_vs_real": hr.build_report(Path(a.twin_vs_real) if a.twin_vs_real else rs.twin_vs_real(tmp / "tvr"),
                                             tmp / "tvr_page")}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    browser = Chromium(exe, tmp / "chromium")
    bad = 0
    try:
        for kind, page in pages.items():
            name, height = SHOTS[kind]
            m = measure(browser, page, screenshot=out / name, max_height_px=height, scale=0.7)
            _shrink(out / name)
            size = (out / name).stat().st_size
            print(f"{kind:13s} {out / name} {size / 1000:.0f} kB, page {m['height']} px, "
                  f"{m['n_figures']} figures, {len(m['problems'])} layout problems")
            for p in m["problems"][:10]:
                print("    " + p)
            bad += bool(m["problems"]) + (size > MAX_BYTES)
    finally:
        browser.close()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
