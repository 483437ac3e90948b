"""``runtime.compile`` on the device input path: the loader's batches, whatever they drew, go through
one traced graph of the work after the crop, never a break or a recompile, and give what eager gives."""

import torch
import torch._dynamo
from torch.utils.data import DataLoader, SequentialSampler

from tests.trainables.data.gpu.test_decode import CPU, jpeg_folder
from trainables.data.gpu.augment import DeviceRecipe
from trainables.data.gpu.compiled import compiled_augment
from trainables.data.gpu.decode import DeviceAugmentLoader, EncodedImages, SeededSampler, collate_encoded


def epoch(root, finish, epoch_number):
    ds = EncodedImages(root / "train")
    sampler = SeededSampler(SequentialSampler(ds), 11)
    sampler.set_epoch(epoch_number)
    loader = DataLoader(ds, sampler=sampler, batch_size=4, drop_last=True, collate_fn=collate_encoded)
    recipe = DeviceRecipe(24, "deit", re_prob=0.5)
    return [x for x, _ in DeviceAugmentLoader(loader, sampler, recipe, CPU, ds, finish=finish)]


def test_every_batch_of_the_loader_replays_one_graph_and_equals_the_eager_batches(tmp_path):
    root = jpeg_folder(tmp_path, per_class=6)  # 12 images: 3 batches of 4 an epoch, each with its own draws
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    finish = compiled_augment(DeviceRecipe(24, "deit", re_prob=0.5), backend="eager")
    for n in range(2):
        compiled, eager = epoch(root, finish, n), epoch(root, None, n)
        assert len(compiled) == 3 and all(torch.equal(a, b) for a, b in zip(compiled, eager, strict=True))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    assert not torch._dynamo.utils.counters["recompiles"] and not torch._dynamo.utils.counters["graph_break"]
