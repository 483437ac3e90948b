"""``mjp sweep run|resume|status``, ``mjp analyze tables`` and ``mjp demo``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from trainables.config import parse_override

PROJECT_DIR = Path(__file__).resolve().parent.parent


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    over = dict(parse_override(o) for o in args.set)
    if getattr(args, "data", None):
        over["data.root"] = args.data
    return over


def _print_sweep(outcome: Any, study_name: str) -> None:
    import ray

    ray.shutdown()  # flush the workers' logs now, not after the summary
    failed = [t for t in outcome.trials if t["error"]]
    print(f"\nsweep {study_name}: {len(outcome.trials)} trials, {len(failed)} failed; MLflow parent run {outcome.parent_run_id}")
    for t in failed:
        print(f"  failed {t['trial_id']} {t['params']}: {t['error'].splitlines()[-1][:300]}")
    if outcome.best:
        print(f"best trial {outcome.best['trial_id']}: {outcome.best['params']}")
    if outcome.pareto:
        print("Pareto front: " + "; ".join(f"{t['params']}" for t in outcome.pareto))
    print(f"experiment dir (for `mjp sweep resume`): {outcome.experiment_dir}")


def cmd_sweep_run(args: argparse.Namespace) -> int:
    from sweep.run import run_sweep
    from sweep.study import load_study

    study = load_study(args.study, smoke=args.smoke, overrides=_overrides(args))
    outcome = run_sweep(study, storage=args.storage, address=args.address)
    _print_sweep(outcome, study.name)
    _print_table(outcome.parent_run_id, study)
    return 0 if outcome.trials and not all(t["error"] for t in outcome.trials) else 1


def cmd_sweep_resume(args: argparse.Namespace) -> int:
    from sweep.run import resume_sweep

    outcome = resume_sweep(args.experiment_dir, address=args.address)
    _print_sweep(outcome, args.experiment_dir)
    return 0


def _print_table(parent_run_id: str, study: Any) -> None:
    from analysis.runs import load_runs
    from analysis.tables import paper_table, to_markdown
    from trainables.tracking import tracking_uri

    cfg = study.train_config({})
    runs = load_runs(tracking_uri(cfg.tracking.uri), cfg.tracking.experiment, parent_run_id=parent_run_id)
    table = paper_table(runs)
    print(to_markdown(table) if len(table) else "no trial finished: nothing to tabulate")


def cmd_sweep_status(args: argparse.Namespace) -> int:
    from analysis.runs import load_runs, load_sweeps
    from trainables.tracking import tracking_uri

    uri = tracking_uri(args.uri)
    sweeps = load_sweeps(uri, args.study)
    if sweeps.empty:
        print(f"no sweeps recorded in {uri}")
        return 0
    print(f"sweeps in {uri} (newest first):")
    for s in sweeps.head(args.limit).itertuples():
        children = load_runs(uri, parent_run_id=s.run_id)
        counts = children["status"].value_counts().to_dict() if len(children) else {}
        shown = ", ".join(f"{n} {k.lower()}" for k, n in sorted(counts.items())) or "no trials yet"
        print(f"  {s.run_name}  [{s.status.lower()}]  {shown}  parent={s.run_id}")
    return 0


def cmd_analyze_tables(args: argparse.Namespace) -> int:
    from analysis.report import write_report
    from analysis.runs import load_runs, load_sweeps
    from analysis.tables import paper_table, to_markdown
    from sweep.cli import UserError
    from trainables.tracking import tracking_uri

    uri = tracking_uri(args.uri)
    sweeps = load_sweeps(uri, args.study)
    if sweeps.empty:
        raise UserError(f"no sweep of study {args.study!r} in {uri}; run `mjp sweep run {args.study}` first")
    if args.all:
        import pandas as pd

        runs = pd.concat([load_runs(uri, parent_run_id=p) for p in sweeps["run_id"]], ignore_index=True)
    else:
        runs = load_runs(uri, parent_run_id=sweeps["run_id"].iloc[0])
    title = f"Study {args.study}: " + (f"{len(sweeps)} sweeps" if args.all else str(sweeps["run_name"].iloc[0]))
    report = write_report(runs, Path(args.out) / args.study, title)
    print(title)
    print(to_markdown(paper_table(runs)))
    print(f"\nreport: {report}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The quickstart study on this machine, then its table and report."""
    from sweep.run import run_sweep
    from sweep.study import load_study
    from trainables.tracking import tracking_uri

    study = load_study("quickstart", smoke=args.smoke, overrides=_overrides(args))
    outcome = run_sweep(study)
    _print_sweep(outcome, study.name)
    cmd_analyze_tables(argparse.Namespace(uri=None, study="quickstart", all=False, out="reports"))
    uri = tracking_uri(None)
    print(f"\nMLflow UI: mlflow ui --backend-store-uri {uri}   (then open http://127.0.0.1:5000)")
    return 0


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    sweep = sub.add_parser("sweep", help="run, resume or list sweeps").add_subparsers(dest="sweep_command", required=True)
    run = sweep.add_parser("run", help="run a study (a file, or a shipped name: quickstart, mask_ratio, variants, backbones, tune, pareto)")
    run.add_argument("study")
    run.add_argument("--smoke", action="store_true", help="the study's small version, for one machine")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a TrainConfig key for every trial")
    run.add_argument("--data", help="dataset root (same as --set data.root=PATH)")
    run.add_argument("--storage", help="Tune storage: a directory or s3:// / gs:// URI (default ./ray_results, or $MJP_SWEEP_STORAGE)")
    run.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS, else a private local Ray)")
    run.set_defaults(func=cmd_sweep_run)

    resume = sweep.add_parser("resume", help="continue an interrupted sweep from its experiment directory")
    resume.add_argument("experiment_dir")
    resume.add_argument("--address")
    resume.set_defaults(func=cmd_sweep_resume)

    status = sweep.add_parser("status", help="list sweeps recorded in MLflow with their trials' states")
    status.add_argument("--study")
    status.add_argument("--uri", help="MLflow tracking URI (default $MLFLOW_TRACKING_URI or ./mlflow.db)")
    status.add_argument("--limit", type=int, default=10)
    status.set_defaults(func=cmd_sweep_status)

    analyze = sub.add_parser("analyze", help="paper-shaped tables and figures from MLflow").add_subparsers(dest="analyze_command", required=True)
    tables = analyze.add_parser("tables", help="tables (Markdown, CSV, LaTeX) and figures of a study's latest sweep")
    tables.add_argument("--study", required=True)
    tables.add_argument("--all", action="store_true", help="pool every sweep of the study, not only the latest")
    tables.add_argument("--uri")
    tables.add_argument("--out", default="reports", help="report directory (default ./reports/<study>)")
    tables.set_defaults(func=cmd_analyze_tables)

    demo = sub.add_parser("demo", help="the quickstart study on this machine, then its table and report")
    demo.add_argument("--smoke", action="store_true", help="3 epochs instead of 30")
    demo.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    demo.set_defaults(func=cmd_demo)
