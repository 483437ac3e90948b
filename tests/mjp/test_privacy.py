"""Gradient-inversion attacks on tiny models with real gradients."""

import numpy as np
import pytest
import torch
from skimage.metrics import structural_similarity

from mjp import MJPConfig, create_model
from mjp.privacy import (
    LPIPS_MISSING,
    NotAttackable,
    april_reconstruct,
    attack_images,
    image_scores,
    infer_label,
    invert_gradients,
    sample_gradients,
)

# D = 64 >= 17 tokens and >= 16 pixels per 4x4 grey patch: the conditions for an exact solve.
KW = dict(img_size=16, patch_size=4, embed_dim=64, depth=2, num_heads=4, num_classes=10, in_chans=1)


def attackable(mjp=None, seed=0):
    """A model whose attention depends on its input, as after training. (At timm's init, std 0.02,
    attention is nearly uniform, every token gets almost the same gradient and the linear system
    is ill-conditioned: exact in float64, not in float32.)"""
    torch.manual_seed(seed)
    model = create_model("vit_tiny_patch16_224", mjp=mjp, april_block=True, **KW).eval()
    with torch.no_grad():
        model.blocks[0].attn.qkv.weight.normal_(std=0.2)
    return model


def images(n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    # smooth real-looking images: upsampled noise, so SSIM and FFT see structure
    small = torch.rand(n, 1, 4, 4, generator=g)
    return torch.nn.functional.interpolate(small, size=16, mode="bilinear"), torch.randint(0, 10, (n,), generator=g)


def test_setting_a_recovers_the_image_exactly():
    x, y = images()
    result = attack_images(attackable(), x, y, "a")
    assert result.scores["psnr"] > 60 and result.scores["ssim"] > 0.999


def test_setting_a_is_exact_for_mjp_models_with_dal_too():
    x, y = images()
    model = attackable(MJPConfig(mask_ratio=0.5))
    result = attack_images(model, x, y, "a", dal_weight=0.01)
    assert result.scores["psnr"] > 60


def test_mjp_with_unk_drops_setting_c_psnr_by_more_than_10_db():
    x, y = images()
    model = attackable(MJPConfig.variant("G", mask_ratio=0.5))
    a = attack_images(model, x, y, "a").scores["psnr"]
    c = attack_images(model, x, y, "c", ratio=0.5, generator=torch.Generator().manual_seed(0)).scores["psnr"]
    assert a - c > 10


def test_without_unk_the_shuffled_image_itself_leaks():
    """Ablation (no E_unk): setting b recovers x~ exactly; with E_unk it does not."""
    x, y = images()
    plain = attack_images(attackable(MJPConfig.variant("E", mask_ratio=0.5)), x, y, "b", generator=torch.Generator().manual_seed(0))
    unk = attack_images(attackable(MJPConfig.variant("G", mask_ratio=0.5)), x, y, "b", generator=torch.Generator().manual_seed(0))
    assert plain.scores["psnr"] > 60 and unk.scores["psnr"] < 30


def test_slots_with_unk_are_detected_and_left_empty():
    """Shuffled slots take E_unk: their PE rows get no gradient, so the attack cannot solve for them.
    (Their tokens still send gradient into Eq. 1 through E_unk, which also spoils the other rows.)"""
    x, y = images(1)
    model = attackable(MJPConfig.variant("G", mask_ratio=0.5))
    from mjp.metrics import sample_eval_shuffle

    shuffle = sample_eval_shuffle(model, x, 0.5, torch.Generator().manual_seed(1))
    grads = sample_gradients(model, x, y[:1], shuffle=shuffle)
    assert (grads["pos_embed"][0, 1:][shuffle.mask[0]] == 0).all()
    recon = april_reconstruct(model, grads)
    patches = recon.reshape(4, 4, 4, 4).permute(0, 2, 1, 3).reshape(16, 16)
    assert (patches[shuffle.mask[0]] == 0).all() and (patches[~shuffle.mask[0]] != 0).any()


def test_models_without_the_april_block_are_refused_with_the_reason():
    torch.manual_seed(0)
    model = create_model("vit_tiny_patch16_224", **KW)
    x, y = images(1)
    with pytest.raises(NotAttackable, match="build it with april_block=True"):
        april_reconstruct(model, sample_gradients(model, x, y))


def test_label_inference_from_the_head_bias():
    x, y = images(3)
    model = attackable()
    for i in range(3):
        assert infer_label(model, sample_gradients(model, x[i : i + 1], y[i : i + 1])) == y[i]


def test_optimisation_attack_lowers_its_objective_and_beats_a_random_image():
    torch.manual_seed(0)
    model = create_model("vit_tiny_patch16_224", mjp=MJPConfig.variant("A"), **{**KW, "embed_dim": 32})
    x, y = images(1)
    grads = sample_gradients(model, x, y)
    result = invert_gradients(model, grads, y, tuple(x.shape), steps=200, generator=torch.Generator().manual_seed(0))
    assert result.objective[-1] < 0.1 * result.objective[0]
    from mjp.privacy import to_unit

    target = to_unit(x, x)
    noise = torch.rand(x.shape, generator=torch.Generator().manual_seed(3))
    assert image_scores(to_unit(result.image, x), target)["psnr"] > image_scores(noise, target)["psnr"] + 2


def test_scores_match_scikit_image_and_their_definitions():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(1, 1, 32, 32, generator=g)
    b = (a + 0.1 * torch.randn(1, 1, 32, 32, generator=g)).clamp(0, 1)
    s = image_scores(b, a)
    oracle = structural_similarity(
        a[0, 0].numpy(), b[0, 0].numpy(), gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=1.0
    )
    assert s["ssim"] == pytest.approx(oracle, abs=1e-4)
    assert s["mse"] == pytest.approx(((a - b) ** 2).mean().item())
    assert s["psnr"] == pytest.approx(10 * np.log10(1 / s["mse"]), rel=1e-5)
    same = image_scores(a, a)
    assert same["fft2d"] == pytest.approx(0, abs=1e-6) and same["ssim"] == pytest.approx(1)
    assert "lpips" not in s and "lpips" in LPIPS_MISSING


def test_bad_setting_and_attack_are_named():
    x, y = images(1)
    with pytest.raises(ValueError, match="setting='d'; allowed: a, b, c"):
        attack_images(attackable(), x, y, "d")
    with pytest.raises(ValueError, match="attack='dlg'; allowed: april, inversion"):
        attack_images(attackable(), x, y, "a", attack="dlg")


def test_at_init_float32_gradients_defeat_the_solve_that_float64_makes_exact():
    """timm's init (std 0.02): the PE-gradient matrix is ill-conditioned; the logged condition
    number says so, and a float64 client shows the attack is exact in principle."""
    torch.manual_seed(0)
    model = create_model("vit_tiny_patch16_224", april_block=True, **KW).eval()
    x, y = images(2)
    f32 = attack_images(model, x, y, "a")
    f64 = attack_images(model, x, y, "a", client_dtype=torch.float64)
    assert f32.scores["cond"] > 1e5 and f64.scores["cond"] == pytest.approx(f32.scores["cond"], rel=0.5)
    assert f64.scores["psnr"] > 60 and f32.scores["psnr"] < f64.scores["psnr"] - 30
    assert next(model.parameters()).dtype == torch.float32  # the client is a copy


def test_the_solve_is_gelsd_s_minimum_norm_solution_without_gelsd():
    """CUDA's lstsq has no gelsd; the pseudo-inverse gives LAPACK gelsd's answer on rank-deficient
    systems (G_p has zero rows at E_unk's slots), so the attack runs on any device."""
    from mjp.privacy.april import min_norm_lstsq

    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 17, generator=g, dtype=torch.float64)
    a[:, [3, 9]] = 0  # two unknowns that no equation sees
    b = torch.randn(64, 5, generator=g, dtype=torch.float64)
    ours = min_norm_lstsq(a, b)
    torch.testing.assert_close(ours, torch.linalg.lstsq(a, b, driver="gelsd").solution)
    assert ours[[3, 9]].abs().max() < 1e-12  # the minimum-norm answer for what nothing determines


def test_an_lpips_backbone_that_is_a_pickled_module_is_one_line_that_never_suggests_unsafe_loading(tmp_path):
    from mjp.privacy.scores import LPIPS

    torch.save(torch.nn.Linear(2, 2), tmp_path / "alexnet.pth")
    with pytest.raises(ValueError) as err:
        LPIPS(tmp_path / "alexnet.pth")
    text = str(err.value)
    assert "alexnet.pth" in text and "allowed: a torchvision AlexNet state dict" in text
    assert "weights_only" not in text and "\n" not in text


def test_the_attack_that_applies_is_chosen_with_its_reason():
    from mjp.privacy import choose_attack

    torch.manual_seed(0)
    assert choose_attack(attackable())[0] == "april"
    attack, why = choose_attack(create_model("vit_tiny_patch16_224", **KW))
    assert attack == "inversion" and "april_block=True" in why


def test_progress_is_reported_once_per_unit_of_work():
    from mjp.privacy import attack_units

    x, y = images(2)
    for attack, model in (("april", attackable()), ("inversion", create_model("vit_tiny_patch16_224", **{**KW, "embed_dim": 32}))):
        ticks: list[int] = []
        attack_images(
            model,
            x,
            y,
            "c",
            attack=attack,
            inversion_steps=3,
            generator=torch.Generator().manual_seed(0),
            on_progress=lambda t=ticks: t.append(1),
        )
        assert len(ticks) == attack_units(attack, 2, 3) == (2 if attack == "april" else 6)
