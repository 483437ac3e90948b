"""Robustness of a model (the paper's Table 2 and supplementary Table 4): ImageNet-C corruptions
made on the fly or read from a folder, mCE (normalised by AlexNet, by a baseline, or not), and
ImageNet-A/O/R measures. Functions take arrays and models; they never read files or log."""

from mjp.robustness.corruptions import CORRUPTIONS, SEVERITIES, corrupt
from mjp.robustness.detection import aupr_ood, aurra, class_subset_indices, imagenet_synsets
from mjp.robustness.mce import ALEXNET_ERRORS, corruption_errors, mce

__all__ = ["ALEXNET_ERRORS", "CORRUPTIONS", "SEVERITIES", "aupr_ood", "aurra", "class_subset_indices", "corrupt", "corruption_errors", "imagenet_synsets", "mce"]
