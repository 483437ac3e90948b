"""``mjp train CONFIG``: one training run (a one-trial Tune run, ``sweep/tuner/training.py``), then
the paper's metrics of it as a one-row table and the command that opens its MLflow run."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mjp import keys
from sweep.console.commands_shown import mlflow_ui_command


def cmd_train(args: argparse.Namespace) -> int:
    from trainables.config.build import load_config

    cfg = load_config(args.config, args.set)
    from sweep.tuner.training import run_training

    outcome = run_training(cfg, address=args.address, uri=args.uri, verbose=args.verbose)
    print(f"logs: {outcome.log_file}")
    if outcome.interrupted:
        from trainables.launch.signals import interrupted_status

        print(f"interrupted: MLflow run {outcome.run_id} is marked KILLED", file=sys.stderr)
        return interrupted_status()
    if outcome.error:
        print(f"training failed: {outcome.error} (MLflow run {outcome.run_id})", file=sys.stderr)
        return 1

    print(metrics_table(outcome.metrics, f"{cfg.model.name} / {cfg.variant} (MLflow run {outcome.run_id})"))
    print(f"\nMLflow UI:\n  {mlflow_ui_command(outcome.uri, cfg.tracking.experiment)}")
    return 0


#: (metric key, column title) of a training's summary
SUMMARY = (
    (keys.VAL_TOP1, "top-1"),
    (keys.VAL_CONSISTENCY, "consistency"),
    (keys.VAL_DIFF_NORM, "Diff. Norm"),
    (keys.top1_shuffled_key(0.9), "top-1 @ shuffle 0.9"),
)


def metrics_table(metrics: dict[str, Any], title: str) -> str:
    """``title`` and one Markdown row of the paper's metrics (present ones only)."""
    from analysis.markdown import format_value, markdown_table

    shown = [(k, t) for k, t in SUMMARY if k in metrics]
    return title + "\n" + markdown_table([t for _, t in shown], [[format_value(k, metrics[k]) for k, _ in shown]])
