"""``mjp attack``: gradient-inversion attacks on a trained model from MLflow or a checkpoint file.

``--attack auto`` (the default) picks the attack that applies to the model (APRIL's analytic one
where it was built with ``april_block=True``, else gradient matching) and says which and why in
one line; the work shows its progress and ETA on stderr."""

from __future__ import annotations

import argparse


def cmd_attack(args: argparse.Namespace) -> int:
    from trainables.errors import UserError
    from trainables.train.trained import load_trained

    if args.images < 1:
        raise UserError(f"--images {args.images}: allowed is 1 or more")
    if args.steps < 1:
        raise UserError(f"--steps {args.steps}: allowed is 1 or more")
    if not 0 <= args.ratio <= 1:
        raise UserError(f"--ratio {args.ratio}: allowed is 0..1")
    if args.lpips_backbone:
        from trainables.launch.weights_file import check_weights_file

        check_weights_file("--lpips-backbone", args.lpips_backbone)
    trained = load_trained(run=args.run, checkpoint=args.checkpoint, config=args.config, uri=args.uri)
    import torch

    from analysis.markdown import markdown_table
    from mjp.keys import privacy_key
    from mjp.privacy import april_requirements, choose_attack
    from sweep.console.progress import ProgressLine
    from trainables.config.schema import PrivacySection
    from trainables.data.datasets import fixed_images, load_datasets
    from trainables.evaluation.privacy import run_privacy_eval
    from trainables.evaluation.result import eval_seed

    cfg = trained.cfg
    if args.attack == "april" and april_requirements(trained.model):
        raise UserError(
            f"--attack april: APRIL's analytic attack does not apply: {april_requirements(trained.model)}; try --attack inversion (or auto)"
        )
    attack, why = choose_attack(trained.model) if args.attack == "auto" else (args.attack, "as asked (--attack)")
    settings = tuple(args.setting or ("a", "b", "c"))
    privacy = PrivacySection(
        settings=settings,
        attack=attack,
        images=args.images,
        ratio=args.ratio,
        inversion_steps=args.steps,
        lpips_backbone=args.lpips_backbone,
        client_dtype=args.client_dtype,
    )
    shown = f"{args.images} image{'s' * (args.images != 1)} x {len(settings)} setting{'s' * (len(settings) != 1)}"
    work = shown + (f" x {args.steps} steps" if attack == "inversion" else "")
    print(f"attack: {attack} ({work}): {why}", flush=True)
    # one image at a time (batch 1): on a CPU, more threads than the run trained with only
    # contend for the cores (20x slower on a busy 2-core machine for the demo's model)
    torch.set_num_threads(max(1, int(cfg.scaling.cpus_per_worker)))
    images, labels = fixed_images(load_datasets(cfg).val, args.images)
    progress = ProgressLine(f"{attack} attack")
    try:
        seed = eval_seed(cfg) if args.seed is None else args.seed  # the run's own: its logged privacy/* scores again
        metrics, _, notes = run_privacy_eval(trained.model, images, labels, privacy, seed=seed, progress=progress)
    finally:
        progress.close()
    columns = ("mse", "psnr", "ssim", "fft2d", "lpips", "cond")
    rows = [[s] + [f"{metrics[privacy_key(s, m)]:.4g}" if privacy_key(s, m) in metrics else "-" for m in columns] for s in settings]
    print(f"{attack} attack on {args.images} images of {cfg.data.name} ({cfg.model.name} / {cfg.variant})")
    print(markdown_table(["setting", "MSE", "PSNR", "SSIM", "FFT-2D", "LPIPS", "cond"], rows))
    for note in notes:
        print(f"note: {note}")
    return 0
