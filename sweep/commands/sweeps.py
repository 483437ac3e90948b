"""``mjp sweep run STUDY``, ``mjp sweep resume DIR`` and ``mjp demo``: a sweep started or continued
(``sweep/tuner/run.py``), then its table, its report and where to look next."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sweep.console.commands_shown import for_terminal, mlflow_ui_command, tool
from sweep.study.cli_overrides import set_overrides


def after_sweep(outcome: Any, study: Any) -> int:
    """The end of a sweep: failures, the table, the report, where to look next; the exit status."""
    from sweep.commands.analyze import publish_sweep_report, reports_dir
    from trainables.tracking.store import optuna_storage_url

    for t in outcome.failed:
        print(for_terminal(f"failed: {t.label}: {t.error}", sys.stderr), file=sys.stderr)
    done = outcome.finished
    print(
        f"\nsweep {study.name}: {done} of {outcome.expected_trials} trials finished, {len(outcome.failed)} failed\n"
        f"  MLflow parent run {outcome.parent_run_id}"
    )
    uri = outcome.uri  # the sweep's store, wherever the command is typed
    if outcome.parent_deleted:
        from trainables.tracking.runs import restore_hint

        hint = restore_hint(uri, outcome.parent_run_id, outcome.parent_deleted)
        deleted = (
            f"the sweep's MLflow parent run was deleted (its {outcome.parent_deleted}) while the sweep ran: its trials' runs are "
            f"kept, nothing more was written to it; restore it ({hint}), then `mjp analyze report --study {study.name}`"
        )
        print(for_terminal(deleted, sys.stderr), file=sys.stderr)
        return 1
    report = publish_sweep_report(outcome.parent_run_id, study, reports_dir(), uri)
    if report is not None:
        print(report.table)
        for text in report.paper.values():
            print(f"\n{for_terminal(text)}")  # its caption and notes wrap; its table scrolls
        print(f"\nreport: {report.html}")
    if outcome.best is not None:
        print(f"best trial: {outcome.best.label}")
    if outcome.pareto:
        print(for_terminal("Pareto front: " + "; ".join(t.label for t in outcome.pareto)))
    print(f"MLflow UI:\n  {mlflow_ui_command(uri, study.base.tracking.experiment)}")
    optuna_url = optuna_storage_url(uri)
    if optuna_url:
        print(f"Optuna dashboard:\n  {tool('optuna-dashboard')} {optuna_url}\n  then open http://127.0.0.1:8080")
    print(f"logs: {outcome.log_file}")
    if outcome.interrupted:
        from trainables.launch.signals import interrupted_status

        interrupted = f"interrupted: the parent run is marked KILLED; continue with `mjp sweep resume {outcome.experiment_dir}`"
        print(f"\n{for_terminal(interrupted, sys.stderr)}", file=sys.stderr)
        return interrupted_status()
    return 1 if outcome.failed or not outcome.trials else 0


def cmd_sweep_run(args: argparse.Namespace) -> int:
    from sweep.study.load import check_study, check_trial_count, load_study

    study = load_study(args.study, smoke=args.smoke, overrides=set_overrides(args), check=False)
    check_trial_count(study, args.max_trials)  # before the pre-flight, which checks every value (a model for each)
    check_study(study)
    from sweep.tuner.run import run_sweep

    outcome = run_sweep(study, storage=args.storage, address=args.address, uri=args.uri, verbose=args.verbose)
    return after_sweep(outcome, study)


def cmd_sweep_resume(args: argparse.Namespace) -> int:
    from sweep.tuner.owner import claim, release
    from sweep.tuner.state import SweepFinished, load_resumable, read_state

    read_state(args.experiment_dir)  # a sweep directory at all (plain JSON)? then it is this driver's, or refused naming its driver
    claim(args.experiment_dir)  # never through a link, never another user's file (sweep.tuner.owner)
    try:
        loaded = load_resumable(args.experiment_dir)  # refused in one line before Ray is imported
        from sweep.tuner.run import resume_sweep

        outcome = resume_sweep(args.experiment_dir, loaded, address=args.address, verbose=args.verbose, uri=args.uri)
    except SweepFinished as finished:
        print(finished)
        return 0
    finally:
        release(args.experiment_dir)
    return after_sweep(outcome, loaded.study)


def cmd_demo(args: argparse.Namespace) -> int:
    """The quickstart study on this machine, then its table and report."""
    from sweep.study.load import load_study

    study = load_study("quickstart", smoke=args.smoke, overrides=set_overrides(args))
    from sweep.tuner.run import run_sweep

    outcome = run_sweep(study, uri=args.uri, verbose=args.verbose, command="mjp demo" + (" --smoke" if args.smoke else ""))
    return after_sweep(outcome, study)
