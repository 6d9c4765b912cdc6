"""The report's Monte-Carlo and sweep figures: per-parameter bias, efficiency and coverage, the
convergence of the running mean and variance with the number of runs, histograms of the estimates
with the Cramer-Rao Gaussian, and the sweep's statistics against the noise scale.

Parameter names: at most ``MAX_NAMES_PER_PANEL`` per x axis (further panels below), rotated, 8 pt.
Legends outside the data areas; no axis offset (see robident_twin/report/svg.py).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from robident_twin.report.plots import MAX_WIDTH_IN, gauss_pdf, log_ticks, name_chunks, names_axis
from robident_twin.report.svg import plt


def _per_parameter(params: Sequence[Mapping[str, Any]], title: str, height_in: float = 2.5):
    pyplot = plt()
    chunks = name_chunks(len(params))
    fig, axes = pyplot.subplots(len(chunks), 1, figsize=(MAX_WIDTH_IN, height_in * len(chunks) + 0.6),
                                squeeze=False, layout="constrained")
    fig.suptitle(title, x=0.02, ha="left")
    return fig, [(axes[c, 0], idx) for c, idx in enumerate(chunks)]


def mc_bias_figure(params: Sequence[Mapping[str, Any]], n_runs: int, title: str = ""):
    """bias / (CRLB std / sqrt N) per parameter (bars) and bias / empirical SEM (dots):
    unbiased estimates lie inside +-1.96 for about 95 % of the parameters."""
    names = [p["name"] for p in params]
    z = np.array([p["bias_over_crlb_sem"] for p in params], float)
    z2 = np.array([p["bias_over_sem"] for p in params], float)
    fig, panels = _per_parameter(params, title or f"bias over its standard error ({n_runs} runs; dashed: +-1.96)")
    for ax, idx in panels:
        x = names_axis(ax, names, idx)
        ax.bar(x, z[idx], color=np.where(np.abs(z[idx]) > 3, "tab:red", "tab:blue"),
               label="bias / CRLB standard error (red: |.| > 3)")
        ax.plot(x, z2[idx], "k.", ms=4, label="bias / empirical standard error")
        for b in (1.96, -1.96):
            ax.axhline(b, color="k", ls="--", lw=0.8)
        ax.set_ylabel("bias / std. error")
    h, lab = panels[0][0].get_legend_handles_labels()
    fig.legend(h, lab, loc="outside upper right", ncol=2, frameon=False)
    return fig


def mc_efficiency_figure(params: Sequence[Mapping[str, Any]], n_runs: int, title: str = "",
                         bonferroni: tuple[float, float] | None = None):
    """Empirical variance / CRLB per parameter (log scale) with the chi-square 90 % interval
    of a single ratio (shaded) and the Bonferroni interval of the joint test (dotted)."""
    from robident_twin.validation.statistics import chi2_ratio_interval

    names = [p["name"] for p in params]
    r = np.array([p["efficiency_ratio"] for p in params], float)
    lo, hi = chi2_ratio_interval(int(n_runs), 0.90)
    fig, panels = _per_parameter(params, title or
                                 f"efficiency: empirical variance over the Cramer-Rao bound ({n_runs} runs)")
    for ax, idx in panels:
        x = names_axis(ax, names, idx)
        ax.axhspan(lo, hi, color="tab:green", alpha=0.18, label=f"chi-square 90 % [{lo:.2f}, {hi:.2f}]")
        ax.axhline(1.0, color="k", lw=0.8)
        if bonferroni is not None:
            for k, b in enumerate(bonferroni):
                ax.axhline(b, color="tab:green", ls=":", lw=1.0, label="Bonferroni interval" if k == 0 else None)
        ri = r[idx]
        inside = (ri >= lo) & (ri <= hi)
        ax.plot(x[inside], ri[inside], "o", color="tab:blue", ms=3.5, label="var / CRLB")
        ax.plot(x[~inside], ri[~inside], "o", color="tab:red", ms=3.5, label="outside the 90 % interval")
        ax.set_yscale("log")
        log_ticks(ax)
        ax.set_ylabel("var / CRLB")
    handles: dict[str, Any] = {}
    for ax, _ in panels:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="outside upper right", ncol=4, frameon=False)
    return fig


def mc_coverage_figure(params: Sequence[Mapping[str, Any]], n_runs: int, title: str = ""):
    """Share of runs whose estimate +- 0.9945 reported std contains the truth (68 % nominal),
    with the binomial 95 % band of a correct 68 % interval over ``n_runs`` runs."""
    names = [p["name"] for p in params]
    c = np.array([p["coverage68"] for p in params], float)
    half = 1.96 * math.sqrt(0.68 * 0.32 / max(int(n_runs), 1))
    fig, panels = _per_parameter(params, title or f"coverage of the reported 68 % intervals ({n_runs} runs)")
    handles: dict[str, Any] = {}
    for ax, idx in panels:
        x = names_axis(ax, names, idx)
        ax.axhspan(0.68 - half, 0.68 + half, color="tab:green", alpha=0.18, label="binomial 95 % band")
        ax.axhline(0.68, color="k", lw=0.8)
        ci = c[idx]
        ok = np.abs(ci - 0.68) <= half
        ax.plot(x[ok], ci[ok], "o", color="tab:blue", ms=3.5, label="68 % coverage")
        ax.plot(x[~ok], ci[~ok], "o", color="tab:red", ms=3.5, label="outside the band")
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("coverage")
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="outside upper right", ncol=3, frameon=False)
    return fig


def running_moments(estimates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running mean and running (unbiased) variance of the rows of ``estimates`` (runs x p) after
    1..N runs; the variance of the first run is nan."""
    e = np.asarray(estimates, float)
    k = np.arange(1, e.shape[0] + 1)[:, None]
    mean = np.cumsum(e, axis=0) / k
    sq = np.cumsum(e * e, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (sq - k * mean**2) / (k - 1)
    var[0] = np.nan
    return mean, np.maximum(var, 0.0)


def mc_convergence_figure(estimates: np.ndarray, truth: np.ndarray, crlb_std: np.ndarray, names: Sequence[str]):
    """Running mean and running variance of every parameter's estimate against the number of runs,
    normalised by the Cramer-Rao bound: (mean - true) / CR std with the +-1.96 / sqrt(k) funnel of an
    efficient unbiased estimator, and variance / CR variance with its chi-square 90 % funnel. Lines
    that leave the funnel for good are biased or inefficient parameters; lines still moving at the
    right end say more runs are needed."""
    from scipy.stats import chi2

    pyplot = plt()
    mean, var = running_moments(estimates)
    sd = np.where(np.asarray(crlb_std, float) > 0, np.asarray(crlb_std, float), np.nan)
    zm = (mean - np.asarray(truth, float)) / sd
    rv = var / sd**2
    n = zm.shape[0]
    k = np.arange(1, n + 1)
    fig, (a, b) = pyplot.subplots(1, 2, figsize=(MAX_WIDTH_IN, 3.6), layout="constrained")
    a.plot(k, zm, color="tab:blue", lw=0.7, alpha=0.5)
    a.plot(k, 1.96 / np.sqrt(k), "k--", lw=1.0, label="efficient, unbiased: +-1.96 / sqrt(runs)")
    a.plot(k, -1.96 / np.sqrt(k), "k--", lw=1.0)
    lim = max(3.0, float(np.nanmax(np.abs(zm[min(n - 1, 4):]))) * 1.1) if n > 1 else 3.0
    a.set_ylim(-lim, lim)
    a.set_xlabel("number of runs")
    a.set_ylabel("(running mean - true) / CR std")
    a.set_title(f"running mean, {zm.shape[1]} parameters (one line each)")
    kk = k[1:]
    b.plot(kk, rv[1:], color="tab:blue", lw=0.7, alpha=0.5)
    b.fill_between(kk, chi2.ppf(0.05, kk - 1) / (kk - 1), chi2.ppf(0.95, kk - 1) / (kk - 1), color="tab:green",
                   alpha=0.18, label="chi-square 90 % of an efficient estimator")
    b.axhline(1.0, color="k", lw=0.8)
    b.set_yscale("log")
    tail = rv[min(n - 1, 9):]
    b.set_ylim(min(0.2, 0.8 * float(np.nanmin(tail))) if tail.size else 0.2,
               max(5.0, 1.25 * float(np.nanmax(tail))) if tail.size else 5.0)
    log_ticks(b)
    b.set_xlabel("number of runs")
    b.set_ylabel("running variance / CRLB")
    b.set_title("running variance")
    for ax in (a, b):
        ax.grid(alpha=0.3)
    h1, l1 = a.get_legend_handles_labels()
    h2, l2 = b.get_legend_handles_labels()
    fig.legend(h1 + h2 + [a.lines[0]], l1 + l2 + ["one parameter"], loc="outside upper center", ncol=3,
               frameon=False)
    return fig


def mc_histograms_figure(estimates: np.ndarray, truth: np.ndarray, crlb_std: np.ndarray, names: Sequence[str],
                         cols: int = 8):
    """Per parameter: histogram of the estimates, in Cramer-Rao standard deviations from the truth,
    with the Cramer-Rao Gaussian N(true, CRLB) (the standard normal on this axis) overlaid."""
    pyplot = plt()
    e = np.asarray(estimates, float)
    sd = np.where(np.asarray(crlb_std, float) > 0, np.asarray(crlb_std, float), np.nan)
    z = (e - np.asarray(truth, float)) / sd
    p = z.shape[1]
    cols = min(cols, p)
    rows = int(math.ceil(p / cols))
    fig, axes = pyplot.subplots(rows, cols, figsize=(MAX_WIDTH_IN, 1.25 * rows + 0.9), squeeze=False,
                                sharex=True, layout="constrained")
    finite = z[np.isfinite(z)]
    lim = float(np.clip(np.max(np.abs(finite)) if finite.size else 4.0, 4.0, 12.0))
    g = np.linspace(-lim, lim, 200)
    bins = np.linspace(-lim, lim, max(8, min(30, int(2 * math.sqrt(e.shape[0])))))
    for j in range(rows * cols):
        ax = axes.flat[j]
        if j >= p:
            ax.axis("off")
            continue
        zj = np.clip(z[:, j][np.isfinite(z[:, j])], -lim, lim)
        ax.hist(zj, bins=bins, density=True, histtype="stepfilled", color="tab:blue", alpha=0.55,
                label="estimates")
        ax.plot(g, gauss_pdf(g, 0.0, 1.0), "r", lw=1.0, label="Cramer-Rao Gaussian N(true, CRLB)")
        ax.set_title(str(names[j]), fontsize=8, pad=2)
        ax.set_yticks([])
    # the panels share x: one call sets the ticks of all (per panel it re-autoscaled every sibling)
    axes.flat[0].set_xticks([-3, 0, 3])
    for c in range(cols):  # the lowest panel of each column carries the x axis
        ax = axes[(p - 1 - c) // cols, c]
        ax.tick_params(labelbottom=True)
        ax.set_xlabel("(est - true) / CR std", fontsize=8)
    h, lab = axes.flat[0].get_legend_handles_labels()
    fig.legend(h, lab, loc="outside upper center", ncol=2, frameon=False)
    return fig


# ----------------------------------------------------------------------------- sweep aggregate

def _min_span(ax, values: np.ndarray, rel: float = 0.05, abs_: float = 0.02) -> None:
    """At least a visible span on the y axis: equal values stay a flat line, not a 'trend' of 1e-13."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if not v.size:
        return
    lo, hi = float(v.min()), float(v.max())
    need = max(rel * max(abs(lo), abs(hi)), abs_)
    if hi - lo < need:
        c = 0.5 * (lo + hi)
        ax.set_ylim(c - need, c + need)


def sweep_metric_figure(runs, col: str, label: str, reference: float | None = None):
    """One line per (robot, mode, estimator, friction): ``col`` of the sweep's jobs against the noise scale."""
    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(4.1, 3.6), layout="constrained")
    allv = []
    for (robot, mode, est, fr), g in runs.groupby(["robot", "mode", "estimator", "friction"]):
        g = g.groupby("noise_scale")[col].mean()
        ax.plot(g.index, g.values, "o-", label=f"{robot} {mode} {est} {fr}")
        allv += list(g.values)
    if reference is not None:
        ax.axhline(reference, color="k", lw=0.8, ls="--", label=f"nominal {reference:g}")
        allv.append(reference)
    _min_span(ax, np.array(allv))
    ax.set_xlabel("noise scale")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", frameon=False, ncol=1)
    return fig


def sweep_efficiency_figure(runs):
    """Mean var / CRLB per estimator over the sweep's jobs."""
    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(4.1, 3.6), layout="constrained")
    eff = runs.groupby("estimator")["mean_efficiency_ratio"].mean()
    ax.plot(range(len(eff)), eff.values, "o", ms=7, label="mean var / CRLB")
    ax.set_xticks(range(len(eff)), list(eff.index))
    ax.set_xlim(-0.6, len(eff) - 0.4)
    ax.axhline(1.0, color="k", lw=0.8, ls="--", label="efficient (1)")
    ax.set_ylabel("mean var / CRLB")
    ax.set_yscale("log")
    vals = np.concatenate([eff.values, [1.0]])
    ax.set_ylim(0.7 * float(np.min(vals)), 1.4 * float(np.max(vals)))
    log_ticks(ax)
    ax.grid(alpha=0.3, axis="y")
    fig.legend(loc="outside lower center", frameon=False, ncol=2)
    return fig
