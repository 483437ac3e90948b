"""The ``mjp`` command line: train, sweep, analyze, demo.

Bad input (config keys and values, missing data, unknown studies) ends with one ``error:`` message
and exit status 2 before anything is launched; no traceback from deep inside torch or Ray.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Under `uv run`, Ray would start its workers through `uv run` again, in an environment without
# this project's packages ("No module named 'ray'"); workers use this interpreter instead.
# Read when ray is imported, so it is set before any import of ray.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


class UserError(Exception):
    """Any error the user can fix by changing the input."""


def _user_errors() -> tuple[type[BaseException], ...]:
    from pydantic import ValidationError

    from trainables.config import ConfigError
    from trainables.data import DataError

    return (UserError, ConfigError, DataError, ValidationError, FileNotFoundError)


def cmd_train(args: argparse.Namespace) -> int:
    from trainables.config import load_config
    from trainables.driver import run_training
    from sweep.report import print_metrics

    cfg = load_config(args.config, args.set)
    outcome = run_training(cfg, address=args.address)
    if outcome.error:
        print(f"training failed (MLflow run {outcome.run_id}): {outcome.error}", file=sys.stderr)
        return 1
    print_metrics(outcome.metrics, title=f"{cfg.model.name} / {cfg.variant} (MLflow run {outcome.run_id})")
    return 0


def build_parser(commands: dict[str, Callable[[argparse.Namespace], int]] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mjp", description="Masked Jigsaw Puzzle: training, sweeps and analysis")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="one training run (local Ray, or the cluster at --address / $RAY_ADDRESS)")
    train.add_argument("config", help="a TrainConfig YAML, e.g. trainables/configs/digits_vit_tiny.yaml")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a dotted key, e.g. optim.epochs=3")
    train.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS, else a private local Ray)")
    train.set_defaults(func=cmd_train)

    from sweep import attack, commands as sweep_commands

    sweep_commands.add_subcommands(sub)
    attack.add_subcommand(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except _user_errors() as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
