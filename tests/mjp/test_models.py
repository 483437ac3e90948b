import pytest
import timm
import torch

from mjp import TABLE4_NAMES, MJPConfig, MJPOutput, create_model, sample_shuffle
from mjp.algorithm import MJPAlgorithm
from tests.conftest import TINY_VIT

VIT = "vit_tiny_patch16_224"


def build(variant="J", seed=0, **kw):
    torch.manual_seed(seed)
    return create_model(VIT, mjp=MJPConfig.variant(variant, **kw), **TINY_VIT)


def train_forward(model, x, seed=0):
    """A training-mode forward with a shuffle drawn as the engine draws it."""
    return model.train()(x, shuffle=MJPAlgorithm.for_model(model, seed=seed).shuffle(x, epoch=0))


@pytest.mark.parametrize("variant", ["A", "J"])
def test_mjp_off_equals_timm_bit_for_bit(variant):
    torch.manual_seed(0)
    ref = timm.create_model(VIT, **TINY_VIT).eval()
    ours = build(variant).eval()
    x = torch.randn(4, 3, 32, 32)
    assert torch.equal(ref(x), ours(x))
    assert torch.equal(ref.state_dict()["pos_embed"], ours.state_dict()["pos_embed"])


def test_plain_timm_when_no_config():
    torch.manual_seed(0)
    model = create_model(VIT, **TINY_VIT)
    assert type(model) is timm.models.vision_transformer.VisionTransformer


def test_timm_checkpoint_loads_missing_only_mjp_keys():
    state = timm.create_model(VIT, **TINY_VIT).state_dict()
    model = build("J", seed=1)
    result = model.load_state_dict(state, strict=False)
    assert not result.unexpected_keys
    assert result.missing_keys and all(k.startswith("mjp_") for k in result.missing_keys)
    assert torch.equal(model.pos_embed, state["pos_embed"])


@pytest.mark.parametrize("letter", list(TABLE4_NAMES))
def test_every_table4_variant_trains_a_step(letter):
    model = build(letter).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    x = torch.randn(8, 3, 32, 32)
    out = model(x, shuffle=MJPAlgorithm.for_model(model, seed=0).shuffle(x, epoch=0))
    logits, aux = (out.logits, out.loss_dal) if isinstance(out, MJPOutput) else (out, 0.0)
    assert logits.shape == (8, 10)
    loss = torch.nn.functional.cross_entropy(logits, torch.arange(8)) + 0.01 * aux
    loss.backward()
    opt.step()
    for name, p in model.named_parameters():
        if name.startswith("mjp_") or name == "pos_embed":
            assert not torch.equal(before[name], p.detach()), f"{letter}: {name} did not train"
    assert (model.pos_embed is None) == (letter == "B")
    assert isinstance(out, MJPOutput) == (MJPConfig.variant(letter).dal != "none")


def test_unk_replaces_the_pe_exactly_at_shuffled_slots():
    model = build("G").train()
    shuffle = sample_shuffle(4, (8, 8), 0.5, generator=torch.Generator().manual_seed(0), per_batch=True)
    model(torch.randn(4, 3, 32, 32), shuffle=shuffle).sum().backward()
    row_grad = model.pos_embed.grad[0, 1:].abs().sum(-1)  # patch rows (row 0 is CLS)
    shuffled = shuffle.mask[0]
    assert (row_grad[shuffled] == 0).all() and (row_grad[~shuffled] > 0).all()
    assert model.mjp_unk_embed.grad.abs().sum() > 0
    assert model.pos_embed.grad[0, 0].abs().sum() > 0  # CLS keeps its PE


def test_unk_gets_no_gradient_without_shuffled_slots():
    model = build("G").train()
    empty = sample_shuffle(4, (8, 8), 0.0)
    model(torch.randn(4, 3, 32, 32), shuffle=empty).sum().backward()
    assert model.mjp_unk_embed.grad is None or (model.mjp_unk_embed.grad == 0).all()


def test_eval_mode_does_not_shuffle_unless_asked():
    model = build("J").eval()
    x = torch.randn(2, 3, 32, 32)
    assert torch.equal(model(x), model(x))
    shuffle = sample_shuffle(2, (8, 8), 0.5, generator=torch.Generator().manual_seed(0))
    assert not torch.equal(model(x), model(x, shuffle=shuffle))


def test_the_model_is_a_pure_function_and_the_algorithm_holds_the_randomness():
    x = torch.randn(2, 3, 32, 32)
    model = build("G", seed=3).train()
    assert torch.equal(model(x), model(x))  # no shuffle drawn inside the model, in training mode too
    a, b = (MJPAlgorithm.for_model(model, seed=3) for _ in range(2))
    assert torch.equal(model(x, shuffle=a.shuffle(x, 0)), model(x, shuffle=b.shuffle(x, 0)))
    other = MJPAlgorithm.for_model(model, seed=99)
    assert not torch.equal(a.shuffle(x, 0).mask, other.shuffle(x, 0).mask)
    assert not any(isinstance(v, torch.Generator) for v in vars(model).values())
    assert not hasattr(model, "mjp_active") and not hasattr(model, "_mjp_active_shuffle")


def test_jigsaw_warmup_epochs_are_unshuffled():
    model = build("J")
    algorithm = MJPAlgorithm.for_model(model, seed=0, warmup_epochs=2)
    x = torch.randn(2, 3, 32, 32)
    assert algorithm.shuffle(x, 0) is None and algorithm.shuffle(x, 1) is None
    assert algorithm.shuffle(x, 2).mask.any()


def test_the_algorithm_state_round_trips():
    model, x = build("J"), torch.randn(2, 3, 32, 32)
    a = MJPAlgorithm.for_model(model, seed=5)
    state = a.state_dict()
    first = a.shuffle(x, 0)
    b = MJPAlgorithm.for_model(model, seed=6)
    b.load_state_dict(state)
    assert torch.equal(b.shuffle(x, 0).perm, first.perm)


@pytest.mark.parametrize(
    "extra",
    [dict(no_embed_class=True), dict(reg_tokens=2), dict(dynamic_img_size=True), dict(class_token=False, global_pool="avg")],
    ids=["no_embed_class", "registers", "dynamic_img_size", "no_cls"],
)
def test_timm_vit_options(extra):
    torch.manual_seed(0)
    kw = {**TINY_VIT, **extra}
    ref = timm.create_model(VIT, **kw).eval()
    torch.manual_seed(0)
    model = create_model(VIT, mjp=MJPConfig.variant("J"), **kw)
    x = torch.randn(2, 3, 32, 32)
    assert torch.equal(ref(x), model.eval()(x))
    out = train_forward(model, x)
    (out.logits.sum() + out.loss_dal).backward()
    assert model.mjp_unk_embed.grad.abs().sum() > 0


def test_dynamic_img_size_shuffles_other_sizes():
    torch.manual_seed(0)
    model = create_model(VIT, mjp=MJPConfig.variant("F"), dynamic_img_size=True, **TINY_VIT).train()
    out = train_forward(model, torch.randn(2, 3, 48, 40))
    assert out.shape == (2, 10)


def test_swin_gets_an_absolute_pe_and_mjp():
    torch.manual_seed(0)
    model = create_model(
        "swin_tiny_patch4_window7_224",
        mjp=MJPConfig.variant("J"),
        img_size=32,
        window_size=4,
        embed_dim=16,
        depths=(1, 1),
        num_heads=(1, 2),
        num_classes=10,
    )
    out = train_forward(model, torch.randn(2, 3, 32, 32))
    (out.logits.sum() + out.loss_dal).backward()
    assert model.absolute_pos_embed.shape == (1, 64, 16) and model.absolute_pos_embed.grad is not None
    assert model.mjp_unk_embed.grad.abs().sum() > 0


def test_resnet_gets_the_shuffle_only():
    torch.manual_seed(0)
    cfg = MJPConfig.variant("E", patch_size=8)
    model = create_model("resnet18", mjp=cfg, num_classes=10)
    torch.manual_seed(0)
    ref = timm.create_model("resnet18", num_classes=10)
    x = torch.randn(2, 3, 32, 32)
    assert torch.equal(ref.eval()(x), model.eval()(x))
    assert model.train()(x).shape == (2, 10)


@pytest.mark.parametrize("variant", ["G", "J"])
def test_resnet_refuses_pe_variants(variant):
    with pytest.raises(ValueError, match="no absolute position embedding.*allowed for ResNet"):
        create_model("resnet18", mjp=MJPConfig.variant(variant), num_classes=10)


def test_grid_too_small_for_the_ratio_is_an_error():
    with pytest.raises(ValueError, match=r"mjp.mask_ratio=0.02 selects round\(64 x 0.02\) = 1 of the 64 patches"):
        create_model(VIT, mjp=MJPConfig(mask_ratio=0.02), **TINY_VIT)


def test_unknown_model_and_bad_timm_argument_are_clear():
    with pytest.raises(
        ValueError, match="model.name='deit_smal_patch16_224' is not a timm model \\(did you mean deit_small_patch16_224\\?\\)"
    ):
        create_model("deit_smal_patch16_224", mjp=MJPConfig())
    with pytest.raises(ValueError, match="timm could not build 'vit_tiny_patch16_224' with not_an_argument=3: TypeError"):
        create_model(VIT, mjp=MJPConfig(), not_an_argument=3)


def test_unsupported_family_is_named():
    with pytest.raises(ValueError, match="MJP supports exactly these timm classes"):
        create_model("deit_tiny_distilled_patch16_224", mjp=MJPConfig(), img_size=32, patch_size=4, num_classes=10)


def test_no_weight_decay_covers_mjp_embeddings():
    nwd = build("F").no_weight_decay() | build("J").no_weight_decay()
    assert {"pos_embed", "mjp_unk_embed", "mjp_idx_embed", "cls_token"} <= nwd


def test_reference_idx_adds_its_table_to_every_slot():
    model = create_model(VIT, mjp=MJPConfig.variant("F", idx_mode="reference"), **TINY_VIT).eval()
    rows = model.mjp_pe_rows()
    assert torch.equal(model.mjp_slot_pos(model.mjp_grid, None), rows + model.mjp_idx_embed)
    ours = create_model(VIT, mjp=MJPConfig.variant("F"), **TINY_VIT).eval()
    assert torch.equal(ours.mjp_slot_pos(ours.mjp_grid, None), ours.mjp_pe_rows())  # ours: only at shuffled slots


@pytest.mark.parametrize("extra", [{}, dict(dynamic_img_size=True)], ids=["fixed", "dynamic_img_size"])
def test_reference_idx_is_added_in_the_unshuffled_forward_too(extra):
    """Evaluation (no shuffle) of a reference-mode IDX model must see E_idx, as its training did."""
    torch.manual_seed(0)
    model = create_model(VIT, mjp=MJPConfig.variant("F", idx_mode="reference"), **TINY_VIT, **extra).eval()
    x = torch.randn(2, 3, 32, 32)
    with_idx = model(x)
    with torch.no_grad():
        model.mjp_idx_embed.zero_()
    without = model(x)
    assert not torch.allclose(with_idx, without)
    torch.manual_seed(0)
    plain = timm.create_model(VIT, **TINY_VIT, **extra).eval()
    assert torch.allclose(without, plain(x), atol=1e-6)  # E_idx = 0: exactly timm's forward


def test_reference_spp_moves_every_patch_with_one_batch_order():
    model = create_model(VIT, mjp=MJPConfig.variant("C", spp_mode="reference", mask_ratio=0.27), **TINY_VIT).train()
    x = torch.randn(3, 3, 32, 32)
    shuffle = MJPAlgorithm.for_model(model, seed=0).shuffle(x, 0)
    assert shuffle.mask.all() and torch.equal(shuffle.perm[0], shuffle.perm[1]) and torch.equal(shuffle.perm[1], shuffle.perm[2])
    assert (shuffle.pixel_order == shuffle.pixel_order[:1, :1]).all()  # one pixel order for every patch of the batch
    ours = create_model(VIT, mjp=MJPConfig.variant("C", mask_ratio=0.27), **TINY_VIT).train()
    spp = MJPAlgorithm.for_model(ours, seed=0).shuffle(x, 0)
    assert (spp.mask.sum(1) == 17).all()  # round(64 x 0.27)
    assert spp.pixel_order.shape == (3, 64, 16)
    assert not torch.equal(ours(x, shuffle=spp), ours(x, shuffle=type(spp)(spp.mask, spp.perm, spp.grid)))  # the pixels moved
