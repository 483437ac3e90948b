"""``create_model``: a timm model, upgraded in place to its MJP family class.

timm builds the model (its init, its pretrained weights, its kwargs); MJP then swaps the class for
the MJP subclass of the same timm class and adds its own ``mjp_*`` parameters after timm's init,
so with MJP off the model is timm's, bit for bit, and every timm checkpoint loads.
"""

from __future__ import annotations

import difflib
import functools
from typing import Any, cast

import timm
import torch
from timm.layers import PatchEmbed
from timm.models.resnet import ResNet
from timm.models.swin_transformer import SwinTransformer
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from mjp.config import MJPConfig
from mjp.masking import check_grid_ratio
from mjp.models.april_block import use_april_block
from mjp.models.base import MJPMixin
from mjp.models.resnet import MJPResNet
from mjp.models.swin import MJPSwinTransformer
from mjp.models.vit import MJPVisionTransformer

#: timm class -> its MJP class. Exact classes only: subclasses (distilled DeiT, ...) change the
#: forward in ways MJP does not know about.
FAMILIES: dict[type[nn.Module], type[nn.Module]] = {
    VisionTransformer: MJPVisionTransformer,
    SwinTransformer: MJPSwinTransformer,
    ResNet: MJPResNet,
}


def _build_timm(name: str, timm_kwargs: dict[str, Any]) -> nn.Module:
    if not timm.is_model(name):
        close = difflib.get_close_matches(name, timm.list_models(), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(f"model.name={name!r} is not a timm model{hint}; see timm.list_models()")
    try:
        return timm.create_model(name, **timm_kwargs)
    except (TypeError, RuntimeError, AssertionError, ValueError, ZeroDivisionError) as err:
        shown = ", ".join(f"{k}={v!r}" for k, v in timm_kwargs.items()) or "no arguments"
        raise ValueError(f"timm could not build {name!r} with {shown}: {type(err).__name__}: {err}") from err


@functools.cache
def _default_model(name: str) -> nn.Module:
    with torch.device("meta"):  # no memory, no initialisation
        return _build_timm(name, {})


def timm_class(name: str) -> type[nn.Module]:
    """The class timm builds for ``name``; ``ValueError`` for an unknown name."""
    return type(_default_model(name))


def default_architecture(name: str) -> dict[str, Any]:
    """``embed_dim`` and ``num_heads`` of timm model ``name`` with its default arguments (ViTs)."""
    model = _default_model(name)
    out: dict[str, Any] = {}
    if isinstance(getattr(model, "embed_dim", None), int):
        out["embed_dim"] = model.embed_dim
    blocks = getattr(model, "blocks", None)
    if blocks is not None and len(blocks) and hasattr(blocks[0], "attn"):
        out["num_heads"] = blocks[0].attn.num_heads
    return out


def takes_image_size(name: str) -> bool:
    """Whether timm model ``name`` is built for an input size (ViT, Swin) or takes any (CNNs)."""
    return issubclass(timm_class(name), (VisionTransformer, SwinTransformer))


def _check_grid(cfg: MJPConfig, grid: tuple[int, int], name: str) -> None:
    n = grid[0] * grid[1]
    if cfg.shuffles:
        check_grid_ratio("mjp.mask_ratio", cfg.mask_ratio, n)


def create_model(name: str, mjp: MJPConfig | None = None, *, april_block: bool = False, **timm_kwargs: Any) -> nn.Module:
    """Build timm model ``name``; with ``mjp`` given, upgrade it to MJP.

    Args:
        name: any timm name of a ViT with an absolute PE (deit_*, vit_*), a Swin, or a ResNet.
        mjp: the method's config; None returns timm's model unchanged.
        april_block: ViTs only: a first block without LayerNorm and skip connection before
            attention, so APRIL's analytic attack applies exactly (``mjp.privacy``).
        timm_kwargs: passed to ``timm.create_model`` (``num_classes``, ``img_size``, ...).

    Raises:
        ValueError: unknown model or argument, a family MJP does not support, a PE variant the
            model cannot have, or a mask ratio its grid cannot honour.
    """
    if mjp is None:
        model = _build_timm(name, timm_kwargs)
        return use_april_block(model) if april_block else model
    if mjp.pos_embed == "none" and "pos_embed" not in timm_kwargs and issubclass(timm_class(name), VisionTransformer):
        timm_kwargs = {**timm_kwargs, "pos_embed": "none"}
    model = _build_timm(name, timm_kwargs)
    mjp_class = FAMILIES.get(type(model))
    if mjp_class is None:
        allowed = ", ".join(c.__name__ for c in FAMILIES)
        raise ValueError(f"model {name!r} is a {type(model).__name__}; MJP supports exactly these timm classes: {allowed}")

    if isinstance(model, ResNet):
        if mjp.pos_embed in ("unk", "idx") or mjp.dal != "none":
            raise ValueError(
                f"{name!r} has no absolute position embedding, so mjp.pos_embed={mjp.pos_embed!r} / mjp.dal={mjp.dal!r} "
                "cannot apply; allowed for ResNet: pos_embed in {standard, none} with dal='none' (shuffle only)"
            )
        dim, grid = 0, (0, 0)
    else:
        embed = cast(PatchEmbed, model.patch_embed)  # ViT and Swin: timm builds their stem with PatchEmbed
        grid = tuple(embed.grid_size)
        dim = embed.proj.out_channels
        if isinstance(model, VisionTransformer) and model.pos_embed is None and mjp.pos_embed != "none":
            raise ValueError(f"{name!r} has no absolute position embedding; mjp.pos_embed={mjp.pos_embed!r} needs one; allowed: 'none'")
        _check_grid(mjp, grid, name)
    model.__class__ = mjp_class
    cast(MJPMixin, model)._init_mjp(mjp, dim, grid)  # the model's class is now its MJP family class
    return use_april_block(model) if april_block else model
