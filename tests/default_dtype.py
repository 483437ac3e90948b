"""Torch's default floating dtype set for a block and put back after it, whatever the block
raises (torch has no public context manager for it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """``torch.set_default_dtype(dtype)`` inside the block, the dtype before it after it."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)
