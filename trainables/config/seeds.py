"""One seed drives a run: every random stream is derived from ``runtime.seed``.

Streams: ``jigsaw`` (training masks and permutations, ``mjp.seed``), ``eval`` (test-time
shuffles, attacks and corruptions, ``eval.seed``), ``data`` (sample order, ``data.seed``) and
``process`` (per data-parallel rank: weight init, augmentation, mixup). A stream given explicitly
in the config keeps its value. Derivation is a hash, so neighbouring seeds give unrelated streams
and a stream never equals another one's seed.
"""

from __future__ import annotations

import hashlib

STREAMS: tuple[str, ...] = ("jigsaw", "eval", "data", "process")


def derive_seed(seed: int, stream: str, rank: int = 0) -> int:
    """A seed in ``[0, 2**32)`` (``mjp.config.SEED_BOUND``) for ``stream`` (and data-parallel ``rank``) of run seed ``seed``."""
    if stream not in STREAMS:
        raise ValueError(f"unknown seed stream {stream!r}; allowed: {', '.join(STREAMS)}")
    digest = hashlib.blake2b(f"mjp/{stream}/{int(seed)}/{int(rank)}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big")
