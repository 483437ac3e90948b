"""The local twin of cluster.yaml without starting it: its node types, what its autoscaler and
provider start, and ``mjp cluster up`` / ``down`` where there is nothing to start or end."""

from pathlib import Path

import pytest
import yaml

CLUSTER = Path(__file__).resolve().parents[3] / "cluster.yaml"


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


def test_cluster_down_of_a_session_that_is_not_up_says_so_and_exits_2(tmp_path, capsys):
    from sweep.cli import main

    assert main(["cluster", "down", "--session", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --session {tmp_path / 'nope'}: no such directory, so no local cluster to end "
        f"(`mjp cluster up --local` starts one in /tmp/mjp-local-cluster)"
    )
    assert main(["cluster", "down", "--session", str(tmp_path)]) == 2  # a directory, but no twin's state nor process
    assert "no local cluster is up there (no cluster.json, no process of it); nothing to end" in capsys.readouterr().err
