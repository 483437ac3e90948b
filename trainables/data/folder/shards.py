"""The metadata file of a folder of Parquet shards (``mjp data prepare``): a leaf module."""

from __future__ import annotations

import json
from pathlib import Path

from trainables.errors import DataError

SHARD_MARKER = "mjp_shards.json"


def shard_metadata(root: str | Path) -> dict | None:
    """The metadata of a folder ``mjp data prepare`` wrote, or None for any other folder."""
    marker = Path(root) / SHARD_MARKER
    if not marker.is_file():
        return None
    try:
        return json.loads(marker.read_text())
    except json.JSONDecodeError as err:
        raise DataError(f"{marker} is damaged ({err}); prepare the shards again") from None
