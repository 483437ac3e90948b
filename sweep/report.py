"""Console output of one training run: the paper's metrics as a one-row table."""

from __future__ import annotations

from typing import Any

from mjp import keys

#: (metric key, column title) of a training's summary
SUMMARY = (
    (keys.VAL_TOP1, "top-1"),
    (keys.VAL_CONSISTENCY, "consistency"),
    (keys.VAL_DIFF_NORM, "Diff. Norm"),
    (keys.top1_shuffled_key(0.9), "top-1 @ shuffle 0.9"),
)


def metrics_table(metrics: dict[str, Any], title: str) -> str:
    """``title`` and one Markdown row of the paper's metrics (present ones only)."""
    from analysis.markdown import markdown_table

    shown = [(k, t) for k, t in SUMMARY if k in metrics]
    return title + "\n" + markdown_table([t for _, t in shown], [[keys.format_value(k, metrics[k]) for k, _ in shown]])
