"""The report's matplotlib figures of an identification run, a control run and a robustness table.

Each ``*_figure`` function returns a matplotlib figure; :func:`robident_twin.report.svg.to_svg`
turns it into the report's inline SVG and :func:`~robident_twin.report.svg.to_png` into a PNG file's
bytes. Conventions (checked in a browser by tests/test_report_layout.py): legends outside the data
areas (``fig.legend(loc="outside ...")`` with the constrained layout), no axis offset, fonts >= 8 pt
at a width that the report shows at 1:1 (<= ``MAX_WIDTH_IN``).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from robident_twin.report.svg import plt, to_png

#: widest figure: shown at 1:1 (96 px per inch) inside the report's main column at 1366 px
MAX_WIDTH_IN = 12.5
#: most parameter names on one x axis (more: further panels below)
MAX_NAMES_PER_PANEL = 40


def gauss_pdf(x: np.ndarray, mu: float, sd: float) -> np.ndarray:
    return np.exp(-0.5 * ((x - mu) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))


def name_chunks(n: int, per_panel: int = MAX_NAMES_PER_PANEL) -> list[np.ndarray]:
    """Index blocks of about equal size, at most ``per_panel`` each (parameter names per x axis)."""
    k = max(1, math.ceil(n / per_panel))
    return [c for c in np.array_split(np.arange(n), k) if c.size]


def names_axis(ax, names: Sequence[str], idx: np.ndarray) -> np.ndarray:
    """Parameter names (rotated 90 degrees) on the x axis of one panel; returns the x positions."""
    x = np.arange(idx.size)
    ax.set_xticks(x, [str(names[i]) for i in idx], rotation=90)
    ax.set_xlim(-0.7, idx.size - 0.3)
    ax.grid(alpha=0.3, axis="y")
    return x


def _tick_text(v: float, _pos=None) -> str:
    if v == 0:
        return "0"
    d = math.log10(abs(v))
    return f"{v:g}" if -3 < d < 4 else f"{'-' if v < 0 else ''}1e{round(d)}"


def log_ticks(ax, axis: str = "y") -> None:
    """Readable ticks on a log axis, as plain numbers, no minor labels (which matplotlib prints on
    top of the major ones over a short range): 1, 2, 5 per decade, or finer steps when the axis
    spans less than a decade. Call after the data (and limits) are set."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

    a = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    if lo > 0 and hi / lo < 10:
        k = np.arange(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
        cand = np.unique(np.outer(10.0 ** k, (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)).ravel())
        cand = cand[(cand >= lo) & (cand <= hi)]
        while cand.size > 6:
            cand = cand[::2]
        a.set_major_locator(FixedLocator(cand))
        a.set_minor_locator(NullLocator())
    else:
        a.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0), numticks=8))
    a.set_major_formatter(FuncFormatter(_tick_text))
    a.set_minor_formatter(NullFormatter())


def symlog_ticks(ax, values: np.ndarray, linthresh: float, max_per_side: int = 3) -> None:
    """Ticks of a symlog y axis: 0 and at most ``max_per_side`` decades on each side (every decade
    labelled overlaps on a short axis)."""
    v = np.abs(np.asarray(values, float))
    v = v[np.isfinite(v) & (v > linthresh)]
    lo = math.floor(math.log10(linthresh))
    hi = math.ceil(math.log10(v.max())) if v.size else lo + 1
    step = max(1, math.ceil((hi - lo) / max_per_side))
    dec = [10.0 ** d for d in range(hi, lo - 1, -step)]
    ticks = sorted([-x for x in dec] + [0.0] + dec)
    ax.set_yticks(ticks, [_tick_text(t) for t in ticks])
    from matplotlib.ticker import NullLocator

    ax.yaxis.set_minor_locator(NullLocator())


# ----------------------------------------------------------------------------- identification run

def residual_histograms_figure(residuals_Nm: np.ndarray, names: Sequence[str],
                               noise_std_Nm: Sequence[float] | None = None):
    """Histogram of the estimation residuals of each channel with the fitted Gaussian (sample mean
    and std; in the panel title) and, dashed, the zero-mean Gaussian of the noise std the estimator
    assumed (``noise_std_Nm``, the std of the period average). One legend for all panels."""
    pyplot = plt()
    r = np.asarray(residuals_Nm, float)
    n = r.shape[1]
    cols = min(4, n)
    rows = int(math.ceil(n / cols))
    fig, axes = pyplot.subplots(rows, cols, figsize=(min(MAX_WIDTH_IN, 3.0 * cols), 2.1 * rows + 0.5),
                                squeeze=False, layout="constrained")
    handles = {}
    for j in range(rows * cols):
        ax = axes.flat[j]
        if j >= n:
            ax.axis("off")
            continue
        x = r[:, j]
        mu, sd = float(np.mean(x)), float(np.std(x))
        lo, hi = float(np.min(x)), float(np.max(x))
        sig = float(noise_std_Nm[j]) if noise_std_Nm is not None else 0.0
        if sig > 0:
            lo, hi = min(lo, -4 * sig), max(hi, 4 * sig)
        handles["residuals"] = ax.hist(x, bins=50, density=True, histtype="stepfilled", color="tab:blue",
                                       alpha=0.5)[2][0]
        g = np.linspace(lo, hi, 200)
        if sd > 0:
            (handles["Gaussian fitted to the residuals"],) = ax.plot(g, gauss_pdf(g, mu, sd), "r", lw=1.3)
        if sig > 0:
            (handles["noise std the estimator assumed"],) = ax.plot(g, gauss_pdf(g, 0.0, sig), "k--", lw=0.9)
        ax.set_title(f"{names[j]}: mean {mu:.2g}, std {sd:.2g} Nm", fontsize=9)
        ax.set_yticks([])
        ax.xaxis.set_major_locator(pyplot.MaxNLocator(5))
        if j >= n - cols:
            ax.set_xlabel("residual [Nm]")
    fig.legend(list(handles.values()), list(handles), loc="outside upper center", ncol=3, frameon=False)
    return fig


def z_histogram_figure(z: np.ndarray, max_abs: float = 10.0):
    """Histogram of (estimate - true) / std against the standard normal; the axis ends at
    +-``max_abs`` (parameters beyond it are counted in the outer bins and in the legend)."""
    pyplot = plt()
    z = np.asarray(z, float)
    z = z[np.isfinite(z)]
    fig, ax = pyplot.subplots(figsize=(7.0, 3.0), layout="constrained")
    lim = float(min(max(4.0, float(np.max(np.abs(z))) if z.size else 4.0), max_abs))
    out = int(np.sum(np.abs(z) > lim))
    ax.hist(np.clip(z, -lim, lim), bins=np.linspace(-lim, lim, 33), density=True, histtype="stepfilled",
            color="tab:blue", alpha=0.6,
            label=f"{z.size} base parameters" + (f" ({out} beyond +-{lim:g}, in the outer bins)" if out else ""))
    g = np.linspace(-lim, lim, 300)
    ax.plot(g, gauss_pdf(g, 0.0, 1.0), "r", lw=1.2, label="N(0, 1)")
    for b in (-3, 3):
        ax.axvline(b, color="k", ls="--", lw=0.8, label="+-3" if b > 0 else None)
    ax.set_xlabel("(estimate - true) / std")
    ax.set_ylabel("density")
    fig.legend(loc="outside right upper", frameon=False)
    return fig


def validation_figure(t_s: np.ndarray, tau_meas_Nm: np.ndarray, tau_pred_Nm: np.ndarray,
                      joint_names: Sequence[str], max_points: int = 1500):
    """Per joint: measured and predicted torque (left) and the error on its own axis (right, its own
    scale, so a 1 Nm error stays visible next to +-80 Nm torques)."""
    pyplot = plt()
    step = max(1, int(math.ceil(len(t_s) / max_points)))
    t, m, p = t_s[::step], tau_meas_Nm[::step], tau_pred_Nm[::step]
    n = m.shape[1]
    # one time axis for all panels, as sharex=True draws it (the limits are equal: every panel plots t), but
    # not shared: a shared x axis measures the tick labels of all 2n panels for each panel's label (n^2 work)
    fig, axes = pyplot.subplots(n, 2, figsize=(MAX_WIDTH_IN, 1.45 * n + 0.7), squeeze=False,
                                gridspec_kw={"width_ratios": (2.2, 1)}, layout="constrained")
    for j in range(n):
        a, b = axes[j]
        if j < n - 1:  # the inner rows: tick marks without labels
            for ax in (a, b):
                ax.xaxis.set_tick_params(which="both", labelbottom=False)
        a.plot(t, m[:, j], "k", lw=1.2, label="measured (period average)")
        a.plot(t, p[:, j], "r--", lw=1.0, label="predicted")
        b.plot(t, m[:, j] - p[:, j], color="tab:blue", lw=0.8, label="error = measured - predicted")
        b.axhline(0.0, color="k", lw=0.5)
        a.set_ylabel(f"{joint_names[j]} [Nm]")
        b.set_ylabel("error [Nm]")
        for ax in (a, b):
            ax.grid(alpha=0.3)
            ax.yaxis.set_major_locator(pyplot.MaxNLocator(4))
    axes[-1, 0].set_xlabel("time in period [s]")
    axes[-1, 1].set_xlabel("time in period [s]")
    h = axes[0, 0].get_legend_handles_labels()
    h2 = axes[0, 1].get_legend_handles_labels()
    fig.legend(h[0] + h2[0], h[1] + h2[1], loc="outside upper center", ncol=3, frameon=False)
    return fig


def parameters_figure(summary: Mapping[str, Any]):
    """Estimates with +-3 std bars against the truth (when known), and (estimate - true) / std;
    at most MAX_NAMES_PER_PANEL parameter names per x axis."""
    pyplot = plt()
    ps = summary["parameters"]
    names = [p["name"] for p in ps]
    est = np.array([p["estimate"] for p in ps], float)
    std = np.array([p["std"] for p in ps], float)
    has_true = all("true" in p for p in ps)
    true = np.array([p["true"] for p in ps], float) if has_true else None
    chunks = name_chunks(len(ps))
    per = 2 if has_true else 1
    fig, axes = pyplot.subplots(per * len(chunks), 1, figsize=(MAX_WIDTH_IN, (2.6 + 1.9 * (per - 1)) * len(chunks)
                                                              + 0.4), squeeze=False, layout="constrained")
    for c, idx in enumerate(chunks):
        ax = axes[per * c, 0]
        x = names_axis(ax, names, idx)
        ax.errorbar(x, est[idx], yerr=3 * std[idx], fmt="o", ms=3, capsize=2, label="estimate +- 3 std")
        if has_true:
            ax.plot(x, true[idx], "rx", ms=5, label="true")
        ax.set_yscale("symlog", linthresh=1e-3)
        symlog_ticks(ax, np.concatenate([np.abs(est[idx]) + 3 * std[idx]] + ([true[idx]] if has_true else [])), 1e-3)
        ax.set_ylabel("value (SI)")
        if has_true:
            z = (est[idx] - true[idx]) / np.where(std[idx] > 0, std[idx], np.nan)
            az = axes[per * c + 1, 0]
            names_axis(az, names, idx)
            az.bar(x, np.nan_to_num(z), color=np.where(np.abs(z) > 3, "tab:red", "tab:blue"))
            az.axhline(3, color="k", ls="--", lw=0.8)
            az.axhline(-3, color="k", ls="--", lw=0.8)
            az.set_ylabel("(est - true) / std")
    h, lab = axes[0, 0].get_legend_handles_labels()
    fig.legend(h, lab, loc="outside upper right", ncol=2, frameon=False)
    fig.suptitle(f"{summary['robot']}: base parameters ({summary['estimator']})", x=0.02, ha="left")
    return fig


# ----------------------------------------------------------------------------- control, robustness

def control_rms_figure(control: Mapping[str, Any]):
    """Bars of the per-joint RMS reference error (deg) of each feed-forward choice (task=control)."""
    pyplot = plt()
    joints, ffs = control["joints"], control["feedforward"]
    fig, ax = pyplot.subplots(figsize=(8.0, 3.4), layout="constrained")
    x = np.arange(len(joints))
    w = 0.8 / max(1, len(ffs))
    for i, (name, d) in enumerate(ffs.items()):
        ax.bar(x + (i - 0.5 * (len(ffs) - 1)) * w, d["rms_deg"], w, label=name)
    ax.set_xticks(x, joints)
    ax.set_yscale("log")
    log_ticks(ax)
    ax.set_ylabel("RMS reference error (deg)")
    fig.legend(loc="outside right upper", frameon=False, title="feed-forward")
    return fig


def robustness_heatmap_figure(table: Mapping[str, Any]):
    """Heat map of the robustness table (robident_twin/validation/robustness.py): median RMSE over
    the Cramer-Rao std per estimator (rows) and twin (columns), log colour scale, each cell
    annotated with that figure and a cross where the bias test fails."""
    pyplot = plt()
    from matplotlib.colors import LogNorm

    cols, ests = list(table["columns"]), list(table["estimators"])
    at = {(c["estimator"], c["column"]): c for c in table["cells"]}
    val = np.full((len(ests), len(cols)), np.nan)
    for i, e in enumerate(ests):
        for j, c in enumerate(cols):
            if (e, c) in at:
                val[i, j] = at[(e, c)]["median_rmse_over_crlb"]
    finite = val[np.isfinite(val) & (val > 0)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (1.0, 10.0)
    fig, ax = pyplot.subplots(figsize=(min(MAX_WIDTH_IN, max(6.0, 2.4 + 1.2 * len(cols))), 1.9 + 0.42 * len(ests)),
                              layout="constrained")
    im = ax.imshow(val, cmap="viridis_r", norm=LogNorm(vmin=min(lo, 1.0), vmax=max(hi, 1.01)), aspect="auto")
    for i, e in enumerate(ests):
        for j, c in enumerate(cols):
            cell = at.get((e, c))
            if cell is None:
                continue
            mark = "" if cell["bias_test_passed"] else " x"
            ax.text(j, i, f"{val[i, j]:.2g}{mark}", ha="center", va="center", fontsize=8,
                    color="white" if val[i, j] > math.sqrt(max(lo, 1.0) * max(hi, 1.01)) else "black")
    ax.set_xticks(range(len(cols)), [c.replace("_", "\n").replace("+", "+\n") for c in cols])
    ax.set_yticks(range(len(ests)), ests)
    cb = fig.colorbar(im, ax=ax, label="median RMSE / Cramer-Rao std")
    log_ticks(cb.ax)
    ax.set_title(f"{table.get('robot', '')}: robustness ({table.get('runs')} runs; x = bias test fails, "
                 f"alpha {table.get('alpha')})")
    return fig


def plot_robustness_heatmap(table: Mapping[str, Any], path: Path | None = None) -> bytes:
    """The heat map as PNG bytes, written to ``path`` too (``robustness.png`` of task=robustness)."""
    png = to_png(robustness_heatmap_figure(table))
    if path is not None:
        Path(path).write_bytes(png)
    return png


def twin_vs_real_figure(res: Mapping[str, Any]):
    """Per quantity of the CLOOS twin-vs-real comparison: the ratio twin / real (|difference| for the
    residual autocorrelation) per joint, the target band shaded, missed targets in red."""
    pyplot = plt()
    ratios, met, tg = res["ratios"], res["met"], res["targets"]
    panels = [("residual RMS", ratios["residual_rms"], met["residual_rms"], tg["residual_rms"]),
              ("repetition variance median", ratios["variance_median"], met["variance_median"], tg["variance_median"])]
    panels += [(f"validation RMS on {n}", v, met["validation"][n], tg["validation"]) for n, v in ratios["validation"].items()]
    panels += [(f"|ACF diff| at {1000 * float(lag):g} ms", v, met["acf_abs_diff"][lag], (0.0, tg["acf_abs_diff"]))
               for lag, v in ratios["acf_abs_diff"].items()]
    cols = min(4, len(panels))
    rows = int(math.ceil(len(panels) / cols))
    fig, axes = pyplot.subplots(rows, cols, figsize=(MAX_WIDTH_IN, 2.3 * rows + 0.5), squeeze=False,
                                layout="constrained")
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.axis("off")
            continue
        title, v, ok, band = panels[k]
        v, ok = np.asarray(v, float), np.asarray(ok, bool)
        x = np.arange(1, v.size + 1)
        ax.axhspan(band[0], band[1], color="tab:green", alpha=0.18, label="target band")
        ax.plot(x[ok], v[ok], "o", color="tab:blue", ms=5, label="met")
        ax.plot(x[~ok], v[~ok], "o", color="tab:red", ms=5, label="missed")
        ax.set_xticks(x, [f"J{j}" for j in x])
        hi = max(float(np.nanmax(v)) if v.size else 1.0, band[1]) * 1.15
        ax.set_ylim(0, hi)
        ax.set_title(title)
        ax.grid(alpha=0.3, axis="y")
    handles: dict[str, Any] = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="outside upper center", ncol=3, frameon=False)
    return fig
