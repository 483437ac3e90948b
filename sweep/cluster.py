"""Offline validation of ``cluster.yaml`` against Ray's own autoscaler schema (``mjp cluster check``).

``prepare_config`` / ``validate_config`` are private Ray APIs (``ray.autoscaler._private.util``);
this module is the one place that calls them, so a Ray upgrade that moves them breaks one test.
Ray's schema leaves the ``provider`` section open (any keys), so the keys this project's AWS
cluster uses are checked here too: a typo there would otherwise surface only in ``ray up``.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

from trainables.errors import ConfigError
from trainables.overrides import did_you_mean
from trainables.yaml_files import read_yaml_mapping

#: keys Ray's AWS node provider reads from ``provider:``
AWS_PROVIDER_KEYS = frozenset({
    "type", "region", "availability_zone", "cache_stopped_nodes", "use_internal_ips", "security_group",
    "vpc_id", "key_pair", "cloudwatch", "controller", "disable_launch_config_check", "foreground_node_launch",
    "use_managed_instance_profile", "iam_role_arn",
})


def validate_cluster_config(path: str | Path) -> dict[str, Any]:
    """The launcher config as ``ray up`` will see it (defaults filled in); ``ConfigError`` if invalid."""
    import logging

    import jsonschema
    from ray.autoscaler._private.util import prepare_config, validate_config

    logging.getLogger("ray.autoscaler._private.util").setLevel(logging.WARNING)  # its INFO lines narrate the defaults it fills in

    path = Path(path)
    raw = read_yaml_mapping(path, "cluster config")
    provider = raw.get("provider")
    if isinstance(provider, dict) and provider.get("type") == "aws":
        unknown = sorted(set(provider) - AWS_PROVIDER_KEYS)
        if unknown:
            raise ConfigError(f"{path}: provider.{unknown[0]} is not a key of Ray's AWS provider{did_you_mean(unknown[0], AWS_PROVIDER_KEYS)}; allowed: {', '.join(sorted(AWS_PROVIDER_KEYS))}")
    try:
        prepared = prepare_config(copy.deepcopy(raw))
        validate_config(prepared)
    except jsonschema.ValidationError as err:
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        raise ConfigError(f"{path}: {where}: {err.message.splitlines()[0][:300]}") from None
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{path}: {type(err).__name__}: {str(err).splitlines()[0][:300]}") from None
    return prepared


def cmd_cluster_check(args: argparse.Namespace) -> int:
    prepared = validate_cluster_config(args.path)
    workers = {name: t.get("max_workers", 0) for name, t in prepared.get("available_node_types", {}).items()}
    print(f"{args.path}: valid for `ray up` (provider {prepared['provider']['type']}, node types {workers})")
    return 0
