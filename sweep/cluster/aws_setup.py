"""What ``cluster.yaml`` needs in an AWS account before ``ray up`` (``mjp cluster aws-setup``).

Ray 2.60's AWS launcher leaves two things to the user that a real account checks:

- **Instance profiles.** Its bootstrap makes a default profile for the head only ("applied only to
  the head node -- not to workers"), so a worker has no credentials: its ``aws s3 sync`` of the
  images and its trials' S3 checkpoints fail. ``cluster.yaml`` names a profile on every node type
  (``IamInstanceProfile: {Name: ...}``); this module makes them. Every profile's role may list the
  bucket and read, write and delete its objects; the head's may also start and end instances (the
  autoscaler) and pass the workers' role to the instances it starts (``iam:PassRole``).
- **The security group.** A group Ray makes itself always opens SSH to ``0.0.0.0/0``, whatever
  ``provider.security_group.IpPermissions`` adds. It takes a group of the configured name as it
  finds it when the group has rules, so this module makes that group first, in the VPC Ray will
  choose (found by Ray's own subnet choice): all traffic between the group's members (the
  cluster's nodes) and ``IpPermissions`` (SSH from the user's address), and revokes any other rule
  (a group Ray made on an earlier try has ``0.0.0.0/0``).

Everything is read from ``cluster.yaml`` (region, bucket, group, profiles); running it again
changes only what differs. ``boto3`` is the ``aws`` dependency group (``uv sync --group aws``).
"""

from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.cluster.check import aws_launch_problems, profile_name
from trainables.config.yaml_files import read_yaml_mapping
from trainables.errors import ConfigError

#: what the head's autoscaler does in EC2: start, stop, end and tag workers, and look them up; a
#: launch by ``resolve:ssm:`` image id reads AWS's public parameter (Ray's default head role holds
#: the whole AmazonEC2FullAccess instead)
AUTOSCALER_STATEMENTS: list[dict[str, Any]] = [
    {
        "Effect": "Allow",
        "Action": [
            "ec2:RunInstances",
            "ec2:StartInstances",
            "ec2:StopInstances",
            "ec2:TerminateInstances",
            "ec2:CreateTags",
            "ec2:Describe*",
        ],
        "Resource": "*",
    },
    {"Effect": "Allow", "Action": "ssm:GetParameters", "Resource": "arn:aws:ssm:*::parameter/aws/service/deeplearning/*"},
]


#: the trust policy of a role that EC2 instances take through their instance profile
EC2_TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


#: what every node does with the bucket: the images, the sweeps' checkpoints, MLflow's artifacts and store
S3_OBJECT_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]


#: the name of the inline policy this module keeps on each role
INLINE_POLICY = "mjp-cluster"


#: seconds a new instance profile is given to reach EC2 before `ray up` may name it (Ray waits 15 after making its own)
PROPAGATION_S = 15


_BUCKET = re.compile(r"export MJP_BUCKET=s3://([^\s'\"/]+)")


@dataclass(frozen=True)
class AccountPlan:
    """What ``cluster.yaml`` asks of the account: read from the file, checked, before any AWS call."""

    region: str
    bucket: str
    group_name: str
    ssh_rules: list[dict[str, Any]]
    head_profile: str
    worker_profiles: tuple[str, ...]


def read_plan(path: str | Path) -> AccountPlan:
    """The account's side of ``cluster.yaml``; ``ConfigError`` for a placeholder or an unsafe value."""
    path = Path(path)
    raw = read_yaml_mapping(path, "cluster config")
    provider = raw.get("provider") or {}
    if provider.get("type") != "aws":
        raise ConfigError(f"{path}: provider.type is {provider.get('type')!r}; `mjp cluster aws-setup` prepares an aws cluster")
    buckets = {m.group(1) for line in raw.get("setup_commands") or [] for m in _BUCKET.finditer(str(line))}
    if len(buckets) != 1 or "YOUR-BUCKET" in buckets:
        found = ", ".join(sorted(buckets)) or "none"
        raise ConfigError(
            f"{path}: setup_commands must export MJP_BUCKET=s3://<your bucket> once (found: {found}); "
            f"replace YOUR-BUCKET with your bucket's name"
        )
    aws_launch_problems(path, raw, allow_placeholders=False)  # the AMI, the profiles, the group and its addresses
    group = provider["security_group"]
    rules = group.get("IpPermissions") or []
    types = raw.get("available_node_types") or {}
    head = raw.get("head_node_type")
    if not isinstance(head, str) or head not in types:
        raise ConfigError(f"{path}: head_node_type {head!r} is not one of available_node_types ({', '.join(types)})")
    workers = tuple(sorted({profile_name(path, name, node) for name, node in types.items() if name != head}))
    head_profile = profile_name(path, head, types[head])
    if head_profile in workers:
        raise ConfigError(
            f"{path}: the head's profile {head_profile!r} is also a worker's; workers need no right to start instances: give them their own"
        )
    return AccountPlan(provider.get("region", "us-west-2"), buckets.pop(), group["GroupName"], rules, head_profile, workers)


def bucket_policy(bucket: str) -> list[dict[str, Any]]:
    """The statements every node's role holds: list the bucket, read, write and delete its objects."""
    return [
        {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": f"arn:aws:s3:::{bucket}"},
        {"Effect": "Allow", "Action": S3_OBJECT_ACTIONS, "Resource": f"arn:aws:s3:::{bucket}/*"},
    ]


def _ensure_role(iam: Any, name: str, statements: list[dict[str, Any]], said: list[str]) -> str:
    """Role and instance profile ``name`` (made when missing) with exactly ``statements`` inline; its ARN."""
    try:
        role = iam.get_role(RoleName=name)["Role"]
    except iam.exceptions.NoSuchEntityException:
        role = iam.create_role(
            RoleName=name, AssumeRolePolicyDocument=json.dumps(EC2_TRUST), Description="mjp cluster nodes (mjp cluster aws-setup)"
        )["Role"]
        said.append(f"made role {name}")
    iam.put_role_policy(
        RoleName=name, PolicyName=INLINE_POLICY, PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": statements})
    )
    try:
        profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    except iam.exceptions.NoSuchEntityException:
        profile = iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]
        said.append(f"made instance profile {name}")
    if name not in {r["RoleName"] for r in profile.get("Roles", [])}:
        iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    return role["Arn"]


def _permission_key(rule: dict[str, Any]) -> tuple:
    """A rule as a comparable value (one source each: EC2 lists rules grouped, we compare them one by one)."""
    return (rule.get("IpProtocol"), rule.get("FromPort"), rule.get("ToPort"), rule.get("source"))


def _split(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """EC2's grouped rules as one rule per source (a CIDR, an IPv6 CIDR or a group)."""
    out = []
    for rule in rules:
        base = {k: rule[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in rule}
        if base.get("IpProtocol") == "-1":  # EC2 reports no ports for "all traffic"
            base.pop("FromPort", None), base.pop("ToPort", None)
        out += [{**base, "IpRanges": [{"CidrIp": r["CidrIp"]}], "source": r["CidrIp"]} for r in rule.get("IpRanges", [])]
        out += [{**base, "Ipv6Ranges": [{"CidrIpv6": r["CidrIpv6"]}], "source": r["CidrIpv6"]} for r in rule.get("Ipv6Ranges", [])]
        out += [{**base, "UserIdGroupPairs": [{"GroupId": r["GroupId"]}], "source": r["GroupId"]} for r in rule.get("UserIdGroupPairs", [])]
    return out


def rays_vpc(config: dict[str, Any]) -> str:
    """The VPC Ray's launcher puts the cluster in, found by Ray's own subnet choice (the first
    usable subnet of ``provider.availability_zone``, or the node types' ``SubnetIds``): Ray looks
    for the group by name there, and makes one open to the Internet where it finds none."""
    import boto3
    from ray.autoscaler._private.aws.config import _configure_subnet
    from ray.autoscaler._private.util import prepare_config

    prepared = _configure_subnet(prepare_config(copy.deepcopy(config)))
    head = prepared["available_node_types"][prepared["head_node_type"]]["node_config"]
    ec2 = boto3.client("ec2", region_name=prepared["provider"]["region"])
    return ec2.describe_subnets(SubnetIds=head["SubnetIds"][:1])["Subnets"][0]["VpcId"]


def _ensure_group(ec2: Any, plan: AccountPlan, vpc: str, said: list[str]) -> str:
    """The cluster's security group in ``vpc`` with exactly: all traffic within it, and ``plan.ssh_rules``."""
    found = ec2.describe_security_groups(
        Filters=[{"Name": "group-name", "Values": [plan.group_name]}, {"Name": "vpc-id", "Values": [vpc]}]
    )["SecurityGroups"]
    if found:
        group_id, current = found[0]["GroupId"], _split(found[0].get("IpPermissions", []))
    else:
        group_id = ec2.create_security_group(
            GroupName=plan.group_name, Description="mjp cluster: within the cluster, and SSH from one address", VpcId=vpc
        )["GroupId"]
        current = []
        said.append(f"made security group {plan.group_name} ({group_id}) in {vpc}")
    wanted = _split([{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]}, *plan.ssh_rules])
    have = {_permission_key(r): r for r in current}
    want = {_permission_key(r): r for r in wanted}
    strip = lambda rules: [{k: v for k, v in r.items() if k != "source"} for r in rules]  # noqa: E731
    extra = [r for k, r in have.items() if k not in want]
    if extra:
        ec2.revoke_security_group_ingress(GroupId=group_id, IpPermissions=strip(extra))
        said.append(f"revoked {', '.join(str(r['source']) for r in extra)} from {plan.group_name}")
    missing = [r for k, r in want.items() if k not in have]
    if missing:
        ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=strip(missing))
    return group_id


def prepare_account(plan: AccountPlan, config: dict[str, Any]) -> list[str]:
    """Make (or bring up to date) the profiles and the security group ``plan`` names (``config``:
    the launcher config it was read from); what was done."""
    import boto3

    said: list[str] = []
    s3 = boto3.client("s3", region_name=plan.region)
    try:
        s3.head_bucket(Bucket=plan.bucket)
    except Exception as err:  # botocore's ClientError: 404 (none), 403 (another account's)
        raise ConfigError(
            f"bucket {plan.bucket} cannot be reached with these credentials ({str(err).splitlines()[0][:120]}); "
            f"make it with `aws s3 mb s3://{plan.bucket} --region {plan.region}`, or name yours in cluster.yaml"
        ) from None
    iam = boto3.client("iam", region_name=plan.region)
    worker_arns = [_ensure_role(iam, name, bucket_policy(plan.bucket), said) for name in plan.worker_profiles]
    pass_workers = [{"Effect": "Allow", "Action": "iam:PassRole", "Resource": worker_arns}] if worker_arns else []
    _ensure_role(iam, plan.head_profile, bucket_policy(plan.bucket) + AUTOSCALER_STATEMENTS + pass_workers, said)
    made_profile = any(line.startswith("made instance profile") for line in said)
    vpc = rays_vpc(config)
    group_id = _ensure_group(boto3.client("ec2", region_name=plan.region), plan, vpc, said)
    if made_profile:  # a new profile takes seconds to reach EC2; Ray's own bootstrap waits the same after making one
        iam.get_waiter("instance_profile_exists").wait(InstanceProfileName=plan.head_profile)
        time.sleep(PROPAGATION_S)
    sources = ", ".join(r["CidrIp"] for rule in plan.ssh_rules for r in rule.get("IpRanges", [])) or "nowhere"
    said.append(
        f"ready: profiles {plan.head_profile} (head), {', '.join(plan.worker_profiles)} (workers) with s3://{plan.bucket}; "
        f"security group {plan.group_name} ({group_id}, {vpc}) open within the cluster and to {sources}"
    )
    return said
