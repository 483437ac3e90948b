"""Figures from the tidy runs frame: the paper's metrics per configuration, and top-1 against the
test-time shuffle ratio (Fig. 3)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from mjp import keys


def _labels(agg_index: pd.Index) -> list[str]:
    return [" / ".join(str(v) for v in (i if isinstance(i, tuple) else (i,))) for i in agg_index]


def metric_bars(runs: pd.DataFrame, by: list[str]) -> Figure:
    """Top-1 and consistency (%) per configuration, mean ± std over seeds."""
    done = runs[runs["status"] == "FINISHED"]
    grouped = done.groupby(by, dropna=False, sort=True)
    fig = Figure(figsize=(10, 3.6))
    axes = fig.subplots(1, 2)
    for ax, (key, title) in zip(axes, [(keys.VAL_TOP1, "top-1 (%)"), (keys.VAL_CONSISTENCY, "consistency (%)")]):
        if key not in done.columns:
            ax.set_visible(False)
            continue
        mean, std = 100 * grouped[key].mean(), 100 * grouped[key].std().fillna(0)
        ax.bar(range(len(mean)), mean.values, yerr=std.values, capsize=3, color="#4C72B0")
        ax.set_xticks(range(len(mean)), _labels(mean.index), rotation=30, ha="right", fontsize=8)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def shuffle_curves(runs: pd.DataFrame, by: list[str]) -> Figure:
    """Top-1 (%) against the test-time shuffle ratio, one line per configuration."""
    done = runs[runs["status"] == "FINISHED"]
    prefix = "val/top1_shuffled_"
    columns = sorted((c for c in done.columns if c.startswith(prefix)), key=lambda c: float(c[len(prefix) :]))
    ratios = [float(c[len(prefix) :]) for c in columns]
    fig = Figure(figsize=(5.5, 3.8))
    ax = fig.subplots()
    for label, group in done.groupby(by, dropna=False, sort=True):
        ax.plot(ratios, 100 * group[columns].mean().values, marker="o", label=" / ".join(map(str, label if isinstance(label, tuple) else (label,))))
    ax.set_xlabel("test-time shuffle ratio")
    ax.set_ylabel("top-1 (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
