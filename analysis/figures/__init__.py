"""Figures a researcher would show, from the tidy runs frame (and per-epoch histories).

Matplotlib's object API (``Figure``): no pyplot state, no backend to select. Every figure labels
configurations by their full names, shows the spread over seeds only where there is more than
one seed (and says so); bars start at zero, so a bar's height is its value (a 1-point difference
is not drawn as a 3x bar). A function returns None when the
runs hold nothing for its figure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.markdown import is_fraction
from analysis.tables import finished, group_columns, label
from mjp import keys

COLOURS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD")


def group_label(by: list[str], index: object) -> str:
    """A configuration's name from its group values, e.g. ``J: JP + UNK + DAL (NLN)``."""
    values = index if isinstance(index, tuple) else (index,)
    return ", ".join(label(c, v) for c, v in zip(by, values))


def spread_note(counts: pd.Series) -> str:
    """What the error bars show, from the runs per configuration."""
    n = set(int(c) for c in counts)
    if n == {1}:
        return "one run per configuration: no error bars; differences between configurations may be seed noise"
    return f"mean ± std over {'/'.join(map(str, sorted(n)))} seeds"


def metric_bars(runs: pd.DataFrame, by: list[str] | None = None) -> Figure | None:
    """Top-1 and consistency (%) and Diff. Norm per configuration: mean, ± std where n > 1."""
    by = by or group_columns(runs)
    done = finished(runs)
    panels = [
        (k, t)
        for k, t in ((keys.VAL_TOP1, "top-1 (%)"), (keys.VAL_CONSISTENCY, "consistency (%)"), (keys.VAL_DIFF_NORM, "Diff. Norm"))
        if k in done.columns and done[k].notna().any()
    ]
    if done.empty or not panels:
        return None
    grouped = done.groupby(by, dropna=False, sort=True)
    names = [group_label(by, i) for i in grouped.size().index]
    fig = Figure(figsize=(4.2 * len(panels), 0.28 * max(len(name) for name in names) + 3.2))
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    for ax, (key, title) in zip(axes, panels):
        scale = 100 if is_fraction(key) else 1
        mean, std, n = scale * grouped[key].mean(), scale * grouped[key].std(), grouped[key].count()
        err = np.where(n > 1, std.fillna(0), 0)
        x = np.arange(len(mean))
        ax.bar(x, mean.values, color=[COLOURS[i % len(COLOURS)] for i in x], yerr=err if (n > 1).any() else None, capsize=4)
        for xi, m in zip(x, mean.values):
            ax.annotate(
                f"{m:.1f}" if scale == 100 else f"{m:.2f}",
                (xi, m),
                ha="center",
                va="bottom",
                fontsize=7,
                xytext=(0, 2),
                textcoords="offset points",
            )
        top = float(np.nanmax((mean + err).values))
        ax.set_ylim(0, min(100.0, top * 1.08) if scale == 100 else top * 1.12)
        ax.set_xticks(x, names, rotation=35, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(spread_note(grouped.size()) + "; bars start at 0", fontsize=8)
    fig.tight_layout()
    return fig


def curves_per_group(
    runs: pd.DataFrame,
    by: list[str] | None,
    prefix: str,
    x_of: type,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    size: tuple[float, float] = (6.4, 4.2),
) -> Figure | None:
    """One line per configuration through the columns ``<prefix><x>`` (fractions, drawn in %),
    x parsed by ``x_of``; a band of ± std where a configuration has several seeds."""
    by = by or group_columns(runs)
    done = finished(runs)
    columns = sorted((c for c in done.columns if c.startswith(prefix) and done[c].notna().any()), key=lambda c: x_of(c[len(prefix) :]))
    if done.empty or len(columns) < 2:
        return None
    xs = [x_of(c[len(prefix) :]) for c in columns]
    fig = Figure(figsize=size)
    ax = fig.subplots()
    for i, (index, group) in enumerate(done.groupby(by, dropna=False, sort=True)):
        mean, std = 100 * group[columns].mean(), 100 * group[columns].std()
        colour = COLOURS[i % len(COLOURS)]
        ax.plot(xs, mean.values, marker="o", color=colour, label=group_label(by, index) + (f" (n={len(group)})" if len(group) > 1 else ""))
        if len(group) > 1:
            ax.fill_between(xs, (mean - std).values, (mean + std).values, color=colour, alpha=0.15)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10 if len(title) < 70 else 8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def shuffle_curves(runs: pd.DataFrame, by: list[str] | None = None) -> Figure | None:
    """Top-1 (%) against the test-time shuffle ratio, one line per configuration (Fig. 3)."""
    return curves_per_group(
        runs,
        by,
        "val/top1_shuffled_",
        float,
        xlabel="test-time shuffle ratio (fraction of patches shuffled)",
        ylabel="top-1 (%)",
        title="Accuracy under a test-time jigsaw (the paper's Fig. 3)",
    )


def mask_ratio_curves(runs: pd.DataFrame) -> Figure | None:
    """Consistency (%) and Diff. Norm against the training masking ratio (Table 3 as a plot)."""
    done = finished(runs)
    column = "mjp.mask_ratio"
    if done.empty or column not in done or done[column].nunique() < 2 or keys.VAL_CONSISTENCY not in done:
        return None
    grouped = done.groupby(column, sort=True)
    fig = Figure(figsize=(9.5, 3.6))
    axes = fig.subplots(1, 3)
    for ax, (key, title) in zip(
        axes, ((keys.VAL_TOP1, "top-1 (%)"), (keys.VAL_CONSISTENCY, "consistency (%)"), (keys.VAL_DIFF_NORM, "Diff. Norm"))
    ):
        scale = 100 if is_fraction(key) else 1
        mean, std, n = scale * grouped[key].mean(), scale * grouped[key].std(), grouped[key].count()
        ax.errorbar(mean.index, mean.values, yerr=np.where(n > 1, std.fillna(0), 0) if (n > 1).any() else None, marker="o", capsize=3)
        ax.set_xlabel("training masking ratio")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    fig.suptitle("Table 3 as a plot: " + spread_note(grouped.size()), fontsize=8)
    fig.tight_layout()
    return fig


def training_curves(runs: pd.DataFrame, histories: pd.DataFrame, by: list[str] | None = None) -> Figure | None:
    """Validation top-1 and training loss per epoch, one line per configuration (the mean where seeds repeat it)."""
    by = by or group_columns(runs)
    done = finished(runs)
    if done.empty or histories.empty:
        return None
    fig = Figure(figsize=(10, 3.8))
    axes = fig.subplots(1, 2)
    for i, (index, group) in enumerate(done.groupby(by, dropna=False, sort=True)):
        mine = histories[histories.run_id.isin(group.run_id)]
        for ax, key in zip(axes, (keys.VAL_TOP1, keys.TRAIN_LOSS)):
            curve = mine[mine.key == key].groupby("step")["value"].mean()
            if len(curve):
                ax.plot(
                    curve.index,
                    (100 if is_fraction(key) else 1) * curve.values,
                    color=COLOURS[i % len(COLOURS)],
                    label=group_label(by, index),
                )
    for ax, title in zip(axes, ("validation top-1 (%)", "training loss")):
        ax.set_xlabel("epoch")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    repeats = done.groupby(by, dropna=False).size().max()
    fig.suptitle(
        f"training curves (mean over {repeats} seeds)" if repeats > 1 else "training curves (one run per configuration)", fontsize=8
    )
    fig.tight_layout()
    return fig


def pareto_plot(runs: pd.DataFrame, front: set[str]) -> Figure | None:
    """Every trial's top-1 against consistency (and against the attack's PSNR when logged), the
    Pareto front highlighted."""
    done = finished(runs)
    if done.empty or keys.VAL_CONSISTENCY not in done or not front:
        return None
    psnr = next((c for c in ("privacy/c_psnr", "privacy/a_psnr") if c in done and done[c].notna().any()), None)
    panels = [(keys.VAL_CONSISTENCY, "consistency (%)", 100)] + (
        [(psnr, f"attack PSNR ({psnr[8]}), dB: lower leaks less", 1)] if psnr else []
    )
    fig = Figure(figsize=(5.2 * len(panels), 4.2))
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    on = done.run_id.isin(front)
    for ax, (key, title, scale) in zip(axes, panels):
        ax.scatter(scale * done.loc[~on, key], 100 * done.loc[~on, keys.VAL_TOP1], color="#BBBBBB", label="trials")
        pts = done[on].sort_values(key)
        ax.plot(scale * pts[key], 100 * pts[keys.VAL_TOP1], "o-", color="#C44E52", label="Pareto front")
        ax.set_xlabel(title)
        ax.set_ylabel("top-1 (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{len(done)} trials, {int(on.sum())} on the front", fontsize=8)
    fig.tight_layout()
    return fig
