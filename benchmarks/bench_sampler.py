"""``mjp.sample_shuffle`` (masks + permutations for one batch): aten ops per call and time per call,
against the per-round loop sampler of an earlier commit (``--baseline``) and the previous one-pass
sampler (``--previous``, whose masks were not Algorithm 1's), both read from git, in one run; and
the share of the selected patches that our top-up places (``mjp.masking.rectangle_share``).

On a GPU the number of kernels matters as much as the FLOPs: each aten op is at least one launch.
Ops are counted with a ``TorchDispatchMode`` (the same on any device); times are medians over
``--repeats`` calls, synchronised on CUDA. Needs no Ray, so it runs on a bare GPU image too.

    python benchmarks/bench_sampler.py [--device cuda] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.published import publish  # noqa: E402
from mjp.jigsaw import jigsaw_permutation, sample_shuffle  # noqa: E402
from mjp.masking import rectangle_share  # noqa: E402

CASES = ((64, 0.27, (14, 14)), (256, 0.1, (14, 14)), (256, 0.27, (14, 14)), (256, 0.5, (14, 14)), (256, 0.27, (24, 24)))


class CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def baseline_sampler(commit: str):
    """``sample_shuffle`` as it was at ``commit``: that commit's ``sample_block_masks`` + today's permutation."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:mjp/masking.py"], capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "masking_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("masking_baseline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def sample(batch, grid, ratio, *, generator):
        mask = module.sample_block_masks(batch, grid, ratio, generator=generator)
        return mask, jigsaw_permutation(mask, generator=generator)

    return sample


def ours(batch, grid, ratio, *, generator):
    s = sample_shuffle(batch, grid, ratio, generator=generator)
    return s.mask, s.perm


def count_ops(sample, batch, grid, ratio, device: torch.device) -> int:
    gen = torch.Generator(device=device).manual_seed(0)
    sample(batch, grid, ratio, generator=gen)  # warm-up: per-grid constants are made once
    with CountOps() as ops:
        sample(batch, grid, ratio, generator=gen)
    return ops.count


def interleaved_ms(samplers: list, batch, grid, ratio, device: torch.device, repeats: int) -> list[float]:
    """Median ms per call of each sampler, called in turn (A, B, A, B, ...) so noise hits all alike."""
    gens = [torch.Generator(device=device).manual_seed(0) for _ in samplers]
    times: list[list[float]] = [[] for _ in samplers]
    for _ in range(repeats):
        for sample, gen, out in zip(samplers, gens, times):
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            sample(batch, grid, ratio, generator=gen)
            if device.type == "cuda":
                torch.cuda.synchronize()
            out.append(1e3 * (time.perf_counter() - start))
    return [statistics.median(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="where masks are drawn")
    parser.add_argument("--baseline", default="1ccef97", help="the commit whose loop sampler is the baseline")
    parser.add_argument("--previous", default="a1c9fdd", help="the commit whose one-pass sampler this one replaces")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per case (median)")
    parser.add_argument("--out", help="append the table to this Markdown file")
    args = parser.parse_args()
    device = torch.device(args.device)
    where = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"{platform.machine()} CPU, {os.cpu_count()} cores, {torch.get_num_threads()} threads"
    )
    old, previous = baseline_sampler(args.baseline), baseline_sampler(args.previous)
    lines = [
        f"### bench_sampler: sample_shuffle on {device.type} ({where}), median of {args.repeats} interleaved calls each",
        f"torch {torch.__version__}; loop: the per-round loop sampler of commit {args.baseline}; previous: the one-pass sampler of commit "
        f"{args.previous}",
        "",
        "| batch | ratio | grid | aten ops: loop | aten ops: previous | aten ops: ours | ms: loop | ms: previous | ms: ours | top-up "
        "share (ours) |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for batch, ratio, grid in CASES:
        ops = [count_ops(sample, batch, grid, ratio, device) for sample in (old, previous, ours)]
        ms = interleaved_ms([old, previous, ours], batch, grid, ratio, device, args.repeats)
        top_up = 1 - rectangle_share(batch, grid, ratio, generator=torch.Generator(device=device).manual_seed(0))
        lines.append(
            f"| {batch} | {ratio:g} | {grid[0]}x{grid[1]} | {ops[0]:,} | {ops[1]} | {ops[2]} | "
            + " | ".join(f"{t:.2f}" for t in ms)
            + f" | {top_up:.1%} |"
        )
    text = "\n".join(lines) + "\n"
    publish(args.out, text)


if __name__ == "__main__":
    main()
