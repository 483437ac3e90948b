"""The 15 ImageNet-C corruptions (Hendrycks & Dietterich, 2019) at 5 severities, made on the fly
from any images with ``imagecorruptions`` (the ``imagecorruptions-imaug`` package).

Small images. The package's ``corrupt()`` refuses images under 32 pixels, but its 15 functions
run on smaller ones (8x8 digits, 28x28 Fashion-MNIST: checked by the tests), so they are called
directly. One-channel images are repeated to RGB for the corruption and come back as one
channel: the mean of the three for every corruption but the three noises, whose draws are
independent per channel, so a mean would divide their strength by sqrt(3); these keep the first
channel, one full-strength draw (the colour corruptions, frost and snow, become grey). The corruptions' parameters are ImageNet's: on
28x28 images the same severity removes more of the picture than on 224x224 ones, so the values
compare models on the same data, not to ImageNet-C.

Randomness. The package draws from numpy's global generator (and ``glass_blur`` and
``impulse_noise`` take their own seed). ``corrupt`` seeds each image from ``seed``, the
corruption, the severity and the image's index, and restores the caller's global state after:
same seed, same output; no side effect.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from mjp.keys import CORRUPTIONS

SEVERITIES: tuple[int, ...] = (1, 2, 3, 4, 5)
#: functions that take a ``seed`` of their own (they ignore numpy's global one)
_OWN_SEED = ("glass_blur", "impulse_noise")
#: corruptions that draw independent noise per channel
PER_CHANNEL_NOISE = ("gaussian_noise", "shot_noise", "impulse_noise")


def _image_seed(seed: int, corruption: str, severity: int, index: int) -> int:
    digest = hashlib.blake2b(f"{seed}/{corruption}/{severity}/{index}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")


def corrupt(images: torch.Tensor, corruption: str, severity: int, *, seed: int) -> torch.Tensor:
    """``images [B, C, H, W]`` in [0, 1] (C = 1 or 3) -> the same shape and dtype, in [0, 1]."""
    if corruption not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {corruption!r}; allowed: {', '.join(CORRUPTIONS)}")
    if severity not in SEVERITIES:
        raise ValueError(f"severity={severity!r}; allowed: 1..5")
    if images.dim() != 4 or images.shape[1] not in (1, 3):
        raise ValueError(f"images must be [B, C, H, W] with C = 1 or 3, got {tuple(images.shape)}")
    from imagecorruptions import corruption_dict
    from PIL import Image

    function = corruption_dict[corruption]
    # imagecorruptions works on uint8 numpy arrays: the one copy to the host is the point of this call
    pixels = (images.detach().float().clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()
    saved = np.random.get_state()
    out = np.empty(pixels.shape[:3] + (3,), dtype=np.uint8)
    try:
        for i, x in enumerate(pixels):
            rgb = np.repeat(x, 3, axis=2) if x.shape[2] == 1 else x
            s = _image_seed(seed, corruption, severity, i)
            np.random.seed(s)
            kwargs = {"seed": s} if corruption in _OWN_SEED else {}
            corrupted = np.asarray(function(Image.fromarray(rgb), severity, **kwargs), dtype=np.float32)  # some return PIL images
            out[i] = np.clip(corrupted, 0, 255).astype(np.uint8)
    finally:
        np.random.set_state(saved)
    result = torch.from_numpy(out).permute(0, 3, 1, 2).float() / 255
    if images.shape[1] == 1:
        result = result[:, :1] if corruption in PER_CHANNEL_NOISE else result.mean(1, keepdim=True)
    return result.to(device=images.device, dtype=images.dtype)
