"""Results that outlive the cluster, on the local twin: `down` saves the MLflow store to the twin's
bucket (the folder standing in for cluster.yaml's S3 bucket), and a new twin with a new head disk
starts from it, runs and artifacts included, as a new head on AWS does (cluster.yaml's
head_start_ray_commands). The first twin is the one the cluster tests share (tests/twin_session.py):
this test takes it down."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import mlflow
import pytest

from sweep.cluster.processes import session_processes
from sweep.cluster.twin import down, up

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_a_new_twin_starts_from_the_store_and_artifacts_the_last_one_kept(twin_session, tmp_path, monkeypatch):
    first = twin_session.get()
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", first.environment()["MLFLOW_TRACKING_TOKEN"])  # through the twin's gate
    client = mlflow.MlflowClient(tracking_uri=first.tracking_uri)
    run = client.create_run(client.create_experiment("kept"))
    client.log_metric(run.info.run_id, "val/top1", 0.75)
    (tmp_path / "note.txt").write_text("kept in the bucket")
    client.log_artifact(run.info.run_id, str(tmp_path / "note.txt"))
    twin_session.take_down()  # checks that nothing is left running and every experiment was kept
    bucket = Path(first.bucket)
    assert (bucket / "mlflow" / "mlflow.db").is_file()

    second = Path(tempfile.mkdtemp(prefix="mjp-st-", dir="/tmp"))  # short: Ray's socket paths live under it
    try:
        again = up(second, gpu_workers=1, cpu_workers=0, bucket=bucket)  # a new head disk: no mlflow.db of its own
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", again.environment()["MLFLOW_TRACKING_TOKEN"])  # its own token
        client = mlflow.MlflowClient(tracking_uri=again.tracking_uri)
        kept = client.get_run(run.info.run_id)
        assert kept.data.metrics == {"val/top1": 0.75}
        downloaded = client.download_artifacts(run.info.run_id, "note.txt", str(tmp_path))
        assert Path(downloaded).read_text() == "kept in the bucket"
    finally:
        down(second, grace_s=5)
        assert session_processes(second) == []
        shutil.rmtree(second, ignore_errors=True)
