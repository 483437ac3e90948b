"""The cluster path on the local twin of cluster.yaml (``mjp cluster up --local``): a sweep
submitted as a Ray job trains on worker nodes the autoscaler starts, logs to an MLflow server
over HTTP, and survives the loss of a training node, of the Ray Data node and of its driver
(the sweep of docs/cluster-local.md, pasted as written, is tests/test_cluster_pasted_docs.py).
Minutes on 2 cores (``make test-cluster``).

Everything that talks to Ray runs in a fresh Python (``on_cluster``), but for the jobs API, which
the tests call over HTTP (tests/twin_jobs.py); the studies and their runs are in tests/twin_sweeps.py,
the nodes in tests/twin_nodes.py. The waits poll real state (a job's status, a run's metrics) with a
deadline: nodes start in seconds to tens of seconds, and nothing here depends on how many.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
import yaml

from mjp import keys
from sweep.cluster.twin_config import DATA_NODE, GPU_STANDIN
from tests.twin_faults import kill_node
from tests.twin_jobs import ENDED, SUBMITTED, driver_pid, job_logs, job_status, stop_job, submit, wait_job
from tests.twin_nodes import HEAD_NODE, alive_nodes, data_nodes_ever, kill_the_data_node_at_epoch, ray_data_task_nodes
from tests.twin_sweeps import TRACKING, child_runs, image_folder, seconds_lost, study, tracking, wait_for_epoch
from trainables.tracking import schema

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
LOSSES: dict[str, float] = {}  # what each loss cost, printed at the end (docs/cluster-local.md)


@pytest.fixture(scope="module")
def cluster(twin_session):
    """The session's twin (tests/twin_session.py), whose MLflow server ``tracking()`` reads."""
    twin = twin_session.get()
    TRACKING["uri"] = twin.tracking_uri
    yield twin
    if LOSSES:
        print("\nseconds each loss cost:", {k: round(v, 1) for k, v in LOSSES.items()})


@pytest.fixture(autouse=True)
def the_gates_token(cluster, monkeypatch):
    """The twin's MLflow is behind its gate, as cluster.yaml's is: this process' clients send the
    token as every node's and job's do (``MLFLOW_TRACKING_TOKEN``)."""
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", cluster.environment()["MLFLOW_TRACKING_TOKEN"])


@pytest.fixture(autouse=True)
def each_test_ends_its_jobs(cluster):
    """A test that fails with its job still running must not starve the tests after it of the
    twin's nodes: every job it submitted is stopped, and has ended, before the next test starts."""
    SUBMITTED.clear()
    yield
    running = [job for job in SUBMITTED if job_status(cluster, job) not in ENDED]
    for job in running:
        stop_job(cluster, job)
    for job in running:
        wait_job(cluster, job, seconds=120)


def test_a_lost_worker_node_costs_one_restart_from_the_last_checkpoint(cluster):
    assert set(alive_nodes(cluster)) == {HEAD_NODE}, "min_workers 0: only the head before the first job"
    job = submit(cluster, "sweep", "run", study(cluster, "cl-node-loss", 8, ["J"]))
    run = wait_for_epoch("cl-node-loss", 2)
    node = tracking().get_run(run.info.run_id).data.tags[f"{schema.TAG_NODE_PREFIX}0"]
    killed_at = time.time()
    assert len(kill_node(cluster.session_dir, node)) > 1, "the node's raylet and its workers"
    assert wait_job(cluster, job) == "SUCCEEDED"

    runs = child_runs("cl-node-loss")
    assert [r.info.run_id for r in runs] == [run.info.run_id], "the restarted trial must log into the same child run"
    after = tracking().get_run(run.info.run_id)
    assert after.info.status == "FINISHED"
    nodes = after.data.tags[schema.TAG_NODES_SEEN].split(",")
    assert nodes[0] == node and len(nodes) == 2 and nodes[1] != node, f"trained on {nodes}; expected the lost node, then another"
    history = tracking().get_metric_history(run.info.run_id, keys.VAL_TOP1)
    resumed = [m for m in history if m.timestamp / 1000 > killed_at]
    assert resumed, "the trial had ended before the loss: the race did not happen"
    assert min(m.step for m in resumed) > 1, "the restart began again at epoch 1, not from its checkpoint"
    assert max(m.step for m in history) == 8
    assert node not in alive_nodes(cluster)
    LOSSES["a training node"] = seconds_lost(history, killed_at)


def test_ray_data_decodes_on_the_cpu_node_and_the_autoscaler_replaces_it_when_lost(cluster):
    root = image_folder(Path(cluster.session_dir) / "images")
    data = {
        "name": "imagefolder",
        "root": str(root),
        "img_size": 16,
        "batch_size": 8,
        "loader": "ray_data",
        "augment": "deit",
        "train_limit": None,
        "val_limit": None,
        "ray_data_resources": {DATA_NODE: 1},
    }
    job = submit(
        cluster,
        "sweep",
        "run",
        study(
            cluster, "cl-ray-data", 10, ["J"], data=data, model={"kwargs": {"patch_size": 4, "embed_dim": 32, "depth": 1, "num_heads": 2}}
        ),
    )
    # the CPU-only node the autoscaler started for the decode tasks, lost after epoch 2 of 10
    lost, data_nodes, killed_at = kill_the_data_node_at_epoch(cluster, "cl-ray-data", 2)
    assert wait_job(cluster, job) == "SUCCEEDED"
    (run,) = child_runs("cl-ray-data")
    trainer = tracking().get_run(run.info.run_id).data.tags[f"{schema.TAG_NODE_PREFIX}0"]
    decoders = ray_data_task_nodes(cluster)
    assert lost in decoders and trainer not in decoders and HEAD_NODE not in decoders, (
        f"Ray Data tasks ran on {decoders}; the CPU-only node was {lost}, the trainer {trainer}"
    )

    runs = child_runs("cl-ray-data")
    assert [r.info.run_id for r in runs] == [run.info.run_id] and runs[0].info.status == "FINISHED"
    history = tracking().get_metric_history(run.info.run_id, keys.VAL_TOP1)
    assert max(m.step for m in history) == 10
    assert [m for m in history if m.timestamp / 1000 > killed_at], "the trial had ended before the loss: the race did not happen"
    LOSSES["the Ray Data node"] = seconds_lost(history, killed_at)
    # Only CPU-only nodes decode: the trial went on once the autoscaler had started a new one
    replacements = data_nodes_ever(cluster) - data_nodes
    assert replacements and decoders - {lost} <= replacements, (
        f"after the loss Ray Data ran on {decoders - {lost}}; new CPU-only nodes: {replacements}"
    )


def test_a_lost_driver_then_sweep_resume_runs_every_trial_once(cluster):
    """The job's driver (the `mjp sweep run` process on the head) SIGKILLed mid-sweep, then
    `mjp sweep resume DIR` as a new job: every trial once, in its own child run, none RUNNING."""
    job = submit(cluster, "sweep", "run", study(cluster, "cl-driver-loss", 6, ["A", "J"]))
    wait_for_epoch("cl-driver-loss", 2)
    driver = driver_pid(cluster, job)
    killed_at = time.time()
    os.kill(int(driver), signal.SIGKILL)
    assert wait_job(cluster, job) in {"FAILED", "STOPPED"}
    [experiment_dir] = [str(p) for p in Path(cluster.storage).glob("cl-driver-loss-*")]
    resumed = submit(cluster, "sweep", "resume", experiment_dir)
    assert wait_job(cluster, resumed) == "SUCCEEDED", job_logs(cluster, resumed)

    runs = child_runs("cl-driver-loss")
    trials = [r.data.tags[schema.TAG_TRIAL_ID] for r in runs]
    assert sorted(trials) == sorted(set(trials)) and len(trials) == 2, f"trials {trials}: each must have exactly one child run"
    assert sorted(r.info.status for r in runs) == ["FINISHED", "FINISHED"]
    LOSSES["the driver: from the kill to the resumed sweep's end, remaining training included"] = time.time() - killed_at


def test_two_workers_strictly_spread_over_two_nodes_train_as_one_worker(cluster):
    """Variant A (no random masks), 1 epoch: 2 Ray Train workers on 2 "GPU" nodes with 32 images
    each per step against 1 worker with 64. DistributedSampler gives the 2 ranks the 64 images the
    1 worker sees at each step, so the validation losses agree to float32 rounding (2e-5 + 1e-4
    of the loss; the weights themselves: tests/trainables/train/test_ddp_equivalence.py)."""
    path = Path(study(cluster, "cl-spread", 1, ["A"]))
    tree = yaml.safe_load(path.read_text())
    tree["space"] = {
        "workers": {
            "type": "grid",
            "values": ["one", "two"],
            "presets": {
                "one": {"scaling.num_workers": 1, "data.batch_size": 64},
                "two": {"scaling.num_workers": 2, "scaling.placement": "STRICT_SPREAD", "data.batch_size": 32},
            },
        }
    }
    tree["budget"] = {"max_concurrent": 1}
    tree["train"]["mjp"] = {"variant": "A"}
    path.write_text(yaml.safe_dump(tree))
    assert wait_job(cluster, submit(cluster, "sweep", "run", str(path)), seconds=480) == "SUCCEEDED"

    runs = {r.data.tags[f"{schema.TAG_SAMPLE_PREFIX}workers"]: r for r in child_runs("cl-spread")}
    two = runs["two"].data.tags
    assert two[f"{schema.TAG_NODE_PREFIX}0"] != two[f"{schema.TAG_NODE_PREFIX}1"], "STRICT_SPREAD: one worker per node"
    assert not {two[f"{schema.TAG_NODE_PREFIX}0"], two[f"{schema.TAG_NODE_PREFIX}1"]} & {HEAD_NODE}
    one_loss, two_loss = runs["one"].data.metrics[keys.VAL_LOSS], runs["two"].data.metrics[keys.VAL_LOSS]
    assert abs(one_loss - two_loss) <= 2e-5 + 1e-4 * abs(one_loss), f"val/loss: 1 worker {one_loss}, 2 workers {two_loss}"


def test_the_probe_reaches_a_gpu_node_and_a_cpu_node_the_autoscaler_starts_and_from_each_the_images_bucket_and_mlflow(cluster):
    """`mjp cluster probe` as a job: one task on a "GPU" node, one on the CPU-only node, each
    checking the images, the sweep storage (the bucket) and the MLflow server from there."""
    root = image_folder(Path(cluster.session_dir) / "probe-images", per_class=2)
    job = submit(cluster, "cluster", "probe", "--gpu-resource", GPU_STANDIN, "--data", str(root), "--timeout", "300")
    assert wait_job(cluster, job, seconds=360) == "SUCCEEDED", job_logs(cluster, job)
    logs = job_logs(cluster, job)
    assert f"GPU node ({GPU_STANDIN}: 1) on" in logs and f"CPU node ({DATA_NODE}: 1) on" in logs, logs
    assert logs.count("images  ok") == 2 and logs.count("bucket  ok") == 2 and logs.count("mlflow  ok") == 2, logs
    assert "cuda " not in logs, "the twin's stand-in has no CUDA to check"
    assert "probe: every check held" in logs
    nodes = re.findall(r"\(node …([0-9a-f]{12})\)", logs)
    assert len(nodes) == 2 and len(set(nodes)) == 2, logs  # two nodes answered, each named by its own id
