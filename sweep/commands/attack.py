"""``mjp attack``: gradient-inversion attacks on a trained model from MLflow or a checkpoint file."""

from __future__ import annotations

import argparse


def cmd_attack(args: argparse.Namespace) -> int:
    from trainables.config.schema import PrivacySection
    from trainables.errors import UserError
    from trainables.train.trained import load_trained

    if args.images < 1:
        raise UserError(f"--images {args.images}: allowed is 1 or more")
    if not 0 <= args.ratio <= 1:
        raise UserError(f"--ratio {args.ratio}: allowed is 0..1")
    if args.lpips_backbone:
        from trainables.launch.weights_file import check_weights_file

        check_weights_file("--lpips-backbone", args.lpips_backbone)
    settings = tuple(args.setting or ("a", "b", "c"))
    privacy = PrivacySection(settings=settings, attack=args.attack, images=args.images, ratio=args.ratio, lpips_backbone=args.lpips_backbone, client_dtype=args.client_dtype)
    trained = load_trained(run=args.run, checkpoint=args.checkpoint, config=args.config, uri=args.uri)
    from analysis.markdown import markdown_table
    from mjp.keys import privacy_key
    from mjp.privacy import NotAttackable
    from trainables.data.datasets import fixed_images, load_datasets
    from trainables.evaluation.privacy import run_privacy_eval

    cfg = trained.cfg
    images, labels = fixed_images(load_datasets(cfg).val, args.images)
    try:
        metrics, _, notes = run_privacy_eval(trained.model, images, labels, privacy, seed=args.seed)
    except NotAttackable as err:
        raise UserError(f"{err}; try --attack inversion") from None
    columns = ("mse", "psnr", "ssim", "fft2d", "lpips", "cond")
    rows = [[s] + [f"{metrics[privacy_key(s, m)]:.4g}" if privacy_key(s, m) in metrics else "-" for m in columns] for s in settings]
    print(f"{args.attack} attack on {args.images} images of {cfg.data.name} ({cfg.model.name} / {cfg.variant})")
    print(markdown_table(["setting", "MSE", "PSNR", "SSIM", "FFT-2D", "LPIPS", "cond"], rows))
    for note in notes:
        print(f"note: {note}")
    return 0
