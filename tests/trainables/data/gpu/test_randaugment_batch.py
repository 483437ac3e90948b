"""The augmentation after the crop, by construction capturable: every RandAugment op computed for
the whole batch gives, per sample, exactly what the per-op reference (``apply_op``, itself checked
against PIL in test_device_augment.py) gives; and the ops with their shapes are the same for every batch of
a given size, whatever the draws, with nothing read back to the host."""

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from trainables.data.gpu.augment import DeviceRecipe, HostPack, augment_resized, batch_params, draw_sample, pack_params
from trainables.data.gpu.randaugment import OPS, apply_op, level_arg
from trainables.data.gpu.randaugment_batch import NO_OP, rand_augment_layer

FILL = (124, 116, 104)
#: ops that make the host wait for the device (a value read back, or a shape made from the data)
HOST_SYNCS = ("_local_scalar_dense", "item", "nonzero", "masked_select", "unique", "bincount", "histc")


class OpRecorder(TorchDispatchMode):
    """Every aten op dispatched, with the shapes and dtypes of its tensor arguments."""

    def __init__(self):
        super().__init__()
        self.seq = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        tensors = [a for a in (*args, *(kwargs or {}).values()) if isinstance(a, torch.Tensor)]
        self.seq.append((str(func), tuple((tuple(t.shape), t.dtype) for t in tensors)))
        return func(*args, **(kwargs or {}))


def images(rng, n, size=20):
    """uint8 ``[n, 3, size, size]``: smooth images with noise; two with a flat channel and one all flat (AutoContrast's and
    Equalize's special cases)."""
    ys, xs = np.mgrid[0:size, 0:size]
    waves = (np.stack([np.sin(xs / 3.0), np.cos(ys / 4.0), np.sin((xs + ys) / 5.0)]) + 1) * 60
    x = (waves[None] + rng.integers(0, 100, (n, 3, size, size))).clip(0, 255).astype(np.uint8)
    if n >= 4:
        x[1, 0], x[2, 2], x[3] = 7, 255, 90
    return torch.from_numpy(x)


def test_each_op_on_the_whole_batch_equals_the_per_op_reference_for_every_sample():
    rng = np.random.default_rng(0)
    n = 64
    x = images(rng, n)
    op = torch.from_numpy(rng.integers(NO_OP, len(OPS), n))
    op[: len(OPS) + 1] = torch.arange(NO_OP, len(OPS))  # every op at least once, and "none"
    op[1:4] = torch.tensor([OPS.index("AutoContrast"), OPS.index("Equalize"), OPS.index("AutoContrast")])
    magnitude = rng.uniform(0, 10, n)
    arg = torch.tensor(
        [level_arg(OPS[o], m, bool(s)) if o >= 0 else 0.0 for o, m, s in zip(op.tolist(), magnitude, rng.integers(0, 2, n))],
        dtype=torch.float64,
    )
    got = rand_augment_layer(x, op, arg, torch.tensor(FILL, dtype=torch.float32))
    assert got.shape == x.shape and got.dtype == torch.uint8
    for i in range(n):
        if op[i] == NO_OP:
            assert torch.equal(got[i], x[i])
            continue
        want = apply_op(OPS[op[i]], x[i : i + 1], arg[i : i + 1], torch.tensor(FILL, dtype=torch.float32))[0]
        assert torch.equal(got[i], want), (i, OPS[op[i]], float(arg[i]))
    assert not torch.equal(got, x)


def params_for(seeds, recipe):
    draws = [draw_sample(s, 40, 50, recipe) for s in seeds]
    pack = HostPack()
    parts = pack_params(pack, draws, recipe)
    pack.upload(torch.device("cpu"))
    return batch_params(pack, parts, len(seeds)), draws


def test_the_work_after_the_crop_is_the_same_ops_and_shapes_whatever_the_draws():
    """Three batches of 256 whose draws differ (ops, which samples apply one, flips, erased boxes):
    one (op, shapes) sequence, no op that syncs with the host."""
    recipe = DeviceRecipe(16, "deit")
    x = images(np.random.default_rng(1), 256, size=16)
    sequences, applied = [], []
    for start in (0, 10_000, 20_000):
        params, draws = params_for(range(start, start + 256), recipe)
        applied.append(sorted((len(d.ops), d.erase is not None, d.flip) for d in draws))
        with OpRecorder() as rec:
            out = augment_resized(x, params, recipe)
        assert out.shape == (256, 3, 16, 16) and out.dtype == torch.float32
        sequences.append(rec.seq)
    assert applied[0] != applied[1] != applied[2]  # the draws differ in what runs where
    assert sequences[0] == sequences[1] == sequences[2]
    assert not [name for name, _ in sequences[0] if any(f"aten.{s}" in name for s in HOST_SYNCS)]
    assert len(sequences[0]) <= 720, len(sequences[0])  # 709: BENCHMARKS.md


def test_a_batch_of_one_applies_only_what_its_sample_drew():
    """The selection by mask leaves a sample alone where it drew nothing: a seed with no RandAugment
    op, no flip and no erasing comes out as the normalised input."""
    recipe = DeviceRecipe(16, "deit")
    seed = next(s for s in range(1000) if (d := draw_sample(s, 40, 50, recipe)).ops == [] and not d.flip and d.erase is None)
    params, _ = params_for([seed], recipe)
    x = images(np.random.default_rng(2), 1, size=16)
    mean, std = torch.tensor(recipe.mean).view(1, 3, 1, 1), torch.tensor(recipe.std).view(1, 3, 1, 1)
    assert torch.equal(augment_resized(x, params, recipe), (x.float() / 255.0 - mean) / std)


def test_the_work_after_the_crop_compiles_to_one_graph_reused_for_every_draw():
    """torch.compile(fullgraph=True) traces it without a break (a host sync or a data-dependent shape
    would break it), once: batches with other draws reuse the graph, and equal the eager result."""
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    recipe = DeviceRecipe(16, "deit")
    x = images(np.random.default_rng(3), 8, size=16)
    compiled = torch.compile(augment_resized, fullgraph=True, backend="eager", dynamic=False)
    for start in (0, 1000, 2000):
        params, _ = params_for(range(start, start + 8), recipe)
        assert torch.equal(compiled(x, params, recipe), augment_resized(x, params, recipe))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    assert not torch._dynamo.utils.counters["recompiles"]
