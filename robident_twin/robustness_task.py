"""``robident-twin task=robustness``: the robustness table (robident_twin/validation/robustness.py)
written to the run directory as ``robustness.json``, ``robustness.png`` (heat map) and ``report.html``."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from robident_twin.validation.robustness import cells_from, format_robustness_table, run_table


def run_robustness_task(cfg, out, run) -> dict[str, Any]:
    """``robident-twin task=robustness``: the table, ``robustness.json``, the heat map and report
    (``run``: the RunConfig validated at the CLI edge; ``cfg``, its DictConfig form, is not read)."""
    from robident_twin.report.tables import write_json

    out = Path(out)
    table = run_table(run, progress=bool(run.robustness.progress))
    write_json(table, out / "robustness.json")
    print(format_robustness_table(cells_from(table), table["best"]))
    la = table["load_average"]
    print(f"\nwall time {table['wall_s']:.1f} s for {len(table['columns'])} columns x {table['runs']} runs x "
          f"{len(table['estimators'])} estimators on {table['robot']} (CPU {table['cpu_s']:.1f} s, load average {la[0]:.1f})")
    if run.output.plots:
        from robident_twin.report.plots import plot_robustness_heatmap

        plot_robustness_heatmap(table, out / "robustness.png")
    if run.output.report:
        from robident_twin.report.html import write_robustness_report

        print(f"report: {write_robustness_report(out)}")
    print(f"\nresults in {out}")
    return table
