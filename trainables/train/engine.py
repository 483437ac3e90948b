"""The training engine: model, DeiT recipe, one epoch (its evaluation: ``evaluation/accuracy.py``).
Plain torch, no Ray; the engine never talks to a process group. The step holds no host sync: losses accumulate on the device and are
read once every ``runtime.log_every`` steps and at the end of the epoch. The engine samples
each batch's jigsaw shuffle itself and hands it to the model, so a compiled model sees tensors,
not a random generator.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol, cast

import numpy as np
import torch
from timm.data import Mixup
from timm.loss import SoftTargetCrossEntropy
from timm.optim import param_groups_weight_decay
from torch import nn

import mjp
from mjp import keys
from mjp.algorithm import MJPAlgorithm
from mjp.models import MJPOutput
from mjp.models.factory import takes_image_size
from trainables.config.schema import TrainConfig
from trainables.config.seeds import derive_seed
from trainables.data.info import DataShape
from trainables.tracking.progress import PERF_DATA_WAIT_FRAC, pace, progress_every
from trainables.train.state import TrainState, unwrap


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


def seed_everything(seed: int) -> None:
    """Seed the process-global generators (weight init, augmentation, mixup) of one worker."""
    random.seed(seed)
    np.random.seed(seed)  # seeds are < 2**32 (mjp.config.SEED_BOUND)
    torch.manual_seed(seed)


def build_model(cfg: TrainConfig, shape: DataShape) -> nn.Module:
    """The configured timm model with MJP, sized for the data (``model.kwargs`` win)."""
    kwargs: dict[str, Any] = dict(num_classes=shape.num_classes, in_chans=shape.in_chans)
    if takes_image_size(cfg.model.name):
        kwargs["img_size"] = shape.img_size
    kwargs.update(cfg.model.kwargs)
    if cfg.model.pretrained_file:
        kwargs.update(pretrained=True, pretrained_cfg_overlay=dict(file=cfg.model.pretrained_file))
    return mjp.create_model(cfg.model.name, mjp=cfg.mjp, april_block=cfg.model.april_block, **kwargs)


def lr_factor(step: int, total: int, warmup: int, min_ratio: float) -> float:
    """Linear warm-up to 1, then cosine down to ``min_ratio``."""
    if step < warmup:
        return (step + 1) / warmup
    t = (step - warmup) / max(1, total - warmup)
    return min_ratio + 0.5 * (1 - min_ratio) * (1 + math.cos(math.pi * min(t, 1.0)))


#: batches whose jigsaw one sampler call draws (``mjp.algorithm``: about 70 / 8 sampler ops a step)
JIGSAW_DRAWS_AHEAD = 8
# On the CPU each batch draws its own jigsaw, as before this was added: the same distribution either
# way, and the runs that README's and results/' tables come from (CPU, seeded) keep every digit.


def build_algorithm(cfg: TrainConfig, model: nn.Module, rank: int = 0, device: torch.device | str = "cpu") -> MJPAlgorithm:
    """The MJP step hook of one data-parallel worker: its own jigsaw stream, drawn on ``device``."""
    return MJPAlgorithm.for_model(
        unwrap(model),
        seed=derive_seed(cfg.mjp.seed, "jigsaw", rank),
        device=device,
        warmup_epochs=cfg.optim.jigsaw_warmup_epochs,
        draws_ahead=JIGSAW_DRAWS_AHEAD if torch.device(device).type == "cuda" else 1,
    )


class _NoWeightDecay(Protocol):
    """A model that names the parameters kept out of weight decay (timm's ViTs, every MJP model)."""

    def no_weight_decay(self) -> set[str]: ...


def build_state(
    cfg: TrainConfig, model: nn.Module, steps_per_epoch: int, world_size: int, algorithm: MJPAlgorithm | None = None
) -> TrainState:
    """AdamW (DeiT lr scaling, no decay on PEs, E_unk, norms, biases), warm-up + cosine, grad scaler;
    ``algorithm`` defaults to rank 0's on the CPU (``build_algorithm``)."""
    raw = unwrap(model)
    o = cfg.optim
    lr = o.base_lr * cfg.data.batch_size * world_size / o.lr_batch_ref
    no_decay = cast(_NoWeightDecay, raw).no_weight_decay()
    groups = param_groups_weight_decay(raw, o.weight_decay, no_weight_decay_list=no_decay)
    optimizer = torch.optim.AdamW(groups, lr=lr)
    total = o.epochs * steps_per_epoch
    warmup = round(o.warmup_epochs * steps_per_epoch)
    min_ratio = min(o.min_lr / lr, 1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, total, warmup, min_ratio))
    scaler = torch.amp.GradScaler(enabled=cfg.runtime.amp == "fp16" and torch.cuda.is_available())
    return TrainState(model, optimizer, scheduler, scaler, total, algorithm=algorithm or build_algorithm(cfg, raw))


def make_mixup(cfg: TrainConfig, num_classes: int) -> Mixup | None:
    o = cfg.optim
    if o.mixup <= 0 and o.cutmix <= 0:
        return None
    return Mixup(mixup_alpha=o.mixup, cutmix_alpha=o.cutmix, label_smoothing=o.label_smoothing, num_classes=num_classes)


def _autocast(cfg: TrainConfig, device: torch.device):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.runtime.amp)
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None and device.type == "cuda")


def train_one_epoch(
    cfg: TrainConfig,
    state: TrainState,
    loader: Iterable,
    device: torch.device,
    mixup: Mixup | None = None,
    on_log: Callable[[dict[str, float], int], None] | None = None,
) -> dict[str, float]:
    """One epoch; returns ``train/loss``, ``train/loss_dal``, ``train/lr``, ``perf/img_per_s``, ``perf/step_ms``,
    ``perf/data_wait_frac`` (time blocked on the loader / the epoch's time).

    ``on_log(metrics, step)`` is called every ``runtime.log_every`` steps with the running means
    and the epoch's progress so far (``trainables.tracking.progress.pace``), and with the progress
    alone in between where an epoch is short (``progress_every``).
    Raises ``NonFiniteLossError`` when the loss is NaN/inf (checked at those same points).
    """
    model, algorithm = state.model, state.algorithm
    if algorithm is None:
        raise ValueError("train_one_epoch draws each batch's shuffle from state.algorithm, which is None (build_state sets it)")
    model.train()
    criterion = SoftTargetCrossEntropy() if mixup else nn.CrossEntropyLoss(label_smoothing=cfg.optim.label_smoothing)
    steps_per_epoch = max(1, state.total_steps // cfg.optim.epochs)
    report_every = progress_every(steps_per_epoch, cfg.runtime.log_every)
    dal_warmup = cfg.optim.dal_warmup_epochs / cfg.optim.epochs
    sums = torch.zeros(2, device=device)  # loss, dal loss
    seen = images = 0
    start = time.perf_counter()
    waited, ready = 0.0, start  # time blocked on the loader; when the last step ended

    def running() -> dict[str, float]:
        loss, dal = (sums / max(seen, 1)).tolist()
        if not math.isfinite(loss):
            raise NonFiniteLossError(f"train/loss is {loss} in epoch {state.epoch + 1}")
        return {keys.TRAIN_LOSS: loss, keys.TRAIN_LOSS_DAL: dal, keys.TRAIN_LR: state.optimizer.param_groups[0]["lr"]}

    for x, y in loader:
        waited += time.perf_counter() - ready
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        if cfg.runtime.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        if mixup is not None:
            x, y = mixup(x, y)
        step = state.epoch * steps_per_epoch + seen
        shuffle = algorithm.shuffle(x, state.epoch)
        with _autocast(cfg, device):
            out = model(x, shuffle=shuffle)
            logits, dal = (out.logits, out.loss_dal) if isinstance(out, MJPOutput) else (out, None)
            loss = criterion(logits, y)
            total = loss if dal is None else loss + algorithm.dal_weight(step / max(state.total_steps, 1), dal_warmup) * dal
        state.optimizer.zero_grad(set_to_none=True)
        state.scaler.scale(total).backward()
        if cfg.optim.clip_grad:
            state.scaler.unscale_(state.optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.clip_grad)
        state.scaler.step(state.optimizer)
        state.scaler.update()
        state.scheduler.step()
        sums[0] += loss.detach()
        if dal is not None:
            sums[1] += dal.detach()
        seen += 1
        images += x.shape[0]
        if on_log is not None and seen % cfg.runtime.log_every == 0:
            metrics = running()  # its host sync ends the steps so far: the pace below is real
            on_log({**metrics, **pace(state.epoch + 1, seen, steps_per_epoch, images, waited, time.perf_counter() - start)}, step + 1)
        elif on_log is not None and seen % report_every == 0:  # a short epoch's progress alone: no host sync
            on_log(pace(state.epoch + 1, seen, steps_per_epoch, images, waited, time.perf_counter() - start), step + 1)
        ready = time.perf_counter()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    result = running()
    result.update(
        {keys.PERF_IMG_PER_S: images / elapsed, keys.PERF_STEP_MS: 1e3 * elapsed / max(seen, 1), PERF_DATA_WAIT_FRAC: waited / elapsed}
    )
    return result
