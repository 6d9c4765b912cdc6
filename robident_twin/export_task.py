"""``robident-twin task=export``: identify (or load a finished run) and write the identified twin.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from robident_twin.report.identified_twin import (
    _plain,
    build_identified_twin,
    check_exports,
    export_twin,
    format_link_diff,
    link_diff,
    load_run,
    nominal_from_config,
    validation_states,
)


def run_export_task(cfg, out: Path) -> dict:
    """``robident-twin task=export``: identify (or read ``export.run_dir``), build the
    identified twin, write it and check it in the three engines."""
    from robident_twin.report.tables import write_json

    plain = _plain(cfg)
    ex = plain.get("export") or {}
    out = Path(out)
    if ex.get("run_dir"):
        model, beta, cov, run_cfg = load_run(ex["run_dir"])
        source = f"summary {Path(ex['run_dir']) / 'summary.json'}"
        is_sim = run_cfg.get("backend", {}).get("name") in ("mujoco", "pybullet")
    else:
        from robident_twin.pipeline import identify

        result = identify(plain, out_dir=out)
        result.summary["config"] = plain
        write_json(result.summary, out / "summary.json")
        model, beta, cov, run_cfg = result.model, result.estimate.beta, result.estimate.cov, plain
        source = f"identification in {out}"
        is_sim = any("true" in p for p in result.summary["parameters"])  # a twin: the robot file is the truth
    spec = model.spec
    nominal = nominal_from_config(spec, ex.get("nominal"))
    twin = build_identified_twin(model, beta, cov, nominal, truth=spec if is_sim else None,
                                 reg_weight=float(ex.get("reg_weight", 1e-3)))
    paths = export_twin(twin, out)
    report: dict[str, Any] = {"robot": spec.name, "source": source, "files": {k: str(v) for k, v in paths.items()},
                              "carried_over": twin.carried_over,
                              "sdp": {"objective": twin.physical.objective, "solve_time_s": twin.physical.solve_time_s,
                                      "max_abs_base_mismatch": float(np.max(np.abs(twin.physical.base_mismatch)))}}
    print(format_link_diff(link_diff(nominal, twin.spec, twin.truth)))
    engines = ex.get("engines", ["pinocchio", "mujoco", "pybullet"]) or []
    if engines:
        from robident_twin.design.auto import is_own_robot, robot_design_dir

        val = (run_cfg["robot"]["validation"] if is_own_robot(spec, run_cfg["robot"])
               else robot_design_dir(spec) / "validation.yaml")  # a user's robot: its own design
        q, dq, ddq = validation_states(spec, val, int(ex.get("check_samples", 400)))
        report["engine_check"] = check_exports(twin, paths, q, dq, ddq, engines)
        for eng, r in report["engine_check"].items():
            print(f"{eng:>9}: exported model vs W chi on the validation trajectory: max relative error "
                  f"{r['max_rel_error']:.2e} (max {r['max_abs_error_Nm']:.2e} N m)")
    write_json(report, out / "export.json")
    print(f"\nidentified twin written to {paths['yaml'].parent}: " + ", ".join(p.name for p in paths.values()))
    return report
