"""What a ViT's position embeddings learn: the paper's Table 6, Fig. 1/4/7/8 and supplementary Table 2.

``pe`` is the matrix of the patch rows of a PE, ``[N, D]`` (no CLS row), row-major over the
``H x W`` patch grid, as a tensor or array.

- ``explained_variance(pe, dims)``: Definition 1. PCA of the rows: the share of the variance the
  top-k principal components hold, ``sum_{i<=k} s_i^2 / sum_i s_i^2`` with ``s`` the singular
  values of the centred matrix (Table 6 reports k = 3..7).
- ``svd_energy(pe)``: Fig. 4. The cumulative share of the squared singular values of the PE matrix
  itself (not centred).
- ``position_regression_mae(pe, grid_size)``: supplementary Table 2. Linear regression from a PE
  row to its position, 5-fold cross-validated: 1-D (the index 0..N-1) and 2-D (row and column,
  averaged), mean absolute error in patch-index units.
- ``pca_projection`` (Fig. 1b, 3-D) and ``umap_projection`` (Fig. 1a/7, 2-D, seeded).
- ``cosine_similarity_maps``: each row's cosine similarity to all rows, on the grid (the ViT
  paper's figure, which the poster shows).
- ``cls_attention_maps(model, images)``: Fig. 8. The last block's attention from CLS to every patch,
  per head, recomputed from that block's input (a forward hook on timm's attention module).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:
    from timm.models.vision_transformer import VisionTransformer


def _matrix(pe: torch.Tensor | np.ndarray) -> np.ndarray:
    # analysis of a trained PE with numpy/scikit-learn: one copy to the host, outside any training step
    x = pe.detach().float().cpu().numpy() if isinstance(pe, torch.Tensor) else np.asarray(pe, dtype=np.float64)
    if x.ndim == 3 and x.shape[0] == 1:
        x = x[0]
    if x.ndim != 2:
        raise ValueError(f"pe must be [N, D] (or [1, N, D]), got shape {x.shape}")
    return x.astype(np.float64)


def _grid(grid_size: int | tuple[int, int], n: int) -> tuple[int, int]:
    h, w = (grid_size, grid_size) if isinstance(grid_size, int) else tuple(grid_size)
    if h * w != n:
        raise ValueError(f"grid_size {(h, w)} has {h * w} positions, the PE has {n} rows")
    return h, w


def explained_variance(pe: torch.Tensor | np.ndarray, dims: Iterable[int]) -> dict[int, float]:
    """``{k: fraction of the variance in the top k principal components}`` for each k in ``dims``."""
    x = _matrix(pe)
    s2 = np.linalg.svd(x - x.mean(0), compute_uv=False) ** 2
    total = s2.sum()
    cumulative = np.cumsum(s2) / total if total > 0 else np.ones_like(s2)
    return {int(k): float(cumulative[min(int(k), len(cumulative)) - 1]) for k in dims}


def svd_energy(pe: torch.Tensor | np.ndarray) -> np.ndarray:
    """Cumulative energy ``[min(N, D)]``: element k-1 is the share of the top k squared singular values."""
    s2 = np.linalg.svd(_matrix(pe), compute_uv=False) ** 2
    return np.cumsum(s2) / s2.sum()


def position_regression_mae(
    pe: torch.Tensor | np.ndarray, grid_size: int | tuple[int, int], *, folds: int = 5, seed: int = 0
) -> dict[str, float]:
    """Cross-validated MAE of linear regressions from a PE row to its 1-D index and 2-D position.

    ``seed`` (any int; numpy takes it modulo 2**32) shuffles the rows into ``folds`` folds.
    """
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import KFold, cross_val_predict

    x = _matrix(pe)
    h, w = _grid(grid_size, len(x))
    if len(x) < folds:
        raise ValueError(f"{len(x)} PE rows cannot be split into {folds} folds")
    index = np.arange(len(x), dtype=np.float64)
    position = np.stack([index // w, index % w], axis=1)
    cv = KFold(folds, shuffle=True, random_state=seed % 2**32)
    one = cross_val_predict(LinearRegression(), x, index, cv=cv)
    two = cross_val_predict(LinearRegression(), x, position, cv=cv)
    return {"mae_1d": float(np.abs(one - index).mean()), "mae_2d": float(np.abs(two - position).mean())}


def pca_projection(pe: torch.Tensor | np.ndarray, dims: int = 3) -> np.ndarray:
    """The rows projected on their top ``dims`` principal components: ``[N, dims]``."""
    x = _matrix(pe)
    x = x - x.mean(0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    return x @ vt[:dims].T


def umap_projection(pe: torch.Tensor | np.ndarray, *, seed: int = 0, neighbors: int = 15) -> np.ndarray:
    """A seeded 2-D UMAP embedding of the rows: ``[N, 2]`` (numba compiles on first use: seconds).

    ``seed``: any int (modulo 2**32); a seeded UMAP runs on one thread, so it is reproducible.
    """
    import umap

    x = _matrix(pe)
    reducer = umap.UMAP(n_components=2, n_neighbors=min(neighbors, len(x) - 1), random_state=seed % 2**32, n_jobs=1)
    return reducer.fit_transform(x)


def cosine_similarity_maps(pe: torch.Tensor | np.ndarray, grid_size: int | tuple[int, int]) -> np.ndarray:
    """``[N, H, W]``: map i holds row i's cosine similarity to every position of the grid."""
    x = _matrix(pe)
    h, w = _grid(grid_size, len(x))
    unit = x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)
    return (unit @ unit.T).reshape(len(x), h, w)


@torch.no_grad()
def cls_attention_maps(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The last block's attention from CLS to each patch: ``images [B, C, H, W]`` -> ``[B, heads, h, w]``.

    Needs a timm ViT with a class token. The attention weights are recomputed from the last
    attention module's input (captured by a forward hook) with its own q/k projections,
    normalisations and scale: the same numbers as inside the fused kernel, not a copied forward.
    """
    blocks = getattr(model, "blocks", None)
    attn = getattr(blocks[-1], "attn", None) if blocks is not None else None
    if attn is None or not hasattr(attn, "qkv") or getattr(model, "cls_token", None) is None:
        raise ValueError(f"{type(model).__name__} is not a ViT with a class token and timm's attention")
    vit = cast("VisionTransformer", model)  # what the checks above found: timm's ViT interface
    captured: list[torch.Tensor] = []
    handle = attn.register_forward_hook(lambda module, args, output: captured.append(args[0]))
    was_training = model.training
    model.eval()
    try:
        vit.forward_features(images)
    finally:
        handle.remove()
        model.train(was_training)
    x = captured[-1]
    b, t, _ = x.shape
    qkv = attn.qkv(x).reshape(b, t, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    q, k = attn.q_norm(qkv[0]), attn.k_norm(qkv[1])
    weights = ((q * attn.scale) @ k.transpose(-2, -1)).softmax(-1)
    prefix = getattr(model, "num_prefix_tokens", 1)
    gh, gw = vit.patch_embed.grid_size
    return weights[:, :, 0, prefix:].reshape(b, attn.num_heads, gh, gw)
