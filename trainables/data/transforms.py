"""The CPU path's image transforms: timm's DeiT training recipe (RandAugment capped at the magnitude
its docs allow) and the evaluation resize and centre crop."""

from __future__ import annotations

from typing import Any

from trainables.config.schema import DataSection

#: DeiT's RandAugment magnitudes are N(9, 0.5) clipped to [0, 10]. At 10 its increasing posterize
#: keeps 4 - int(10 / 10 * 4) = 0 bits: older Pillow made that a black image, Pillow >= 11 raises
#: "bits must be between or equal to 1 and 8" (about 1 image in 300, so nearly every ImageNet
#: epoch). Clipping just below 10 keeps one bit there and leaves every other op as it was.
RAND_AUGMENT_MAX_MAGNITUDE = 9.999


def _cap_rand_augment(transform: Any) -> Any:
    """``transform`` with its RandAugment ops' magnitude capped at ``RAND_AUGMENT_MAX_MAGNITUDE``."""
    from timm.data.auto_augment import RandAugment

    for step in getattr(transform, "transforms", []):
        if isinstance(step, RandAugment):
            for op in step.ops:
                op.magnitude_max = RAND_AUGMENT_MAX_MAGNITUDE
    return transform


def image_transforms(cfg: DataSection, img_size: int, train: bool):
    """timm's transform for ``cfg.augment`` (DeiT's recipe, a small one, or the eval resize + crop).
    DeiT erases with per-pixel normal noise (``re_mode="pixel"``), as ``data.decode: gpu`` does."""
    from timm.data import create_transform

    if cfg.augment == "deit" and train:
        return _cap_rand_augment(
            create_transform(
                img_size, is_training=True, auto_augment="rand-m9-mstd0.5-inc1", re_prob=0.25, re_mode="pixel", interpolation="bicubic"
            )
        )
    if cfg.augment == "small" and train:
        return create_transform(
            img_size,
            is_training=True,
            auto_augment=None,
            re_prob=0.0,
            color_jitter=None,  # type: ignore[arg-type]  # timm types it without None, but its code reads None as "no jitter"
            interpolation="bicubic",
        )
    return create_transform(img_size, is_training=False, interpolation="bicubic", crop_pct=0.875 if img_size >= 64 else 1.0)
