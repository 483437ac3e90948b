"""How close a reconstruction is to its target: MSE, PSNR, SSIM, FFT-2D and (with weights) LPIPS.

Images are ``[B, C, H, W]`` in [0, 1]. SSIM is pytorch-msssim's (Gaussian window 11, sigma 1.5,
the reference SSIM); FFT-2D is ``1 - cos`` between the magnitude spectra (0 = same spectrum);
LPIPS needs a local AlexNet backbone file: without one it is absent, never computed with a
random backbone. In the paper's Table 5, larger MSE / FFT-2D / LPIPS and smaller PSNR / SSIM mean
more privacy.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from pytorch_msssim import ssim

LPIPS_MISSING = (
    "lpips: no backbone weights given (pass a torchvision AlexNet state dict: `mjp attack --lpips-backbone FILE`, "
    "or eval.privacy.lpips_backbone)"
)


def to_unit(images: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Map model-space images to [0, 1] with the reference's per-image min and max."""
    lo = reference.amin(dim=(1, 2, 3), keepdim=True)
    hi = reference.amax(dim=(1, 2, 3), keepdim=True)
    return ((images - lo) / (hi - lo).clamp_min(1e-12)).clamp(0, 1)


def psnr(recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per image, data range 1: ``[B]``."""
    mse = ((recon - target) ** 2).flatten(1).mean(1)
    return 10 * torch.log10(1.0 / mse.clamp_min(1e-20))


def fft2d_distance(recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``1 - cos`` between the 2-D magnitude spectra, per image: ``[B]``."""
    a = torch.fft.fft2(recon).abs().flatten(1)
    b = torch.fft.fft2(target).abs().flatten(1)
    return 1 - torch.nn.functional.cosine_similarity(a, b, dim=1)


def _rgb(images: torch.Tensor) -> torch.Tensor:
    """``[B, 1, H, W]`` grey images as ``[B, 3, H, W]`` (a view); ``[B, 3, H, W]`` as they are."""
    return images.expand(-1, 3, -1, -1) if images.shape[1] == 1 else images


class LPIPS:
    """LPIPS (AlexNet, v0.1) with the backbone read from a local torchvision state-dict file."""

    def __init__(self, backbone_file: str | Path):
        import lpips
        from torchvision.models import alexnet

        net = alexnet()
        try:
            state = torch.load(backbone_file, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError:  # torch's own message suggests loading it unsafely: not ours
            raise ValueError(
                f"LPIPS backbone {str(backbone_file)!r} holds more than weights and is not loaded (unpickling it can run code); "
                "allowed: a torchvision AlexNet state dict of tensors"
            ) from None
        net.load_state_dict(state)
        self.metric = lpips.LPIPS(net="alex", pnet_rand=True, verbose=False).eval()
        for i in range(1, 6):
            for name, layer in getattr(self.metric.net, f"slice{i}").named_children():
                layer.load_state_dict(net.features[int(name)].state_dict())

    @torch.no_grad()
    def __call__(self, recon: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.metric(_rgb(recon) * 2 - 1, _rgb(target) * 2 - 1).flatten()


@torch.no_grad()
def image_scores(recon: torch.Tensor, target: torch.Tensor, *, lpips: LPIPS | None = None) -> dict[str, float]:
    """Mean scores over the batch: ``mse``, ``psnr``, ``ssim``, ``fft2d`` (and ``lpips`` when given).

    ``recon``, ``target``: ``[B, C, H, W]`` in [0, 1] (``[C, H, W]`` is taken as one image).
    """
    recon, target = (t.unsqueeze(0) if t.dim() == 3 else t for t in (recon.float(), target.float()))
    if recon.shape != target.shape:
        raise ValueError(f"recon {tuple(recon.shape)} and target {tuple(target.shape)} differ in shape")
    side = min(target.shape[-2:])
    window = 11 if side >= 11 else side - (side % 2 == 0)  # odd, fits the image (7 for 8x8 digits)
    scores = {
        "mse": ((recon - target) ** 2).mean(),
        "psnr": psnr(recon, target).mean(),
        "ssim": ssim(recon, target, data_range=1.0, size_average=True, win_size=window),
        "fft2d": fft2d_distance(recon, target).mean(),
    }
    if lpips is not None:
        scores["lpips"] = lpips(recon, target).mean()
    values = torch.stack([v.float().reshape(()) for v in scores.values()]).tolist()  # one host sync
    return dict(zip(scores, values))
