"""Weights files given by the user (``model.pretrained_file``, ``--pretrained-file``, the LPIPS
backbone) checked before anything starts: a file that holds more than weights is refused in one
line, naming the file and what is allowed. Nothing in the file is run: state dicts are opened
with ``torch.load(weights_only=True, mmap=True)`` (tensors are mapped, not read),
safetensors and ``.npz`` by their headers."""

from __future__ import annotations

import pickle
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

from trainables.errors import ConfigError

ALLOWED = "allowed: a .safetensors file, or a torch.save'd state dict (a dict of tensors, weights only)"


def check_weights_file(label: str, path: str | Path) -> None:
    """Refuse ``path`` unless it is weights only. ``label`` names the setting (``model.pretrained_file``)."""
    path = Path(path)
    shown = f"{label}={str(path)!r}"
    if not path.is_file():
        raise ConfigError(f"{shown} does not exist; give a local weights file (nothing is downloaded)")
    if path.suffix == ".safetensors":
        return _check_safetensors(shown, path)
    if path.suffix == ".npz":
        return _check_npz(shown, path)
    import torch

    archive = zipfile.is_zipfile(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=archive)
    except pickle.UnpicklingError as err:
        named = re.search(r"GLOBAL (\S+)", str(err))
        if not named and not archive:
            raise ConfigError(f"{shown} is not a PyTorch weights file (not a torch.save archive); {ALLOWED}") from None
        what = (
            f"a pickle that would call {named.group(1)} (a whole model saved with torch.save?)"
            if named
            else "a pickle of objects other than tensors"
        )
        raise ConfigError(f"{shown} is {what}; it is not loaded, since unpickling it can run code; {ALLOWED}") from None
    except (RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile) as err:
        first = str(err).splitlines()[0][:160] if str(err) else type(err).__name__
        raise ConfigError(f"{shown} is not a PyTorch weights file ({first}); {ALLOWED}") from None
    if not isinstance(state, Mapping):
        raise ConfigError(f"{shown} holds a {type(state).__name__}, not a state dict; {ALLOWED}")


def _check_safetensors(shown: str, path: Path) -> None:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as fh:
            fh.keys()
    except Exception as err:  # safetensors raises its own SafetensorError for any bad header
        raise ConfigError(f"{shown} is not a readable safetensors file ({str(err).splitlines()[0][:160]}); {ALLOWED}") from None


def _check_npz(shown: str, path: Path) -> None:
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as archive:
            for name in archive.files:
                archive[name]
    except (ValueError, OSError, zipfile.BadZipFile) as err:
        raise ConfigError(
            f"{shown} is not a numeric .npz archive ({str(err).splitlines()[0][:160]}); {ALLOWED}, or a timm .npz of arrays"
        ) from None
