"""Masked Jigsaw Puzzle (MJP) position embeddings for Vision Transformers (Ren et al., CVPR 2023), on timm.

Method code only: torch, timm, numpy (and pydantic for the validated config). It never logs,
prints or reads files; every random draw takes an explicit ``torch.Generator`` or seed.

The package is lazy: ``import mjp`` costs nothing, and ``mjp.create_model`` imports torch and timm
on first use. Light modules (``mjp.config``, ``mjp.keys``) can be imported by tools that must
start fast (the CLI, the analysis) without paying for torch.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "MJPConfig": "mjp.config",
    "TABLE4": "mjp.config",
    "TABLE4_NAMES": "mjp.config",
    "JigsawShuffle": "mjp.jigsaw",
    "jigsaw_permutation": "mjp.jigsaw",
    "sample_shuffle": "mjp.jigsaw",
    "shuffle_image_patches": "mjp.jigsaw",
    "shuffle_tokens": "mjp.jigsaw",
    "sample_block_masks": "mjp.masking",
    "MJPMixin": "mjp.models",
    "MJPOutput": "mjp.models",
    "create_model": "mjp.models",
}
_SUBMODULES = ("config", "keys", "metrics", "privacy", "robustness", "pe_analysis", "models", "dal", "jigsaw", "masking", "pos_embed")

__all__ = sorted(_EXPORTS) + list(_SUBMODULES)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"mjp.{name}")
    raise AttributeError(f"module 'mjp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
