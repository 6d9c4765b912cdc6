"""``robident-twin task=export``: identify (or load a finished run) and write the identified twin.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from robident_twin.report.identified_twin import (
    build_identified_twin,
    check_exports,
    export_twin,
    format_link_diff,
    link_diff,
    load_run,
    validation_states,
)


def run_export_task(run, out: Path) -> dict:
    """``robident-twin task=export``: identify (or read ``export.run_dir``), build the
    identified twin, write it and check it in the three engines. ``run``: the validated RunConfig
    (:func:`robident_twin.config.validate` makes one from a mapping)."""
    from robident_twin.estimation.postprocess import nominal_model
    from robident_twin.model.config import as_robot
    from robident_twin.report.tables import write_json

    ex = run.export
    out = Path(out)
    if ex.run_dir:
        # recorded: the config record of the finished run's summary.json (data read from the file)
        model, beta, cov, recorded = load_run(ex.run_dir)
        source = f"summary {Path(ex.run_dir) / 'summary.json'}"
        is_sim = (recorded.get("backend") or {}).get("name") in ("mujoco", "pybullet")
        robot = recorded["robot"]  # typed (as_robot) where the engine check reads it
    else:
        from robident_twin.pipeline import identify

        result = identify(run, out_dir=out)
        result.summary["config"] = run.record()
        write_json(result.summary, out / "summary.json")
        model, beta, cov, robot = result.model, result.estimate.beta, result.estimate.cov, run.robot
        source = f"identification in {out}"
        is_sim = any("true" in p for p in result.summary["parameters"])  # a twin: the robot file is the truth
    spec = model.spec
    nominal = nominal_model(spec, ex.nominal)
    twin = build_identified_twin(model, beta, cov, nominal, truth=spec if is_sim else None,
                                 reg_weight=float(ex.reg_weight))
    paths = export_twin(twin, out)
    report: dict[str, Any] = {"robot": spec.name, "source": source, "files": {k: str(v) for k, v in paths.items()},
                              "carried_over": twin.carried_over,
                              "sdp": {"objective": twin.physical.objective, "solve_time_s": twin.physical.solve_time_s,
                                      "max_abs_base_mismatch": float(np.max(np.abs(twin.physical.base_mismatch)))}}
    print(format_link_diff(link_diff(nominal, twin.spec, twin.truth)))
    engines = list(ex.engines)
    if engines:
        from robident_twin.design.auto import is_own_robot, robot_design_dir

        robot = as_robot(robot)
        val = (robot.validation if is_own_robot(spec, robot)
               else robot_design_dir(spec) / "validation.yaml")  # a user's robot: its own design
        q, dq, ddq = validation_states(spec, val, int(ex.check_samples))
        report["engine_check"] = check_exports(twin, paths, q, dq, ddq, engines)
        for eng, r in report["engine_check"].items():
            print(f"{eng:>9}: exported model vs W chi on the validation trajectory: max relative error "
                  f"{r['max_rel_error']:.2e} (max {r['max_abs_error_Nm']:.2e} N m)")
    write_json(report, out / "export.json")
    print(f"\nidentified twin written to {paths['yaml'].parent}: " + ", ".join(p.name for p in paths.values()))
    return report
