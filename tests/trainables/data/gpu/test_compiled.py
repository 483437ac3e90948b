"""``runtime.compile`` on the device input path: the work after the crop is compiled on the loader's
own thread before the first batch, and every batch of the loader, whatever it drew, then goes
through that one graph, never a break or a new trace, giving what eager gives."""

import threading

import torch
import torch._dynamo
from torch.utils.data import DataLoader, SequentialSampler

from tests.trainables.data.gpu.photos import CPU, jpeg_folder
from trainables.data.gpu.augment import DeviceRecipe
from trainables.data.gpu.decode import DeviceAugmentLoader, EncodedImages, SeededSampler, collate_encoded

RECIPE = DeviceRecipe(24, "deit", re_prob=0.5)


def loader(root, backend, epoch_number):
    ds = EncodedImages(root / "train")
    sampler = SeededSampler(SequentialSampler(ds), 11)
    sampler.set_epoch(epoch_number)
    batches = DataLoader(ds, sampler=sampler, batch_size=4, drop_last=True, collate_fn=collate_encoded)
    return DeviceAugmentLoader(batches, sampler, RECIPE, CPU, ds, compile_backend=backend)


def test_the_loader_compiles_once_on_its_own_thread_and_every_batch_replays_it_as_eager_would(tmp_path, monkeypatch):
    root = jpeg_folder(tmp_path, per_class=6)  # 12 images: 3 batches of 4 an epoch, each with its own draws
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiling_threads = []  # the thread of each frame torch.compile is asked to trace
    compiled = loader(root, "eager", 0)
    tracer = torch._dynamo.convert_frame.ConvertFrameAssert.__call__

    def traced(self, frame, *args, **kwargs):
        compiling_threads.append(threading.current_thread().name)
        return tracer(self, frame, *args, **kwargs)

    monkeypatch.setattr(torch._dynamo.convert_frame.ConvertFrameAssert, "__call__", traced)
    for n in range(2):
        got = [x for x, _ in (compiled if n == 0 else loader(root, "eager", n))]
        want = [x for x, _ in loader(root, None, n)]
        assert len(got) == 3 and all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1, "a new trace for a batch with other draws"
    assert not torch._dynamo.utils.counters["graph_break"]
    assert set(compiling_threads) == {threading.main_thread().name}, compiling_threads
