"""``--set`` and ``--data`` of a command line as the dotted overrides a study or config is built with."""

from __future__ import annotations

import argparse
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
