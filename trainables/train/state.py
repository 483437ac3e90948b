"""What a checkpoint holds, and loading it without running code.

A checkpoint is tensors and plain Python values only (RNG states included: numpy's as a tensor
and ints), so ``torch.load(..., weights_only=True)`` reads it. Anything else (a pickle that
would run code, a file that is no checkpoint) is refused with one line naming the file.
"""

from __future__ import annotations

import io
import pickle
import random
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from mjp.algorithm import MJPAlgorithm
from trainables.errors import UserError

CHECKPOINT_FILE = "state.pt"


class CheckpointError(UserError):
    """A file that is not a checkpoint this platform wrote, or one that would run code."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (a full disk, a missing or read-only folder)."""


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DDP / compile wrapper."""
    while hasattr(model, "module") or hasattr(model, "_orig_mod"):
        model = getattr(model, "module", None) or model.get_submodule("_orig_mod")
    return model


def load_safely(path: str | Path) -> Any:
    """``torch.load`` with ``weights_only=True``: tensors and plain types, never code."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist" + (" (it is a directory)" if path.is_dir() else ""))
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive
        raise CheckpointError(f"{path} is not a PyTorch checkpoint (not a torch.save archive)")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        named = re.search(r"GLOBAL (\S+)", str(err))
        what = f"it would call {named.group(1)}" if named else "it holds objects other than tensors and plain values"
        raise CheckpointError(
            f"{path} is not a safe checkpoint: {what}; refusing to load it (only tensors and plain values are read)"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, OSError) as err:
        raise CheckpointError(
            f"{path} is a damaged PyTorch checkpoint ({type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''})"
        ) from None


def _numpy_state() -> dict[str, Any]:
    state = np.random.get_state(legacy=True)  # the default: numpy's stubs type a call without it as legacy=False
    if isinstance(state, dict):  # legacy=True gives a dict only for bit generators other than the global MT19937
        raise TypeError(f"numpy's global generator is {state.get('bit_generator')}, not MT19937")
    kind, keys, pos, has_gauss, cached = state
    return {
        "kind": kind,
        "keys": torch.from_numpy(keys.astype(np.int64)),
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "cached": float(cached),
    }


def _set_numpy_state(state: dict[str, Any]) -> None:
    np.random.set_state((state["kind"], state["keys"].numpy().astype(np.uint32), state["pos"], state["has_gauss"], state["cached"]))


def _python_state() -> list[Any]:
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]


def _set_python_state(state: list[Any]) -> None:
    random.setstate((state[0], tuple(state[1]), state[2]))


@dataclass
class TrainState:
    """Everything a checkpoint restores: model, optimiser, schedule, grad scaler, epoch, RNGs."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler
    total_steps: int
    epoch: int = 0  # epochs completed
    algorithm: MJPAlgorithm | None = None  # the jigsaw's generator travels with the checkpoint

    def state_dict(self) -> dict[str, Any]:
        raw = unwrap(self.model)
        return dict(
            model=raw.state_dict(),
            optimizer=self.optimizer.state_dict(),
            scheduler=self.scheduler.state_dict(),
            scaler=self.scaler.state_dict(),
            epoch=self.epoch,
            rng=dict(
                torch=torch.get_rng_state(),
                cuda=torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
                numpy=_numpy_state(),
                python=_python_state(),
                mjp=self.algorithm.generator.get_state() if self.algorithm else torch.empty(0, dtype=torch.uint8),
            ),
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raw = unwrap(self.model)
        raw.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.epoch = int(state["epoch"])
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        if rng["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        _set_numpy_state(rng["numpy"])
        _set_python_state(rng["python"])
        if self.algorithm is not None and rng["mjp"].numel():
            self.algorithm.generator.set_state(rng["mjp"])

    def save(self, directory: str | Path) -> Path:
        """Serialise in memory, then write: torch's own file writer reports a full disk as
        "unexpected pos 64 vs 0"; Python's names the cause (``No space left on device``)."""
        path = Path(directory) / CHECKPOINT_FILE
        buffer = io.BytesIO()
        torch.save(self.state_dict(), buffer)
        try:
            with open(path, "wb") as fh:
                fh.write(buffer.getbuffer())
        except OSError as err:
            raise CheckpointWriteError(f"cannot write the checkpoint {path} (epoch {self.epoch}): {err.strerror or err}") from None
        return path

    def restore(self, directory: str | Path) -> None:
        state = load_safely(Path(directory) / CHECKPOINT_FILE)
        if not isinstance(state, dict) or not {"model", "optimizer", "epoch", "rng"} <= state.keys():
            raise CheckpointError(f"{Path(directory) / CHECKPOINT_FILE} is not a training checkpoint of this platform")
        self.load_state_dict(state)


def model_weights(loaded: Any, path: str | Path) -> dict[str, torch.Tensor]:
    """The model's state dict from a loaded file: a training checkpoint or bare weights."""
    if isinstance(loaded, dict) and isinstance(loaded.get("model"), dict):
        loaded = loaded["model"]
    if not isinstance(loaded, dict) or not loaded or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        raise CheckpointError(f"{path} holds no model weights (expected a state dict of tensors, or a training checkpoint)")
    return loaded
