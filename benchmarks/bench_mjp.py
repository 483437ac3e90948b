"""Step time of MJP (JP+UNK+DAL mlp, ratio 0.27) against the same timm model without MJP.

Both models are built, fed and stepped alternately in one process (A, B, A, B, ...) so machine
noise hits both alike; the ratio of medians is the number to read, and img/s of each. As in the
training engine, the MJP step samples its shuffle outside the model and passes it in (drawing
``JIGSAW_DRAWS_AHEAD`` batches per sampler call), so ``--compile`` compiles the same graph the
engine runs. Also times one batch's mask + permutation sampling and the token gather alone.
Prints a Markdown table; ``--out`` appends it to a file.

    python benchmarks/bench_mjp.py [--models deit_tiny_patch16_224 deit_small_patch16_224] [--batch 64] [--steps 6]
    python benchmarks/bench_mjp.py --device cuda --models deit_small_patch16_224 --batch 256 --amp bf16 [--compile]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import timm
import torch

import mjp
from benchmarks.published import publish
from mjp import MJPConfig, MJPOutput, create_model
from mjp.algorithm import MJPAlgorithm
from trainables.train.engine import JIGSAW_DRAWS_AHEAD


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def make_step(
    model: torch.nn.Module,
    device: torch.device,
    batch: int,
    amp: bool,
    compile_model: bool,
    sample=None,
    dal_weight: float = 0.01,
    img_size: int = 224,
    num_classes: int = 1000,
    backend: str = "inductor",
):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, 3, img_size, img_size, device=device)
    y = torch.randint(0, num_classes, (batch,), device=device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp)
    run = torch.compile(model, backend=backend) if compile_model else model

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with autocast:
            out = run(x, shuffle=sample(x, 0)) if sample is not None else run(x)
            if isinstance(out, MJPOutput):
                loss = torch.nn.functional.cross_entropy(out.logits, y) + dal_weight * out.loss_dal
            else:
                loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()

    return step


def timed(fn, device: torch.device) -> float:
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return (time.perf_counter() - t0) * 1e3


def bench_model(
    name: str,
    device: torch.device,
    batch: int,
    steps: int,
    amp: bool = False,
    compile_model: bool = False,
    backend: str = "inductor",
    **model_kwargs,
) -> dict[str, float]:
    """Medians (ms) of the timm step, the MJP step and mask sampling; ``model_kwargs`` size both models
    (``img_size``, ``num_classes``, ...: the GPU check's tiny CPU run), ``backend`` is torch.compile's."""
    torch.manual_seed(0)
    base = timm.create_model(name, **model_kwargs).to(device).train()
    torch.manual_seed(0)
    ours = create_model(name, mjp=MJPConfig(mask_ratio=0.27, dal="mlp"), **model_kwargs).to(device).train()
    # masks drawn on the device, several batches per sampler call, as the engine does
    algorithm = MJPAlgorithm.for_model(ours, seed=0, device=device, draws_ahead=JIGSAW_DRAWS_AHEAD)
    shape = dict(img_size=model_kwargs.get("img_size", 224), num_classes=model_kwargs.get("num_classes", 1000), backend=backend)
    step_base = make_step(base, device, batch, amp, compile_model, **shape)
    step_ours = make_step(ours, device, batch, amp, compile_model, algorithm.shuffle, **shape)
    for _ in range(3 if compile_model else 2):  # warm-up (and compile)
        step_base(), step_ours()
    t_base, t_ours = [], []
    for _ in range(steps):
        t_base.append(timed(step_base, device))
        t_ours.append(timed(step_ours, device))
    gen = algorithm.generator
    grid = tuple(ours.patch_embed.grid_size)
    tokens = torch.randn(batch, grid[0] * grid[1], ours.embed_dim, device=device)

    def mask_and_shuffle() -> None:
        s = mjp.sample_shuffle(batch, grid, 0.27, generator=gen, device=device)
        mjp.shuffle_tokens(tokens, s.perm)

    mask_and_shuffle()
    t_mask = [timed(mask_and_shuffle, device) for _ in range(20)]
    med_base, med_ours = statistics.median(t_base), statistics.median(t_ours)
    return dict(base=med_base, mjp=med_ours, ratio=med_ours / med_base, mask=statistics.median(t_mask))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["deit_tiny_patch16_224", "deit_small_patch16_224"])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--amp", choices=["none", "bf16"], default="none", help="bf16 autocast (as runtime.amp=bf16)")
    parser.add_argument("--compile", action="store_true", help="torch.compile both models (as runtime.compile=true)")
    parser.add_argument("--out", help="append the table to this Markdown file")
    args = parser.parse_args()
    device = torch.device(args.device)
    where = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    )
    mode = f"{'bf16' if args.amp == 'bf16' else 'fp32'}, {'compiled' if args.compile else 'eager'}"
    lines = [
        f"### bench_mjp: {device.type} ({where}), batch {args.batch}, {mode}, median of {args.steps} steps",
        f"torch {torch.__version__}, timm {timm.__version__}; MJP = JP+UNK+DAL(mlp), ratio 0.27, per-sample masks",
        "",
        "| model | timm step (ms) | MJP step (ms) | MJP / timm | timm img/s | MJP img/s | mask+perm+gather (ms) | mask share of MJP step |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in args.models:
        r = bench_model(name, device, args.batch, args.steps, args.amp == "bf16", args.compile)
        lines.append(
            f"| {name} | {r['base']:.1f} | {r['mjp']:.1f} | {r['ratio']:.3f} | {1e3 * args.batch / r['base']:,.0f} | "
            f"{1e3 * args.batch / r['mjp']:,.0f} "
            f"| {r['mask']:.2f} | {100 * r['mask'] / r['mjp']:.2f}% |"
        )
    table = "\n".join(lines) + "\n"
    publish(args.out, table)


if __name__ == "__main__":
    main()
