"""Offline validation of ``cluster.yaml`` against Ray's own autoscaler schema.

``prepare_config`` / ``validate_config`` are private Ray APIs (``ray.autoscaler._private.util``);
this module is the one place that calls them, so a Ray upgrade that moves them breaks one test.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from trainables.config import ConfigError


def validate_cluster_config(path: str | Path) -> dict[str, Any]:
    """The launcher config as ``ray up`` will see it (defaults filled in); ``ConfigError`` if invalid."""
    import jsonschema
    from ray.autoscaler._private.util import prepare_config, validate_config

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"cluster config {str(path)!r} does not exist")
    raw = yaml.safe_load(path.read_text())
    try:
        prepared = prepare_config(copy.deepcopy(raw))
        validate_config(prepared)
    except jsonschema.ValidationError as err:
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        raise ConfigError(f"{path}: {where}: {err.message}") from None
    except ValueError as err:
        raise ConfigError(f"{path}: {err}") from None
    return prepared
