import re
from pathlib import Path

import pytest
import ray
import yaml

from sweep.cluster import validate_cluster_config
from trainables.config import ConfigError

CLUSTER = Path(__file__).resolve().parents[2] / "cluster.yaml"


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


def test_a_typo_is_reported_with_its_place(tmp_path):
    bad = yaml.safe_load(CLUSTER.read_text())
    bad["available_node_types"]["gpu_worker"]["max_worker"] = 3
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match=re.escape("available_node_types.gpu_worker: Additional properties are not allowed ('max_worker' was unexpected)")):
        validate_cluster_config(path)


def test_the_bucket_is_set_in_one_place_and_nodes_install_the_locked_versions():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    files = [root / "cluster.yaml", *sorted((root / "trainables" / "configs").glob("*.yaml"))]
    assert sum(f.read_text().count("YOUR-BUCKET") for f in files) == 1
    setup = " ".join(yaml.safe_load((root / "cluster.yaml").read_text())["setup_commands"])
    assert "uv export --frozen" in setup and "--no-deps -e" in setup and "uv pip install --system -e" not in setup
