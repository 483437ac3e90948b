import timm
import torch

from mjp import MJPConfig, create_model, metrics
from tests.conftest import TINY_VIT


def test_a_model_without_pe_is_perfectly_consistent(gen):
    torch.manual_seed(0)
    model = create_model("vit_tiny_patch16_224", mjp=MJPConfig.variant("B"), **TINY_VIT)
    out = metrics.consistency(model, torch.randn(16, 3, 32, 32), 0.5, generator=gen)
    assert out["consistency"] == 1.0 and out["diff_norm"] < 1e-4


def test_a_model_with_pe_changes_under_shuffle(gen):
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", **TINY_VIT)
    with torch.no_grad():  # weights large enough that attention depends on the input
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(std=0.3)
    x = torch.randn(32, 3, 32, 32)
    out = metrics.consistency(model, x, 0.5, generator=gen)
    assert out["diff_norm"] > 0.1 and out["consistency"] < 1.0
    with torch.no_grad():  # the same network without a PE is blind to the shuffle
        model.pos_embed.zero_()
    out = metrics.consistency(model, x, 0.5, generator=gen)
    assert out["diff_norm"] < 1e-4 and out["consistency"] == 1.0


def test_metrics_are_reproducible_with_a_seeded_generator():
    torch.manual_seed(0)
    model = create_model("vit_tiny_patch16_224", mjp=MJPConfig(), **TINY_VIT)
    x = torch.randn(8, 3, 32, 32)
    a = metrics.consistency(model, x, 0.5, generator=torch.Generator().manual_seed(5))
    b = metrics.consistency(model, x, 0.5, generator=torch.Generator().manual_seed(5))
    assert a == b


def test_top1_under_shuffle_at_ratio_zero_is_plain_top1():
    torch.manual_seed(0)
    model = create_model("vit_tiny_patch16_224", mjp=MJPConfig(), **TINY_VIT).eval()
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    plain = (model(x).argmax(-1) == y).float().mean().item()
    assert metrics.top1_under_shuffle(model, x, y, 0.0) == plain


def test_metric_keys():
    from mjp import keys

    assert keys.top1_shuffled_key(0.9) == "val/top1_shuffled_0.9"
    assert keys.top1_shuffled_key(0.0) == "val/top1_shuffled_0"
    assert keys.privacy_key("c", "psnr") == "privacy/c_psnr"
    assert keys.robust_err_key("fog") == "robust/fog_err" and keys.pe_ev_key(3) == "pe/ev_3"
