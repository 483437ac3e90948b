"""cluster.yaml against Ray 2.60's own AWS launcher, on an AWS emulator (moto's server on loopback).

The project's account set-up (``mjp cluster aws-setup``), then Ray's bootstrap (``bootstrap_aws``:
IAM, key pair, subnets, security group, AMI) and node creation (``AWSNodeProvider.create_node``)
for every node type of ``cluster.yaml``, as ``ray up`` and the head's autoscaler call them. Then
the emulated account is read back for what a real one would check: every instance has a profile
whose role may use the bucket, no ingress from the whole Internet, the AMI is not Ray's CUDA 11.2
default, the instance types and the key pair are cluster.yaml's.

moto does not evaluate IAM policies, nor resolve ``resolve:ssm:`` image ids (EC2 does at launch):
the policies are evaluated here (``allows``), and the image id is checked as EC2 receives it.
"""

from __future__ import annotations

import copy
import fnmatch
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweep.cluster.ports import free_port

pytest.importorskip("moto")
boto3 = pytest.importorskip("boto3")

ROOT = Path(__file__).resolve().parents[3]
BUCKET = "mjp-test-bucket"
SSH_FROM = "203.0.113.7/32"
REGION = "us-west-2"


@pytest.fixture
def account(tmp_path, monkeypatch):
    """An empty emulated AWS account on 127.0.0.1; boto3 (Ray's too) talks to it only."""
    from moto.server import ThreadedMotoServer

    monkeypatch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")  # Ray's default head role attaches two of AWS's
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    import urllib.request

    urllib.request.urlopen(
        urllib.request.Request(f"http://127.0.0.1:{port}/moto-api/reset", method="POST")
    ).close()  # moto keeps accounts per process
    for key, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "HOME": str(tmp_path),
    }.items():  # HOME: Ray writes the key pair's .pem under ~/.ssh
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(key, raising=False)
    from ray.autoscaler._private.aws import utils

    utils.resource_cache.cache_clear(), utils.client_cache.cache_clear()  # Ray's boto3 handles: this account's
    from ray.autoscaler._private.aws import config

    monkeypatch.setattr(
        config, "time", type("NoWait", (), {"sleep": staticmethod(lambda seconds: None)})
    )  # its IAM waits 15 s twice for propagation
    monkeypatch.setattr("sweep.cluster.aws_setup.PROPAGATION_S", 0)  # and so does aws-setup, after making a profile
    boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    yield
    utils.resource_cache.cache_clear(), utils.client_cache.cache_clear()
    server.stop()


def users_cluster_yaml(tmp_path: Path, text: str | None = None) -> Path:
    """cluster.yaml with its two settings made, as a user makes them."""
    text = (text or (ROOT / "cluster.yaml").read_text()).replace("YOUR-BUCKET", BUCKET).replace("YOUR-IP/32", SSH_FROM)
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def launch_every_node_type(path: Path) -> dict[str, dict[str, Any]]:
    """``ray up``'s bootstrap, then one instance of each node type as Ray's launcher creates it;
    the described instances by node type."""
    from ray.autoscaler._private.aws.config import bootstrap_aws
    from ray.autoscaler._private.aws.node_provider import AWSNodeProvider
    from ray.autoscaler._private.util import hash_launch_conf, prepare_config, validate_config
    from ray.autoscaler.tags import (
        NODE_KIND_HEAD,
        NODE_KIND_WORKER,
        TAG_RAY_LAUNCH_CONFIG,
        TAG_RAY_NODE_KIND,
        TAG_RAY_NODE_NAME,
        TAG_RAY_USER_NODE_TYPE,
    )

    config = prepare_config(yaml.safe_load(path.read_text()))
    validate_config(config)
    config = bootstrap_aws(config)
    provider = AWSNodeProvider(config["provider"], config["cluster_name"])
    for name, node_type in config["available_node_types"].items():
        node_config = copy.deepcopy(node_type["node_config"])
        head = name == config["head_node_type"]
        if head:
            node_config.update(config["head_node"])  # as `ray up` does: Ray's head-only settings
        tags = {
            TAG_RAY_NODE_KIND: NODE_KIND_HEAD if head else NODE_KIND_WORKER,
            TAG_RAY_USER_NODE_TYPE: name,
            TAG_RAY_NODE_NAME: f"ray-mjp-{name}",
            TAG_RAY_LAUNCH_CONFIG: hash_launch_conf(node_config, config["auth"]),
        }
        provider.create_node(node_config, tags, 1)  # as `ray up` (the head) and the autoscaler (workers) call it
    ec2 = boto3.client("ec2", region_name=REGION)
    instances = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    by_type = {}
    for instance in instances:
        tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        by_type[tags[TAG_RAY_USER_NODE_TYPE]] = instance
    return by_type


def role_statements(profile_arn: str) -> tuple[str, list[dict[str, Any]]]:
    """The role behind an instance profile, and every Allow/Deny statement it holds (inline and attached)."""
    iam = boto3.client("iam", region_name=REGION)
    profile = iam.get_instance_profile(InstanceProfileName=profile_arn.rsplit("/", 1)[1])["InstanceProfile"]
    [role] = profile["Roles"]
    name, statements = role["RoleName"], []
    for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
        document = iam.get_role_policy(RoleName=name, PolicyName=policy)["PolicyDocument"]
        statements += (json.loads(document) if isinstance(document, str) else document)["Statement"]
    for attached in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
        version = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]["DefaultVersionId"]
        document = iam.get_policy_version(PolicyArn=attached["PolicyArn"], VersionId=version)["PolicyVersion"]["Document"]
        document = json.loads(document) if isinstance(document, str) else document
        statements += document["Statement"] if isinstance(document["Statement"], list) else [document["Statement"]]
    return name, statements


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def allows(statements: list[dict[str, Any]], action: str, resource: str) -> bool:
    """IAM's answer for identity policies without conditions: an Allow matches and no Deny does."""

    def matches(st: dict[str, Any]) -> bool:
        acts = any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in _as_list(st.get("Action", [])))
        return acts and any(fnmatch.fnmatchcase(resource, r) for r in _as_list(st.get("Resource", [])))

    return any(matches(s) for s in statements if s["Effect"] == "Allow") and not any(
        matches(s) for s in statements if s["Effect"] == "Deny"
    )


def ingress_sources(group_ids: list[str]) -> set[str]:
    ec2 = boto3.client("ec2", region_name=REGION)
    sources = set()
    for group in ec2.describe_security_groups(GroupIds=group_ids)["SecurityGroups"]:
        for rule in group["IpPermissions"]:
            sources |= {f"{rule.get('FromPort', 'all')}:{r['CidrIp']}" for r in rule.get("IpRanges", [])}
            sources |= {f"{rule.get('FromPort', 'all')}:{r['CidrIpv6']}" for r in rule.get("Ipv6Ranges", [])}
    return sources


def check_account(instances: dict[str, dict[str, Any]]) -> None:
    """What a real account checks, for every node type of cluster.yaml."""
    from ray.autoscaler._private.aws.config import DEFAULT_AMI

    from sweep.cluster.check import DLAMI_SSM

    shipped = yaml.safe_load((ROOT / "cluster.yaml").read_text())["available_node_types"]
    assert set(instances) == set(shipped), "one instance of every node type"
    keys = {k["KeyName"] for k in boto3.client("ec2", region_name=REGION).describe_key_pairs()["KeyPairs"]}
    roles = {}
    for name, instance in instances.items():
        assert instance["InstanceType"] == shipped[name]["node_config"]["InstanceType"], name
        assert instance["ImageId"] not in DEFAULT_AMI.values(), f"{name}: Ray's CUDA 11.2 Deep Learning AMI"
        assert instance["ImageId"] == DLAMI_SSM, name
        assert instance.get("KeyName") in keys, f"{name}: its key pair exists"
        assert "IamInstanceProfile" in instance, f"{name}: no instance profile, so no S3"
        role, statements = role_statements(instance["IamInstanceProfile"]["Arn"])
        roles[name] = role
        assert allows(statements, "s3:ListBucket", f"arn:aws:s3:::{BUCKET}"), name
        for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
            assert allows(statements, action, f"arn:aws:s3:::{BUCKET}/imagenet/train/n01440764/x.JPEG"), f"{name}: {action}"
        assert not allows(statements, "s3:GetObject", "arn:aws:s3:::another-bucket/x"), f"{name}: only the cluster's bucket"
        sources = ingress_sources([g["GroupId"] for g in instance["SecurityGroups"]])
        assert sources == {f"22:{SSH_FROM}"}, f"{name}: ingress from outside the cluster: {sources}"
    head = role_statements(instances["head"]["IamInstanceProfile"]["Arn"])[1]
    assert allows(head, "ec2:RunInstances", "*") and allows(head, "ec2:TerminateInstances", "*"), (
        "the head's autoscaler starts and ends workers"
    )
    for worker in ("gpu_worker", "cpu_worker"):
        role_arn = f"arn:aws:iam::123456789012:role/{roles[worker]}"
        assert allows(head, "iam:PassRole", role_arn), f"the head may start {worker} with its profile"
        assert not allows(role_statements(instances[worker]["IamInstanceProfile"]["Arn"])[1], "ec2:RunInstances", "*"), (
            f"{worker} starts no instance"
        )


def test_every_node_type_of_cluster_yaml_launches_with_s3_rights_a_current_ami_and_ssh_from_one_address(account, tmp_path, capsys):
    from sweep.cli import main

    path = users_cluster_yaml(tmp_path)
    assert main(["cluster", "aws-setup", str(path)]) == 0
    assert "ready: profiles mjp-head (head), mjp-worker (workers)" in capsys.readouterr().out
    check_account(launch_every_node_type(path))


def test_aws_setup_closes_the_world_open_ssh_of_a_group_ray_made_on_an_earlier_try(account, tmp_path, capsys):
    """A `ray up` before `aws-setup` leaves Ray's own group with SSH from 0.0.0.0/0; setting up
    afterwards revokes it, and running it again changes nothing."""
    from ray.autoscaler._private.aws.config import bootstrap_aws
    from ray.autoscaler._private.util import prepare_config

    from sweep.cli import main

    path = users_cluster_yaml(tmp_path)
    bootstrap_aws(prepare_config(yaml.safe_load(path.read_text())))  # the group, made by Ray itself
    ec2 = boto3.client("ec2", region_name=REGION)
    [group] = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["mjp-cluster"]}])["SecurityGroups"]
    assert "22:0.0.0.0/0" in ingress_sources([group["GroupId"]])
    assert main(["cluster", "aws-setup", str(path)]) == 0
    assert "revoked 0.0.0.0/0" in capsys.readouterr().out
    assert ingress_sources([group["GroupId"]]) == {f"22:{SSH_FROM}"}
    assert main(["cluster", "aws-setup", str(path)]) == 0
    assert "revoked" not in capsys.readouterr().out and ingress_sources([group["GroupId"]]) == {f"22:{SSH_FROM}"}


def test_the_cluster_yaml_before_this_check_fails_it(account, tmp_path):
    """The check catches what it was built for: cluster.yaml as it was (Ray's default AMI, no
    profile on the workers, Ray's own security group) launches workers without S3 rights."""
    old = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    old["provider"].pop("security_group")
    for _name, node_type in old["available_node_types"].items():
        node_type["node_config"]["ImageId"] = "latest_dlami"
        node_type["node_config"].pop("IamInstanceProfile")
    path = users_cluster_yaml(tmp_path, yaml.safe_dump(old))
    with pytest.raises(AssertionError):
        check_account(launch_every_node_type(path))


@pytest.mark.parametrize(
    "edit, message",
    [
        (("YOUR-IP/32", "0.0.0.0/0"), "opens the port to the whole Internet"),
        (("YOUR-IP/32", "YOUR-IP/32"), "'YOUR-IP/32' is not an address range"),
        (("s3://YOUR-BUCKET", "s3://YOUR-BUCKET"), "replace YOUR-BUCKET with your bucket's name"),
    ],
)
def test_aws_setup_refuses_a_placeholder_or_the_open_internet_before_any_aws_call(tmp_path, capsys, edit, message):
    from sweep.cli import main

    text = (ROOT / "cluster.yaml").read_text()
    if "BUCKET" not in edit[0]:
        text = text.replace("YOUR-BUCKET", BUCKET)
    path = tmp_path / "cluster.yaml"
    path.write_text(text.replace(*edit))
    assert main(["cluster", "aws-setup", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_the_group_is_made_in_the_vpc_ray_chooses_not_the_default_one(account, tmp_path, capsys):
    """Ray takes the VPC of the first usable subnet of the availability zones (sorted Z-A within
    an AZ), not the default VPC; a group made elsewhere would leave Ray to make its own, open to
    0.0.0.0/0. An account whose other VPC has a public subnet in us-west-2a."""
    from sweep.cli import main

    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24", AvailabilityZone="us-west-2a")["Subnet"]["SubnetId"]
    ec2.modify_subnet_attribute(SubnetId=subnet, MapPublicIpOnLaunch={"Value": True})
    default = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    for other in ec2.describe_subnets(
        Filters=[{"Name": "vpc-id", "Values": [default]}, {"Name": "availability-zone", "Values": ["us-west-2a"]}]
    )["Subnets"]:
        ec2.modify_subnet_attribute(SubnetId=other["SubnetId"], MapPublicIpOnLaunch={"Value": False})  # the default VPC's first AZ: private
    path = users_cluster_yaml(tmp_path)
    assert main(["cluster", "aws-setup", str(path)]) == 0
    assert f"{vpc}) open within the cluster" in capsys.readouterr().out
    instances = launch_every_node_type(path)
    assert {i["VpcId"] for i in instances.values()} == {vpc}
    check_account(instances)
