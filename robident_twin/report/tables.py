"""Outputs of an identification run: summary.json, a table on stdout, PNG plots."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from robident_twin.atomic import write_text_atomic


def write_json(obj: Any, path: Path) -> None:
    """Atomic JSON write: a killed run never leaves a half-written file."""
    write_text_atomic(path, json.dumps(obj, indent=2, allow_nan=True))


def format_table(summary: dict) -> str:
    """A readable parameter table and the validation figures."""
    has_true = any("true" in p for p in summary["parameters"])
    w = max([10] + [len(p["name"]) for p in summary["parameters"]])  # the user's names can be long
    head = f"{'parameter':<{w}} {'estimate':>13} {'std':>11} {'RSD %':>9}"
    if has_true:
        head += f" {'true':>13} {'(est-true)/std':>15}"
    lines = [
        f"robot {summary['robot']} | backend {summary['backend']} | estimator {summary['estimator']} | "
        f"{summary['measurement']} | {summary['n_samples']} samples x {len(summary['residual_rms_Nm'])} joints | "
        f"{summary['n_base_parameters']} base parameters | cond {summary['cond']:.1f} | "
        f"chi2/dof {summary['chi2_per_dof']:.3g}",
        head, "-" * len(head)]
    for p in summary["parameters"]:
        rsd = "inf" if p["rsd_percent"] is None else f"{p['rsd_percent']:.3g}"
        row = f"{p['name']:<{w}} {p['estimate']:>13.6g} {p['std']:>11.3g} {rsd:>9}"
        if has_true:
            z = (p["estimate"] - p["true"]) / p["std"] if p["std"] > 0 else float("nan")
            row += f" {p['true']:>13.6g} {z:>15.2f}"
        lines.append(row)
    val = summary["validation"]
    lines.append("")
    lines.append("validation (held-out trajectory), per joint:")
    lines.append("  torque RMSE [Nm]  " + " ".join(f"{v:8.4f}" for v in val["torque_rmse_Nm"]))
    lines.append("  torque NRMSE [%]  " + " ".join(f"{v:8.3f}" for v in val["torque_nrmse_percent"]))
    if "simulated_noise_std_Nm" in val:
        lines.append("  noise std [Nm]    " + " ".join(f"{v:8.4f}" for v in val["simulated_noise_std_Nm"]))
    if "ground_truth" in summary:
        gt = summary["ground_truth"]
        lines.append(f"ground truth: {100 * gt['fraction_within_3std']:.1f} % of base parameters within 3 std "
                     f"(max |est-true|/std = {gt['max_abs_z']:.2f})")
    tw = summary.get("twin")
    if tw is not None:
        lines.append(f"twin: {tw['name']}" + (f" with {', '.join(tw['effects'])}" if tw.get("effects") else ""))
    mm = summary.get("mismatch")
    if mm is not None:
        lines.append(f"mismatch: chi2/dof {mm['chi2_per_dof']:.3g}; residual Durbin-Watson "
                     + " ".join(f"{v:.2f}" for v in mm["durbin_watson"]) + " (2: white); lag-1 autocorrelation "
                     + " ".join(f"{v:.2f}" for v in mm["residual_lag1_autocorrelation"]))
        if "beyond_3std" in mm:
            b = mm["beyond_3std"]
            lines.append(f"  {len(b)} base parameter(s) beyond 3 std of the truth"
                         + (": " + ", ".join(b) if b else ""))
    tr = summary.get("trajectory")
    if tr is not None:  # a process or recorded trajectory (conf/trajectory/)
        lines.append(f"trajectory: {tr['kind']}, {tr['processing']}")
    red = summary.get("reduction")
    if isinstance(red, dict) and "cond_before" in red:
        lines.append(f"reduction ({red['method']}): {red['n_before']} -> {red['n_after']} parameters, cond "
                     f"{red['cond_before']:.4g} -> {red['cond_after']:.4g}; removed {', '.join(red['removed']) or 'none'}")
    lines.append("timings [s]: " + ", ".join(f"{k} {v:.2f}" for k, v in summary["timings_s"].items()))
    return "\n".join(lines)


def plot_validation(t_s: np.ndarray, tau_meas_Nm: np.ndarray, tau_pred_Nm: np.ndarray, joint_names,
                    path: Path) -> None:
    """``validation_torques.png``: the report's figure (robident_twin/report/plots.py) as a PNG file."""
    from robident_twin.report.plots import validation_figure
    from robident_twin.report.svg import to_png

    Path(path).write_bytes(to_png(validation_figure(t_s, tau_meas_Nm, tau_pred_Nm, joint_names)))


def plot_parameters(summary: dict, path: Path) -> None:
    """``parameters.png``: estimates with +-3 sigma bars against the truth (when known)."""
    from robident_twin.report.plots import parameters_figure
    from robident_twin.report.svg import to_png

    Path(path).write_bytes(to_png(parameters_figure(summary)))
