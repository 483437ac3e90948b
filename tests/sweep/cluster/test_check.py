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


def test_the_local_twin_has_cluster_yamls_node_types_and_every_key_rays_monitor_reads():
    from sweep.cluster.twin_config import GPU_STANDIN, twin_config

    real = yaml.safe_load(CLUSTER.read_text())
    twin = twin_config(6379, gpu_workers=2, cpu_workers=1)
    for key in real:  # the monitor reads cluster.yaml's keys unguarded (KeyError: 'file_mounts')
        assert key in twin, key
    types = twin["available_node_types"]
    assert {"gpu_worker", "cpu_worker"} <= set(types) and set(real["available_node_types"]) - {"head"} <= set(types)
    assert types[twin["head_node_type"]]["resources"] == {"CPU": 0}, "the head runs drivers, no training or Ray Data task"
    assert GPU_STANDIN in types["gpu_worker"]["resources"] and GPU_STANDIN not in types["cpu_worker"]["resources"]
    assert all(types[t]["min_workers"] == 0 for t in ("gpu_worker", "cpu_worker"))
    assert twin["provider"]["gcs_address"] == "127.0.0.1:6379"
    # the autoscaler loads the twin's provider by this path: Ray's fake one, which forgets a lost node
    from ray.autoscaler._private.fake_multi_node.node_provider import FakeMultiNodeProvider
    from ray.autoscaler._private.loader import load_function_or_class

    assert issubclass(load_function_or_class(twin["provider"]["module"]), FakeMultiNodeProvider)


def test_the_twins_autoscaler_starts_a_cpu_only_node_for_a_decode_task_that_asks_for_memory():
    """Ray Data asks for ``memory`` in its map tasks once it knows their output size; the decode
    task of a lost CPU-only node waited forever when no node type declared ``memory`` (CI's
    failure). Asked of the autoscaler's own bin-packing, with no node up: a CPU-only node."""
    from functools import partial

    from ray.autoscaler._private.node_provider_availability_tracker import NodeAvailabilitySummary
    from ray.autoscaler._private.resource_demand_scheduler import _default_utilization_scorer, get_nodes_for

    from sweep.cluster.twin_config import DATA_NODE, twin_config

    twin = twin_config(6379, gpu_workers=2, cpu_workers=1)
    decode_task = {"CPU": 1.0, "memory": 24704.0, DATA_NODE: 1.0}  # a waiting task in that run's autoscaler log
    scorer = partial(_default_utilization_scorer, node_availability_summary=NodeAvailabilitySummary(node_availabilities={}))
    added, left = get_nodes_for(twin["available_node_types"], {}, twin["head_node_type"], twin["max_workers"], [decode_task], scorer)
    assert (dict(added), left) == ({"cpu_worker": 1}, [])


def test_the_twins_provider_starts_nodes_without_the_memory_ray_refuses_as_a_custom_resource(monkeypatch):
    """The node type's ``memory`` is the autoscaler's figure; Ray's fake provider would pass it to
    the raylet among custom resources, which ``RayParams`` rejects."""
    from ray.autoscaler._private.fake_multi_node.node_provider import FakeMultiNodeProvider

    from sweep.cluster.twin_provider import TwinNodeProvider

    started = []
    monkeypatch.setattr(FakeMultiNodeProvider, "create_node_with_resources_and_labels", lambda self, *args: started.append(args))
    TwinNodeProvider.__new__(TwinNodeProvider).create_node_with_resources_and_labels(
        {}, {"t": "x"}, 1, {"CPU": 1, "mjp_data": 1, "memory": 2**30}, {}
    )
    assert started == [({}, {"t": "x"}, 1, {"CPU": 1, "mjp_data": 1}, {})]


def test_a_trial_asks_for_its_custom_resources_and_refuses_cpu_among_them():
    from trainables.config.build import build_config
    from trainables.launch.trial import worker_resources

    base = {"model": {"name": "vit_tiny_patch16_224"}, "data": {"name": "digits"}}
    cfg = build_config(base, {"scaling.worker_resources": {"mjp_gpu": 1}}, source="test")
    assert worker_resources(cfg.scaling) == {"CPU": 1.0, "mjp_gpu": 1.0}
    with pytest.raises(ConfigError, match="'CPU'.*custom resources"):
        build_config(base, {"scaling.worker_resources": {"CPU": 2}}, source="test")


def test_cluster_down_of_an_empty_session_ends_nothing(tmp_path):
    from sweep.cluster.twin import down
    from tests.twin_faults import raylet_pid

    assert down(tmp_path, grace_s=0) == []
    with pytest.raises(LookupError, match="no raylet of node abc"):
        raylet_pid(tmp_path, "abc")


def test_cluster_down_says_where_it_saved_the_store(tmp_path, capsys):
    """`down` saves MLflow's store to the bucket (docs/cluster-local.md) and never said so."""
    import json
    import sqlite3
    from dataclasses import asdict

    from sweep.cli import main
    from sweep.cluster.twin import STATE_FILE, LocalCluster

    bucket = tmp_path / "bucket"
    twin = LocalCluster(str(tmp_path), "127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3", str(bucket / "s"), str(bucket))
    (tmp_path / STATE_FILE).write_text(json.dumps(asdict(twin)))
    (tmp_path / "mlflow").mkdir()
    with sqlite3.connect(tmp_path / "mlflow" / "mlflow.db") as db:  # a store with one row, its copy checked below
        db.execute("create table kept (x)")
        db.execute("insert into kept values (7)")
    assert main(["cluster", "down", "--session", str(tmp_path)]) == 0
    out = capsys.readouterr().out.strip()
    assert out == f"local cluster in {tmp_path} down: 0 processes ended, MLflow's store saved to {twin.kept_store}"
    with sqlite3.connect(twin.kept_store) as db:
        assert db.execute("select x from kept").fetchall() == [(7,)]


def test_cluster_up_without_local_and_a_bad_size_are_refused_before_anything_starts(tmp_path, capsys):
    from sweep.cli import main

    assert main(["cluster", "up", "--session", str(tmp_path)]) == 2
    assert "`ray up cluster.yaml`" in capsys.readouterr().err
    assert main(["cluster", "up", "--local", "--session", str(tmp_path), "--gpu-workers", "9"]) == 2
    assert "gpu_workers=9" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_the_bucket_is_set_in_one_place_and_nodes_install_the_locked_versions():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3]
    files = [root / "cluster.yaml", *sorted((root / "trainables" / "configs").glob("*.yaml"))]
    assert sum(f.read_text().count("YOUR-BUCKET") for f in files) == 1
    setup = " ".join(yaml.safe_load((root / "cluster.yaml").read_text())["setup_commands"])
    assert "uv export --frozen" in setup and "--no-deps -e" in setup and "uv pip install --system -e" not in setup


def test_ray_data_resources_place_the_decode_tasks_and_are_refused_where_no_node_has_them(tmp_path, monkeypatch):
    from trainables.config.build import build_config
    from trainables.data.ray_data import _placement
    from trainables.launch.ray_runtime import check_local_resources

    base = {"model": {"name": "vit_tiny_patch16_224"}, "data": {"name": "digits"}}
    cfg = build_config(base, {"data.ray_data_resources": {"mjp_data": 1}, "data.loader": "ray_data"}, source="test")
    assert _placement(cfg.data) == {"resources": {"mjp_data": 1.0}}
    assert _placement(build_config(base, {}, source="test").data) == {}
    with pytest.raises(ConfigError, match="'CPU'.*ray_data_resources"):
        build_config(base, {"data.ray_data_resources": {"CPU": 1}}, source="test")
    assert any(
        "does nothing with data.loader=torch" in w
        for w in build_config(base, {"data.ray_data_resources": {"mjp_data": 1}}, source="test").warnings()
    )
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ConfigError, match=r"data.ray_data_resources=\{'mjp_data': 1.0\}.*only a cluster"):
        check_local_resources(cfg, None)
    check_local_resources(cfg, "127.0.0.1:6379")  # a cluster's nodes declare them
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    check_local_resources(cfg, None)


def test_a_data_section_with_a_placement_is_hashable_as_ray_data_tasks_need():
    from trainables.config.build import build_config
    from trainables.data.ray_data import _transform

    def make():
        return build_config(
            {"data": {"name": "digits"}}, {"data.ray_data_resources": {"mjp_data": 1}, "data.img_size": 16}, source="test"
        ).data

    assert hash(make()) == hash(make()) and _transform(make()) is _transform(make())  # one transform per section


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", "status", "quickstart-smoke"],
        ["analyze", "report", "--study", "quickstart"],
        ["sweep", "run", "quickstart", "--smoke"],
        ["train", "trainables/configs/digits_vit_tiny.yaml", "--set", "optim.epochs=1"],
    ],
)
def test_with_the_twins_exports_left_after_down_a_command_answers_in_one_line(argv, tmp_path, monkeypatch, capsys):
    """MLflow retries an absent server for minutes and Ray an absent GCS; the commands ask first."""
    from sweep.cli import main

    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("MJP_SWEEP_STORAGE", str(tmp_path / "sweeps"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("no MLflow server answers" in err or "no Ray cluster answers" in err), err
    assert not (tmp_path / "sweeps").exists(), "refused before anything was written"


def test_the_ui_hint_for_a_tracking_server_is_its_own_page(monkeypatch):
    import trainables.tracking.store
    from sweep.console.commands_shown import mlflow_ui_command

    monkeypatch.setattr(
        trainables.tracking.store, "experiment_runs_page", lambda uri, name, host="http://127.0.0.1:5000": f"{host}/#/experiments/7/runs"
    )
    monkeypatch.delenv("MLFLOW_TRACKING_TOKEN", raising=False)
    assert mlflow_ui_command("http://127.0.0.1:41234", "mjp").startswith("open http://127.0.0.1:41234/#/experiments/7/runs")
    assert "token" not in mlflow_ui_command("http://127.0.0.1:41234", "mjp")
    assert "mlflow ui --backend-store-uri sqlite:////x/mlflow.db" in mlflow_ui_command("sqlite:////x/mlflow.db", "mjp")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "s3cret")  # behind a cluster's gate: the page asks for the token once
    behind_gate = mlflow_ui_command("http://127.0.0.1:41234", "mjp")
    assert behind_gate.startswith("open http://127.0.0.1:41234/#/experiments/7/runs") and "echo $MLFLOW_TRACKING_TOKEN" in behind_gate
    assert "s3cret" not in behind_gate


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


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU: use_gpu=true is runnable here")
def test_a_gpu_or_cpus_this_machine_lacks_are_refused_locally_but_left_to_a_clusters_autoscaler(monkeypatch):
    """A local Ray would wait forever for a GPU this machine lacks (nothing on screen), or
    pretend to have 64 CPUs and run 64 threads per trial on 2 cores; an address is a cluster."""
    import os

    from trainables.config.build import build_config
    from trainables.launch.ray_runtime import check_local_resources

    base = {"model": {"name": "vit_tiny_patch16_224"}, "data": {"name": "digits"}}
    gpu = build_config(base, {"scaling.use_gpu": True}, source="test")
    cpus = build_config(base, {"scaling.num_workers": 2, "scaling.cpus_per_worker": os.cpu_count()}, source="test")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(
        ConfigError, match=r"scaling.use_gpu=true asks for 1 GPU\(s\) per trial .* but this machine has 0 \(torch sees no CUDA devices\)"
    ):
        check_local_resources(gpu, None)
    with pytest.raises(
        ConfigError,
        match=(
            rf"scaling.num_workers=2 x scaling.cpus_per_worker={os.cpu_count()} = {2 * os.cpu_count()} CPUs per trial, "
            rf"but this machine has {os.cpu_count()}"
        ),
    ):
        check_local_resources(cpus, None)
    check_local_resources(build_config(base, {"scaling.cpus_per_worker": os.cpu_count()}, source="test"), None)  # all the cores: allowed
    for cfg in (gpu, cpus):
        check_local_resources(cfg, "127.0.0.1:6379")  # the cluster's autoscaler may provide them
        monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
        check_local_resources(cfg, None)
        monkeypatch.delenv("RAY_ADDRESS")


def test_cluster_down_of_a_session_that_is_not_up_says_so_and_exits_2(tmp_path, capsys):
    from sweep.cli import main

    assert main(["cluster", "down", "--session", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --session {tmp_path / 'nope'}: no such directory, so no local cluster to end "
        f"(`mjp cluster up --local` starts one in /tmp/mjp-local-cluster)"
    )
    assert main(["cluster", "down", "--session", str(tmp_path)]) == 2  # a directory, but no twin's state nor process
    assert "no local cluster is up there (no cluster.json, no process of it); nothing to end" in capsys.readouterr().err
