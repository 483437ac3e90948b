"""What only a GPU can show: every evaluation once on CUDA, the sampler's contract on CUDA, APRIL's
solve on CUDA. Marked ``gpu``: ``make test-gpu`` runs them; ``make test`` skips them without CUDA.

``MJP_GPU_TEST_DEVICE=cpu`` runs the same code on the CPU (to check the tests themselves where
there is no GPU); the default device is ``cuda``. Nothing here needs Ray, MLflow or Optuna, so the
GPU machine's bare image (torch, torchvision, timm) runs them.
"""

from __future__ import annotations

import pytest
import torch

from mjp import MJPConfig, create_model, sample_shuffle
from mjp.algorithm import MJPAlgorithm
from mjp.masking import target_count
from tests.conftest import TINY_VIT

pytestmark = pytest.mark.gpu


def tiny(device: torch.device, variant: str = "J", **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_model("vit_tiny_patch16_224", mjp=MJPConfig.variant(variant), **{**TINY_VIT, **kw}).to(device)


@pytest.mark.parametrize("batch, ratio, grid", [(64, 0.27, (14, 14)), (256, 0.1, (14, 14)), (256, 0.5, (14, 14)), (256, 0.27, (24, 24))])
def test_the_sampler_keeps_its_contract_on_the_device(device, batch, ratio, grid):
    gen = torch.Generator(device=device).manual_seed(0)
    s = sample_shuffle(batch, grid, ratio, generator=gen)
    assert s.mask.device.type == device.type and s.perm.device.type == device.type
    assert (s.mask.sum(1) == target_count(grid[0] * grid[1], ratio)).all()
    moved = s.perm != torch.arange(grid[0] * grid[1], device=device)
    assert not (moved & ~s.mask).any()  # only selected positions move
    again = sample_shuffle(batch, grid, ratio, generator=torch.Generator(device=device).manual_seed(0))
    assert torch.equal(s.mask, again.mask) and torch.equal(s.perm, again.perm)


def test_a_training_step_with_bf16_and_the_algorithm_on_the_device(device):
    model = tiny(device).train()
    algorithm = MJPAlgorithm.for_model(model, seed=0, device=device)
    x = torch.randn(8, 3, 32, 32, device=device)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        out = model(x, shuffle=algorithm.shuffle(x, 0))
        loss = out.logits.float().logsumexp(-1).mean() + 0.01 * out.loss_dal
    loss.backward()
    assert model.mjp_unk_embed.grad.abs().sum() > 0


def test_consistency_and_shuffled_evaluation_on_the_device(device):
    from mjp.metrics import consistency_per_image, shuffled_correct

    model = tiny(device).eval()
    gen = torch.Generator(device=device).manual_seed(0)
    x, y = torch.randn(8, 3, 32, 32, device=device), torch.randint(0, 10, (8,), device=device)
    agree, diff = consistency_per_image(model, x, 0.5, generator=gen)
    correct = shuffled_correct(model, x, y, 0.9, generator=gen)
    assert agree.device.type == diff.device.type == correct.device.type == device.type and (diff >= 0).all()


def test_privacy_attack_is_exact_on_the_device(device):
    """APRIL's solve runs where the model lives (CUDA's lstsq has no gelsd): float64, exact."""
    from mjp.privacy import attack_images

    torch.manual_seed(0)
    kw = dict(img_size=16, patch_size=4, embed_dim=64, depth=2, num_heads=4, num_classes=10, in_chans=1)
    model = create_model("vit_tiny_patch16_224", mjp=MJPConfig(mask_ratio=0.5), april_block=True, **kw).eval()
    with torch.no_grad():
        model.blocks[0].attn.qkv.weight.normal_(std=0.2)
    model = model.to(device)
    small = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    x = torch.nn.functional.interpolate(small, size=16, mode="bilinear").to(device)
    y = torch.tensor([1, 2], device=device)
    for setting in ("a", "c"):
        result = attack_images(model, x, y, setting)
        assert result.reconstructions.device.type == device.type or result.reconstructions.device.type == "cpu"
    assert attack_images(model, x, y, "a").scores["psnr"] > 60


def evaluate_on_the_device(device: torch.device, what: str, overrides: list[str]):
    from trainables.config.build import load_config
    from trainables.data.datasets import load_datasets
    from trainables.evaluation.suite import run_evaluations
    from trainables.train.engine import build_model

    cfg = load_config(
        "trainables/configs/digits_vit_tiny.yaml", ["model.kwargs={patch_size: 2, embed_dim: 32, depth: 2, num_heads: 2}", *overrides]
    )
    bundle = load_datasets(cfg)
    model = build_model(cfg, bundle.shape).to(device).eval()
    return run_evaluations(cfg, model, bundle, device, (what,))[what]


def test_robustness_on_the_device(device):
    # imagecorruptions imports cv2, numba and scikit-image: about 140 MB that the GPU check's kit
    # cannot carry to a stock PyTorch image (docs/gpu-check.md); without them this test says so
    try:
        import imagecorruptions  # noqa: F401
    except ImportError as exc:  # cv2, numba or skimage missing is an ImportError of its own, not a ModuleNotFoundError
        pytest.skip(f"imagecorruptions (with cv2, numba, scikit-image) does not import on this image: {exc}")
    from mjp import keys

    result = evaluate_on_the_device(device, "robustness", ["eval.robustness={images: 8, corruptions: [gaussian_noise, fog], workers: 1}"])
    assert keys.ROBUST_MCE_UNNORMALIZED in result.metrics and result.figures


def test_pe_analysis_on_the_device(device):
    from mjp import keys

    result = evaluate_on_the_device(device, "pe", ["eval.pe_analysis={umap: false, attention_images: 2}"])
    assert keys.PE_MAE_2D in result.metrics and result.figures


def test_the_engine_evaluates_shuffles_on_the_device(device):
    from torch.utils.data import DataLoader

    from mjp import keys
    from trainables.config.build import build_config
    from trainables.data.datasets import load_datasets
    from trainables.evaluation.accuracy import evaluate_shuffles
    from trainables.train.engine import build_model

    cfg = build_config({"model": {"kwargs": {"patch_size": 2, "embed_dim": 16, "depth": 1, "num_heads": 2}}})
    bundle = load_datasets(cfg)
    model = build_model(cfg, bundle.shape).to(device)
    out = evaluate_shuffles(cfg, model, DataLoader(bundle.val, batch_size=64), device)
    assert 0 <= out[keys.VAL_CONSISTENCY] <= 1
