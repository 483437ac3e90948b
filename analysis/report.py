"""A study's report: tables (Markdown, CSV, LaTeX), figures, and a Markdown index, on disk."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.figures import metric_bars, shuffle_curves
from analysis.tables import group_columns, paper_table, to_latex, to_markdown


def write_report(runs: pd.DataFrame, out_dir: str | Path, title: str) -> Path:
    """Write ``table.{md,csv,tex}``, ``runs.csv``, figures and ``report.md`` to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    by = group_columns(runs)
    table = paper_table(runs, by)
    runs.to_csv(out / "runs.csv", index=False)
    table.to_csv(out / "table.csv", index=False)
    (out / "table.md").write_text(to_markdown(table) + "\n")
    (out / "table.tex").write_text(to_latex(table, title) + "\n")
    figures = {"metrics.png": metric_bars(runs, by), "top1_vs_shuffle_ratio.png": shuffle_curves(runs, by)}
    for name, fig in figures.items():
        fig.savefig(out / name, dpi=120, bbox_inches="tight")
    failed = runs[runs["status"] != "FINISHED"]
    lines = [f"# {title}", "", to_markdown(table), ""]
    if len(failed):
        lines += [f"{len(failed)} run(s) did not finish: " + ", ".join(f"{r.run_id[:8]} ({r.status})" for r in failed.itertuples()), ""]
    lines += [f"![metrics]({n})" for n in figures] + ["", "Files: table.md, table.csv, table.tex, runs.csv"]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return out / "report.md"
