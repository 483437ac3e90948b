"""Console output: metric tables for people (percentages as in the paper)."""

from __future__ import annotations

from typing import Any, Iterable

from mjp import metrics as keys

#: Columns of the console summary: (metric key, header, is a fraction shown as %).
SUMMARY_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    (keys.VAL_TOP1, "top-1 %", True),
    (keys.VAL_CONSISTENCY, "consistency %", True),
    (keys.VAL_DIFF_NORM, "Diff. Norm", False),
    (keys.top1_shuffled_key(0.9), "top-1 @shuffle 0.9 %", True),
)


def format_value(value: Any, percent: bool) -> str:
    if value is None or value != value:
        return "-"
    return f"{100 * value:.1f}" if percent else f"{value:.2f}"


def markdown_table(headers: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def summary_table(named_metrics: list[tuple[str, dict[str, Any]]]) -> str:
    """One row per run: ``(name, metrics)`` -> Markdown table of ``SUMMARY_COLUMNS``."""
    headers = ["run"] + [h for _, h, _ in SUMMARY_COLUMNS]
    rows = [[name] + [format_value(m.get(k), pct) for k, _, pct in SUMMARY_COLUMNS] for name, m in named_metrics]
    return markdown_table(headers, rows)


def print_metrics(metrics: dict[str, Any], title: str) -> None:
    print(title)
    print(summary_table([("final", metrics)]))
