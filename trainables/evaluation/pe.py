"""The position-embedding step of a run (``eval.pe_analysis``): what the PE learnt.

Metrics ``pe/ev_<k>`` (Table 6), ``pe/mae_1d`` / ``pe/mae_2d`` (supplementary Table 2) and the
figures: explained variance and SVD energy (Fig. 4), PCA 3-D and UMAP 2-D projections coloured
by row and column (Fig. 1/7), cosine-similarity maps, and last-layer CLS attention on the first
validation images (Fig. 8). A model without an absolute PE (variant B, ResNet) has none of them,
with the reason in the notes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from mjp import keys
from mjp.models.base import MJPMixin
from trainables.config.schema import TrainConfig
from trainables.data.datasets import DatasetBundle, fixed_images
from trainables.evaluation.result import EvaluationResult, eval_seed, given


def pe_rows(model: nn.Module) -> tuple[torch.Tensor, tuple[int, int]] | None:
    """The patch rows of a model's absolute PE, ``[N, D]``, and its ``(H, W)`` grid; None without one.

    MJP models say where their rows are (``mjp_pe_rows``); a plain timm ViT keeps them after its
    prefix tokens in ``pos_embed`` (unless ``no_embed_class``).
    """
    rows: torch.Tensor | None
    if isinstance(model, MJPMixin):
        rows, grid = model.mjp_pe_rows(), model.mjp_grid
    elif isinstance(pos_embed := getattr(model, "pos_embed", None), torch.Tensor) and hasattr(model, "patch_embed"):
        start = 0 if getattr(model, "no_embed_class", False) else getattr(model, "num_prefix_tokens", 1)
        patch_embed: Any = model.patch_embed
        h, w = patch_embed.grid_size
        rows, grid = pos_embed[:, start:], (h, w)
    else:
        return None
    if rows is None:
        return None
    return rows.detach().float().cpu().reshape(-1, rows.shape[-1]), grid


def pe_evaluation(cfg: TrainConfig, model: nn.Module, bundle: DatasetBundle | None, device: torch.device, title: str) -> EvaluationResult:
    """Everything ``eval.pe_analysis`` asks for; ``bundle`` gives the attention maps' images."""
    from mjp import pe_analysis
    from trainables.evaluation import pe_figures

    section = given(cfg.eval.pe_analysis, "eval.pe_analysis")
    result = EvaluationResult()
    found = pe_rows(model)
    if found is None:
        result.notes.append(f"{cfg.model.name} / {cfg.variant} has no absolute position embedding: no PE analysis")
        return result
    pe, grid = found
    top = min(pe.shape)
    explained = pe_analysis.explained_variance(pe, range(1, top + 1))
    result.metrics.update({keys.pe_ev_key(k): explained[min(k, top)] for k in section.dims})
    seed = eval_seed(cfg)
    if len(pe) >= section.folds:
        mae = pe_analysis.position_regression_mae(pe, grid, folds=section.folds, seed=seed)
        result.metrics.update({keys.PE_MAE_1D: mae["mae_1d"], keys.PE_MAE_2D: mae["mae_2d"]})
    else:
        result.notes.append(f"{len(pe)} PE rows are too few for {section.folds}-fold position regression")
    result.figures.append(
        (
            pe_figures.variance_figure(np.array(list(explained.values())), pe_analysis.svd_energy(pe), f"{title}: PE spectrum"),
            "pe/explained_variance.png",
        )
    )
    result.figures.append(
        (pe_figures.projection_figure(pe_analysis.pca_projection(pe, 3), grid, f"{title}: PE rows", "PCA 3-D"), "pe/pca_3d.png")
    )
    if section.umap:
        result.figures.append(
            (
                pe_figures.projection_figure(pe_analysis.umap_projection(pe, seed=seed), grid, f"{title}: PE rows", "UMAP 2-D"),
                "pe/umap_2d.png",
            )
        )
    result.figures.append(
        (
            pe_figures.cosine_figure(pe_analysis.cosine_similarity_maps(pe, grid), f"{title}: cosine similarity of position embeddings"),
            "pe/cosine_similarity.png",
        )
    )
    if section.attention_images and bundle is not None:
        attention_figure(result, model, bundle, section.attention_images, device, title)
    return result


def attention_figure(
    result: EvaluationResult, model: nn.Module, bundle: DatasetBundle, count: int, device: torch.device, title: str
) -> None:
    from mjp.pe_analysis import cls_attention_maps
    from trainables.evaluation.pe_figures import attention_figure as draw

    images, _ = fixed_images(bundle.val, count)
    try:
        maps = cls_attention_maps(model, images.to(device))
    except ValueError as err:
        result.notes.append(f"no CLS attention maps: {err}")
        return
    pixels = bundle.pixels.to_pixels(images).permute(0, 2, 3, 1).cpu().numpy()
    result.figures.append((draw(pixels, maps.float().cpu().numpy(), f"{title}: last-layer CLS attention"), "pe/cls_attention.png"))
