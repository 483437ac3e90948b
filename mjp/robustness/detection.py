"""ImageNet-A, -O and -R measures (Hendrycks et al., 2021), with the paper's protocol.

- The 200 classes of each set are a subset of ImageNet-1K's; a model's 1000 logits are masked to
  them (``class_subset_indices`` from the set's own class folders, in timm's ImageNet order).
- ImageNet-A: top-1 on the masked logits, and AURRA: the mean, over k, of the accuracy of the k
  images the model is most confident about (confidence: the maximum softmax probability).
- ImageNet-O: out-of-distribution detection with the maximum softmax probability against
  ImageNet validation images of the same 200 classes; AUPR with ImageNet-O as the positive class
  and ``-confidence`` as the score (scikit-learn's average precision).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def imagenet_synsets() -> list[str]:
    """The 1000 ImageNet-1K wnids in the order of a model's logits (timm's list)."""
    import timm.data

    return (Path(timm.data.__file__).parent / "_info" / "imagenet_synsets.txt").read_text().split()


def class_subset_indices(classes: Sequence[str]) -> list[int]:
    """Logit indices of ``classes`` (wnids, e.g. a dataset's class folders), in their order."""
    order = {wnid: i for i, wnid in enumerate(imagenet_synsets())}
    unknown = [c for c in classes if c not in order]
    if unknown:
        raise ValueError(f"classes {unknown[:5]} are not ImageNet-1K wnids (expected folders named like n01498041)")
    return [order[c] for c in classes]


def aurra(confidence: np.ndarray, correct: np.ndarray) -> float:
    """Area under the response-rate accuracy curve: accuracy of the k most confident, averaged over k."""
    confidence, correct = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    if confidence.shape != correct.shape or confidence.ndim != 1 or len(confidence) == 0:
        raise ValueError("confidence and correct must be two 1-D arrays of the same, non-zero length")
    ranked = correct[np.argsort(-confidence, kind="stable")]
    return float(np.mean(np.cumsum(ranked) / np.arange(1, len(ranked) + 1)))


def aupr_ood(confidence_in: np.ndarray, confidence_out: np.ndarray) -> float:
    """AUPR of detecting the out-of-distribution images by their low maximum softmax probability."""
    from sklearn.metrics import average_precision_score

    scores = -np.concatenate([np.asarray(confidence_out, float), np.asarray(confidence_in, float)])
    labels = np.concatenate([np.ones(len(confidence_out)), np.zeros(len(confidence_in))])
    return float(average_precision_score(labels, scores))
