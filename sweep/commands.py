"""``mjp demo`` (and, later, ``mjp sweep ...``) subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
DEMO_CONFIG = PROJECT_DIR / "trainables" / "configs" / "digits_vit_tiny.yaml"


def cmd_demo(args: argparse.Namespace) -> int:
    """Train a baseline and an MJP model on digits and print them side by side."""
    from trainables.config import load_config
    from trainables.driver import run_training
    from sweep.report import summary_table

    rows = []
    for variant in ("A", "J"):
        cfg = load_config(DEMO_CONFIG, [f"mjp.variant={variant}", *args.set])
        outcome = run_training(cfg)
        if outcome.error:
            raise RuntimeError(f"demo run {variant} failed: {outcome.error}")
        rows.append((f"{cfg.variant} ({outcome.run_id[:8]})", outcome.metrics))
    print(summary_table(rows))
    return 0


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="a small real run on the bundled digits data, on this machine")
    demo.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    demo.set_defaults(func=cmd_demo)
