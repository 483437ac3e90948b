"""What the commands share: ``--set``/``--data`` as overrides, a tool's path beside this Python, and the
command that opens a run's MLflow page."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from trainables.errors import UserError


def set_overrides(args: argparse.Namespace) -> dict[str, Any]:
    from trainables.config.overrides import parse_overrides

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
    refuses ``mlflow ui`` on an http store), a database store needs ``mlflow ui`` started on it.
    The command and the address each on a line of their own, indented under the caller's label,
    so that a narrow terminal wraps neither in the middle."""
    from trainables.tracking.store import experiment_runs_page, is_tracking_server

    if is_tracking_server(uri):
        return f"open {experiment_runs_page(uri, experiment, host=uri.rstrip('/'))}\n  (the tracking server's own UI)"
    return f"{tool('mlflow')} ui --backend-store-uri {shlex.quote(uri)}\n  then open {experiment_runs_page(uri, experiment)}"


def terminal_columns() -> int:
    """The terminal's width (``COLUMNS`` first); very wide where the output is not a terminal, so
    that files and pipes get the one-line layouts."""
    import shutil

    return shutil.get_terminal_size(fallback=(10_000, 24)).columns
