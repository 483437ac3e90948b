"""APRIL's analytic gradient attack (supplementary Eq. 1-2) on a ViT with an ``AprilBlock``.

From one sample's gradients:

1. ``A = W_qkv^T dL/dW_qkv`` equals ``G^T Z`` with ``Z = z0 [T, D]`` and ``G = dL/dz0`` (Eq. 1).
2. ``G``'s patch rows are the PE's gradient rows (``z0 = x_p E + b + E_pos``); the CLS row is the
   CLS token's gradient, and the CLS row of ``Z`` is known (``cls_token`` + its PE).
3. Solve ``G_p^T Z_p = A - G_cls^T Z_cls`` for ``Z_p`` (least squares; exact when ``D >= N``).
4. Remove the PE and the patch-embedding bias, invert the patch embedding (least squares;
   exact when ``D >= C * P * P``), reassemble the image.

MJP's E_unk: shuffled slots take the shared E_unk, so their PE-gradient rows are zero and their
embedding cannot be solved for; the attack sees this (zero rows) and leaves those patches empty
(zeros in the model's input space), which is what a user of MJP gains. A DAL head puts its own
gradient on the PE: pass ``dal_weight`` and the attack removes it (exactly when nothing was
shuffled; the attacker does not know the mask otherwise).

Precision. The solve in step 3 is only as good as ``G_p`` is conditioned. At timm's
initialisation (std 0.02) attention is nearly uniform, every token receives almost the same
gradient, and ``G_p``'s condition number is 1e6-1e10: from float64 gradients the recovery is
exact, from float32 gradients (what a real client sends) it is noise. ``pe_gradient_condition``
reports that number; the platform logs it with every attack and can simulate a float64 client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from mjp.models.april_block import AprilBlock
from mjp.models.base import MJPMixin

if TYPE_CHECKING:
    from timm.models.vision_transformer import VisionTransformer


class NotAttackable(ValueError):
    """The model's architecture does not admit the analytic attack; the message says why."""


def april_requirements(model: nn.Module) -> str | None:
    """Why ``model`` cannot be attacked analytically, or None when it can."""
    blocks = getattr(model, "blocks", None)
    if blocks is None or getattr(model, "pos_embed", None) is None:
        return f"{type(model).__name__} has no ViT blocks with an absolute position embedding"
    if not isinstance(blocks[0], AprilBlock):
        return "its first block has a LayerNorm and a skip connection before attention; build it with april_block=True"
    if getattr(model, "reg_token", None) is not None:
        return "register tokens are not supported by this attack"
    return None


def _param(grads: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    if name not in grads:
        raise KeyError(f"the attack needs the gradient of {name!r}; got {sorted(grads)[:8]}...")
    return grads[name].detach().double()


def remove_dal_gradient(model: nn.Module, pe_grad: torch.Tensor, dal_weight: float) -> torch.Tensor:
    """The PE gradient minus ``dal_weight * dL_DAL/dE_pos`` (DAL over all rows)."""
    if dal_weight == 0 or not isinstance(model, MJPMixin) or not hasattr(model, "mjp_dal_head"):
        return pe_grad
    with torch.enable_grad():
        (dal_pe,) = torch.autograd.grad(model.mjp_dal_loss(None), model.get_parameter("pos_embed"))
    return pe_grad - dal_weight * dal_pe[0].double()


def _attackable(model: nn.Module) -> VisionTransformer:
    """``model``, which ``april_requirements`` accepted: a timm ViT (its attributes) with an APRIL block."""
    why = april_requirements(model)
    if why:
        raise NotAttackable(f"APRIL's analytic attack does not apply: {why}")
    return cast("VisionTransformer", model)


def _patch_pe_gradient(
    model: VisionTransformer, grads: dict[str, torch.Tensor], dal_weight: float
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``G_p`` (the patch rows of the PE gradient, DAL's share removed) ``[N, D]``, the PE's patch
    rows ``[N, D]`` and the number of prefix rows, in float64."""
    pe_grad = remove_dal_gradient(model, _param(grads, "pos_embed")[0], dal_weight)  # [T_pe, D]
    pos = model.get_parameter("pos_embed").detach().double()[0]
    prefix = 0 if model.no_embed_class else model.num_prefix_tokens
    return pe_grad[prefix:], pos[prefix:], prefix


def min_norm_lstsq(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The minimum-norm least-squares solution ``x [n, k]`` of ``a [m, n] x = b [m, k]``, on any device.

    LAPACK's ``gelsd`` (SVD, singular values below ``eps * max(m, n) * s_max`` dropped) is what the
    attack needs, since ``G_p`` has zero rows at E_unk's slots; CUDA's ``lstsq`` has only ``gels``,
    which assumes full rank. The pseudo-inverse with the same cut-off is the same solution, and runs
    wherever the model does (float64 in, float64 out).
    """
    return torch.linalg.pinv(a) @ b


@torch.no_grad()
def pe_gradient_condition(model: nn.Module, grads: dict[str, torch.Tensor], *, dal_weight: float = 0.0) -> float:
    """Condition number (largest / smallest singular value) of the solvable rows of ``G_p``: how
    much the solve of step 3 amplifies the gradients' rounding errors (float32: ~1e-7 relative)."""
    g_patch = _patch_pe_gradient(_attackable(model), grads, dal_weight)[0]
    known = g_patch[g_patch.abs().sum(-1) != 0]
    return float(torch.linalg.cond(known)) if len(known) else float("inf")


@torch.no_grad()
def april_reconstruct(model: nn.Module, grads: dict[str, torch.Tensor], *, dal_weight: float = 0.0) -> torch.Tensor:
    """Reconstruct the one input image behind ``grads`` (parameter name -> gradient).

    Returns the image ``[1, C, H, W]`` in the model's input space (as fed to the model, i.e. the
    shuffled image when the sample was shuffled). Raises ``NotAttackable`` for other models.
    """
    vit = _attackable(model)
    w_qkv = vit.get_parameter("blocks.0.attn.qkv.weight").detach().double()  # [3D, D]
    a = w_qkv.T @ _param(grads, "blocks.0.attn.qkv.weight")  # [D, D] = G^T Z
    g_patch, pos_patch, prefix = _patch_pe_gradient(vit, grads, dal_weight)
    pos = vit.get_parameter("pos_embed").detach().double()[0]
    if vit.cls_token is not None:
        g_cls = _param(grads, "cls_token")[0]  # [1, D]
        z_cls = vit.cls_token.detach().double()[0] + (pos[:1] if prefix else 0)
        a = a - g_cls.T @ z_cls
    z_patch = min_norm_lstsq(g_patch.T, a)  # [N, D]
    unknown = g_patch.abs().sum(-1) == 0  # slots whose PE got no gradient (E_unk): unrecoverable
    proj = vit.patch_embed.proj
    bias = proj.bias.detach().double() if proj.bias is not None else 0
    e = proj.weight.detach().double().flatten(1)  # [D, C * ph * pw]
    x_p = min_norm_lstsq(e, (z_patch - pos_patch - bias).T).T  # [N, C*ph*pw]
    x_p[unknown] = 0
    return _assemble(x_p, vit).float()


def _assemble(x_p: torch.Tensor, model: VisionTransformer) -> torch.Tensor:
    c = model.patch_embed.proj.in_channels
    ph, pw = model.patch_embed.patch_size
    gh, gw = model.patch_embed.grid_size
    return x_p.reshape(gh, gw, c, ph, pw).permute(2, 0, 3, 1, 4).reshape(1, c, gh * ph, gw * pw)
