"""The report of ``task=identify`` at the end of the run: ``report_data.npz``, ``report.html`` and,
with ``output.plots``, the PNG files of the same figures (each figure drawn once: the PNG is
written from the drawing of the SVG), split over two processes."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from robident_twin.report.html import (
    DATA,
    IDENTIFY_FIGURES,
    ReportData,
    identify_figures,
    report_data_from_result,
    write_identify_report,
)

#: the figures ``report_identify_run`` hands to ``start``, about half of the drawing (CPU s, idle, in-process,
#: each laid out once: validation 0.41 + its PNG 0.21, z 0.07; here parameters 0.44 + its PNG 0.22 (in a
#: further child), residuals 0.20; benchmarks/bench_report.py)
ELSEWHERE = ("validation", "z")
#: the PNG files (``output.plots``) of the report's figures
PNG_FILES = {"validation": "validation_torques.png", "parameters": "parameters.png"}


def begin_identify_report(result, summary: Mapping[str, Any], run_dir: Path, start=None, pngs: bool = False):
    """Start the report of ``task=identify``: store ``report_data.npz`` and, with ``start`` (``fn ->
    handle with .result()``, e.g. :func:`robident_twin.forked.start`), start the figures of
    :data:`ELSEWHERE` on the other core now (``summary`` must be complete: the child sees it as it is
    now). ``pngs``: also the figures of :data:`PNG_FILES` as PNG files in ``run_dir``. Returns
    ``finish(excitation=None) -> Path``, which draws the other figures here (their PNG files, with
    ``start``, in a further child each, forked with the laid-out figure beside its SVG's drawing: the
    main process has the larger half) and writes ``report.html``; the page and the files are the same
    on either route."""
    run_dir = Path(run_dir)
    path = report_data_from_result(result).save(run_dir / DATA)
    # the stored (float32) arrays, as task=report will read them: the rebuilt page equals this one
    data = ReportData.load(path)
    png = {k: run_dir / v for k, v in PNG_FILES.items()} if pngs else None
    other = None if start is None else start(lambda: identify_figures(summary, data, ELSEWHERE, png))

    def finish(excitation: list | None = None) -> Path:
        pending = []  # the PNG files of the figures drawn here, each started once its figure is laid out
        try:
            figures = identify_figures(summary, data, [n for n in IDENTIFY_FIGURES
                                                       if other is None or n not in ELSEWHERE], png,
                                       None if start is None else lambda fn: pending.append(start(fn)))
            if other is not None:
                figures.update(other.result())
            for job in pending:
                job.result()
        except BaseException:
            for job in pending:
                job.cancel()
            raise
        return write_identify_report(run_dir, summary, data, excitation=excitation, figures=figures)

    return finish


def report_identify_run(result, summary: Mapping[str, Any], run_dir: Path, excitation: list | None = None,
                        start=None, pngs: bool = False) -> Path:
    """End of ``task=identify`` in one call (:func:`begin_identify_report`, then its ``finish``)."""
    return begin_identify_report(result, summary, run_dir, start, pngs)(excitation)
