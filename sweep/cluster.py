"""Offline validation of ``cluster.yaml`` against Ray's own autoscaler schema.

``prepare_config`` / ``validate_config`` are private Ray APIs (``ray.autoscaler._private.util``);
this module is the one place that calls them, so a Ray upgrade that moves them breaks one test.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from trainables.config import ConfigError, read_yaml_mapping


def validate_cluster_config(path: str | Path) -> dict[str, Any]:
    """The launcher config as ``ray up`` will see it (defaults filled in); ``ConfigError`` if invalid."""
    import jsonschema
    from ray.autoscaler._private.util import prepare_config, validate_config

    path = Path(path)
    raw = read_yaml_mapping(path, "cluster config")
    try:
        prepared = prepare_config(copy.deepcopy(raw))
        validate_config(prepared)
    except jsonschema.ValidationError as err:
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        raise ConfigError(f"{path}: {where}: {err.message}") from None
    except ValueError as err:
        raise ConfigError(f"{path}: {err}") from None
    return prepared
