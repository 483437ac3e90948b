"""The local twin's nodes as tests/test_cluster_local.py sees them: which are alive, which ran Ray
Data's decode tasks, and losing the CPU-only node that decodes while a trial trains."""

from __future__ import annotations

from mjp import keys
from sweep.cluster.twin_config import DATA_NODE
from tests.twin_jobs import on_cluster
from trainables.tracking import schema

HEAD_NODE = "fffffffffffffffffffffffffffffffffffffffffffffffffff00000"  # the fake provider's head id


def alive_nodes(twin) -> dict[str, dict]:
    return on_cluster(
        twin,
        "import json, ray; ray.init(log_to_driver=False); "
        "print(json.dumps({n['NodeID']: n['Resources'] for n in ray.nodes() if n['Alive']}))",
    )


def data_nodes_ever(twin) -> set[str]:
    """Every node, alive or lost, that declared the CPU-only nodes' resource."""
    return set(
        on_cluster(
            twin,
            "import json, ray; ray.init(log_to_driver=False); "
            f"print(json.dumps([n['NodeID'] for n in ray.nodes() if {DATA_NODE!r} in n['Resources']]))",
        )
    )


def ray_data_task_nodes(twin) -> set[str]:
    """The nodes that ran Ray Data's read + decode tasks (``decode_and_augment``) so far."""
    return set(
        on_cluster(
            twin,
            "import json, ray; from ray.util.state import list_tasks; ray.init(log_to_driver=False); "
            "print(json.dumps(sorted({t.node_id for t in list_tasks(limit=10_000, raise_on_missing_output=False) "
            "if 'decode_and_augment' in t.name and t.node_id})))",
        )
    )


def kill_the_data_node_at_epoch(twin, experiment: str, epoch: int) -> tuple[str, set[str], float]:
    """Wait, in one fresh Python started at once, for a trial of ``experiment`` to log ``epoch``,
    then lose the CPU-only node that ran its Ray Data decode tasks at that moment: no second
    Python starts between the event and the kill (one took seconds under load, and a short
    trial could end meanwhile, leaving nothing to decode after the loss). The lost node, every
    CPU-only node known then, and the time of the kill."""
    code = f"""
import json, sys, time
import mlflow, ray
from ray.util.state import list_tasks
from tests.twin_faults import kill_node
from trainables.launch.ray_runtime import raylet_messages_to_log
raylet_messages_to_log()  # the raylet's notes to this driver go to stderr, not onto the JSON line's stdout
ray.init(log_to_driver=False)
client = mlflow.MlflowClient({twin.tracking_uri!r})
deadline = time.monotonic() + 300
def reached():
    exp = client.get_experiment_by_name({experiment!r})
    runs = client.search_runs([exp.experiment_id], "tags.`{schema.TAG_PARENT}` != ''") if exp else []
    return any(m.step >= {epoch} for r in runs for m in client.get_metric_history(r.info.run_id, {keys.VAL_TOP1!r}))
while not reached():
    assert time.monotonic() < deadline, "no trial of {experiment} reached epoch {epoch}"
    time.sleep(0.2)
data = {{n["NodeID"]: n["Alive"] for n in ray.nodes() if {DATA_NODE!r} in n["Resources"]}}
decoding = sorted({{t.node_id for t in list_tasks(limit=10_000, raise_on_missing_output=False)
                   if "decode_and_augment" in t.name and data.get(t.node_id)}})
assert decoding, f"no living CPU-only node ran a decode task: {{data}}"
kill_node({twin.session_dir!r}, decoding[0])
killed_at = time.time()
ray.shutdown()
print(json.dumps([decoding[0], sorted(data), killed_at]))
"""
    lost, known, killed_at = on_cluster(twin, code)
    return lost, set(known), killed_at
