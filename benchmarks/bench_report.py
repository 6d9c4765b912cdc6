"""Cost of the identification report at the end of ``task=identify`` (``report.html`` with inline SVG
figures, ``parameters.png``, ``validation_torques.png``).

    python benchmarks/bench_report.py [--run-dir outputs/<date>/<time>] [--repeat 3]

Without ``--run-dir`` a default identification (iiwa 14) is run first into a temporary directory.
CPU seconds (the machine is shared: CPU time is the proxy for the idle wall time), best of
``--repeat``, each after a warm-up in this process:

1. per stage, as ``task=identify`` makes them: the excitation section (its dry run and figure, in
   a child beside the fit), each figure of the report (its inline SVG, and its PNG file where it
   has one), the page; and each figure against matplotlib's own route for the same files (a
   ``savefig`` per file with the figure's constrained layout: the raw library call), as a ratio;
2. the work of each process on the forked route (``identify_run.ELSEWHERE`` in a child, the rest
   in the main process, the PNG files of those in further children) and the wall time of ``begin_identify_report(...)(excitation)`` on the forked
   route (``ROBIDENT_FORK=1``): the report's share of the critical path.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import best_of

ROOT = Path(__file__).resolve().parents[1]


def cpu(fn, repeat: int) -> float:
    return best_of(fn, repeat, clock=time.process_time)


def raw_savefig(make, png: bool) -> None:
    """matplotlib's own route: the figure with its constrained layout, ``savefig`` once per file."""
    from robident_twin.report.svg import plt

    fig = make()
    fig.savefig(io.StringIO(), format="svg", metadata={"Date": None, "Creator": None})
    if png:
        fig.savefig(io.BytesIO(), format="png", dpi=90)
    plt().close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-dir", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from robident_twin import forked
    from robident_twin.report import html as hr
    from robident_twin.report import plots
    from robident_twin.report import identify_run
    from robident_twin.report.identify_run import ELSEWHERE, PNG_FILES
    from robident_twin.report.page import figure
    from robident_twin.report.svg import plt

    plt()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run = Path(args.run_dir) if args.run_dir else tmp / "run"
        if not args.run_dir:
            env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
            subprocess.run([sys.executable, "-m", "robident_twin.cli", f"hydra.run.dir={run}"], check=True,
                           capture_output=True, cwd=tmp, env=env)
        summary = json.loads((run / "summary.json").read_text())
        data = hr.ReportData.load(run / hr.DATA)
        png = {k: tmp / v for k, v in PNG_FILES.items()}
        z = hr._z_scores(summary["parameters"])
        makers = {"validation": lambda: plots.validation_figure(data.t_val_s, data.tau_val_meas_Nm,
                                                                data.tau_val_pred_Nm, data.channels),
                  "residuals": lambda: plots.residual_histograms_figure(data.residuals_Nm, data.channels,
                                                                        summary.get("noise_std_of_mean_Nm")),
                  "parameters": lambda: plots.parameters_figure(summary),
                  "z": lambda: plots.z_histogram_figure(z)}
        config = summary.get("config")
        excitation = hr.excitation_blocks(config)  # warm-up: imports, font cache
        hr.identify_figures(summary, data, list(makers), png)
        costs = {"excitation section": cpu(lambda: hr.excitation_blocks(config), args.repeat)}
        raw, svg_only = {}, {}
        for name, make in makers.items():
            costs[name] = cpu(lambda: figure(make(), name, name, png_path=png.get(name)), args.repeat)
            raw[name] = cpu(lambda: raw_savefig(make, name in png), args.repeat)
            svg_only[name] = cpu(lambda: figure(make(), name, name), args.repeat) if name in png else costs[name]
        figs = hr.identify_figures(summary, data, list(makers), png)
        costs["page"] = cpu(lambda: hr.write_identify_report(run, summary, data, out_dir=tmp, excitation=excitation,
                                                             figures=figs), args.repeat)
        os.environ["ROBIDENT_FORK"] = "1"
        out = tmp / "forked"
        out.mkdir()

        identify_run.report_data_from_result = lambda result: data  # the run's stored arrays (no result object)

        def forked_report():
            identify_run.begin_identify_report(None, summary, out, start=lambda fn: forked.start(fn, "figures"),
                                               pngs=True)(excitation)

        wall = best_of(forked_report, args.repeat)
    print(f"run {summary['robot']}: {len(data.t_val_s)} validation samples x {len(data.channels)} channels, "
          f"{len(summary['parameters'])} base parameters; CPU s, best of {args.repeat}")
    for k, v in costs.items():
        files = "SVG + PNG" if k in png else "SVG" if k in makers else ""
        ratio = f"   matplotlib's savefig {raw[k]:6.3f} s, ratio {v / raw[k]:5.2f}" if k in raw else ""
        print(f"  {k:<20} {files:<10} {v:6.3f} s{ratio}")
    drawn = [k for k in makers]
    child = sum(costs[k] for k in drawn if k in ELSEWHERE)
    here = sum(svg_only[k] for k in drawn if k not in ELSEWHERE)  # their PNGs: a further child each
    pngs = sum(costs[k] - svg_only[k] for k in drawn if k not in ELSEWHERE)
    total = sum(costs[k] for k in drawn)
    print(f"  figures, all          {total:6.3f} s (matplotlib's own route {sum(raw.values()):6.3f} s, "
          f"ratio {total / sum(raw.values()):5.2f})")
    print(f"  processes: child {', '.join(ELSEWHERE)} {child:6.3f} s | here {', '.join(k for k in drawn if k not in ELSEWHERE)}"
          f" {here:6.3f} s | their PNG files in further children {pngs:6.3f} s")
    print(f"forked route (ROBIDENT_FORK=1), begin_identify_report to the page: {wall:6.3f} s wall "
          f"(load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
