"""Bad evaluations: the privacy, robustness and PE sections, and `mjp evaluate`."""

from __future__ import annotations

from tests.bad_inputs import TRAIN
from tests.bad_inputs_made import CONFIG, evil_checkpoint, mlflow_store

#: eval sections and `mjp evaluate`
EVALUATION = [
    (
        "april without its block",
        lambda t: TRAIN + ["--set", "eval.privacy={settings: [a]}"],
        "model.april_block=true, or eval.privacy.attack=inversion",
    ),
    (
        "lpips backbone that runs code",
        lambda t: TRAIN + ["--set", "model.april_block=true", "--set", f"eval.privacy={{lpips_backbone: {evil_checkpoint(t)}}}"],
        "eval.privacy.lpips_backbone=",
    ),
    (
        "evaluate weights that run code",
        lambda t: ["evaluate", "--timm", "deit_small_patch16_224", "--pretrained-file", evil_checkpoint(t)],
        "--pretrained-file=",
    ),
    (
        "missing lpips backbone",
        lambda t: TRAIN + ["--set", "model.april_block=true", "--set", "eval.privacy={lpips_backbone: /nope.pth}"],
        "eval.privacy.lpips_backbone='/nope.pth' does not exist",
    ),
    (
        "unknown corruption",
        lambda t: TRAIN + ["--set", "eval.robustness={corruptions: [fogg]}"],
        "unknown corruptions ['fogg'] (did you mean fog?)",
    ),
    (
        "imagenet-a on digits",
        lambda t: TRAIN + ["--set", f"eval.robustness={{imagenet_a_root: {t}}}"],
        "eval.robustness.imagenet_a_root needs a model of the 1000 ImageNet-1K classes, but data.name='digits' has 10",
    ),
    (
        "imagenet-c without a corruption",
        lambda t: TRAIN + ["--set", f"eval.robustness={{imagenet_c_root: {t}}}"],
        "lacks 75 of the <corruption>/<severity> folders",
    ),
    ("pe folds below two", lambda t: TRAIN + ["--set", "eval.pe_analysis={folds: 1}"], "eval.pe_analysis.folds: must be >= 2 (got 1)"),
    (
        "evaluate unknown evaluation",
        lambda t: ["evaluate", "--run", "x", "--what", "pe,robustnes"],
        "--what 'pe,robustnes': unknown 'robustnes'; allowed: a comma-separated subset of shuffle, robustness, pe, privacy",
    ),
    (
        "evaluate weights without timm",
        lambda t: ["evaluate", "--run", "x", "--pretrained-file", CONFIG],
        "--pretrained-file goes with --timm",
    ),
    ("evaluate unknown timm model", lambda t: ["evaluate", "--timm", "deit_smal_patch16_224"], "did you mean deit_small_patch16_224?"),
    (
        "evaluate missing weights",
        lambda t: ["evaluate", "--timm", "deit_small_patch16_224", "--pretrained-file", str(t / "w.pth")],
        "--pretrained-file",
    ),
    (
        "evaluate an unknown run",
        lambda t: ["evaluate", "--run", "0123456789abcdef", "--uri", mlflow_store(t)],
        "no MLflow run with id '0123456789abcdef'",
    ),
]
