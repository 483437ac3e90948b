"""The robustness step of a run (``eval.robustness``): corruption errors and mCE, ImageNet-A/O/R.

Corruptions are made from the first ``eval.robustness.images`` validation images (a fixed set),
taken back to pixels with the data's normalisation, corrupted at every severity (seeded from
``eval.seed``), normalised again and classified; several CPUs share the corrupting (spawned
processes: a Ray worker must not fork). Where a pre-made ImageNet-C folder is given it is read
instead. mCE is logged unnormalised for every dataset, normalised by AlexNet's errors only for
ImageNet-1K models with all 15 corruptions; relative to the study's baseline run, the analysis
computes it (``robust/mce_relative``). A set whose folder is not configured is absent, with the
reason in the run's notes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from mjp import keys
from trainables.config.schema import TrainConfig
from trainables.data.datasets import DatasetBundle, fixed_images
from trainables.errors import ConfigError
from trainables.evaluation.result import EvaluationResult, PreflightFacts, eval_seed, given

BATCH = 256


@dataclass
class RobustnessResult:
    metrics: dict[str, float] = field(default_factory=dict)
    errors: dict[str, list[float]] = field(default_factory=dict)  # corruption -> errors at severities 1..5
    notes: list[str] = field(default_factory=list)


@torch.no_grad()
def predictions(model: nn.Module, inputs: Any, device: torch.device, subset: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(predicted class, maximum softmax probability) per image; ``subset`` masks the logits to
    those classes (ImageNet-A/O/R) and predicts an index into it. ``inputs``: a tensor or a loader."""
    batches = (inputs[i : i + BATCH] for i in range(0, len(inputs), BATCH)) if isinstance(inputs, torch.Tensor) else (x for x, _ in inputs)
    model.eval()
    classes, confidence = [], []
    for x in batches:
        logits = model(x.to(device)).float()
        if subset is not None:
            logits = logits[:, subset]
        p = logits.softmax(-1)
        confidence.append(p.max(-1).values.cpu().numpy())
        classes.append(p.argmax(-1).cpu().numpy())
    return np.concatenate(classes), np.concatenate(confidence)


def _corrupt_task(job: tuple[torch.Tensor, str, int, int]) -> tuple[str, int, torch.Tensor]:
    from mjp.robustness import corrupt

    pixels, corruption, severity, seed = job
    return corruption, severity, corrupt(pixels, corruption, severity, seed=seed)


def corrupted_sets(pixels: torch.Tensor, corruptions: tuple[str, ...], seed: int, workers: int) -> Iterator[tuple[str, int, torch.Tensor]]:
    """Every (corruption, severity) of ``pixels [N, C, H, W]`` in [0, 1], corrupted."""
    jobs = [(pixels, c, s, seed) for c in corruptions for s in (1, 2, 3, 4, 5)]
    if workers <= 1:
        yield from map(_corrupt_task, jobs)
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        yield from pool.map(_corrupt_task, jobs)


def made_corruption_errors(
    cfg: TrainConfig, model: nn.Module, bundle: DatasetBundle, device: torch.device
) -> tuple[dict[str, list[float]], float, int]:
    """Errors per corruption and severity on corrupted validation images, the clean error, and the
    number of images."""
    r = given(cfg.eval.robustness, "eval.robustness")
    images, labels = fixed_images(bundle.val, r.images)
    truth = labels.cpu().numpy()
    clean = float((predictions(model, images, device)[0] != truth).mean())
    workers = r.workers or max(1, int(cfg.scaling.cpus_per_worker))
    errors: dict[str, list[float]] = {c: [0.0] * 5 for c in r.corruptions}
    for corruption, severity, corrupted in corrupted_sets(bundle.pixels.to_pixels(images), r.corruptions, eval_seed(cfg), workers):
        predicted, _ = predictions(model, bundle.pixels.to_inputs(corrupted), device)
        errors[corruption][severity - 1] = float((predicted != truth).mean())
    return errors, clean, len(truth)


def _folder(root: str | Path, transform: Any) -> Any:
    from torchvision.datasets import ImageFolder

    from trainables.data.folder.image_folder import readable_loader

    return ImageFolder(str(root), transform=transform, loader=readable_loader)


def _loader(dataset: Dataset, workers: int) -> DataLoader:
    return DataLoader(dataset, batch_size=BATCH, shuffle=False, num_workers=workers)


def imagenet_c_errors(cfg: TrainConfig, model: nn.Module, device: torch.device) -> dict[str, list[float]]:
    """Errors read from a pre-made ImageNet-C folder (its 224 px crops, normalised as ImageNet)."""
    from torchvision import transforms

    r = given(cfg.eval.robustness, "eval.robustness")
    to_input = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    errors: dict[str, list[float]] = {}
    for corruption in r.corruptions:
        errors[corruption] = []
        for severity in (1, 2, 3, 4, 5):
            ds = _folder(Path(given(r.imagenet_c_root, "eval.robustness.imagenet_c_root")) / corruption / str(severity), to_input)
            predicted, _ = predictions(model, _loader(ds, cfg.data.loader_workers), device)
            errors[corruption].append(float((predicted != np.asarray(ds.targets)).mean()))
    return errors


def natural_sets(cfg: TrainConfig, model: nn.Module, device: torch.device) -> tuple[dict[str, float], list[str]]:
    """ImageNet-A (top-1, AURRA), -O (AUPR against ImageNet val) and -R (top-1), where configured."""
    from mjp.robustness import aupr_ood, aurra, class_subset_indices
    from trainables.data.transforms import image_transforms

    r = given(cfg.eval.robustness, "eval.robustness")
    transform = image_transforms(cfg.data, cfg.data.img_size or 224, False)
    metrics, notes = {}, []
    for name, root, keys_ in (
        ("ImageNet-A", r.imagenet_a_root, (keys.ROBUST_IMAGENET_A_TOP1, keys.ROBUST_IMAGENET_A_AURRA)),
        ("ImageNet-R", r.imagenet_r_root, (keys.ROBUST_IMAGENET_R_TOP1,)),
    ):
        if root is None:
            notes.append(f"{name}: absent (no eval.robustness.{name.lower().replace('-', '_')}_root given)")
            continue
        ds = _folder(root, transform)
        predicted, confidence = predictions(model, _loader(ds, cfg.data.loader_workers), device, class_subset_indices(ds.classes))
        correct = predicted == np.asarray(ds.targets)
        metrics[keys_[0]] = float(correct.mean())
        if len(keys_) > 1:
            metrics[keys_[1]] = aurra(confidence, correct)
    if r.imagenet_o_root is None:
        notes.append("ImageNet-O: absent (no eval.robustness.imagenet_o_root given)")
    else:
        out = _folder(r.imagenet_o_root, transform)
        subset = class_subset_indices(out.classes)
        inside = _folder(Path(given(cfg.data.root, "data.root")) / "val", transform)
        wanted = set(out.classes)
        keep = [i for i, (_, label) in enumerate(inside.samples) if inside.classes[label] in wanted]
        _, conf_in = predictions(model, _loader(torch.utils.data.Subset(inside, keep), cfg.data.loader_workers), device, subset)
        _, conf_out = predictions(model, _loader(out, cfg.data.loader_workers), device, subset)
        metrics[keys.ROBUST_IMAGENET_O_AUPR] = aupr_ood(conf_in, conf_out)
    return metrics, notes


def robustness_step(cfg: TrainConfig, model: nn.Module, bundle: DatasetBundle, device: torch.device) -> RobustnessResult:
    from mjp.robustness import mce

    r = given(cfg.eval.robustness, "eval.robustness")
    result = RobustnessResult()
    if r.imagenet_c_root:
        result.errors = imagenet_c_errors(cfg, model, device)
    else:
        result.errors, clean, count = made_corruption_errors(cfg, model, bundle, device)
        result.metrics[keys.ROBUST_CLEAN_ERR] = clean
        result.notes.append(f"corruptions made from the first {count} validation images ({bundle.shape.img_size}x{bundle.shape.img_size})")
    result.metrics.update({keys.robust_err_key(c): float(np.mean(e)) for c, e in result.errors.items()})
    result.metrics[keys.ROBUST_MCE_UNNORMALIZED] = mce(result.errors, baseline=None) / 100
    if bundle.shape.num_classes == 1000 and set(r.corruptions) == set(keys.CORRUPTIONS):
        result.metrics[keys.ROBUST_MCE] = mce(result.errors)
    else:
        result.notes.append(
            "mCE normalised by AlexNet's ImageNet-C errors needs an ImageNet-1K model and all 15 corruptions: not logged; the analysis "
            "reports mCE relative to the study's baseline"
        )
    if bundle.shape.num_classes == 1000:
        natural, notes = natural_sets(cfg, model, device)
        result.metrics.update(natural)
        result.notes += notes
    else:
        result.notes.append("ImageNet-A/O/R: absent (they need an ImageNet-1K model)")
    return result


def errors_json(result: RobustnessResult) -> str:
    return json.dumps({"errors_by_severity": result.errors, "metrics": result.metrics, "notes": result.notes}, indent=2)


def robustness_evaluation(cfg: TrainConfig, model: nn.Module, bundle: DatasetBundle, device: torch.device, title: str) -> EvaluationResult:
    """Everything ``eval.robustness`` asks for, with the errors by severity as a figure and JSON."""
    from trainables.evaluation.figures import corruption_figure

    result = robustness_step(cfg, model, bundle, device)
    return EvaluationResult(
        result.metrics,
        [(corruption_figure(result.errors, f"{title}: corruption error by severity"), "robustness/errors_by_severity.png")],
        [(errors_json(result), "robustness/errors.json")],
        result.notes,
    )


def _class_folders(key: str, root: str) -> list[str]:
    """The class folders of an ImageNet-A/O/R copy, which must be ImageNet-1K wnids."""
    from mjp.robustness import imagenet_synsets

    folder = Path(root)
    if not folder.is_dir():
        raise ConfigError(
            f"{key}={root!r} is not a directory; allowed: a folder of <wnid>/<image> (or leave it unset: the metric is then absent)"
        )
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    known = set(imagenet_synsets())
    strange = [c for c in classes if c not in known]
    if not classes or strange:
        raise ConfigError(
            f"{key}={root!r}: expected class folders named by ImageNet-1K wnids (e.g. n01498041), found {strange[:3] or 'none'}"
        )
    return classes


def robustness_preflight(cfg: TrainConfig, facts: PreflightFacts) -> None:
    """The folders ``eval.robustness`` names exist (where files are read) and fit the model, before any training."""
    r = given(cfg.eval.robustness, "eval.robustness")
    if facts.files and r.imagenet_c_root is not None:
        root = Path(r.imagenet_c_root)
        absent = [f"{c}/{s}" for c in r.corruptions for s in range(1, 6) if not (root / c / str(s)).is_dir()]
        if absent:
            raise ConfigError(
                f"eval.robustness.imagenet_c_root={r.imagenet_c_root!r} lacks {len(absent)} of the <corruption>/<severity> folders the "
                f"config asks for, e.g. {', '.join(absent[:3])}; give the corruptions it has in eval.robustness.corruptions"
            )
    sets = {
        k: v
        for k, v in (("imagenet_a_root", r.imagenet_a_root), ("imagenet_o_root", r.imagenet_o_root), ("imagenet_r_root", r.imagenet_r_root))
        if v is not None
    }
    if sets and facts.info.shape.num_classes != 1000:
        raise ConfigError(
            f"eval.robustness.{next(iter(sets))} needs a model of the 1000 ImageNet-1K classes, but data.name={cfg.data.name!r} has "
            f"{facts.info.shape.num_classes}; remove it"
        )
    if not facts.files:
        return
    for key, folder in sets.items():
        _class_folders(f"eval.robustness.{key}", folder)
    if r.imagenet_o_root is not None and not (cfg.data.root and (Path(cfg.data.root) / "val").is_dir()):
        raise ConfigError(
            f"eval.robustness.imagenet_o_root: ImageNet-O is scored against ImageNet's validation images, but data.root={cfg.data.root!r} "
            "has no val/ folder"
        )
