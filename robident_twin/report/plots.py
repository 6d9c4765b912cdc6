"""The report's matplotlib figures (residual and z histograms, Monte-Carlo bias, efficiency, coverage)
as PNG bytes for the self-contained HTML report.
"""
from __future__ import annotations

import io
import math
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

# ----------------------------------------------------------------------------- figures

def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig, dpi: int = 80) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    _plt().close(fig)
    return buf.getvalue()


def _png_via_file(plot, *args) -> bytes:
    """PNG bytes of one of the project's file-writing plot functions (report.py, dryrun.py)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fig.png"
        plot(*args, path)
        return path.read_bytes()


def _gauss_pdf(x: np.ndarray, mu: float, sd: float) -> np.ndarray:
    return np.exp(-0.5 * ((x - mu) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))


def plot_residual_histograms(residuals_Nm: np.ndarray, names: Sequence[str],
                             noise_std_Nm: Sequence[float] | None = None) -> bytes:
    """Histogram of the estimation residuals of each channel with the fitted Gaussian
    (maximum likelihood: sample mean and std) and, dashed, the zero-mean Gaussian of the
    noise std the estimator assumed (``noise_std_Nm``, the std of the period average)."""
    plt = _plt()
    r = np.asarray(residuals_Nm, float)
    n = r.shape[1]
    cols = min(4, n)
    rows = int(math.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.3 * rows + 0.4), squeeze=False)
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
        dens, _, _ = ax.hist(x, bins=50, density=True, histtype="stepfilled", color="tab:blue", alpha=0.5)
        ax.set_ylim(0, 1.45 * max(float(np.max(dens)), _gauss_pdf(np.zeros(1), 0.0, sig)[0] if sig > 0 else 0.0))
        g = np.linspace(lo, hi, 200)
        if sd > 0:
            ax.plot(g, _gauss_pdf(g, mu, sd), "r", lw=1.3, label=f"fit: mean {mu:.2g}, std {sd:.2g}")
        if sig > 0:
            ax.plot(g, _gauss_pdf(g, 0.0, sig), "k--", lw=0.9, label=f"noise std {sig:.2g}")
        ax.set_title(str(names[j]), fontsize=9, pad=2)
        ax.tick_params(labelsize=7)
        ax.set_yticks([])
        ax.legend(fontsize=6, loc="upper right", frameon=False)
        if j >= n - cols:
            ax.set_xlabel("residual [Nm]", fontsize=8)
    fig.subplots_adjust(left=0.02, right=0.98, bottom=0.45 / rows, top=1 - 0.5 / (2.3 * rows + 0.4),
                        wspace=0.08, hspace=0.45)
    return _png(fig)


def plot_z_histogram(z: np.ndarray) -> bytes:
    """Histogram of (estimate - true) / std against the standard normal."""
    plt = _plt()
    z = np.asarray(z, float)
    z = z[np.isfinite(z)]
    fig, ax = plt.subplots(figsize=(5.5, 2.6))
    lim = max(4.0, float(np.max(np.abs(z))) if z.size else 4.0)
    ax.hist(z, bins=np.linspace(-lim, lim, 33), density=True, histtype="stepfilled", color="tab:blue", alpha=0.6,
            label=f"{z.size} base parameters")
    g = np.linspace(-lim, lim, 300)
    ax.plot(g, _gauss_pdf(g, 0.0, 1.0), "r", lw=1.2, label="N(0, 1)")
    for b in (-3, 3):
        ax.axvline(b, color="k", ls="--", lw=0.8)
    ax.set_xlabel("(estimate - true) / std")
    ax.legend(fontsize=8, loc="upper left")
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.2, top=0.96)
    return _png(fig)


def _mc_axes_setup(ax, names, fontsize=6):
    x = np.arange(len(names))
    ax.set_xticks(x)
    ax.set_xticklabels(names, rotation=90, fontsize=fontsize)
    ax.set_xlim(-0.7, len(names) - 0.3)
    ax.grid(alpha=0.3, axis="y")
    return x


def plot_mc_bias(params: Sequence[Mapping[str, Any]], n_runs: int, title: str = "") -> bytes:
    """bias / (CRLB std / sqrt N) per parameter (bars) and bias / empirical SEM (dots):
    unbiased estimates lie inside +-1.96 for about 95 % of the parameters."""
    plt = _plt()
    names = [p["name"] for p in params]
    z = np.array([p["bias_over_crlb_sem"] for p in params], float)
    z2 = np.array([p["bias_over_sem"] for p in params], float)
    fig, ax = plt.subplots(figsize=(max(9.0, 0.16 * len(names) + 2), 3.0))
    x = _mc_axes_setup(ax, names)
    ax.bar(x, z, color=np.where(np.abs(z) > 3, "tab:red", "tab:blue"), label="bias / CRLB standard error")
    ax.plot(x, z2, "k.", ms=3, label="bias / empirical standard error")
    for b, ls in ((1.96, "--"), (-1.96, "--")):
        ax.axhline(b, color="k", ls=ls, lw=0.8)
    ax.set_ylabel("bias / std. error")
    ax.legend(fontsize=7, loc="upper right", ncol=2)
    ax.set_title(title or f"bias over its standard error ({n_runs} runs; dashed: +-1.96)", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def plot_mc_efficiency(params: Sequence[Mapping[str, Any]], n_runs: int, title: str = "",
                       bonferroni: tuple[float, float] | None = None) -> bytes:
    """Empirical variance / CRLB per parameter (log scale) with the chi-square 90 % interval
    of a single ratio (shaded) and the Bonferroni interval of the joint test (dotted)."""
    from robident_twin.validation.statistics import chi2_ratio_interval

    plt = _plt()
    names = [p["name"] for p in params]
    r = np.array([p["efficiency_ratio"] for p in params], float)
    lo, hi = chi2_ratio_interval(int(n_runs), 0.90)
    fig, ax = plt.subplots(figsize=(max(9.0, 0.16 * len(names) + 2), 3.0))
    x = _mc_axes_setup(ax, names)
    ax.axhspan(lo, hi, color="tab:green", alpha=0.18, label=f"chi-square 90 % [{lo:.2f}, {hi:.2f}]")
    ax.axhline(1.0, color="k", lw=0.8)
    if bonferroni is not None:
        for b in bonferroni:
            ax.axhline(b, color="tab:green", ls=":", lw=1.0)
    inside = (r >= lo) & (r <= hi)
    ax.plot(x[inside], r[inside], "o", color="tab:blue", ms=3.5, label="var / CRLB")
    ax.plot(x[~inside], r[~inside], "o", color="tab:red", ms=3.5, label="outside the 90 % interval")
    ax.set_yscale("log")
    ax.set_ylabel("var / CRLB")
    ax.legend(fontsize=7, loc="upper right", ncol=3)
    ax.set_title(title or f"efficiency: empirical variance over the Cramer-Rao bound ({n_runs} runs)", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def plot_mc_coverage(params: Sequence[Mapping[str, Any]], n_runs: int, title: str = "") -> bytes:
    """Share of runs whose estimate +- 0.9945 reported std contains the truth (68 % nominal),
    with the binomial 95 % band of a correct 68 % interval over ``n_runs`` runs."""
    plt = _plt()
    names = [p["name"] for p in params]
    c = np.array([p["coverage68"] for p in params], float)
    half = 1.96 * math.sqrt(0.68 * 0.32 / max(int(n_runs), 1))
    fig, ax = plt.subplots(figsize=(max(9.0, 0.16 * len(names) + 2), 3.0))
    x = _mc_axes_setup(ax, names)
    ax.axhspan(0.68 - half, 0.68 + half, color="tab:green", alpha=0.18, label="binomial 95 % band")
    ax.axhline(0.68, color="k", lw=0.8)
    ok = np.abs(c - 0.68) <= half
    ax.plot(x[ok], c[ok], "o", color="tab:blue", ms=3.5, label="68 % coverage")
    ax.plot(x[~ok], c[~ok], "o", color="tab:red", ms=3.5, label="outside the band")
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("coverage")
    ax.legend(fontsize=7, loc="lower right", ncol=3)
    ax.set_title(title or f"coverage of the reported 68 % intervals ({n_runs} runs)", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def plot_control_rms(control: Mapping[str, Any]) -> bytes:
    """Bars of the per-joint RMS reference error (deg) of each feed-forward choice (task=control)."""
    plt = _plt()
    joints, ffs = control["joints"], control["feedforward"]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    x = np.arange(len(joints))
    w = 0.8 / max(1, len(ffs))
    for i, (name, d) in enumerate(ffs.items()):
        ax.bar(x + (i - 0.5 * (len(ffs) - 1)) * w, d["rms_deg"], w, label=name)
    ax.set_xticks(x, joints)
    ax.set_yscale("log")
    ax.set_ylabel("RMS reference error (deg)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _png(fig)


def plot_robustness_heatmap(table: Mapping[str, Any], path: Path | None = None) -> bytes:
    """Heat map of the robustness table (robident_twin/validation/robustness.py): median RMSE over
    the Cramer-Rao std per estimator (rows) and twin (columns), log colour scale, each cell
    annotated with that figure and a cross where the bias test fails. Written to ``path`` too."""
    plt = _plt()
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
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 + 1.1 * len(cols)), 1.2 + 0.45 * len(ests)))
    im = ax.imshow(val, cmap="viridis_r", norm=LogNorm(vmin=min(lo, 1.0), vmax=max(hi, 1.01)), aspect="auto")
    for i, e in enumerate(ests):
        for j, c in enumerate(cols):
            cell = at.get((e, c))
            if cell is None:
                continue
            mark = "" if cell["bias_test_passed"] else " x"
            ax.text(j, i, f"{val[i, j]:.2g}{mark}", ha="center", va="center", fontsize=7,
                    color="white" if val[i, j] > math.sqrt(max(lo, 1.0) * max(hi, 1.01)) else "black")
    ax.set_xticks(range(len(cols)), [c.replace("_", " ").replace("+", "+\n") for c in cols], fontsize=7,
                  rotation=30, ha="right")
    ax.set_yticks(range(len(ests)), ests, fontsize=7)
    fig.colorbar(im, ax=ax, label="median RMSE / Cramer-Rao std")
    ax.set_title(f"{table.get('robot', '')}: robustness ({table.get('runs')} runs; x = bias test fails, "
                 f"alpha {table.get('alpha')})", fontsize=8)
    fig.tight_layout()
    png = _png(fig)
    if path is not None:
        Path(path).write_bytes(png)
    return png
