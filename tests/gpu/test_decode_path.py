"""``data.decode: gpu`` where it runs: the device decode + transforms against the CPU path's output,
and no host synchronisation in the augmentation or in an MJP training step.

``MJP_GPU_TEST_DEVICE=cpu`` runs the same code on the CPU (the sync check then looks for the aten
ops that would synchronise on CUDA; ``torch.cuda.set_sync_debug_mode("error")`` needs CUDA)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.data import DataLoader, SequentialSampler

from mjp import MJPConfig, create_model
from mjp.algorithm import MJPAlgorithm
from tests.conftest import TINY_VIT
from trainables.data.gpu.augment import DeviceRecipe, augment_batch
from trainables.data.gpu.decode import DeviceAugmentLoader, EncodedImages, SeededSampler, collate_encoded, decode_on_device

pytestmark = pytest.mark.gpu

SIZE = 64  # timm's eval transform: resize the shorter side to 73, centre crop 64
#: aten ops that copy a device value to the host (and so wait for the device) on CUDA
SYNCING_OPS = (
    "aten._local_scalar_dense",
    "aten.nonzero",
    "aten.masked_select",
    "aten.is_nonzero",
    "aten.equal",
    "aten._unique",
    "aten.unique",
    "aten.item",
)


def colourful(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Smooth, strongly coloured waves with different phases per channel: a channel swap, a colour
    space mix-up or a crop moved by a pixel or two all change it visibly."""
    ys, xs = np.mgrid[0:h, 0:w] / 16.0
    a, b, c = rng.uniform(0.6, 1.4, 3)
    img = np.stack([np.sin(a * xs + c), np.cos(b * ys - c), np.sin(a * xs * 0.7 + b * ys * 1.3)], -1)
    return ((img + 1) * 120 + 8).astype(np.uint8)


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory) -> list:
    root = tmp_path_factory.mktemp("decode") / "c"
    root.mkdir()
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate([(96, 128), (120, 90), (100, 100), (77, 140), (130, 97), (88, 88)]):
        Image.fromarray(colourful(rng, h, w)).save(root / f"{i}.jpg", quality=95)
    Image.fromarray(colourful(rng, 90, 110)).convert("CMYK").save(root / "cmyk.jpg", quality=95)
    Image.fromarray(colourful(rng, 110, 90)).save(root / "progressive.jpg", quality=95, progressive=True)
    return sorted(root.glob("*.jpg"))


def cpu_path(paths) -> torch.Tensor:
    """``data.decode: cpu``'s evaluation transform (PIL decode, timm's resize + centre crop, normalise)."""
    from trainables.config.build import build_config
    from trainables.data.transforms import image_transforms

    transform = image_transforms(build_config({"data": {"augment": "none"}}).data, SIZE, train=False)
    return torch.stack([transform(Image.open(p).convert("RGB")) for p in paths])


def device_path(paths, device: torch.device) -> torch.Tensor:
    """``data.decode: gpu``: the loader's byte buffers, decode and transforms on ``device``, prefetched."""
    ds = EncodedImages(paths[0].parent.parent)
    sampler = SeededSampler(SequentialSampler(ds), 0)
    loader = DataLoader(ds, sampler=sampler, batch_size=4, collate_fn=collate_encoded, pin_memory=device.type == "cuda")
    batches = DeviceAugmentLoader(loader, sampler, DeviceRecipe(SIZE, "none"), device, ds)
    out = torch.cat([x for x, _ in batches])
    assert out.device.type == device.type
    return out.cpu()


def distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """Mean absolute difference in normalised units (1 grey level is about 0.017)."""
    return (a - b).abs().mean().item()


def test_the_decode_path_matches_the_cpu_path_and_would_catch_a_mix_up(device, jpegs):
    """Within ~3 grey levels on average (decoders and PIL's between-pass rounding differ by 1-2);
    a swapped channel order, YCbCr read as RGB, a crop moved by 2 pixels, or ImageNet's std
    forgotten are each several times further off."""
    ours, reference = device_path(jpegs, device), cpu_path(jpegs)
    assert ours.shape == reference.shape == (len(jpegs), 3, SIZE, SIZE)
    tolerance = 0.05
    assert distance(ours, reference) < tolerance
    per_image = (ours - reference).abs().mean(dim=(1, 2, 3))
    assert per_image.max() < 2 * tolerance  # CMYK and progressive files too (decoded by the loader)

    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    pixels = ours * std + mean  # back to [0, 1] RGB
    y = 0.299 * pixels[:, 0] + 0.587 * pixels[:, 1] + 0.114 * pixels[:, 2]
    ycbcr = torch.stack([y, (pixels[:, 2] - y) * 0.564 + 0.5, (pixels[:, 0] - y) * 0.713 + 0.5], 1)
    wrong = {
        "BGR": ours.flip(1),
        "YCbCr": (ycbcr - mean) / std,
        "crop moved 2 px": torch.roll(ours, shifts=(2, 2), dims=(2, 3)),
        "no std": pixels - mean,
    }
    for name, mistake in wrong.items():
        assert distance(mistake, reference) > 3 * tolerance, name


def test_the_training_transforms_on_the_device_match_their_cpu_run(device, jpegs):
    """DeiT's recipe, same seeds, device vs CPU: decoders and kernels differ by rounding only (a
    threshold op such as solarize may flip a few pixels)."""
    datas = [EncodedImages(jpegs[0].parent.parent)[(i, 0)][0] for i in range(len(jpegs))]
    seeds = list(range(100, 100 + len(jpegs)))
    recipe = DeviceRecipe(SIZE, "deit", re_prob=1.0)
    on_device = augment_batch(decode_on_device(datas, device), seeds, recipe).cpu()
    on_cpu = augment_batch(decode_on_device(datas, torch.device("cpu")), seeds, recipe)
    diff = (on_device - on_cpu).abs()
    assert diff.median() < 0.05 and (diff < 0.2).float().mean() > 0.9


class SyncingOps(TorchDispatchMode):
    """Records the aten ops that, on CUDA tensors, copy a value to the host."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func).split(".default")[0].split(".Tensor")[0] in SYNCING_OPS or str(func) in SYNCING_OPS:
            self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


class NoHostSync:
    """``torch.cuda.set_sync_debug_mode("error")`` on CUDA (any synchronising call raises), and on
    every device a record of the aten ops that would synchronise."""

    def __init__(self, device: torch.device):
        self.device, self.ops = device, SyncingOps()

    def __enter__(self) -> SyncingOps:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.set_sync_debug_mode("error")
        return self.ops.__enter__()

    def __exit__(self, *exc) -> None:
        self.ops.__exit__(*exc)
        if self.device.type == "cuda":
            torch.cuda.set_sync_debug_mode(0)


def test_the_augmentation_never_waits_for_the_device(device, jpegs):
    images = decode_on_device([EncodedImages(jpegs[0].parent.parent)[(i, 0)][0] for i in range(len(jpegs))], device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    with NoHostSync(device) as ops:
        x = augment_batch(images, list(range(len(images))), DeviceRecipe(SIZE, "deit", re_prob=1.0))
    assert x.device.type == device.type and ops.seen == []


def test_an_mjp_training_step_never_waits_for_the_device(device):
    """Forward (jigsaw shuffle, masked positions), DAL loss, backward: no syncing op on any device;
    on CUDA the optimizer step runs under the sync check too (AdamW keeps its step count on the
    host there, so its ``.item()`` is no device sync; on the CPU it is, to the spy, a scalar read)."""
    torch.manual_seed(0)
    model = create_model("vit_tiny_patch16_224", mjp=MJPConfig.variant("J"), **TINY_VIT).to(device).train()
    algorithm = MJPAlgorithm.for_model(model, seed=0, device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 3, 32, 32, device=device), torch.randint(0, 10, (8,), device=device)
    for step in range(2):  # the second step runs with every state allocated
        with NoHostSync(device) as ops:
            out = model(x, shuffle=algorithm.shuffle(x, 0))
            loss = torch.nn.functional.cross_entropy(out.logits, y) + 0.01 * out.loss_dal
            loss.backward()
        assert ops.seen == [], step
        if device.type == "cuda":
            torch.cuda.set_sync_debug_mode("error")
        try:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        finally:
            if device.type == "cuda":
                torch.cuda.set_sync_debug_mode(0)
