"""Options that several commands share, and the parser class every command uses."""

from __future__ import annotations

import argparse
import difflib


class Parser(argparse.ArgumentParser):
    """argparse with "did you mean" for a mistyped command."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if "invalid choice:" in message:
            word = message.split("invalid choice: ", 1)[1].split("'")[1]
            choices = [c.strip(" '") for c in message.split("choose from", 1)[-1].strip(" )").split(",")]
            close = difflib.get_close_matches(word, choices, n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        super().error(message)


def group(sub: argparse._SubParsersAction, name: str, helptext: str) -> argparse._SubParsersAction:
    """A command group (``mjp NAME SUBCOMMAND``) and the action its sub-commands are added to."""
    return sub.add_parser(name, help=helptext).add_subparsers(
        dest=f"{name}_command", required=True, metavar=f"{name.upper()}_COMMAND", parser_class=Parser
    )


def add_sets(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. optim.epochs=3 (a mapping merges into its section)",
    )


def add_verbose(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verbose", action="store_true", help="show Ray's, Ray Train's and Tune's own logs on the console")


def add_uri(p: argparse.ArgumentParser) -> None:
    p.add_argument("--uri", help="MLflow tracking URI (default $MLFLOW_TRACKING_URI or ./mlflow.db)")


def add_store(p: argparse.ArgumentParser) -> None:
    """``--uri`` of a command that trains: the store its runs are written to."""
    p.add_argument(
        "--uri",
        help="MLflow tracking URI the runs are written to (default: the config's tracking.uri, $MLFLOW_TRACKING_URI or ./mlflow.db)",
    )


def add_address(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS, else a private local Ray)")
