"""Figures a training run logs: top-1 against the test-time shuffle ratio (the paper's Fig. 3).

Matplotlib's object API (``Figure``), not pyplot: no global figure state, no backend to select.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from mjp import keys


def shuffle_accuracy_figure(results: dict[str, float], ratios: tuple[float, ...], title: str) -> Figure:
    """Top-1 (%) at each test-time shuffle ratio, from ``val/top1_shuffled_<r>`` entries."""
    fig = Figure(figsize=(4.5, 3.2))
    ax = fig.subplots()
    ax.plot(ratios, [100 * results[keys.top1_shuffled_key(r)] for r in ratios], marker="o")
    ax.set_xlabel("test-time shuffle ratio")
    ax.set_ylabel("top-1 (%)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
