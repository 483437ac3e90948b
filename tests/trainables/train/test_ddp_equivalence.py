"""Data parallel = one worker with N times the batch: 2 gloo processes against 1 process, the same
global batch, data order and (fixed) shuffles, through the engine's real step (clipping, AdamW,
schedule). MJP off and on (JP + UNK + DAL-mlp). Also: each rank draws its own masks, and E_unk
and the DAL head stay identical across ranks.

Both train in float64. The two differ only in the order of their sums, and AdamW's first steps
amplify that rounding where a gradient is near zero (its step moves by up to lr / eps = 4e6 times
the gradient's change). In float32 the weights of MJP off differed by 2e-6 run alone here, 2e-5
with torch's AVX2 kernels, 3.5e-5 in one ``make test`` (a failure of the old bound, 2e-5 + 1e-4
relative); in float64 by 8e-15 (off) and 3.5e-9 (on) with either kernels, far under
``TOLERANCE``, while the one worker at twice the learning rate ends 4.5e-3 away (both variants).

(The ``pca`` DAL head fits its PCA per worker on that worker's unshuffled rows; a fit is not
linear in its rows, so it is not equal to one fit over the global batch, as in the reference
code, which also runs per GPU. The pointwise heads are.)
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from mjp import sample_shuffle
from mjp.algorithm import MJPAlgorithm
from tests.default_dtype import default_dtype
from trainables.config.build import build_config
from trainables.data.info import DataShape
from trainables.train.engine import build_algorithm, build_model, build_state, seed_everything, train_one_epoch

STEPS, PER_RANK, WORLD = 3, 8, 2
TINY = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 2, "num_heads": 2}},
    "optim": {"epochs": 1, "base_lr": 0.04, "warmup_epochs": 0},
    "runtime": {"log_every": 1000},
}
SHAPE = DataShape(10, 1, 8)
TOLERANCE = 1e-7


def batches():
    g = torch.Generator().manual_seed(7)
    return [
        (torch.randn(WORLD * PER_RANK, 1, 8, 8, generator=g), torch.randint(0, 10, (WORLD * PER_RANK,), generator=g)) for _ in range(STEPS)
    ]


def shuffles(variant: str):
    g = torch.Generator().manual_seed(11)
    return [None if variant == "A" else sample_shuffle(WORLD * PER_RANK, (4, 4), 0.27, generator=g) for _ in range(STEPS)]


def train(variant: str, rank: int, world: int) -> torch.nn.Module:
    """STEPS engine steps on this rank's slice of the global batches and shuffles."""
    cfg = build_config(TINY, {"mjp.variant": variant, "data.batch_size": PER_RANK * WORLD // world})  # same global batch, same lr
    seed_everything(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = build_model(cfg, SHAPE)
    part = slice(rank * PER_RANK * WORLD // world, (rank + 1) * PER_RANK * WORLD // world)
    fixed = iter([None if s is None else type(s)(s.mask[part], s.perm[part], s.grid) for s in shuffles(variant)])
    wrapped = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    state = build_state(cfg, wrapped, STEPS, world)
    state.algorithm.shuffle = lambda x, epoch: next(fixed)
    state.total_steps = STEPS
    train_one_epoch(cfg, state, [(x[part], y[part]) for x, y in batches()], torch.device("cpu"))
    return model


def worker(rank: int, variant: str, store: str, out: str) -> None:
    torch.set_default_dtype(torch.float64)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    model = train(variant, rank, WORLD)
    torch.save({k: v.detach() for k, v in model.state_dict().items()}, f"{out}.{rank}")
    dist.destroy_process_group()


@pytest.mark.parametrize("variant", ["A", "J"], ids=["mjp off", "mjp on (JP+UNK+DAL-mlp)"])
def test_two_workers_train_the_model_one_worker_trains_on_the_doubled_batch(variant, tmp_path):
    mp.start_processes(worker, args=(variant, str(tmp_path / "store"), str(tmp_path / "ddp")), nprocs=WORLD, start_method="spawn")
    ranks = [torch.load(tmp_path / f"ddp.{r}", weights_only=True) for r in range(WORLD)]
    with default_dtype(torch.float64):
        single = train(variant, 0, 1).state_dict()
    for name, value in single.items():
        assert value.dtype == ranks[0][name].dtype == torch.float64, name
        assert torch.equal(ranks[0][name], ranks[1][name]), f"{name} differs between ranks"
        assert torch.allclose(ranks[0][name], value, atol=TOLERANCE, rtol=0), (
            f"{name}: DDP and one worker differ by {(ranks[0][name] - value).abs().max():.2e}"
        )
    if variant == "J":
        assert any(k.startswith("mjp_unk_embed") for k in single) and any(k.startswith("mjp_dal_head") for k in single)


def test_each_rank_draws_its_own_masks():
    cfg = build_config(TINY)
    masks = []
    for rank in range(WORLD):
        model = build_model(cfg, SHAPE)
        masks.append(build_algorithm(cfg, model, rank).shuffle(torch.zeros(PER_RANK, 1, 8, 8), epoch=0).mask)  # as the worker loop does
    assert not torch.equal(masks[0], masks[1])


def test_ranks_would_share_masks_without_their_own_seeds():
    """The control: the same seed on both ranks gives the same masks (what per-rank seeds avoid)."""
    cfg = build_config(TINY)
    a, b = (MJPAlgorithm.for_model(build_model(cfg, SHAPE), seed=5) for _ in range(2))
    x = torch.zeros(PER_RANK, 1, 8, 8)
    assert torch.equal(a.shuffle(x, 0).mask, b.shuffle(x, 0).mask)
