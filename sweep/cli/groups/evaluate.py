"""``mjp evaluate``: the paper's evaluations on an existing model."""

from __future__ import annotations

import argparse

from sweep.cli.options import add_sets, add_uri


def add(sub: argparse._SubParsersAction) -> None:
    evaluate = sub.add_parser("evaluate", help="the paper's evaluations on an existing model (`mjp evaluate --help` lists them)")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="an MLflow run id: evaluates its logged model and logs into that run")
    source.add_argument("--checkpoint", help="a model or training checkpoint file (with --config)")
    source.add_argument("--timm", metavar="NAME", help="a timm model (with --pretrained-file for local weights)")
    evaluate.add_argument("--config", help="the TrainConfig YAML of --checkpoint / the data for --timm")
    evaluate.add_argument("--pretrained-file", help="local timm weights for --timm (nothing is downloaded)")
    from sweep.commands.evaluate import WhatOption  # its help lists the registry's evaluations, read only when a help is shown

    evaluate.add_argument("--what", default="robustness,pe,shuffle", action=WhatOption)
    add_sets(evaluate)
    add_uri(evaluate)
    evaluate.set_defaults(handler="sweep.commands.evaluate:cmd_evaluate")
