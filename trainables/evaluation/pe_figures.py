"""Figures of the position-embedding analysis (the paper's Fig. 1, 4, 7, 8 and the ViT paper's
cosine-similarity grid). Matplotlib's object API (``Figure``): no pyplot state, no backend."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure


def variance_figure(explained: np.ndarray, energy: np.ndarray, title: str) -> Figure:
    """Explained variance (Definition 1, Table 6) and SVD energy (Fig. 4) against the dimension k.

    ``explained``, ``energy``: cumulative fractions ``[K]``, element k-1 for the top k components.
    """
    fig = Figure(figsize=(4.8, 3.2))
    ax = fig.subplots()
    ks = np.arange(1, len(explained) + 1)
    ax.plot(ks, 100 * explained, marker=".", label="explained variance (PCA, centred)")
    ax.plot(np.arange(1, len(energy) + 1), 100 * energy, marker=".", label="SVD energy (not centred)")
    ax.set_xlabel("dimensions k")
    ax.set_ylabel("cumulative share (%)")
    ax.set_ylim(0, 101)
    ax.set_xlim(0.5, min(len(explained), 32) + 0.5)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def projection_figure(points: np.ndarray, grid: tuple[int, int], title: str, method: str) -> Figure:
    """``points [N, 2 or 3]`` (one per patch position), coloured by row (left) and column (right)."""
    h, w = grid
    index = np.arange(len(points))
    three_d = points.shape[1] == 3
    fig = Figure(figsize=(7.6, 3.6))
    for i, (values, name) in enumerate(((index // w, "row"), (index % w, "column"))):
        ax = fig.add_subplot(1, 2, i + 1, projection="3d" if three_d else None)
        depth: dict[str, Any] = {"zs": points[:, 2]} if three_d else {}  # a 3-D axis takes the third coordinate as zs
        scatter = ax.scatter(
            points[:, 0], points[:, 1], c=values, cmap="viridis", s=14, vmin=0, vmax=(h if name == "row" else w) - 1, **depth
        )
        ax.set_title(f"{method}, coloured by {name}", fontsize=9)
        ax.tick_params(labelsize=6)
        fig.colorbar(scatter, ax=ax, shrink=0.7, label=name)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def mosaic(maps: np.ndarray, pad: int = 1) -> np.ndarray:
    """``maps [H*W, H, W]`` (one map per grid position) tiled on the ``H x W`` grid, ``pad`` NaN
    pixels between tiles: ``[H*(H+pad)-pad, W*(W+pad)-pad]``."""
    n, h, w = maps.shape
    if n != h * w:
        raise ValueError(f"{n} maps for a {h}x{w} grid; one per position ({h * w}) is expected")
    rows, cols = h, w
    out = np.full((rows * (h + pad) - pad, cols * (w + pad) - pad), np.nan)
    for i, tile in enumerate(maps):
        r, c = divmod(i, cols)
        out[r * (h + pad) : r * (h + pad) + h, c * (w + pad) : c * (w + pad) + w] = tile
    return out


def cosine_figure(maps: np.ndarray, title: str) -> Figure:
    """``maps [N, H, W]``: tile (r, c) shows the cosine similarity of position (r, c)'s PE to every
    position (the ViT paper's Fig. 7 layout), drawn as one image."""
    fig = Figure(figsize=(5.4, 5.0))
    ax = fig.subplots()
    image = ax.imshow(mosaic(maps), cmap="viridis", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xticks([]), ax.set_yticks([])
    ax.set_xlabel("input patch column"), ax.set_ylabel("input patch row")
    fig.colorbar(image, ax=ax, shrink=0.8, label="cosine similarity")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def attention_figure(pixels: np.ndarray, attention: np.ndarray, title: str) -> Figure:
    """Images above their last-layer CLS attention (mean over heads), as in the paper's Fig. 8.

    ``pixels [B, H, W, C]`` in [0, 1] (C = 1 or 3); ``attention [B, heads, h, w]``.
    """
    n = len(pixels)
    fig = Figure(figsize=(1.7 * n + 0.6, 3.6))
    axes = fig.subplots(2, n, squeeze=False)
    for i in range(n):
        image = pixels[i].squeeze(-1) if pixels[i].shape[-1] == 1 else pixels[i]
        axes[0, i].imshow(image, cmap="gray" if image.ndim == 2 else None, vmin=0, vmax=1)
        axes[1, i].imshow(attention[i].mean(0), cmap="inferno", interpolation="nearest")
        for ax in axes[:, i]:
            ax.set_xticks([]), ax.set_yticks([])
    axes[0, 0].set_ylabel("image", fontsize=8)
    axes[1, 0].set_ylabel("CLS attention", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig
