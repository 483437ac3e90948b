"""Figures a training run logs: top-1 against the test-time shuffle ratio (the paper's Fig. 3)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from mjp import metrics as keys  # noqa: E402


def shuffle_accuracy_figure(results: dict[str, float], ratios: tuple[float, ...], title: str) -> Figure:
    """Top-1 (%) at each test-time shuffle ratio, from ``val/top1_shuffled_<r>`` entries."""
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.plot(ratios, [100 * results[keys.top1_shuffled_key(r)] for r in ratios], marker="o")
    ax.set_xlabel("test-time shuffle ratio")
    ax.set_ylabel("top-1 (%)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    return fig
