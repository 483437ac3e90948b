"""``mjp attack``: gradient-inversion attacks (Table 5) on a trained model."""

from __future__ import annotations

import argparse

from sweep.cli.options import add_uri


def add(sub: argparse._SubParsersAction) -> None:
    attack = sub.add_parser("attack", help="gradient-inversion attacks (Table 5 settings a/b/c) on a trained model")
    source = attack.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="an MLflow run id (its params and checkpoint/model.pt)")
    source.add_argument("--checkpoint", help="a model or training checkpoint file (with --config)")
    attack.add_argument("--config", help="the TrainConfig YAML of --checkpoint")
    attack.add_argument("--images", type=int, default=4, help="how many validation images to attack (default 4)")
    attack.add_argument("--setting", choices=["a", "b", "c"], action="append", help="repeatable; default: all three")
    attack.add_argument(
        "--attack",
        choices=["auto", "april", "inversion"],
        default="auto",
        help=(
            "auto (default): april where the model was built with april_block=True, else inversion; "
            "april: the analytic attack; inversion: gradient matching"
        ),
    )
    attack.add_argument("--steps", type=int, default=200, help="optimisation steps per image of the inversion attack (default 200)")
    attack.add_argument("--ratio", type=float, default=0.5, help="shuffle ratio of x~ (settings b, c)")
    attack.add_argument(
        "--client-dtype", choices=["float32", "float64"], default="float32", help="precision of the simulated client's gradients"
    )
    attack.add_argument("--lpips-backbone", help="torchvision AlexNet state dict; LPIPS is absent without it")
    attack.add_argument(
        "--seed",
        type=int,
        help="seed of the shuffles and the attack (default: the run's eval.seed, as its own attack at the end of training used)",
    )
    add_uri(attack)
    attack.set_defaults(handler="sweep.commands.attack:cmd_attack")
