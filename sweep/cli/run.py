"""Run one ``mjp`` command: parse, then call its handler with the errors every command shares."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from sweep.cli.parser import build_parser


def command() -> NoReturn:
    """The ``mjp`` console script and ``python -m sweep.cli``: ``main`` as the process's whole work,
    with fewer full garbage collections while it imports (``trainables/process_start.py``) and
    ended without Python's finalization (``trainables/process_end.py``: 1 to 3 s less in each command)."""
    from trainables.process_end import run_and_exit
    from trainables.process_start import fewer_full_collections

    fewer_full_collections()
    run_and_exit(main)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from trainables.errors import UserError, one_line
    from trainables.launch.ray_runtime import prepare_environment
    from trainables.launch.signals import interrupted_status, sigterm_as_ctrl_c

    sigterm_as_ctrl_c()  # SIGTERM (`ray job stop`, systemd) stops as Ctrl-C does: runs closed KILLED, exit 143
    module, _, name = args.handler.partition(":")
    try:
        prepare_environment()  # (refuses a database password in $MLFLOW_TRACKING_URI in one line)
        if getattr(args, "set", None):
            from trainables.tracking.credentials import scrub_overrides

            args.set = scrub_overrides(args.set)  # `--set tracking.uri=http://user:password@...`: credentials to the environment only
        handler = getattr(importlib.import_module(module), name)
        return handler(args)
    except UserError as err:
        from sweep.console.commands_shown import for_terminal

        # one line, whatever the input held (wrapped between words only at a narrower terminal)
        print(for_terminal(f"error: {one_line(str(err))}", sys.stderr), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return interrupted_status()
    except Exception as err:
        from trainables.errors import disk_full_reason

        full = disk_full_reason(err)
        if full is None:
            raise
        print(
            f"error: a disk this command writes to is full ({full}); free some space and run it again "
            f"(`mjp sweep resume DIR` continues a sweep)",
            file=sys.stderr,
        )
        return 1
