"""``mjp config``: inspect configs."""

from __future__ import annotations

import argparse

from sweep.cli.options import add_sets, group


def add(sub: argparse._SubParsersAction) -> None:
    config = group(sub, "config", "inspect configs")
    show = config.add_parser("show", help="print the fully resolved TrainConfig (defaults, variant, derived seeds)")
    show.add_argument("config", help="a TrainConfig YAML, or a study (file or shipped name) for its base config")
    add_sets(show)
    show.add_argument("--smoke", action="store_true", help="with a study: its smoke-size base")
    show.set_defaults(handler="sweep.commands.listing:cmd_config_show")
