"""One seed drives a run: runtime.seed changes the jigsaw masks, the evaluation shuffles and the
data order; the same seed twice gives the same ones (what error bars over seeds rely on)."""

import torch

from mjp.config import SEED_BOUND
from mjp.metrics import sample_eval_shuffle
from trainables.config.build import build_config
from trainables.config.seeds import derive_seed
from trainables.data.info import DataShape
from trainables.data.samplers import train_sampler
from trainables.train.engine import build_algorithm, build_model

TINY = {"model": {"kwargs": {"patch_size": 2, "embed_dim": 16, "depth": 1, "num_heads": 2}}}
X = torch.zeros(16, 1, 8, 8)


def streams(seed: int) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """(training masks, evaluation masks, data order) of a run with ``runtime.seed=seed``."""
    cfg = build_config(TINY, {"runtime.seed": seed})
    model = build_model(cfg, DataShape(10, 1, 8))
    algorithm = build_algorithm(cfg, model, rank=0)  # as the worker loop does
    train = torch.stack([algorithm.shuffle(X, epoch=0).mask for _ in range(3)])
    gen = torch.Generator().manual_seed(derive_seed(cfg.eval.seed, "eval", 0))  # as evaluate_shuffles does
    evaluation = sample_eval_shuffle(model.eval(), X, 0.5, gen).mask
    sampler = train_sampler(range(100), seed=cfg.data.seed, repeats=1, rank=0, world=1)
    return train, evaluation, list(sampler)


def test_two_seeds_differ_in_every_stream_and_one_seed_repeats_exactly():
    a, b, again = streams(1), streams(2), streams(1)
    for name, x, y, z in zip(("training masks", "evaluation masks", "data order"), a, b, again):
        assert (x != y).any() if isinstance(x, torch.Tensor) else x != y, f"{name}: seeds 1 and 2 gave the same"
        assert torch.equal(x, z) if isinstance(x, torch.Tensor) else x == z, f"{name}: seed 1 twice differed"


def test_repeated_augmentation_follows_the_seed():
    """DeiT's repeated augmentation: two data seeds give two orders, one seed gives one (timm's
    sampler alone seeds its shuffle with the epoch, the same for every seed)."""

    def order(seed, epoch=0, rank=0):
        sampler = train_sampler(range(600), seed=seed, repeats=3, rank=rank, world=2)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert order(1) == order(1) and order(1) != order(2)
    assert order(1, epoch=0) != order(1, epoch=1)
    assert order(1, rank=0) != order(1, rank=1)  # each worker its own share


def test_every_derived_seed_fits_every_consumer():
    """One rule: seeds lie in [0, 2**32) (numpy, Ray Data, torch), so nothing reduces them."""
    assert all(
        0 <= derive_seed(s, stream, rank) < SEED_BOUND
        for s in (0, 1, 2**31)
        for stream in ("jigsaw", "eval", "data", "process")
        for rank in (0, 7)
    )
    cfg = build_config({}, {"runtime.seed": 3})
    assert all(0 <= v < SEED_BOUND for v in (cfg.data.seed, cfg.eval.seed, cfg.mjp.seed))


def test_a_seed_beyond_the_bound_is_refused_by_name():
    import pytest

    from trainables.errors import UserError

    for key in ("data.seed", "eval.seed", "mjp.seed", "runtime.seed"):
        with pytest.raises((UserError, ValueError), match=key.split(".")[0]):
            build_config({}, {key: 2**32})


def test_the_platform_pins_cpu_kernels_before_torch_loads():
    """One seed, one result across CPUs: torch, MKL and oneDNN kernels are pinned to AVX2 in every
    process the CLI starts (measured here: the ATen, MKL and oneDNN choices each change a 4-epoch
    digits run's loss in its third decimal)."""
    import subprocess
    import sys

    code = (
        "from trainables.launch.ray_runtime import prepare_environment; prepare_environment(); import os, torch; "
        "print(torch.backends.cpu.get_cpu_capability(), os.environ['MKL_CBWR'], os.environ['ONEDNN_MAX_CPU_ISA'])"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout.split()
    assert out == ["AVX2", "AVX2", "AVX2"]


def test_a_cpu_training_draws_each_batchs_jigsaw_alone():
    """On the CPU the training loop draws one batch's jigsaw per sampler call, as the runs behind
    README's and results/' tables did: their seeds give the same masks, batch by batch, as a plain
    one-batch-a-call algorithm (drawing ahead, for a GPU's kernel launches, would reorder the stream)."""
    from mjp.algorithm import MJPAlgorithm

    cfg = build_config(TINY, {"runtime.seed": 3})
    model = build_model(cfg, DataShape(10, 1, 8))
    ours = build_algorithm(cfg, model, rank=0, device="cpu")
    plain = MJPAlgorithm.for_model(model, seed=derive_seed(cfg.mjp.seed, "jigsaw", 0), draws_ahead=1)
    for _ in range(3):
        assert torch.equal(ours.shuffle(X, epoch=0).mask, plain.shuffle(X, epoch=0).mask)
