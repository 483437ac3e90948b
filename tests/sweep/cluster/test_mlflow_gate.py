"""The cluster's MLflow server behind the cluster's token: MLflow's client passes the gate with
``MLFLOW_TRACKING_TOKEN`` and reads its answer; without the token, or with another, it gets 401
and nothing reaches the server. A token file others can read is refused."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from sweep.cluster.mlflow_gate import gate_app, read_token
from tests.stand_in_mlflow import StandInMlflow
from trainables.errors import UserError

#: the MLflow server behind the gate: one experiment, and every request it saw
EXPERIMENT = {"experiment": {"experiment_id": "7", "name": "gated", "lifecycle_stage": "active"}}


@pytest.fixture
def gate(tmp_path):
    """The MLflow stand-in and the gate in front of it (the gate on a thread of its own)."""
    from aiohttp import web

    server = StandInMlflow(EXPERIMENT).__enter__()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(gate_app(f"http://127.0.0.1:{server.port}", "s3cret-token"))
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    threading.Thread(target=loop.run_forever, daemon=True).start()
    yield f"http://127.0.0.1:{port}", server
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    server.__exit__()


def test_mlflow_passes_the_gate_with_the_token_and_nothing_passes_without(gate, monkeypatch):
    from mlflow.tracking import MlflowClient

    from trainables.tracking.store import bounded_http

    gate, mlflow = gate
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "s3cret-token")
    assert MlflowClient(gate).get_experiment("7").name == "gated"
    assert mlflow.seen and mlflow.seen[-1][1] == ""  # the token stops at the gate
    passed = len(mlflow.seen)
    for token in (None, "s3cret-tokem"):
        if token is None:
            monkeypatch.delenv("MLFLOW_TRACKING_TOKEN")
        else:
            monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", token)
        with bounded_http(), pytest.raises(Exception, match="401"):
            MlflowClient(gate).get_experiment("7")
    assert len(mlflow.seen) == passed  # nothing reached the server


def test_a_token_file_others_can_read_is_refused(tmp_path):
    path = tmp_path / "auth_token"
    path.write_text("abc\n")
    os.chmod(path, 0o644)
    with pytest.raises(UserError, match="readable by other users .*chmod 600"):
        read_token(path)
    os.chmod(path, 0o600)
    assert read_token(path) == "abc"
