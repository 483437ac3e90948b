"""Metric keys and the evaluation protocol's constants: the one spelling used by Ray reports,
MLflow and the analysis (run tags and other MLflow names: ``trainables/tracking/schema.py``).

Pure Python (no torch), so the CLI and the analysis can import it without paying for torch.
Accuracies, consistency and error rates are fractions in [0, 1] under these keys; tables print
percentages like the paper.
"""

from __future__ import annotations

# --- per epoch ---------------------------------------------------------------------------------
TRAIN_LOSS = "train/loss"
TRAIN_LOSS_DAL = "train/loss_dal"
TRAIN_LR = "train/lr"
VAL_LOSS = "val/loss"
VAL_TOP1 = "val/top1"
VAL_TOP5 = "val/top5"
PERF_IMG_PER_S = "perf/img_per_s"
PERF_STEP_MS = "perf/step_ms"
#: what ``train_one_epoch`` logs every ``runtime.log_every`` steps, by global step
RUNNING_SUFFIX = "_running"
EPOCH_METRICS: tuple[str, ...] = (TRAIN_LOSS, TRAIN_LOSS_DAL, TRAIN_LR, VAL_LOSS, VAL_TOP1, VAL_TOP5, PERF_IMG_PER_S, PERF_STEP_MS)

# --- once, at the end of training (the paper's evaluation) --------------------------------------
VAL_CONSISTENCY = "val/consistency"
VAL_DIFF_NORM = "val/diff_norm"
#: The paper's protocol for consistency and Diff. Norm (Table 1): a test-time shuffle at ratio 0.5.
CONSISTENCY_RATIO = 0.5
#: Test-time shuffle ratios reported by default (Fig. 3).
SHUFFLE_EVAL_RATIOS: tuple[float, ...] = (0.0, 0.1, 0.3, 0.5, 0.9)

#: the 15 corruptions of ImageNet-C (``imagecorruptions`` spelling, the benchmark's order)
CORRUPTIONS: tuple[str, ...] = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)
#: mCE in percent (100 = as bad as the reference), the robustness literature's unit: normalised by
#: AlexNet's ImageNet-C errors (ImageNet-1K models, all 15 corruptions) / by the study's baseline
#: run (computed by the analysis, for any data)
ROBUST_MCE = "robust/mce"
ROBUST_MCE_RELATIVE = "robust/mce_relative"
#: the mean over corruptions and severities of the error, a fraction (the reference code's "mCE")
ROBUST_MCE_UNNORMALIZED = "robust/mce_unnormalized"
#: error on the uncorrupted images the corruptions were made from, a fraction
ROBUST_CLEAN_ERR = "robust/clean_err"
ROBUST_IMAGENET_A_TOP1 = "robust/imagenet_a_top1"
ROBUST_IMAGENET_A_AURRA = "robust/imagenet_a_aurra"
ROBUST_IMAGENET_O_AUPR = "robust/imagenet_o_aupr"
ROBUST_IMAGENET_R_TOP1 = "robust/imagenet_r_top1"

PE_MAE_1D = "pe/mae_1d"
PE_MAE_2D = "pe/mae_2d"
#: projection dimensions of the explained variance reported by default (Table 6: 3..7)
PE_EV_DIMS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7)


def top1_shuffled_key(ratio: float) -> str:
    """``val/top1_shuffled_<ratio>``, e.g. ``val/top1_shuffled_0.9``."""
    return f"val/top1_shuffled_{ratio:g}"


def privacy_key(setting: str, metric: str) -> str:
    """``privacy/<setting>_<metric>``: setting a, b or c; metric one of the attack's image scores ``mse``, ``psnr``, ``ssim``,
    ``fft2d``, ``lpips`` (only with a local backbone) or ``cond`` (the analytic attack's condition number of the PE-gradient
    matrix, how solvable its linear system was)."""
    return f"privacy/{setting}_{metric}"


def robust_err_key(corruption: str) -> str:
    """``robust/<corruption>_err``: error averaged over the 5 severities."""
    return f"robust/{corruption}_err"


def pe_ev_key(dims: int) -> str:
    """``pe/ev_<k>``: explained variance of the PE at k PCA dimensions."""
    return f"pe/ev_{dims}"
