"""Everything that can be checked before launch, each failure one ``ConfigError`` line naming
the key, the value and what is allowed: the data is there and readable, the model builds (on the
meta device: no memory, no initialisation), its patch grid fits the images, MJP's ratios select
patches on that grid, and every configured evaluation passes its own check (``check`` of its
entry in ``trainables/evaluation/registry.py``: the evaluations can run on this model and data).
"""

from __future__ import annotations

import functools
import inspect
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainables.config.schema import TrainConfig
from trainables.data.info import DataInfo, check_data, data_info, planned_data_info
from trainables.errors import ConfigError
from trainables.evaluation.registry import check_evaluations
from trainables.evaluation.result import PreflightFacts
from trainables.launch.weights_file import check_weights_file


def _timm_signature_check(name: str, kwargs: dict[str, Any]) -> None:
    """``model.kwargs`` that the timm class does not take, named before timm raises a TypeError."""
    from mjp.models.factory import timm_class

    cls = timm_class(name)
    params = _init_arguments(name)
    if params is None:
        return
    unknown = sorted(set(kwargs) - params)
    if unknown:
        shown = ", ".join(unknown)
        raise ConfigError(
            f"model.kwargs {{{shown}}} are not arguments of {name!r} (a timm {cls.__name__}); "
            f"remove them (--set model.kwargs={{}} clears all) or pick a model that takes them"
        )


@functools.cache
def _init_arguments(name: str) -> frozenset[str] | None:
    """The keyword arguments the timm class of model ``name`` takes (None: any, it has ``**kwargs``)."""
    from mjp.models.factory import timm_class

    params = inspect.signature(timm_class(name).__init__).parameters
    return None if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()) else frozenset(params)


def _positive_int_kwargs(kwargs: dict[str, Any]) -> None:
    """Sizes timm divides by: a zero or a negative one fails deep inside timm (ZeroDivisionError)."""
    for key in ("patch_size", "embed_dim", "depth", "num_heads", "window_size", "depths"):
        value = kwargs.get(key)
        values = value if isinstance(value, (list, tuple)) else [value]  # Swin: one per stage
        if value is not None and any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
            raise ConfigError(
                f"model.kwargs.{key}={value!r}: allowed is a positive integer" + (" per stage" if isinstance(value, (list, tuple)) else "")
            )


def _heads_divide_width(name: str, kwargs: dict[str, Any]) -> None:
    from mjp.models.factory import default_architecture

    arch = default_architecture(name)
    dim, heads = kwargs.get("embed_dim", arch.get("embed_dim")), kwargs.get("num_heads", arch.get("num_heads"))
    if isinstance(dim, int) and isinstance(heads, int) and dim % heads:
        raise ConfigError(
            f"model.kwargs.embed_dim={dim} is not divisible by model.kwargs.num_heads={heads}; "
            f"allowed: an embed_dim that is a multiple of {heads} (e.g. {heads * max(1, dim // heads)}), or num_heads dividing {dim}"
        )


#: ``MJPConfig`` fields that change what MJP does in training, never the modules it builds: configs
#: that differ only in them share one meta model (the mask ratio's own check is ``_ratios_select_patches``)
_NOT_BUILT = frozenset(
    {"mask_ratio", "mask_mode", "min_block_patches", "aspect_ratio", "jigsaw_prob", "unk_init_std", "dal_weight", "dal_schedule"}
    | {"dal_final_weight", "seed"}
)
#: meta models built, by what built them (``_architecture``): a study's thousand values of a
#: learning rate or a mask ratio cost one build, not a thousand (about 40 ms each)
_BUILT: dict[str, tuple[Any, int]] = {}
_BUILT_LIMIT = 64


def _architecture(cfg: TrainConfig, info: DataInfo, with_mjp: bool) -> str:
    """What the meta model of ``cfg`` is built from: the model section, the data's shape and the
    MJP fields other than ``_NOT_BUILT`` (none without MJP)."""
    mjp = cfg.mjp.model_dump(mode="json", exclude=set(_NOT_BUILT)) if with_mjp and cfg.mjp is not None else None
    return json.dumps([cfg.model.model_dump(mode="json"), repr(info.shape), mjp], sort_keys=True, default=str)


def _build_on_meta(cfg: TrainConfig, info: DataInfo, *, with_mjp: bool) -> tuple[Any, int]:
    """``cfg``'s model on the meta device (no memory, no initialisation) and its number of
    parameters, built once per ``_architecture``."""
    key = _architecture(cfg, info, with_mjp)
    if key not in _BUILT:
        if len(_BUILT) >= _BUILT_LIMIT:
            _BUILT.pop(next(iter(_BUILT)))
        model = _build_new_on_meta(cfg, info, with_mjp=with_mjp)
        _BUILT[key] = (model, sum(p.numel() for p in model.parameters()))
    return _BUILT[key]


def _build_new_on_meta(cfg: TrainConfig, info: DataInfo, *, with_mjp: bool):
    import torch

    from trainables.train.engine import build_model

    c = cfg if with_mjp else cfg.model_copy(update={"mjp": None})
    model: dict[str, Any] = {"pretrained_file": None}  # a meta model cannot take weights
    accepted = _init_arguments(cfg.model.name)
    if "weight_init" not in cfg.model.kwargs and accepted is not None and "weight_init" in accepted:  # ViT, Swin: no values to draw
        model["kwargs"] = {**cfg.model.kwargs, "weight_init": "skip"}
    c = c.model_copy(update={"model": c.model.model_copy(update=model)})
    try:
        with torch.device("meta"):
            return build_model(c, info.shape)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _patch_grid_fits(cfg: TrainConfig, info: DataInfo, model: Any) -> None:
    embed = getattr(model, "patch_embed", None)
    size = info.shape.img_size
    if embed is None or getattr(embed, "patch_size", None) is None:
        return
    ph, pw = tuple(embed.patch_size)
    if size % ph or size % pw or size < ph:
        divisors = [d for d in range(1, size + 1) if size % d == 0 and d < size]
        raise ConfigError(
            f"{cfg.model.name} cuts images into {ph}x{pw} patches, which do not tile the {size}x{size} images of "
            f"data.name={cfg.data.name!r}; set model.kwargs.patch_size to a divisor of {size} ({', '.join(map(str, divisors[-4:]))})"
        )


def _ratios_select_patches(cfg: TrainConfig, n: int) -> None:
    """MJP's shuffle ratio against ``mjp.masking.check_grid_ratio`` (the one rule); an evaluation's
    ratios are its own pre-flight check's."""
    from mjp.masking import check_grid_ratio

    if not cfg.mjp.shuffles:
        return
    try:
        check_grid_ratio("mjp.mask_ratio", cfg.mjp.mask_ratio, n)
    except ValueError as err:
        raise ConfigError(str(err)) from None


#: the most memory one layer's attention maps of a worker's batch may take: an 80 GB GPU's (A100/H100)
ATTENTION_BYTES_LIMIT = 80 * 10**9
#: what one CPU core is credited with for attention: generous (this 2-core VM's torch reaches
#: about 5 GFLOP/s a core on 12,544 tokens: 197 s for one step of 2 images), so only hopeless
#: runs are refused
CPU_FLOPS_PER_CORE = 20e9
#: the most seconds one training image's attention may take on a CPU trial at that rate
CPU_SECONDS_PER_IMAGE = 1.0


def _attention_fits(cfg: TrainConfig, model: Any, size: int, patch: int) -> None:
    """A ViT whose global attention over the (``size`` / ``patch``)^2 patches would not fit one layer's attention maps
    ([batch, heads, tokens, tokens] floats) in the memory of any GPU is refused, naming the keys
    that made the tokens, before any training starts (it would otherwise stall or run out of memory).
    A fused attention kernel (timm's default where torch has one) never materialises the maps, but
    its work still grows as tokens^2: such a run would not finish either, so the bound stays.
    A CPU trial is bounded by that work: one image's attention may take ``CPU_SECONDS_PER_IMAGE``
    at ``CPU_FLOPS_PER_CORE`` per core. ``mjp train``, ``mjp sweep run`` and ``mjp sweep plan``
    all refuse through here (``preflight``, ``check_attention``)."""
    blocks = getattr(model, "blocks", None)
    heads = getattr(getattr(blocks[0], "attn", None), "num_heads", None) if blocks is not None and len(blocks) else None
    if blocks is None or heads is None:
        return  # no global attention (ResNet; Swin attends within windows)
    tokens = (size // patch) ** 2
    need = 4 * cfg.data.batch_size * heads * tokens * tokens
    images = f"data.img_size={size}" if cfg.data.img_size is not None else f"{size}x{size} images of data.name={cfg.data.name!r}"
    if need > ATTENTION_BYTES_LIMIT:
        raise ConfigError(
            f"{images} with model.kwargs.patch_size={patch} makes {tokens:,} tokens per image: "
            f"one layer's attention for data.batch_size={cfg.data.batch_size} has {need // 4:,} scores, {need / 2**30:,.0f} GiB "
            "where they are materialised (more than an 80 GB GPU; a fused kernel avoids the memory, not the tokens^2 work); "
            "use a larger model.kwargs.patch_size or a smaller data.img_size"
        )
    if not cfg.scaling.use_gpu:
        dim: int = getattr(model, "embed_dim", 0) or getattr(model, "num_features", 0)
        flops = 12 * len(blocks) * tokens * tokens * dim  # QK^T and AV, 4 T^2 D a layer forward; backward twice that
        seconds = flops / (CPU_FLOPS_PER_CORE * cfg.scaling.cpus_per_worker)
        if seconds > CPU_SECONDS_PER_IMAGE:
            raise ConfigError(
                f"{images} with model.kwargs.patch_size={patch} makes {tokens:,} tokens per image: on a CPU (scaling.use_gpu=false) "
                f"one image's attention, forward and backward, is {flops / 1e9:,.0f} GFLOP, {seconds:,.0f} s of "
                f"scaling.cpus_per_worker={cfg.scaling.cpus_per_worker:g} core(s) even at {CPU_FLOPS_PER_CORE / 1e9:.0f} GFLOP/s each "
                f"(allowed: {CPU_SECONDS_PER_IMAGE:g} s); use a larger model.kwargs.patch_size, a smaller data.img_size "
                "or scaling.use_gpu=true"
            )


def check_attention(cfg: TrainConfig, shape: Any) -> None:
    """``_attention_fits`` for data described by ``shape`` (a ``DataShape``), model built on the meta device."""
    from mjp.metrics import model_patch_size
    from trainables.data.info import DataInfo

    model, _ = _build_on_meta(cfg, DataInfo(shape, 1, 1), with_mjp=False)
    _attention_fits(cfg, model, shape.img_size, model_patch_size(model)[0])


def _loader_fits(cfg: TrainConfig) -> None:
    if cfg.data.loader == "ray_data" and cfg.data.repeated_aug > 1:
        raise ConfigError(
            f"data.repeated_aug={cfg.data.repeated_aug} needs the torch loader's sampler; with data.loader=ray_data set "
            "data.repeated_aug=1 (or use data.loader=torch)"
        )


def _batch_fits(cfg: TrainConfig, info: DataInfo) -> None:
    n = info.train_size if cfg.data.train_limit is None else min(info.train_size, cfg.data.train_limit)
    per_step = cfg.data.batch_size * cfg.scaling.num_workers
    if per_step > n:
        raise ConfigError(
            f"data.batch_size={cfg.data.batch_size} x scaling.num_workers={cfg.scaling.num_workers} = {per_step} images per step, "
            f"but the training set has {n}; allowed: data.batch_size <= {max(1, n // cfg.scaling.num_workers)}"
        )


@dataclass(frozen=True)
class Preflight:
    """What the pre-flight learnt: the data, and the model's size."""

    info: DataInfo
    parameters: int

    @property
    def checkpoint_bytes(self) -> int:
        """A training checkpoint: float32 weights and AdamW's two moments (plus RNG states, small)."""
        return 12 * self.parameters


def check_disk_space(storage: str, checkpoint_bytes: int, what: str) -> None:
    """A local storage folder must hold a few checkpoints (Tune keeps two, one is being written)."""
    if "://" in storage:
        return
    folder = Path(storage)
    while not folder.exists():
        folder = folder.parent
    free, needed = shutil.disk_usage(folder).free, 3 * checkpoint_bytes
    if free < needed:
        raise ConfigError(
            f"{free / 2**20:.0f} MiB free in {folder}, but checkpoints of {what} need about {needed / 2**20:.0f} MiB "
            f"({checkpoint_bytes / 2**20:.0f} MiB each); free some space or give --storage / tracking.storage_path elsewhere"
        )


def preflight(cfg: TrainConfig, *, files: bool = True) -> Preflight:
    """Check ``cfg`` end to end without training; returns what was learnt about data and model.

    ``files=False`` (``mjp sweep plan``, made where the cluster's data may be absent) takes a
    dataset's published figures where its files cannot be read here and skips the checks that
    read files (data, weights, evaluation folders); every other check is the same."""
    _loader_fits(cfg)
    if files:
        check_data(cfg)
        info = data_info(cfg)
    else:
        info = planned_data_info(cfg)[0]
    _batch_fits(cfg, info)
    from mjp.models.factory import timm_class

    try:
        timm_class(cfg.model.name)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    _positive_int_kwargs(cfg.model.kwargs)
    _timm_signature_check(cfg.model.name, cfg.model.kwargs)
    _heads_divide_width(cfg.model.name, cfg.model.kwargs)
    if files and cfg.model.pretrained_file:
        check_weights_file("model.pretrained_file", cfg.model.pretrained_file)
    _patch_grid_fits(cfg, info, _build_on_meta(cfg, info, with_mjp=False)[0])
    model, parameters = _build_on_meta(cfg, info, with_mjp=True)
    from mjp.metrics import model_patch_size

    patch = model_patch_size(model)
    size = info.shape.img_size
    if size % patch[0] or size % patch[1]:
        raise ConfigError(
            f"{size}x{size} images do not split into {patch[0]}x{patch[1]} jigsaw patches; set mjp.patch_size (ResNet) or "
            f"model.kwargs.patch_size to a divisor of {size}"
        )
    patches = (size // patch[0]) * (size // patch[1])
    _ratios_select_patches(cfg, patches)
    _attention_fits(cfg, model, size, patch[0])
    check_evaluations(cfg, PreflightFacts(info, model, patches, files, check_weights_file))
    return Preflight(info, parameters)
