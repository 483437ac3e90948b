"""``mjp demo``: the quickstart study on this machine, then its table and report."""

from __future__ import annotations

import argparse

from sweep.cli.options import add_sets, add_store, add_verbose


def add(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="the quickstart study on this machine, then its table and HTML report")
    demo.add_argument("--smoke", action="store_true", help="3 epochs instead of 30")
    add_sets(demo)
    add_store(demo)
    add_verbose(demo)
    demo.set_defaults(handler="sweep.commands.sweeps:cmd_demo")
