"""What every step shares: its command line, the sizes of the two modes and writing its result.

``cuda``: the sizes of the GPU rows of BENCHMARKS.md (DeiT-S, batch 256, bf16, torch.compile with
inductor). ``cpu``: the same code at tiny sizes (a 2-block ViT on 32 px images, fp32, and
torch.compile with the ``aot_eager`` backend: Dynamo and AOTAutograd trace the same graph, but
inductor's C++ build would take minutes on a small CPU), so the check itself can be checked
where there is no GPU."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainables.process_start import fewer_full_collections
from trainables.written import write_atomically

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # timm never reaches for the network


@dataclass(frozen=True)
class Sizes:
    """How big each step runs in one mode."""

    device: str
    model: str
    model_kwargs: dict[str, Any]
    img_size: int
    num_classes: int
    batch: int
    amp: bool
    steps: int  # timed steps of the model and engine steps
    warmup: int  # engine steps before timing (compile included)
    compile_backend: str
    jpegs: int  # generated JPEG files for the input path
    jpeg_hw: tuple[int, int]
    loader_epochs: int
    april_models: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)


TINY = {"img_size": 32, "patch_size": 4, "embed_dim": 32, "depth": 2, "num_heads": 2, "num_classes": 10}

SIZES = {
    "cuda": Sizes(
        device="cuda",
        model="deit_small_patch16_224",
        model_kwargs={},
        img_size=224,
        num_classes=1000,
        batch=256,
        amp=True,
        steps=20,
        warmup=10,
        compile_backend="inductor",
        jpegs=3072,
        jpeg_hw=(375, 500),
        loader_epochs=3,
        april_models={
            "tiny ViT 32x32 (D=128, 64 patches)": (
                "vit_tiny_patch16_224",
                {"img_size": 32, "patch_size": 4, "embed_dim": 128, "depth": 4, "num_heads": 4, "num_classes": 10},
            ),
            "DeiT-S 224x224 (D=384, 196 patches)": ("deit_small_patch16_224", {"num_classes": 1000}),
        },
    ),
    "cpu": Sizes(
        device="cpu",
        model="vit_tiny_patch16_224",
        model_kwargs=TINY,
        img_size=32,
        num_classes=10,
        batch=8,
        amp=False,
        steps=2,
        warmup=1,
        compile_backend="aot_eager",
        jpegs=48,
        jpeg_hw=(60, 80),
        loader_epochs=2,
        april_models={
            "tiny ViT 32x32 (D=64, 64 patches)": (
                "vit_tiny_patch16_224",
                {"img_size": 32, "patch_size": 4, "embed_dim": 64, "depth": 2, "num_heads": 4, "num_classes": 10},
            )
        },
    ),
}


def step_args(description: str, extra: dict[str, dict[str, Any]] | None = None) -> argparse.Namespace:
    """``--mode cuda|cpu --out FILE`` and a step's own flags; the first call of every step, so it
    also sets the step's process up as the platform's (``trainables/process_start.py``: no full
    garbage collection while it imports torch and timm; 0.7 to 1 CPU-s in a trial's imports, not measured for a step)."""
    fewer_full_collections()
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--mode", choices=sorted(SIZES), required=True)
    parser.add_argument("--out", type=Path, required=True, help="the step's JSON result")
    for flag, kw in (extra or {}).items():
        parser.add_argument(flag, **kw)
    return parser.parse_args()


def sizes(mode: str) -> Sizes:
    return SIZES[mode]


def device_of(s: Sizes) -> Any:
    """The step's torch device; a ``cuda`` run without CUDA fails here, in one line."""
    import torch

    if s.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu check: --mode cuda but torch.cuda.is_available() is False (use --cpu to check the check)")
    torch.set_num_threads(min(torch.get_num_threads(), 2) if s.device == "cpu" else torch.get_num_threads())
    return torch.device(s.device)


def synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_seconds(fn: Callable[[], Any], device: Any, repeat: int = 3) -> float:
    """The fastest of ``repeat`` timed calls of ``fn`` after one warm-up call, the device synchronised around each."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


def write_result(path: Path, result: dict[str, Any], s: Sizes) -> None:
    """The step's numbers, with the sizes they were measured at."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps({"sizes": asdict(s), **result}, indent=1, default=str))  # a step cut off mid-write: no torn JSON
    print(json.dumps(result, indent=1, default=str))
