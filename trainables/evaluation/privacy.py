"""The privacy step of a run: attack the first val images in each Table 5 setting, score them,
and draw originals above reconstructions. Used at the end of training and by ``mjp attack``."""

from __future__ import annotations

from collections.abc import Callable

import torch
from matplotlib.figure import Figure
from torch import nn
from torch.utils.data import Dataset

from mjp.keys import privacy_key
from mjp.privacy import LPIPS, LPIPS_MISSING, AttackResult, april_requirements, attack_images, attack_units
from trainables.config.schema import PrivacySection, TrainConfig
from trainables.data.datasets import DatasetBundle, fixed_images
from trainables.errors import ConfigError
from trainables.evaluation.result import EvaluationResult, PreflightFacts, eval_seed, given


def privacy_units(cfg: PrivacySection, images: int) -> int:
    """How many units of work ``run_privacy_eval`` reports through ``progress`` in all."""
    return len(cfg.settings) * attack_units(cfg.attack, images, cfg.inversion_steps)


def run_privacy_eval(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    cfg: PrivacySection,
    *,
    seed: int = 0,
    dal_weight: float = 0.0,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, float], dict[str, AttackResult], list[str]]:
    """Metrics ``privacy/<setting>_<metric>``, the per-setting results, and notes (absent metrics).
    ``progress(done, total)``: after each unit of work (an image for APRIL, a step for inversion)."""
    lpips = LPIPS(cfg.lpips_backbone) if cfg.lpips_backbone else None
    notes = [] if lpips else [LPIPS_MISSING]
    metrics: dict[str, float] = {}
    results: dict[str, AttackResult] = {}
    total, done = privacy_units(cfg, images.shape[0]), 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    for setting in cfg.settings:
        result = attack_images(
            model,
            images,
            labels,
            setting,
            attack=cfg.attack,
            ratio=cfg.ratio,
            generator=torch.Generator().manual_seed(seed),
            dal_weight=dal_weight,
            inversion_steps=cfg.inversion_steps,
            lpips=lpips,
            client_dtype=torch.float64 if cfg.client_dtype == "float64" else torch.float32,
            on_progress=tick if progress else None,
        )
        results[setting] = result
        metrics.update({privacy_key(setting, k): v for k, v in result.scores.items()})
    return metrics, results, notes


def privacy_step(
    cfg: TrainConfig, model: nn.Module, val_set: Dataset, device: torch.device, title: str
) -> tuple[dict[str, float], Figure, list[str]]:
    """The configured attacks on the first ``eval.privacy.images`` val images; scores, grid, notes."""
    privacy = given(cfg.eval.privacy, "eval.privacy")
    images, labels = fixed_images(val_set, privacy.images)
    metrics, results, notes = run_privacy_eval(model, images.to(device), labels.to(device), privacy, seed=eval_seed(cfg))
    return metrics, reconstruction_grid(results, f"{title}: {privacy.attack} attack"), notes


def reconstruction_grid(results: dict[str, AttackResult], title: str) -> Figure:
    """Per setting, targets above reconstructions (tensors on any device)."""
    settings = list(results)
    n = results[settings[0]].targets.shape[0]
    fig = Figure(figsize=(1.3 * n, 2.7 * len(settings)))
    axes = fig.subplots(2 * len(settings), n, squeeze=False)
    for row, setting in enumerate(settings):
        r = results[setting]
        for i in range(n):
            for k, (img, what) in enumerate([(r.targets[i], "target"), (r.reconstructions[i], "recon")]):
                ax = axes[2 * row + k, i]
                pixels = img.detach().float().cpu().permute(1, 2, 0).squeeze(-1).numpy()
                ax.imshow(pixels, cmap="gray" if img.shape[0] == 1 else None, vmin=0, vmax=1)
                ax.set_xticks([]), ax.set_yticks([])
                if i == 0:
                    ax.set_ylabel(f"({setting}) {what}", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def privacy_evaluation(cfg: TrainConfig, model: nn.Module, bundle: DatasetBundle, device: torch.device, title: str) -> EvaluationResult:
    """The configured attacks, with the grid of reconstructions as a figure."""
    scores, grid, notes = privacy_step(cfg, model, bundle.val, device, title)
    return EvaluationResult(scores, [(grid, "privacy_reconstructions.png")], notes=notes)


def privacy_preflight(cfg: TrainConfig, facts: PreflightFacts) -> None:
    """``eval.privacy.ratio`` selects patches, APRIL can attack the model as built, and the LPIPS
    backbone is a weights file (where files are read)."""
    privacy = given(cfg.eval.privacy, "eval.privacy")
    facts.check_ratio("eval.privacy.ratio", privacy.ratio)
    if privacy.attack == "april":
        why = april_requirements(facts.model)
        if why:
            raise ConfigError(
                f"eval.privacy.attack='april' cannot attack {cfg.model.name}: {why} (model.april_block=true, or "
                "eval.privacy.attack=inversion)"
            )
    if facts.files and privacy.lpips_backbone:
        facts.check_weights_file("eval.privacy.lpips_backbone", privacy.lpips_backbone)
