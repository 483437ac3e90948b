"""``mjp train``: one training run."""

from __future__ import annotations

import argparse

from sweep.cli.options import add_address, add_sets, add_store, add_verbose


def add(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser("train", help="one training run (local Ray, or the cluster at --address / $RAY_ADDRESS)")
    train.add_argument("config", help="a TrainConfig YAML, e.g. trainables/configs/digits_vit_tiny.yaml")
    add_sets(train)
    add_address(train)
    add_store(train)
    add_verbose(train)
    train.set_defaults(handler="sweep.commands.train:cmd_train")
