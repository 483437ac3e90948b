"""``mjp train``, ``mjp sweep run|resume`` and ``mjp demo``: launch, then say what happened.

A sweep ends with its table, the report's path and the commands that open the MLflow UI and the
Optuna dashboard. Exit status: 0 when every trial finished, 1 when one failed, 130 when the
sweep was interrupted (the parent run is then KILLED and ``mjp sweep resume`` continues it).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from trainables.errors import UserError


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    from trainables.overrides import parse_overrides

    over = parse_overrides(args.set)
    if getattr(args, "data", None):
        if "data.root" in over:
            raise UserError(f"--data {args.data!r} and --set data.root={over['data.root']!r} both give the data root; keep one")
        over["data.root"] = args.data
    root = over.get("data.root")
    if isinstance(root, str) and root and "://" not in root:  # recorded in the sweep's state: resumable from any directory
        from pathlib import Path

        over["data.root"] = str(Path(root).expanduser().absolute())
    return over


def tool(name: str) -> str:
    """This environment's own ``name`` executable (``.venv/bin/mlflow``), as a user can type it."""
    from pathlib import Path

    path = Path(sys.executable).parent / name
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def mlflow_ui_command(uri: str, experiment: str) -> str:
    """How to see ``experiment`` in the MLflow UI: a tracking server serves its own (open it; MLflow
    refuses ``mlflow ui`` on an http store), a database store needs ``mlflow ui`` started on it."""
    from trainables.tracking import experiment_runs_page, is_tracking_server

    if is_tracking_server(uri):
        return f"open {experiment_runs_page(uri, experiment, host=uri.rstrip('/'))}   (the tracking server's own UI)"
    return f"{tool('mlflow')} ui --backend-store-uri {shlex.quote(uri)}   (then open {experiment_runs_page(uri, experiment)})"


def cmd_train(args: argparse.Namespace) -> int:
    from trainables.config import load_config

    cfg = load_config(args.config, args.set)
    from sweep.training import run_training
    from trainables.tracking import tracking_uri

    outcome = run_training(cfg, address=args.address, verbose=args.verbose)
    print(f"logs: {outcome.log_file}")
    if outcome.interrupted:
        print(f"interrupted: MLflow run {outcome.run_id} is marked KILLED", file=sys.stderr)
        return 130
    if outcome.error:
        print(f"training failed: {outcome.error} (MLflow run {outcome.run_id})", file=sys.stderr)
        return 1
    from sweep.report import metrics_table

    print(metrics_table(outcome.metrics, f"{cfg.model.name} / {cfg.variant} (MLflow run {outcome.run_id})"))
    print(f"\nMLflow UI: {mlflow_ui_command(tracking_uri(cfg.tracking.uri), cfg.tracking.experiment)}")
    return 0


def _after_sweep(outcome: Any, study: Any) -> int:
    """The end of a sweep: failures, the table, the report, where to look next; the exit status."""
    from sweep.analyze import publish_sweep_report, reports_dir
    from trainables.tracking import optuna_storage_url

    for t in outcome.failed:
        print(f"failed: {t.label}: {t.error}", file=sys.stderr)
    done = outcome.finished
    print(f"\nsweep {study.name}: {done} of {outcome.expected_trials} trials finished, {len(outcome.failed)} failed · MLflow parent run {outcome.parent_run_id}")
    uri = outcome.uri  # the sweep's store, wherever the command is typed
    report = publish_sweep_report(outcome.parent_run_id, study, reports_dir(), uri)
    if report is not None:
        print(report.table)
        for text in report.paper.values():
            print(f"\n{text}")
        print(f"\nreport: {report.html}")
    if outcome.best is not None:
        print(f"best trial: {outcome.best.label}")
    if outcome.pareto:
        print("Pareto front: " + "; ".join(t.label for t in outcome.pareto))
    from trainables.tracking import tracking_uri

    resolved = tracking_uri(uri)
    print(f"MLflow UI: {mlflow_ui_command(resolved, study.train_config({}).tracking.experiment)}")
    optuna_url = optuna_storage_url(resolved)
    if optuna_url:
        print(f"Optuna dashboard: {tool('optuna-dashboard')} {optuna_url}   (then open http://127.0.0.1:8080)")
    print(f"logs: {outcome.log_file}")
    if outcome.interrupted:
        print(f"\ninterrupted: the parent run is marked KILLED; continue with `mjp sweep resume {outcome.experiment_dir}`", file=sys.stderr)
        return 130
    return 1 if outcome.failed or not outcome.trials else 0


def cmd_sweep_run(args: argparse.Namespace) -> int:
    from sweep.study import load_study

    study = load_study(args.study, smoke=args.smoke, overrides=_overrides(args))
    from sweep.run import run_sweep

    outcome = run_sweep(study, storage=args.storage, address=args.address, verbose=args.verbose)
    return _after_sweep(outcome, study)


def cmd_sweep_resume(args: argparse.Namespace) -> int:
    from sweep.sweep_state import load_resumable

    state, study = load_resumable(args.experiment_dir)  # refused in one line before Ray is imported
    from sweep.run import resume_sweep

    outcome = resume_sweep(args.experiment_dir, (state, study), address=args.address, verbose=args.verbose)
    return _after_sweep(outcome, study)


def cmd_demo(args: argparse.Namespace) -> int:
    """The quickstart study on this machine, then its table and report."""
    from sweep.study import load_study

    study = load_study("quickstart", smoke=args.smoke, overrides=_overrides(args))
    from sweep.run import run_sweep

    outcome = run_sweep(study, verbose=args.verbose)
    return _after_sweep(outcome, study)
