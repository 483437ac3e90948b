"""Figures of the robustness and position-embedding evaluations across a study's configurations:
corruption error per corruption (supplementary Table 4 as a plot) and explained variance of the
PE against the number of PCA dimensions (Table 6 as a plot). Same conventions as
``analysis.figures``: full names, spread only where there are several seeds, None when nothing
was logged."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.figures import COLOURS, curves_per_group, group_label, spread_note
from analysis.robustness import corruption_columns
from analysis.tables import finished, group_columns
from mjp import keys


def corruption_bars(runs: pd.DataFrame, by: list[str] | None = None) -> Figure | None:
    """Error (%) per corruption, averaged over severities: grouped bars, one colour per configuration."""
    by = by or group_columns(runs)
    done = finished(runs)
    columns = corruption_columns(done)
    if done.empty or not columns:
        return None
    if keys.ROBUST_CLEAN_ERR in done.columns and done[keys.ROBUST_CLEAN_ERR].notna().any():
        columns = [keys.ROBUST_CLEAN_ERR, *columns]
    grouped = done.groupby(by, dropna=False, sort=True)
    count = len(grouped)
    width = 0.8 / count
    x = np.arange(len(columns))
    fig = Figure(figsize=(max(7.0, 0.55 * len(columns) * max(count, 2)), 4.0))
    ax = fig.subplots()
    for i, (index, group) in enumerate(grouped):
        mean, std = 100 * group[columns].mean(), 100 * group[columns].std()
        ax.bar(
            x + (i - (count - 1) / 2) * width,
            mean.values,
            width,
            yerr=std.fillna(0).values if len(group) > 1 else None,
            capsize=2,
            color=COLOURS[i % len(COLOURS)],
            label=group_label(by, index) + (f" (n={len(group)})" if len(group) > 1 else ""),
        )
    names = ["clean" if c == keys.ROBUST_CLEAN_ERR else c[len("robust/") : -len("_err")].replace("_", " ") for c in columns]
    ax.set_xticks(x, names, rotation=40, ha="right", fontsize=8)
    ax.set_ylabel("error (%), mean of 5 severities")
    ax.set_ylim(0, 100)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Corruption error per corruption (supplementary Table 4 as a plot); " + spread_note(grouped.size()), fontsize=9)
    fig.tight_layout()
    return fig


def pe_variance_curves(runs: pd.DataFrame, by: list[str] | None = None) -> Figure | None:
    """Explained variance (%) of the PE at k = 1.. PCA dimensions, one line per configuration."""
    return curves_per_group(
        runs,
        by,
        "pe/ev_",
        int,
        xlabel="PCA dimensions k",
        ylabel="explained variance of the PE (%)",
        size=(5.6, 4.0),
        title="Explained variance of the PE (Table 6 as a plot); the paper reads a lower curve as a less sparse, more informative PE",
    )
