"""``mjp analyze tables|report`` and the report a sweep publishes when it ends.

The report is assembled from MLflow alone (the study's YAML and settings are on the sweep's
parent run), so it can be made again at any time, and pooled over several sweeps of a study.
A sweep's own report is also logged to its parent run (``report/``), whose description then
holds the study's description and its table.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainables.tracking import schema


@dataclass
class PublishedReport:
    table: str
    html: Path
    paper: dict[str, str]


def _sweeps(uri: str, study: str) -> Any:
    from analysis.runs import load_sweeps
    from trainables.tracking.store import check_store_readable

    check_store_readable(uri)
    from analysis.runs import recorded_studies
    from sweep.study.names import check_study_name, no_sweep_error

    recorded = recorded_studies(uri)
    check_study_name(study, recorded, uri)
    sweeps = load_sweeps(uri, study)
    if sweeps.empty:
        raise no_sweep_error(study, recorded, uri)
    return sweeps


def _context(uri: str, parents: list[str], runs: Any, title: str) -> Any:
    """A ReportContext from what the sweeps logged on their parent runs."""
    import yaml

    from analysis.report import ReportContext
    from analysis.runs import load_histories, sweep_record
    from mjp import keys
    from trainables.tracking.store import optuna_storage_url

    newest = sweep_record(uri, parents[0])
    params = newest.params
    description = str((yaml.safe_load(newest.study_yaml) or {}).get("description", "")) if newest.study_yaml else ""
    trial_ids = {r.get("trial_id") for r in newest.pareto}
    pareto = set(runs[runs["trial_id"].isin(trial_ids)].run_id) if trial_ids and "trial_id" in runs else set()
    optuna_url = optuna_storage_url(uri)
    searched = params.search_algorithm in ("tpe", "random", "nsga2")  # a grid's history and importances say nothing
    optuna = (
        (optuna_url, newest.run_name)
        if searched and optuna_url and Path(optuna_url.removeprefix("sqlite:///")).is_file() and len(parents) == 1
        else None
    )
    histories = load_histories(uri, list(runs.run_id), (keys.VAL_TOP1, keys.TRAIN_LOSS)) if len(runs) else None
    sweep_lines = (
        f"{len(parents)} sweep(s), newest {newest.run_name} ({newest.status.lower()}); {len(runs)} runs; "
        f"search {params.search_algorithm or '?'}, objective {','.join(f'{m}:{mode}' for m, mode in params.objectives) or '?'}",
        f"MLflow: parent run {newest.run_id} in {uri}",
    )
    return ReportContext(
        study=params.study or "?",
        title=title,
        description=description,
        study_yaml=newest.study_yaml,
        paper_tables=params.paper_tables,
        best=newest.tags.get(schema.TAG_BEST_TRIAL),
        pareto_run_ids=pareto,
        optuna=optuna,
        experiment_ids=dict(zip(runs.run_id, runs.experiment_id)) if len(runs) else {},
        histories=histories,
        sweep_lines=sweep_lines,
        run_figures=_pe_run_figures(uri, runs),
    )


def _pe_run_figures(uri: str, runs: Any) -> dict[str, dict[str, bytes]]:
    """Per configuration, the PE figures its first finished run logged (UMAP, else PCA)."""
    from analysis.figures import group_label
    from analysis.report import PE_RUN_FIGURES
    from analysis.runs import run_artifact_bytes
    from analysis.tables import finished, group_columns

    done = finished(runs)
    if done.empty or not any(c.startswith("pe/") for c in done.columns):
        return {}
    by = group_columns(done)
    out = {}
    for index, group in done.groupby(by, dropna=False, sort=True):
        found = run_artifact_bytes(uri, group.run_id.iloc[0], tuple(PE_RUN_FIGURES))
        if "figures/pe/umap_2d.png" in found:
            found.pop("figures/pe/pca_3d.png", None)
        if found:
            out[group_label(by, index)] = found
    return out


def writable_directory(path: str) -> str:
    """``path``, when the report can be written there: a directory this user may write, or one it
    may make (its nearest existing parent is); else ``UserError`` in one line, before any work
    and without making anything (a read-only or file ``--out``)."""
    import os
    from pathlib import Path

    from trainables.errors import UserError

    target = Path(path).absolute()
    existing = next(p for p in (target, *target.parents) if p.exists())
    if not existing.is_dir():
        raise UserError(f"cannot write the report to {path}: {existing} is a file; give --out a directory you can write")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"cannot write the report to {path}: {existing} is not writable by this user; give --out a directory you can write")
    return path


def reports_dir() -> str:
    """Where reports go by default: ``$MJP_REPORTS_DIR`` (the local twin's exports set it to its
    session, so its jobs' reports and a local run's stay apart), else ``./reports``."""
    import os

    return os.environ.get("MJP_REPORTS_DIR") or "reports"


def build_report(uri: str, study: str, out_dir: str | Path, pool: bool = False, parent_run_id: str | None = None) -> Any:
    """Write the report of the study's newest sweep (or ``parent_run_id``, or every sweep pooled)."""
    import pandas as pd

    from analysis.report import write_report
    from analysis.runs import load_runs
    from sweep.study.names import named_inside

    named_inside(out_dir, study)  # before MLflow is read
    if parent_run_id is not None:
        parents, what = [parent_run_id], "this sweep"
    else:
        sweeps = _sweeps(uri, study)
        parents = list(sweeps["run_id"]) if pool else [sweeps["run_id"].iloc[0]]
        what = f"{len(parents)} sweeps pooled" if pool else str(sweeps["run_name"].iloc[0])
    runs = pd.concat([load_runs(uri, parent_run_id=p) for p in parents], ignore_index=True)
    title = f"Study {study}: {what}" if parent_run_id is None else f"Study {study}"
    return write_report(runs, named_inside(out_dir, study), _context(uri, parents, runs, title))


def _print(files: Any, paper: bool) -> None:
    from analysis.report import SECTIONS
    from analysis.tables import paper_text, to_markdown

    print(to_markdown(files.table) if len(files.table) else "no run finished: nothing to tabulate")
    for note in files.notes:
        print(f"note: {note}")
    for name, t in files.sections.items():
        heading, _, note = SECTIONS[name]
        print(f"\n{heading}\n{to_markdown(t)}\n{note}")
    if paper:
        for key, t in files.paper.items():
            print(f"\n{paper_text(key, t, files.setup)}")
        if not files.paper:
            print("\n(this study names no table of the paper: add `paper: [...]` to its YAML)")


def refuse_study_without_sweeps(study: str, configured: str | None) -> None:
    """In a second, before MLflow is imported: ``UserError`` for a study with no sweep in a SQLite
    store (read with sqlite3 alone); other stores are checked by ``_sweeps`` as before."""
    from sweep.study.names import check_study_name, no_sweep_error
    from trainables.tracking.sqlite_sweeps import absolute_sqlite, configured_uri, sweep_studies

    uri = absolute_sqlite(configured_uri(configured))
    recorded = sweep_studies(uri)
    if recorded is None or study in recorded:
        return
    check_study_name(study, recorded, uri)
    raise no_sweep_error(study, recorded, uri)


def cmd_analyze(args: argparse.Namespace) -> int:
    """``mjp analyze tables`` and ``mjp analyze report``: both write the whole report and print its
    tables; they differ in the last line alone (``tables`` also names the table files)."""
    out = writable_directory(args.out or reports_dir())
    refuse_study_without_sweeps(args.study, args.uri)
    from trainables.tracking.store import tracking_uri

    files = build_report(tracking_uri(args.uri), args.study, out, pool=args.all)
    _print(files, args.paper)
    tables = f" (tables: {files.directory}/table.md, .csv, .tex)" if args.analyze_command == "tables" else ""
    print(f"\nreport: {files.html}{tables}")
    return 0


def publish_sweep_report(parent_run_id: str, study: Any, out_dir: str, uri: str) -> PublishedReport | None:
    """The report of a sweep that just ended, written to ``out_dir/<study>`` and logged to its
    parent run in the store at ``uri`` (the sweep's, as its run resolved it); the parent's
    description gets the study's description and table. None when no trial finished."""
    from analysis.tables import to_markdown
    from trainables.tracking.runs import RunTracker

    files = build_report(uri, study.name, out_dir, parent_run_id=parent_run_id)
    if files.table.empty:
        return None
    parent = RunTracker(uri, parent_run_id)
    for path in [files.html, files.markdown, *files.directory.glob("*table*.*"), files.directory / "runs.csv"]:
        parent.log_artifact(path, schema.ARTIFACT_REPORT_DIR)
    for path in (files.directory / "figures").glob("*.*"):
        parent.log_artifact(path, schema.ARTIFACT_REPORT_FIGURES_DIR)
    description = " ".join(study.config.description.split())
    parent.set_note(f"{description}\n\n{to_markdown(files.table)}\n\nThe full report: artifacts, report/report.html")
    from analysis.tables import paper_text

    return PublishedReport(to_markdown(files.table), files.html, {k: paper_text(k, v, files.setup) for k, v in files.paper.items()})
