"""Report pages of the robustness table (``task=robustness``), model-based control
(``task=control``) and the CLOOS twin against the real measurements
(``experiments/twin_vs_real_cloos``), as sections of blocks (robident_twin/report/page.py).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from robident_twin.report.page import figure, h3, kv, note, num, para, render_page, section, span, table
from robident_twin.report.plots import control_rms_figure, robustness_heatmap_figure, twin_vs_real_figure

# ----------------------------------------------------------------------------- robustness


def robustness_html(tab: Mapping[str, Any]) -> str:
    """The HTML of a robustness table (``robustness.json`` of ``task=robustness``): the heat map, one
    table per figure (rows estimators, columns twins) and the best estimator per twin."""
    cols, ests = list(tab["columns"]), list(tab["estimators"])
    at = {(c["estimator"], c["column"]): c for c in tab["cells"]}
    figures = [("share of parameters with |bias| <= 3 std", lambda c: f"{100 * c['share_within_3std']:.0f} %"),
               ("max |bias| / std", lambda c: num(c["max_bias_over_std"], ".3g")),
               ("median |bias| / std", lambda c: num(c["median_bias_over_std"], ".3g")),
               ("median RMSE / Cramer-Rao std", lambda c: num(c["median_rmse_over_crlb"], ".3g")),
               ("validation torque NRMSE (%)", lambda c: num(c["val_nrmse_percent"], ".3g")),
               ("bias test", lambda c: span("pass", True) if c["bias_test_passed"]
                else span(f"FAIL ({c['bias_test_failing']})", False))]
    la = tab.get("load_average") or [float("nan")]
    info = kv([("robot", tab.get("robot")), ("measurement", tab.get("measurement")),
               ("runs per cell", tab.get("runs")), ("seed", tab.get("seed")),
               ("position-noise scale", num(tab.get("q_noise_scale"))),
               ("bias test", f"Bonferroni t over {tab.get('n_params')} parameters, false-alarm rate "
                             f"{num(tab.get('alpha'))} per cell"),
               ("wall time", f"{num(tab.get('wall_s'), '.1f')} s (CPU {num(tab.get('cpu_s'), '.1f')} s, load "
                             f"average {num(la[0], '.1f')})")])
    blocks = [info, figure(robustness_heatmap_figure(tab), "heatmap", "robustness heat map")]
    heads = ["estimator"] + [c.replace("_", " ").replace("+", "+\u200b") for c in cols]  # may break after +
    for title, fmt in figures:
        rows = [[e] + [fmt(at[(e, c)]) if (e, c) in at else "-" for c in cols] for e in ests]
        blocks += [h3(title), table(heads, rows, wrap_head=True)]
    best = tab.get("best") or {}
    rows = [[c, b["best"], num(b["best_rmse_over_crlb"], ".3g"), b.get("runner_up") or "-",
             num(b.get("factor"), ".3g"), ", ".join(b["passing"]) or "none", ", ".join(b["failing"]) or "none"]
            for c, b in best.items()]
    blocks += [h3("Best estimator per twin"),
               table(["twin", "best", "median RMSE/CR std", "runner-up", "runner-up / best", "bias test passed",
                      "failed"], rows, left=(0, 1, 3, 5, 6), rel=(5, 6), wrap_head=True)]
    return render_page(f"robident-twin robustness: {tab.get('robot', '')}",
                       "every estimator against every twin effect", [section("robustness", "Robustness table", blocks)])


# ----------------------------------------------------------------------------- model-based control

def control_section(control: Mapping[str, Any]) -> dict:
    """The ``control`` section: Table VII layout (RMS reference error per joint and feed-forward
    model, ratios to no model) and its bar plot."""
    ffs = control["feedforward"]
    names = list(ffs)
    rnames = [n for n in names if n != "none" and "ratio_to_none" in ffs[n]]
    head = ["joint"] + [f"{n} RMS (deg)" for n in names] + [f"{n} / none" for n in rnames]
    rows = [[j] + [num(ffs[n]["rms_deg"][i]) for n in names] + [num(ffs[n]["ratio_to_none"][i], ".3f")
                                                               for n in rnames]
            for i, j in enumerate(control["joints"])]
    info = control.get("info", {})
    ctrl = info.get("controller", {})
    ctrl_txt = ", ".join(f"{k} {v}" for k, v in ctrl.items()) if isinstance(ctrl, Mapping) else str(ctrl)
    return section("control", "Model-based feed-forward control", [
        note(f"{info.get('robot', '')} on {info.get('backend', '')}, {info.get('trajectory', '')} trajectory, "
             f"{num(info.get('duration_s'))} s; controller {ctrl_txt}; error {info.get('error', '')}"),
        table(head, rows, wrap_head=True), figure(control_rms_figure(control), "control", "RMS reference error")])


# ----------------------------------------------------------------------------- twin against the real CLOOS

def _stat(s) -> dict:
    return {"residual_rms_Nm": np.asarray(s.residual_rms_Nm, float).tolist(),
            "variance_median_Nm2": np.median(np.asarray(s.variance_Nm2, float), axis=0).tolist(),
            "validation_rms_Nm": {k: np.asarray(v, float).tolist() for k, v in s.validation_rms_Nm.items()},
            "acf": {f"{lag:g}": np.asarray(v, float).tolist() for lag, v in s.acf.items()},
            "param_std": np.asarray(s.param_std, float).tolist(), "chi2_per_dof": float(s.chi2_per_dof)}


def _plain(x):
    if isinstance(x, Mapping):
        return {f"{k:g}" if isinstance(k, float) else str(k): _plain(v) for k, v in x.items()}
    a = np.asarray(x)
    return a.tolist() if a.ndim else a.item()


def twin_vs_real_results(real, twin, cmp: Mapping[str, Any], targets: Mapping[str, Any], **meta: Any) -> dict:
    """The JSON-able results of the CLOOS twin-vs-real comparison: the two sides' statistics
    (``FitStatistics`` of robident_twin.validation.twin_vs_real), the ratios and targets met of its
    ``compare`` and the acceptance bands (``TARGETS``); ``meta`` (repetitions, seed, wall time, ...)."""
    return {"kind": "twin_vs_real", "robot": "cloos_qrc350", "meta": _plain(meta), "targets": _plain(targets),
            "real": _stat(real), "twin": _stat(twin), "ratios": _plain(cmp["rows"]), "met": _plain(cmp["met"])}


def twin_vs_real_text(real, twin, cmp: Mapping[str, Any]) -> str:
    """The twin-vs-real table per joint as text, as the experiment prints it (``real``, ``twin``:
    ``FitStatistics`` of robident_twin.validation.twin_vs_real; ``cmp``: its ``compare``)."""
    f = lambda a, p=3: " ".join(f"{x:8.{p}f}" for x in a)
    ok = lambda m: " ".join(f"{'ok' if x else 'MISS':>8}" for x in np.atleast_1d(m))
    rows, met = cmp["rows"], cmp["met"]
    out = [f"{'quantity':34s} " + " ".join(f"{'J' + str(j):>8}" for j in range(1, 7))]
    out += [f"{'residual RMS real [Nm]':34s} " + f(real.residual_rms_Nm),
            f"{'residual RMS twin [Nm]':34s} " + f(twin.residual_rms_Nm),
            f"{'  ratio (0.75-1.33)':34s} " + f(rows['residual_rms'], 2), f"{'':34s} " + ok(met['residual_rms']),
            f"{'rep. variance median real [Nm2]':34s} " + f(np.median(real.variance_Nm2, axis=0), 4),
            f"{'rep. variance median twin [Nm2]':34s} " + f(np.median(twin.variance_Nm2, axis=0), 4),
            f"{'  ratio (0.8-1.25)':34s} " + f(rows['variance_median'], 2), f"{'':34s} " + ok(met['variance_median'])]
    for n in rows["validation"]:
        out += [f"{'val. RMS ' + n + ' real [Nm]':34s} " + f(real.validation_rms_Nm[n]),
                f"{'val. RMS ' + n + ' twin [Nm]':34s} " + f(twin.validation_rms_Nm[n]),
                f"{'  ratio (0.7-1.4)':34s} " + f(rows['validation'][n], 2), f"{'':34s} " + ok(met['validation'][n])]
    for lag in real.acf:
        ms = round(lag * 1000)
        out += [f"{'residual ACF ' + str(ms) + ' ms real':34s} " + f(real.acf[lag], 2),
                f"{'residual ACF ' + str(ms) + ' ms twin':34s} " + f(twin.acf[lag], 2),
                f"{'  |diff| (<= 0.15)':34s} " + f(rows['acf_abs_diff'][lag], 2),
                f"{'':34s} " + ok(met['acf_abs_diff'][lag])]
    out.append(f"parameter std, median ratio twin/real over {len(real.param_std)} parameters: "
               f"{rows['param_std_median']:.2f} (0.67-1.5) {'ok' if met['param_std_median'] else 'MISS'}")
    out.append(f"chi2/dof of the WLS fit: real {real.chi2_per_dof:.1f}, twin {twin.chi2_per_dof:.1f}")
    return "\n".join(out)


def _band(t) -> str:
    return f"{t[0]:g}-{t[1]:g}" if isinstance(t, (list, tuple)) else f"<= {t:g}"


def twin_vs_real_section(res: Mapping[str, Any]) -> dict:
    """Per joint: real and twin values, the ratio (or |difference|) with its target band, each ratio
    marked met or missed; the parameter-std median ratio and chi2/dof below."""
    real, twin, ratios, met, tg = res["real"], res["twin"], res["ratios"], res["met"], res["targets"]
    nj = len(real["residual_rms_Nm"])
    head = ["quantity"] + [f"J{j + 1}" for j in range(nj)] + ["target"]

    def values(label, v, fmt=".3f"):
        return [label] + [num(x, fmt) for x in v] + [""]

    def marked(label, v, ok, band):
        return [label] + [span(f"{num(x, '.2f')} {'met' if m else 'missed'}", bool(m)) for x, m in zip(v, ok)] + [band]

    rows, bad = [], []

    def group(name, r, t, ratio, ok, band, fmt=".3f", what="ratio twin / real"):
        rows.extend([values(f"{name} real", r, fmt), values(f"{name} twin", t, fmt),
                     marked(f"  {what}", ratio, ok, band)])
        bad.extend([False, False, not all(ok)])

    group("residual RMS [Nm]", real["residual_rms_Nm"], twin["residual_rms_Nm"], ratios["residual_rms"],
          met["residual_rms"], _band(tg["residual_rms"]))
    group("repetition variance median [Nm2]", real["variance_median_Nm2"], twin["variance_median_Nm2"],
          ratios["variance_median"], met["variance_median"], _band(tg["variance_median"]), ".4f")
    for n in ratios["validation"]:
        group(f"validation RMS on {n} [Nm]", real["validation_rms_Nm"][n], twin["validation_rms_Nm"][n],
              ratios["validation"][n], met["validation"][n], _band(tg["validation"]))
    for lag in ratios["acf_abs_diff"]:
        group(f"residual ACF at {1000 * float(lag):g} ms", real["acf"][lag], twin["acf"][lag],
              ratios["acf_abs_diff"][lag], met["acf_abs_diff"][lag], _band(tg["acf_abs_diff"]), ".2f", "|twin - real|")
    per_joint = [m for k in ("residual_rms", "variance_median") for m in met[k]] + \
        [m for d in ("validation", "acf_abs_diff") for v in met[d].values() for m in v]
    n_met = sum(map(bool, per_joint)) + bool(met["param_std_median"])
    meta = res.get("meta") or {}
    blocks = [para(f"CLOOS QRC 350: the twin ({meta.get('repetitions', '?')} repetitions) against the real "
                   f"ICMA 2020 files, both processed the same way. Targets met: {n_met} of {len(per_joint) + 1}."),
              figure(twin_vs_real_figure(res), "twin-vs-real", "ratios twin / real per joint with the target bands"),
              table(head, rows, bad=bad, left=(0,)),
              kv([("parameter std, median ratio twin / real",
                   [f"{num(ratios['param_std_median'], '.2f')} over {len(real['param_std'])} parameters (target "
                    f"{_band(tg['param_std_median'])}) ", span("met" if met["param_std_median"] else "missed",
                                                                bool(met["param_std_median"]))]),
                  ("chi2 / dof of the WLS fit", f"real {num(real['chi2_per_dof'], '.1f')}, twin "
                                                f"{num(twin['chi2_per_dof'], '.1f')}")]
                 + [(str(k), str(v)) for k, v in meta.items()]),
              note("Ratios are twin / real; the ACF rows compare the residual autocorrelations (|twin - real|). "
                   "Rows in red hold at least one missed target.")]
    return section("twin-vs-real", "Twin against the real CLOOS QRC 350", blocks)


def twin_vs_real_html(res: Mapping[str, Any]) -> str:
    return render_page("robident-twin: CLOOS twin against the real robot",
                       f"{(res.get('meta') or {}).get('repetitions', '?')} twin repetitions | per-joint targets of "
                       "issue 15", [twin_vs_real_section(res)])

