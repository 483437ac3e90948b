"""One seed drives a run: runtime.seed changes the jigsaw masks, the evaluation shuffles and the
data order; the same seed twice gives the same ones (what error bars over seeds rely on)."""

import torch
from torch.utils.data import DistributedSampler

from mjp.metrics import sample_eval_shuffle
from trainables.config import build_config
from trainables.data import DataShape
from trainables.engine import build_algorithm, build_model
from trainables.seeds import derive_seed

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
    sampler = DistributedSampler(range(100), num_replicas=1, rank=0, shuffle=True, seed=cfg.data.seed % 2**63)
    return train, evaluation, list(sampler)


def test_two_seeds_differ_in_every_stream_and_one_seed_repeats_exactly():
    a, b, again = streams(1), streams(2), streams(1)
    for name, x, y, z in zip(("training masks", "evaluation masks", "data order"), a, b, again):
        assert (x != y).any() if isinstance(x, torch.Tensor) else x != y, f"{name}: seeds 1 and 2 gave the same"
        assert torch.equal(x, z) if isinstance(x, torch.Tensor) else x == z, f"{name}: seed 1 twice differed"
