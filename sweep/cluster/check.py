"""Offline validation of ``cluster.yaml`` against Ray's own autoscaler schema (``mjp cluster check``).

``prepare_config`` / ``validate_config`` are private Ray APIs (``ray.autoscaler._private.util``);
this module is the one place that calls them, so a Ray upgrade that moves them breaks one test.
Ray's schema leaves the ``provider`` section open (any keys), so the keys this project's AWS
cluster uses are checked here too: a typo there would otherwise surface only in ``ray up``.
So does it leave ``node_config`` open: what a real account would stop at is checked here as well
(``aws_launch_problems``): Ray's fixed CUDA 11.2 AMI, a node type without an instance profile,
SSH open to the Internet. The account's side is made by ``mjp cluster aws-setup``.
"""

from __future__ import annotations

import copy
import ipaddress
from pathlib import Path
from typing import Any

from trainables.config.overrides import did_you_mean
from trainables.config.yaml_files import read_yaml_mapping
from trainables.errors import ConfigError

#: keys Ray's AWS node provider reads from ``provider:``
AWS_PROVIDER_KEYS = frozenset(
    {
        "type",
        "region",
        "availability_zone",
        "cache_stopped_nodes",
        "use_internal_ips",
        "security_group",
        "key_pair",
        "aws_credentials",
        "cloudwatch",
        "controller",
        "disable_launch_config_check",
        "foreground_node_launch",
        "use_managed_instance_profile",
        "iam_role_arn",
    }
)


#: the AMI every node type of cluster.yaml runs: AWS's public SSM parameter for its current Deep
#: Learning Base AMI (Ubuntu 24.04, an NVIDIA driver of the R580 series or newer, Docker, the NVIDIA
#: Container Toolkit), resolved by EC2 at launch
DLAMI_SSM = "resolve:ssm:/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"


#: placeholders of the shipped cluster.yaml that a user sets before `ray up`
PLACEHOLDERS = {"YOUR-BUCKET": "your S3 bucket (setup_commands, MJP_BUCKET)", "YOUR-IP": "your address for SSH (provider.security_group)"}


def profile_name(path: Path, node_type: str, node: dict[str, Any]) -> str:
    """The instance profile a node type names (``IamInstanceProfile: {Name: ...}``); ``ConfigError`` when none."""
    profile = node.get("node_config", {}).get("IamInstanceProfile")
    if not isinstance(profile, dict) or not isinstance(profile.get("Name"), str):
        raise ConfigError(
            f"{path}: available_node_types.{node_type}.node_config.IamInstanceProfile: give every node type a profile by name "
            f"({{Name: mjp-head}} or {{Name: mjp-worker}}): Ray's launcher gives its default profile to the head only, "
            f"and a node without one cannot reach S3"
        )
    return profile["Name"]


def check_cidr(cidr: Any, where: str) -> str:
    """``cidr`` if it is a network that is not the whole Internet; ``ConfigError`` naming ``where`` else."""
    try:
        net = ipaddress.ip_network(str(cidr), strict=False)
    except ValueError:
        raise ConfigError(
            f"{where}: {cidr!r} is not an address range; set it to your address, e.g. 203.0.113.7/32 "
            "(`curl -s https://checkip.amazonaws.com` prints it)"
        ) from None
    if net.prefixlen == 0:
        raise ConfigError(f"{where}: {cidr} opens the port to the whole Internet; allow only your address, e.g. 203.0.113.7/32")
    return str(cidr)


def aws_launch_problems(path: Path, raw: dict[str, Any], *, allow_placeholders: bool = True) -> None:
    """``ConfigError`` for what Ray's schema lets through and a real account would stop at
    (``allow_placeholders``: the shipped file's ``YOUR-IP`` passes, as ``mjp cluster check`` lists it)."""
    for name, node in (raw.get("available_node_types") or {}).items():
        image = str((node.get("node_config") or {}).get("ImageId", ""))
        if image.lower() in ("", "latest_dlami"):
            raise ConfigError(
                f"{path}: available_node_types.{name}.node_config.ImageId is {image or 'missing'}: Ray 2.60 takes that for its fixed "
                f"'AWS Deep Learning AMI (Ubuntu 18.04) V71.0' (CUDA 11.2), whose driver cannot run the CUDA 13 torch uv.lock pins; "
                f"use {DLAMI_SSM}"
            )
        profile_name(path, name, node)
    group = (raw.get("provider") or {}).get("security_group") or {}
    if not group.get("GroupName"):
        raise ConfigError(
            f"{path}: provider.security_group.GroupName is missing: a group Ray makes itself opens SSH to 0.0.0.0/0; "
            "name the group `mjp cluster aws-setup` makes (cluster.yaml ships mjp-cluster)"
        )
    rules = group.get("IpPermissions") or []
    if not any(
        rule.get("FromPort", 0) <= 22 <= rule.get("ToPort", 65535) and rule.get("IpProtocol") in ("tcp", "6", "-1") for rule in rules
    ):
        raise ConfigError(
            f"{path}: provider.security_group.IpPermissions has no SSH rule: `ray up` reaches the head over SSH; "
            "allow port 22 from your address ({IpProtocol: tcp, FromPort: 22, ToPort: 22, IpRanges: [{CidrIp: 203.0.113.7/32}]})"
        )
    for i, rule in enumerate(rules):
        ranges = [(f"IpRanges[{j}].CidrIp", r.get("CidrIp")) for j, r in enumerate(rule.get("IpRanges", []))]
        ranges += [(f"Ipv6Ranges[{j}].CidrIpv6", r.get("CidrIpv6")) for j, r in enumerate(rule.get("Ipv6Ranges", []))]
        for where, cidr in ranges:
            if not (allow_placeholders and "YOUR-IP" in str(cidr)):
                check_cidr(cidr, f"{path}: provider.security_group.IpPermissions[{i}].{where}")


def placeholders_left(path: Path) -> list[str]:
    """What of ``PLACEHOLDERS`` the file still holds, each with where it is set."""
    text = path.read_text()
    return [f"{word}: {what}" for word, what in PLACEHOLDERS.items() if word in text]


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
            raise ConfigError(
                f"{path}: provider.{unknown[0]} is not a key of Ray's AWS provider{did_you_mean(unknown[0], AWS_PROVIDER_KEYS)}; "
                f"allowed: {', '.join(sorted(AWS_PROVIDER_KEYS))}"
            )
        aws_launch_problems(path, raw)
    try:
        prepared = prepare_config(copy.deepcopy(raw))
        validate_config(prepared)
    except jsonschema.ValidationError as err:
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        raise ConfigError(f"{path}: {where}: {err.message.splitlines()[0][:300]}") from None
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{path}: {type(err).__name__}: {str(err).splitlines()[0][:300]}") from None
    return prepared
