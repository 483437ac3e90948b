"""Attack time per image: APRIL's analytic attack and the gradient-matching attack, on a tiny ViT
(32x32 images) and on DeiT-S (224x224), both with the attackable first block.

The gradient-matching attack is timed per optimisation step (double backward) and per image at
the given step budget. CPU here; on a GPU machine pass --device cuda.

    python benchmarks/bench_attack.py [--steps 200] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import functools
import time

import torch
from common import environment
from published import publish

from mjp import MJPConfig, create_model
from mjp.privacy import april_reconstruct, invert_gradients, sample_gradients

MODELS = {
    "tiny ViT 32x32 (D=128, 64 patches)": (
        "vit_tiny_patch16_224",
        dict(img_size=32, patch_size=4, embed_dim=128, depth=4, num_heads=4, num_classes=10),
    ),
    "DeiT-S 224x224 (D=384, 196 patches)": ("deit_small_patch16_224", dict(num_classes=1000)),
}


def timed(fn, device: torch.device, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out")
    args = parser.parse_args()
    device = torch.device(args.device)
    rows = []
    for label, (name, kw) in MODELS.items():
        torch.manual_seed(0)
        model = create_model(name, mjp=MJPConfig.variant("G"), april_block=True, **kw).to(device).eval()
        size = kw.get("img_size", 224)
        x, y = torch.rand(1, 3, size, size, device=device), torch.tensor([1], device=device)
        grads = sample_gradients(model, x, y)
        t_grads = timed(functools.partial(sample_gradients, model, x, y), device)
        t_april = timed(functools.partial(april_reconstruct, model, grads), device)
        t_step = timed(functools.partial(invert_gradients, model, grads, y, tuple(x.shape), steps=2), device, repeat=2) / 2
        rows.append(f"| {label} | {t_grads:.0f} | {t_april:.0f} | {t_step:.0f} | {t_step * args.steps / 1e3:.1f} |")
    publish(
        args.out,
        "\n".join(
            [
                f"### bench_attack: time per image on {device.type}",
                environment(device.type),
                "",
                f"| model | client gradients (ms) | APRIL solve (ms) | matching attack, per step (ms) | matching attack, {args.steps} "
                "steps (s) |",
                "| --- | ---: | ---: | ---: | ---: |",
                *rows,
                "",
            ]
        ),
    )


if __name__ == "__main__":
    main()
