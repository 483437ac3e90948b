"""What the console shows of other commands: a tool's path beside this Python, the command that
opens a run's MLflow page, the terminal's width they are laid out for, and sentences wrapped to it."""

from __future__ import annotations

import os
import shlex
import sys
import textwrap
from typing import TextIO


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
        page = f"open {experiment_runs_page(uri, experiment, host=uri.rstrip('/'))}\n  "
        if os.environ.get("MLFLOW_TRACKING_TOKEN"):  # behind the cluster's gate (the twin's, a node's)
            return (
                page
                + "(the tracking server's own UI; the cluster's gate asks the browser once for its token:\n  echo $MLFLOW_TRACKING_TOKEN)"
            )
        return page + "(the tracking server's own UI)"
    return f"{tool('mlflow')} ui --backend-store-uri {shlex.quote(uri)}\n  then open {experiment_runs_page(uri, experiment)}"


def terminal_columns() -> int:
    """The terminal's width (``COLUMNS`` first); very wide where the output is not a terminal, so
    that files and pipes get the one-line layouts."""
    import shutil

    return shutil.get_terminal_size(fallback=(10_000, 24)).columns


def for_terminal(text: str, stream: TextIO | None = None) -> str:
    """``text`` as a terminal shows it whole: where ``stream`` (stdout by default) is a terminal
    narrower than a line, the line wraps between words, its continuation indented two more than it;
    a table row (``|`` first) stays whole, to scroll. A file or a pipe gets ``text`` unchanged,
    a sentence to a line, for tools and logs."""
    if not (stream or sys.stdout).isatty():
        return text
    width = terminal_columns()
    lines = []
    for line in text.split("\n"):
        body = line.lstrip(" ")
        if len(line) <= width or body.startswith("|"):
            lines.append(line)
            continue
        lead = line[: len(line) - len(body)]
        lines.append(
            textwrap.fill(body, width, initial_indent=lead, subsequent_indent=lead + "  ", break_long_words=False, break_on_hyphens=False)
        )
    return "\n".join(lines)
