"""What position embedding each patch slot receives under MJP (paper Eq. 4): a pure function.

- ``unk``: slots that were shuffled get the one shared, learnable E_unk; the others keep their own
  PE row (the paper's MJP).
- ``idx``: a second learnable table E_idx. Our reading (``idx_mode="shuffled_slots"``): E_idx
  replaces the PE at shuffled slots, as E_unk does but with a row per slot. The reference code's
  (``idx_mode="reference"``): E_idx is added to every slot, shuffled or not, on top of the PE.
- ``standard`` / ``none``: the slot's own PE (JP's mismatch at shuffled slots) / nothing.
"""

from __future__ import annotations

import torch


def _given(table: torch.Tensor | None, name: str, kind: str) -> torch.Tensor:
    """``table`` itself; a ``ValueError`` naming the missing argument when it is None."""
    if table is None:
        raise ValueError(f"position-embedding kind {kind!r} needs the {name} table; got None")
    return table


def slot_position_embedding(
    rows: torch.Tensor,
    mask: torch.Tensor | None,
    *,
    kind: str,
    unk: torch.Tensor | None = None,
    idx: torch.Tensor | None = None,
    idx_mode: str = "shuffled_slots",
) -> torch.Tensor:
    """PE added to each patch slot.

    Args:
        rows: the slots' own PE rows ``[1, N, D]``.
        mask: bool ``[B, N]``, True = the slot holds a shuffled token; None: nothing shuffled.
        kind: ``standard``, ``unk`` or ``idx`` (``none`` never reaches here: there is no PE).
        unk: E_unk ``[1, 1, D]`` (kind ``unk``); idx: E_idx ``[1, N, D]`` (kind ``idx``).

    Returns:
        ``[1, N, D]`` when no slot-dependent choice is made, else ``[B, N, D]``.
    """
    if kind == "idx" and idx_mode == "reference":
        return rows + _given(idx, "idx", kind).to(rows.dtype)
    if mask is None or kind == "standard":
        return rows
    marked = mask.unsqueeze(-1)
    if kind == "unk":
        return torch.where(marked, _given(unk, "unk", kind).to(rows.dtype), rows)
    if kind == "idx":
        return torch.where(marked, _given(idx, "idx", kind).to(rows.dtype), rows)
    raise ValueError(f"unknown position-embedding kind {kind!r}; allowed: standard, unk, idx")
