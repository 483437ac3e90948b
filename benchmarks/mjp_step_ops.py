"""What the MJP step adds to timm's, op by op: aten ops and bytes moved, counted on the CPU.

Each part of the MJP step is run alone under a ``TorchDispatchMode`` that counts every aten op
dispatched and the bytes it moves (the sizes of its tensor arguments and results, as a kernel
would read and write them, an expanded dimension once; ops that only make a view move none): mask sampling, the permutation,
the token gather (forward and backward), the per-slot position embedding (forward and backward),
the DAL loss (forward and backward), and both whole training steps (forward, backward, AdamW) of
timm's DeiT and of the same model with MJP (JP + UNK + DAL mlp, ratio 0.27, per-sample masks, as
bench_mjp). Counts do not depend on the machine; bytes are fp32 at the batch given.

    python benchmarks/mjp_step_ops.py [--model deit_small_patch16_224] [--batch 64] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import math
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import timm
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from benchmarks.published import publish
from mjp import MJPConfig, create_model
from mjp.algorithm import MJPAlgorithm
from mjp.jigsaw import jigsaw_permutation, sample_shuffle, shuffle_tokens
from mjp.masking import sample_block_masks
from mjp.pos_embed import slot_position_embedding


def distinct_bytes(t: torch.Tensor) -> int:
    """The bytes a tensor spans once (an expanded dimension, stride 0, is read once, not per copy)."""
    return math.prod(size for size, stride in zip(t.shape, t.stride()) if stride != 0) * t.element_size()


class OpLedger(TorchDispatchMode):
    """aten ops dispatched, and bytes moved by those that are not views."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self.bytes = 0
        self.by_name: Counter[str] = Counter()
        self.bytes_by_name: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.ops += 1
        self.by_name[str(func)] += 1
        if not func.is_view:
            tensors = [t for t in tree_flatten((args, kwargs or {}, out))[0] if isinstance(t, torch.Tensor)]
            moved = sum(distinct_bytes(t) for t in tensors)
            self.bytes += moved
            self.bytes_by_name[str(func)] += moved
        return out


def count(fn: Callable[[], Any]) -> OpLedger:
    """The ledger of one call of ``fn`` (after one call outside the count, so caches are made)."""
    fn()
    with OpLedger() as ledger:
        fn()
    return ledger


def per_step(algorithm: MJPAlgorithm, images: torch.Tensor, steps: int) -> Callable[[], None]:
    """``steps`` batches' shuffles from ``algorithm`` (``count`` divides by nothing: the caller does)."""

    def run() -> None:
        for _ in range(steps):
            algorithm.shuffle(images, 0)

    return run


def parts(model_name: str, batch: int, seed: int = 0, draws_ahead: int = 8) -> tuple[list[tuple[str, int, int]], list[str]]:
    """(part, ops, bytes) rows: the MJP step's parts alone, then the whole steps; and the extra
    ops of the MJP step (drawn ahead) over timm's by name, per step, as table rows."""
    torch.manual_seed(seed)
    base = timm.create_model(model_name).train()
    torch.manual_seed(seed)
    ours = create_model(model_name, mjp=MJPConfig(mask_ratio=0.27, dal="mlp")).train()
    grid = tuple(ours.patch_embed.grid_size)
    n, dim = grid[0] * grid[1], ours.embed_dim
    gen = torch.Generator().manual_seed(seed)
    shuffle = sample_shuffle(batch, grid, 0.27, generator=gen)
    tokens = torch.randn(batch, n, dim, requires_grad=True)
    rows, unk = ours.mjp_pe_rows().detach().requires_grad_(), ours.mjp_unk_embed.detach().requires_grad_()
    x = torch.randn(batch, 3, *ours.patch_embed.img_size)
    y = torch.randint(0, ours.num_classes, (batch,))

    def gather() -> None:
        shuffle_tokens(tokens, shuffle.perm).sum().backward()

    def slot_pe() -> None:
        (tokens + slot_position_embedding(rows, shuffle.mask, kind="unk", unk=unk)).sum().backward()

    def timm_pe() -> None:
        (tokens + rows).sum().backward()

    def dal() -> None:
        ours.mjp_dal_loss(shuffle).backward()

    def step(model: torch.nn.Module, algorithm: MJPAlgorithm | None = None, steps: int = 1) -> Callable[[], None]:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def one() -> None:
            opt.zero_grad(set_to_none=True)
            if algorithm is not None:
                out = model(x, shuffle=algorithm.shuffle(x, 0))
                loss = torch.nn.functional.cross_entropy(out.logits, y) + 0.01 * out.loss_dal
            else:
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        def run() -> None:
            for _ in range(steps):
                one()

        return run

    patch = ours.mjp_patch_size()

    def algorithm(draws_ahead: int = 1) -> MJPAlgorithm:
        return MJPAlgorithm(ours.mjp_cfg, patch, seed=seed, draws_ahead=draws_ahead)

    k = draws_ahead
    measured: list[tuple[str, Callable[[], Any], int]] = [
        ("sampling, one batch per sampler call (before), per step", per_step(algorithm(), x, 1), 1),
        (f"sampling, {k} batches per sampler call (after), per step", per_step(algorithm(k), x, k), k),
        ("  of which mask: sample_block_masks", lambda: sample_block_masks(batch, grid, 0.27, generator=gen), 1),
        ("  of which permutation: jigsaw_permutation", lambda: jigsaw_permutation(shuffle.mask, generator=gen), 1),
        ("gather: shuffle_tokens, forward + backward", gather, 1),
        ("slot PE (E_unk where shuffled) + add, forward + backward", slot_pe, 1),
        ("  timm's PE add, forward + backward (for comparison)", timm_pe, 1),
        ("DAL loss, forward + backward", dal, 1),
        ("timm's whole step (forward, backward, AdamW)", step(base), 1),
        ("MJP's whole step, one batch per sampler call (before)", step(ours, algorithm()), 1),
        (f"MJP's whole step, {k} batches per sampler call (after), per step", step(ours, algorithm(k), k), k),
    ]
    results, ledgers = [], []
    for name, fn, steps in measured:
        ledger = count(fn)
        ledgers.append(ledger)
        results.append((name, round(ledger.ops / steps), round(ledger.bytes / steps)))
    timm_step, mjp_step = ledgers[-3], ledgers[-1]
    extra = []
    for op in sorted(set(timm_step.by_name) | set(mjp_step.by_name)):
        ops = mjp_step.by_name[op] / k - timm_step.by_name[op]
        moved = mjp_step.bytes_by_name[op] / k - timm_step.bytes_by_name[op]
        if ops or abs(moved) > 1e3:
            extra.append(f"| `{op}` | {ops:+.3g} | {moved / 1e6:+,.2f} |")
    return results, extra


def table(model_name: str, batch: int) -> str:
    rows, extra = parts(model_name, batch)
    named = {name: (ops, moved) for name, ops, moved in rows}
    timm_ops, timm_bytes = named["timm's whole step (forward, backward, AdamW)"]
    lines = [
        f"| part ({model_name}, batch {batch}, fp32) | aten ops | MB moved | share of timm's step (ops / bytes) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, ops, moved in rows:
        lines.append(f"| {name} | {ops:,} | {moved / 1e6:,.1f} | {100 * ops / timm_ops:.1f} % / {100 * moved / timm_bytes:.2f} % |")
    for name, ops, moved in rows[-2:]:
        lines.append(
            f"| {name.split(', ', 1)[1]}: MJP - timm | {ops - timm_ops:+,} | {(moved - timm_bytes) / 1e6:+,.1f} | "
            f"{100 * (ops - timm_ops) / timm_ops:+.1f} % / {100 * (moved - timm_bytes) / timm_bytes:+.2f} % |"
        )
    lines += ["", "| op (MJP step, drawn ahead, minus timm's step; per step) | ops | MB moved |", "| --- | ---: | ---: |", *extra]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="deit_small_patch16_224")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--out", help="append the table to this Markdown file")
    args = parser.parse_args()
    text = f"torch {torch.__version__}, timm {timm.__version__}\n\n" + table(args.model, args.batch)
    publish(args.out, text)


if __name__ == "__main__":
    main()
