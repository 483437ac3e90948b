"""Console output of one training run: the paper's metrics as a one-row table."""

from __future__ import annotations

from typing import Any

from analysis.tables import PAPER_METRICS, format_cell, markdown_table


def summary_table(named_metrics: list[tuple[str, dict[str, Any]]]) -> str:
    """One row per run: ``(name, metrics)`` -> Markdown table of the paper's metrics."""
    headers = ["run"] + [title for _, title, _ in PAPER_METRICS]
    rows = [[name] + [format_cell(m.get(k), percent=pct) for k, _, pct in PAPER_METRICS] for name, m in named_metrics]
    return markdown_table(headers, rows)


def print_metrics(metrics: dict[str, Any], title: str) -> None:
    print(title)
    print(summary_table([("final", metrics)]))
