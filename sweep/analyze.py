"""``mjp analyze tables|report`` and the report a sweep publishes when it ends."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainables.errors import UserError


@dataclass
class PublishedReport:
    table: str
    html: Path


def _runs_of(uri: str, study: str, pool: bool) -> tuple[Any, str]:
    from analysis.runs import load_runs, load_sweeps
    from trainables.tracking import check_store_readable

    check_store_readable(uri)
    sweeps = load_sweeps(uri, study)
    if sweeps.empty:
        raise UserError(f"no sweep of study {study!r} in {uri}; run `mjp sweep run {study}` first")
    if pool:
        import pandas as pd

        return pd.concat([load_runs(uri, parent_run_id=p) for p in sweeps["run_id"]], ignore_index=True), f"{len(sweeps)} sweeps"
    return load_runs(uri, parent_run_id=sweeps["run_id"].iloc[0]), str(sweeps["run_name"].iloc[0])


def cmd_analyze_tables(args: argparse.Namespace) -> int:
    from analysis.report import write_report
    from analysis.tables import paper_table, to_markdown
    from trainables.tracking import tracking_uri

    uri = tracking_uri(args.uri)
    runs, what = _runs_of(uri, args.study, args.all)
    title = f"Study {args.study}: {what}"
    report = write_report(runs, Path(args.out) / args.study, title)
    print(title)
    print(to_markdown(paper_table(runs)))
    print(f"\nreport: {report}")
    return 0


def cmd_analyze_report(args: argparse.Namespace) -> int:
    return cmd_analyze_tables(args)


def publish_sweep_report(parent_run_id: str, study: Any, out_dir: str, uri: str | None) -> PublishedReport | None:
    """Tables and figures of a finished sweep in ``out_dir/<study>``; None when nothing finished."""
    from analysis.report import write_report
    from analysis.runs import load_runs
    from analysis.tables import paper_table, to_markdown
    from trainables.tracking import tracking_uri

    runs = load_runs(tracking_uri(uri), parent_run_id=parent_run_id)
    table = paper_table(runs)
    if table.empty:
        return None
    path = write_report(runs, Path(out_dir) / study.name, f"Study {study.name}")
    return PublishedReport(to_markdown(table), path)
