"""Figures a training run logs: top-1 against the test-time shuffle ratio (the paper's Fig. 3) and
the corruption error against severity (ImageNet-C's per-corruption curves).

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


def corruption_figure(errors: dict[str, list[float]], title: str) -> Figure:
    """Error (%) at severities 1..5, one line per corruption (``errors``: corruption -> 5 fractions)."""
    fig = Figure(figsize=(6.4, 3.8))
    ax = fig.subplots()
    styles = ("-", "--", ":")
    for i, (name, values) in enumerate(errors.items()):
        ax.plot(
            range(1, len(values) + 1), [100 * v for v in values], marker=".", linestyle=styles[i // 10 % 3], label=name.replace("_", " ")
        )
    ax.set_xlabel("severity")
    ax.set_ylabel("error (%)")
    ax.set_xticks(range(1, 6))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=1, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
