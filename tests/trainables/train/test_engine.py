import copy
import math

import torch
from torch.utils.data import DataLoader

from mjp import keys
from trainables.config.build import build_config
from trainables.data.datasets import load_datasets
from trainables.evaluation.accuracy import evaluate, evaluate_shuffles
from trainables.train.engine import build_model, build_state, lr_factor, seed_everything, train_one_epoch

CPU = torch.device("cpu")
TINY = {"model": {"kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 2, "num_heads": 4}}, "optim": {"epochs": 2, "base_lr": 0.08}}


def setup(overrides=None):
    cfg = build_config(TINY, overrides)
    seed_everything(0)
    bundle = load_datasets(cfg)
    model = build_model(cfg, bundle.shape)
    train = DataLoader(bundle.train, batch_size=64, shuffle=True, drop_last=True, generator=torch.Generator().manual_seed(0))
    val = DataLoader(bundle.val, batch_size=128)
    return cfg, model, build_state(cfg, model, len(train), 1), train, val


def test_epochs_on_digits_learn_and_report_every_metric():
    # 8 epochs, not 4: at 4 the tiny ViT is still within noise of chance (14-16% top-1, either sampler)
    cfg, model, state, train, val = setup({"optim.epochs": 8})
    before = evaluate(model, val, CPU)
    for _ in range(8):
        out = train_one_epoch(cfg, state, train, CPU)
        state.epoch += 1
    after = evaluate(model, val, CPU)
    assert {keys.TRAIN_LOSS, keys.TRAIN_LOSS_DAL, keys.PERF_IMG_PER_S, keys.PERF_STEP_MS} <= out.keys()
    assert math.isfinite(out[keys.TRAIN_LOSS]) and out[keys.TRAIN_LOSS_DAL] > 0
    assert after[keys.VAL_LOSS] < before[keys.VAL_LOSS] - 0.2 and after[keys.VAL_TOP1] > 0.2  # chance: 0.1; 26% and -0.32 here
    shuffled = evaluate_shuffles(cfg, model, val, CPU)
    assert 0 <= shuffled[keys.VAL_CONSISTENCY] <= 1 and shuffled[keys.VAL_DIFF_NORM] >= 0
    assert shuffled[keys.top1_shuffled_key(0.0)] == after[keys.VAL_TOP1]


def test_checkpoint_resume_is_exact():
    """Train 2 epochs straight, or 1 epoch + save + restore into a fresh state + 1 epoch: same weights."""
    cfg, model, state, train, _ = setup()
    train_one_epoch(cfg, state, train, CPU)
    state.epoch += 1
    saved = copy.deepcopy(state.state_dict())  # state_dict() holds live tensors
    train.generator.manual_seed(1)
    train_one_epoch(cfg, state, train, CPU)
    straight = {k: v.clone() for k, v in model.state_dict().items()}

    cfg, model2, state2, train2, _ = setup()
    state2.load_state_dict(saved)
    train2.generator.manual_seed(1)
    train_one_epoch(cfg, state2, train2, CPU)
    for k, v in model2.state_dict().items():
        assert torch.equal(v, straight[k]), k


def test_no_decay_on_position_embeddings_and_unk():
    cfg, model, state, *_ = setup()
    decayed = {id(p) for g in state.optimizer.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    assert id(model.pos_embed) not in decayed and id(model.mjp_unk_embed) not in decayed
    assert id(model.blocks[0].attn.qkv.weight) in decayed


def test_lr_schedule_warms_up_then_decays_to_min():
    assert lr_factor(0, 100, 10, 0.01) == 0.1
    assert lr_factor(9, 100, 10, 0.01) == 1.0
    assert math.isclose(lr_factor(100, 100, 10, 0.01), 0.01)
    assert lr_factor(50, 100, 10, 0.01) < lr_factor(20, 100, 10, 0.01)


def test_jigsaw_warmup_turns_the_shuffle_off():
    """No slot is shuffled in a warm-up epoch, so E_unk gets no gradient and stays as it was."""
    cfg, model, state, train, _ = setup({"optim.jigsaw_warmup_epochs": 1})
    unk = model.mjp_unk_embed.detach().clone()
    train_one_epoch(cfg, state, train, CPU)
    assert torch.equal(model.mjp_unk_embed, unk)
    state.epoch = 1
    train_one_epoch(cfg, state, train, CPU)
    assert not torch.equal(model.mjp_unk_embed, unk)


def test_a_nan_loss_stops_the_run_with_its_epoch():
    import pytest

    from trainables.train.engine import NonFiniteLossError

    cfg, model, state, train, _ = setup({"runtime.log_every": 2})
    with torch.no_grad():
        model.head.weight.fill_(float("nan"))
    with pytest.raises(NonFiniteLossError, match="train/loss is nan in epoch 1"):
        train_one_epoch(cfg, state, train, CPU, on_log=lambda m, step: None)


def test_masks_do_not_depend_on_the_loader_worker_count():
    """Masks come from the run's jigsaw generator on the training device, one draw per batch, so
    the number of data-loader processes cannot change them."""
    drawn = {}
    for workers in (0, 2):
        cfg, model, state, _, _ = setup({"optim.epochs": 1})
        bundle = load_datasets(cfg)
        loader = DataLoader(
            bundle.train, batch_size=64, shuffle=True, drop_last=True, num_workers=workers, generator=torch.Generator().manual_seed(0)
        )
        masks, sample = [], state.algorithm.shuffle

        def recorded(x, epoch, masks=masks, sample=sample):
            masks.append(sample(x, epoch))
            return masks[-1]

        state.algorithm.shuffle = recorded
        train_one_epoch(cfg, state, loader, CPU)
        drawn[workers] = torch.stack([s.mask for s in masks])
    assert torch.equal(drawn[0], drawn[2])


def test_checkpoints_come_by_epoch_and_by_time():
    """Long epochs: a checkpoint at the end of any epoch that ends checkpoint_minutes after the last,
    so a lost worker restarts from there, not from epoch 1."""
    from trainables.train.loop import checkpoint_due, checkpoint_epochs

    cfg = build_config(TINY, {"optim.epochs": 30, "runtime.checkpoint_every": 10, "runtime.checkpoint_minutes": 5})
    saves = checkpoint_epochs(cfg)
    assert saves == {10, 20, 30}
    assert checkpoint_due(cfg, 10, saves, since_last_s=1.0)
    assert not checkpoint_due(cfg, 3, saves, since_last_s=299.0)
    assert checkpoint_due(cfg, 3, saves, since_last_s=300.0)
