"""``mjp attack``: gradient-inversion attacks on a trained model from MLflow or a checkpoint file."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch


def load_trained(run: str, config: str | None, uri: str | None):
    """(TrainConfig, model) from an MLflow run id (params + ``checkpoint/model.pt``) or a
    checkpoint file with ``--config``."""
    from sweep.cli import UserError
    from trainables.config import load_config
    from trainables.data import check_data, data_shape
    from trainables.engine import build_model
    from trainables.tracking import download_run_checkpoint, run_config_tree, tracking_uri

    if Path(run).is_file():
        if not config:
            raise UserError(f"{run} is a checkpoint file: give its training config with --config")
        cfg, weights = load_config(config), Path(run)
    else:
        from trainables.config import build_config

        uri = tracking_uri(uri)
        cfg = build_config(run_config_tree(uri, run), source=f"MLflow run {run}")
        weights = download_run_checkpoint(uri, run, tempfile.mkdtemp())
    check_data(cfg)
    model = build_model(cfg, data_shape(cfg))
    state = torch.load(weights, map_location="cpu", weights_only=False)
    model.load_state_dict(state["model"] if "model" in state and isinstance(state["model"], dict) else state)
    return cfg, model.eval()


def cmd_attack(args: argparse.Namespace) -> int:
    from mjp.privacy import NotAttackable
    from sweep.cli import UserError
    from analysis.tables import markdown_table
    from trainables.config import PrivacySection
    from trainables.data import load_datasets
    from trainables.privacy_eval import fixed_images, run_privacy_eval

    args.setting = args.setting or ["a", "b", "c"]
    cfg, model = load_trained(args.run, args.config, args.uri)
    privacy = PrivacySection(settings=tuple(args.setting), attack=args.attack, images=args.images, ratio=args.ratio, lpips_backbone=args.lpips_backbone)
    images, labels = fixed_images(load_datasets(cfg).val, args.images)
    try:
        metrics, _, notes = run_privacy_eval(model, images, labels, privacy, seed=args.seed)
    except NotAttackable as err:
        raise UserError(f"{err}; try --attack inversion") from None
    rows = [[s] + [f"{metrics.get(f'privacy/{s}_{m}', float('nan')):.4f}" for m in ("mse", "psnr", "ssim", "fft2d", "lpips")] for s in args.setting]
    print(f"{args.attack} attack on {args.images} images of {cfg.data.name} ({cfg.model.name} / {cfg.variant})")
    print(markdown_table(["setting", "MSE", "PSNR", "SSIM", "FFT-2D", "LPIPS"], rows))
    for note in notes:
        print(f"note: {note}")
    return 0


def add_subcommand(sub: argparse._SubParsersAction) -> None:
    attack = sub.add_parser("attack", help="gradient-inversion attacks (Table 5 settings a/b/c) on a trained model")
    attack.add_argument("--run", required=True, help="an MLflow run id, or a checkpoint file (with --config)")
    attack.add_argument("--config", help="the TrainConfig YAML of a checkpoint file")
    attack.add_argument("--images", type=int, default=4)
    attack.add_argument("--setting", choices=["a", "b", "c"], action="append", help="repeatable; default: all three")
    attack.add_argument("--attack", choices=["april", "inversion"], default="april")
    attack.add_argument("--ratio", type=float, default=0.5, help="shuffle ratio of x~ (settings b, c)")
    attack.add_argument("--lpips-backbone", help="torchvision AlexNet state dict; LPIPS is absent without it")
    attack.add_argument("--seed", type=int, default=0)
    attack.add_argument("--uri", help="MLflow tracking URI (default $MLFLOW_TRACKING_URI or ./mlflow.db)")
    attack.set_defaults(func=cmd_attack, setting=None)
