"""``mjp cluster check`` and the shipped cluster.yaml: Ray's schema, the image and the private
MLflow server, the bucket named once, and what a real AWS account would stop at, refused offline."""

import re
from pathlib import Path

import pytest
import ray
import yaml

from sweep.cluster.check import validate_cluster_config
from trainables.errors import ConfigError

CLUSTER = Path(__file__).resolve().parents[3] / "cluster.yaml"


def test_cluster_yaml_passes_rays_schema():
    config = validate_cluster_config(CLUSTER)
    workers = config["available_node_types"]["gpu_worker"]
    assert workers["min_workers"] == 0 and workers["max_workers"] >= 1
    assert config["head_node_type"] == "head"
    assert "/home/ray/mjp" in config["file_mounts"]


def test_image_matches_the_installed_ray_and_mlflow_is_private():
    config = yaml.safe_load(CLUSTER.read_text())
    assert config["docker"]["image"].startswith(f"rayproject/ray:{ray.__version__}-")
    head = " ".join(config["head_start_ray_commands"])
    assert "mlflow server" in head and "0.0.0.0" not in head and "hostname -I" in head
    assert "MLFLOW_TRACKING_URI=http://" in head
    assert any("/home/ray/mjp" in c for c in config["setup_commands"])
    # the server on loopback; the private address only through the token gate; the token private, every node sending it
    server = next(c for c in config["head_start_ray_commands"] if "mlflow server" in c)
    assert "--host 127.0.0.1 --port 5001" in server
    assert server.startswith("MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false ")  # no job runner (huey consumers) beside it
    gate = next(c for c in config["head_start_ray_commands"] if "mjp cluster mlflow-gate" in c)
    assert "$(hostname -I | awk '{print $1}'):5000" in gate and "--upstream http://127.0.0.1:5001" in gate
    assert "chmod 600 ~/.ray/auth_token" in config["setup_commands"]
    assert any("MLFLOW_TRACKING_TOKEN=$(cat ~/.ray/auth_token)" in c for c in config["setup_commands"])


def test_a_typo_is_reported_with_its_place(tmp_path):
    bad = yaml.safe_load(CLUSTER.read_text())
    bad["available_node_types"]["gpu_worker"]["max_worker"] = 3
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(
        ConfigError, match=re.escape("available_node_types.gpu_worker: Additional properties are not allowed ('max_worker' was unexpected)")
    ):
        validate_cluster_config(path)


def test_the_bucket_is_set_in_one_place_and_nodes_install_the_locked_versions():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3]
    files = [root / "cluster.yaml", *sorted((root / "trainables" / "configs").glob("*.yaml"))]
    assert sum(f.read_text().count("YOUR-BUCKET") for f in files) == 1
    setup = " ".join(yaml.safe_load((root / "cluster.yaml").read_text())["setup_commands"])
    assert "uv export --frozen" in setup and "--no-deps -e" in setup and "uv pip install --system -e" not in setup


def _edited(tmp_path, edit) -> Path:
    config = yaml.safe_load(CLUSTER.read_text())
    edit(config)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda c: c["available_node_types"]["gpu_worker"]["node_config"].update(ImageId="latest_dlami"),
            "gpu_worker.node_config.ImageId is latest_dlami: Ray 2.60 takes that for its fixed",
        ),
        (lambda c: c["available_node_types"]["cpu_worker"]["node_config"].pop("ImageId"), "cpu_worker.node_config.ImageId is missing"),
        (
            lambda c: c["available_node_types"]["cpu_worker"]["node_config"].pop("IamInstanceProfile"),
            "cpu_worker.node_config.IamInstanceProfile: give every node type a profile",
        ),
        (
            lambda c: c["provider"]["security_group"]["IpPermissions"][0]["IpRanges"][0].update(CidrIp="0.0.0.0/0"),
            "opens the port to the whole Internet",
        ),
        (lambda c: c["provider"]["security_group"].update(IpPermissions=[]), "has no SSH rule"),
        (lambda c: c["provider"].pop("security_group"), "a group Ray makes itself opens SSH to 0.0.0.0/0"),
    ],
)
def test_cluster_check_refuses_what_a_real_account_would_stop_at(tmp_path, edit, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_cluster_config(_edited(tmp_path, edit))


def test_the_shipped_cluster_yaml_names_a_current_ami_and_a_profile_on_every_node_type(capsys):
    from sweep.cli import main
    from sweep.cluster.check import DLAMI_SSM

    for name, node_type in yaml.safe_load(CLUSTER.read_text())["available_node_types"].items():
        assert node_type["node_config"]["ImageId"] == DLAMI_SSM, name
        assert node_type["node_config"]["IamInstanceProfile"]["Name"] == ("mjp-head" if name == "head" else "mjp-worker")
    assert main(["cluster", "check", str(CLUSTER)]) == 0
    assert "set before `mjp cluster aws-setup` and `ray up`: YOUR-BUCKET" in capsys.readouterr().out
