"""Cost of the HTML report at the end of an identification run.

    python benchmarks/bench_report.py [--run-dir outputs/<date>/<time>] [--repeat 3]

Without ``--run-dir`` a default identification (iiwa 14, ``acquisition.periods=2``) is run
first into a temporary directory. Prints the best-of-``repeat`` time of
:func:`robident_twin.report.html.write_identify_report` (dry run without simulation, all
figures, HTML), the same for the two PNG plots ``task=identify`` already writes
(``report.plot_validation`` + ``report.plot_parameters``), and the ratios of the report to
those plots and to the run's own stage timings (``summary.json`` ``timings_s``).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from _timing import best_of


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run-dir", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    from robident_twin.report import html as hr
    from robident_twin.report.tables import plot_parameters, plot_validation

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.run_dir) if args.run_dir else Path(tmp) / "run"
        if not args.run_dir:
            exe = Path(sys.executable).parent / "robident-twin"
            subprocess.run([str(exe), f"hydra.run.dir={run}", "acquisition.periods=2"], check=True,
                           capture_output=True, cwd=tmp)
        summary = json.loads((run / "summary.json").read_text())
        data = hr.ReportData.load(run / hr.DATA)
        hr.write_identify_report(run, summary, data)  # warm-up: imports, font cache
        t_report = best_of(lambda: hr.write_identify_report(run, summary, data), args.repeat)
        png = Path(tmp) / "x.png"
        t_plots = best_of(lambda: (plot_validation(data.t_val_s, data.tau_val_meas_Nm, data.tau_val_pred_Nm,
                                                   data.channels, png), plot_parameters(summary, png)), args.repeat)
        t_stages = sum(summary["timings_s"].values())
        size_kb = (run / hr.REPORT).stat().st_size / 1024
    print(f"run {summary['robot']}: stages {t_stages:.2f} s, report.html {size_kb:.0f} kB")
    print(f"report (dry run + figures + HTML)   {t_report:7.3f} s")
    print(f"report.py's two PNG plots           {t_plots:7.3f} s   report / plots  {t_report / t_plots:6.2f}")
    print(f"report / run stages                 {t_report / t_stages:7.3f}")


if __name__ == "__main__":
    main()
