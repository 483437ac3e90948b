"""Robustness of a model (the paper's Table 2 and supplementary Table 4): ImageNet-C corruptions
made on the fly or read from a folder, mCE (normalised by AlexNet, by a baseline, or not), and
ImageNet-A/O/R measures. Functions take arrays and models; they never read files or log.

Lazy, like ``mjp``: the mCE arithmetic (``mjp.robustness.mce``) imports numpy only, so the
analysis can use it without torch; ``corrupt`` imports torch on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from mjp.keys import CORRUPTIONS
from mjp.robustness.mce import ALEXNET_ERRORS, corruption_errors, mce  # numpy only; binds `mce` to the function, not its module

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "SEVERITIES": "mjp.robustness.corruptions",
    "corrupt": "mjp.robustness.corruptions",
    "aupr_ood": "mjp.robustness.detection",
    "aurra": "mjp.robustness.detection",
    "class_subset_indices": "mjp.robustness.detection",
    "imagenet_synsets": "mjp.robustness.detection",
}

__all__ = ["ALEXNET_ERRORS", "CORRUPTIONS", "corruption_errors", "mce", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'mjp.robustness' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
