"""Masked Jigsaw Puzzle (MJP) position embeddings for Vision Transformers (Ren et al., CVPR 2023), on timm.

Method code only: torch, timm, numpy (and pydantic for the validated config). It never logs,
prints or reads files; every random draw takes an explicit ``torch.Generator``.
"""

from mjp import metrics
from mjp.config import MJPConfig, TABLE4, TABLE4_NAMES
from mjp.jigsaw import JigsawShuffle, jigsaw_permutation, sample_shuffle, shuffle_image_patches, shuffle_tokens
from mjp.masking import sample_block_masks
from mjp.models import MJPMixin, MJPOutput, create_model
from mjp import privacy  # noqa: E402  (after models: it builds on them)

__all__ = [
    "MJPConfig",
    "MJPMixin",
    "MJPOutput",
    "JigsawShuffle",
    "TABLE4",
    "TABLE4_NAMES",
    "create_model",
    "jigsaw_permutation",
    "metrics",
    "privacy",
    "sample_block_masks",
    "sample_shuffle",
    "shuffle_image_patches",
    "shuffle_tokens",
]
