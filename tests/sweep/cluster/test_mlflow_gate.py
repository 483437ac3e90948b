"""The cluster's MLflow server behind the cluster's token: MLflow's client passes the gate with
``MLFLOW_TRACKING_TOKEN`` and reads its answer; without the token, or with another, it gets 401
and nothing reaches the server. A token file others can read is refused."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from sweep.cluster.gate.listener import open_gate
from sweep.cluster.gate.mlflow_gate import gate_app, read_token
from tests.stand_in_mlflow import StandInMlflow
from trainables.errors import UserError

#: the MLflow server behind the gate: one experiment, and every request it saw
EXPERIMENT = {"experiment": {"experiment_id": "7", "name": "gated", "lifecycle_stage": "active"}}


@pytest.fixture
def gate(tmp_path):
    """The MLflow stand-in and the gate in front of it (the gate on a thread of its own)."""
    server = StandInMlflow(EXPERIMENT).__enter__()
    loop = asyncio.new_event_loop()
    opened = loop.run_until_complete(open_gate(gate_app(f"http://127.0.0.1:{server.port}", "s3cret-token"), "127.0.0.1", 0))
    threading.Thread(target=loop.run_forever, daemon=True).start()
    yield f"http://127.0.0.1:{opened.port}", server
    asyncio.run_coroutine_threadsafe(opened.close(), loop).result()
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


@pytest.mark.parametrize("token", [None, "s3cret-tokem"])
def test_a_missing_or_wrong_token_is_one_line_naming_it_before_the_command_works(gate, monkeypatch, capsys, token):
    """A wrong MLflow password or token (HTTP 401) printed 31 lines of MLflow's traceback."""
    from sweep.cli import main

    url, server = gate
    if token is None:
        monkeypatch.delenv("MLFLOW_TRACKING_TOKEN", raising=False)
    else:
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", token)
    assert main(["sweep", "status", "--uri", url]) == 2
    err = capsys.readouterr().err
    sent = "no credentials" if token is None else "the token in $MLFLOW_TRACKING_TOKEN"
    assert err.count("\n") == 1 and f"error: the MLflow server at {url} refuses {sent} (HTTP 401)" in err, err
    assert server.seen == []  # nothing reached the server


def test_a_token_file_others_can_read_is_refused(tmp_path):
    path = tmp_path / "auth_token"
    path.write_text("abc\n")
    os.chmod(path, 0o644)
    with pytest.raises(UserError, match="readable by other users .*chmod 600"):
        read_token(path)
    os.chmod(path, 0o600)
    assert read_token(path) == "abc"


@pytest.fixture(scope="module")
def real_gate(tmp_path_factory):
    """A real ``mlflow server`` (SQLite, proxied artifacts) with the gate in front of it, as
    cluster.yaml's head runs them."""
    import subprocess
    import sys

    from sweep.cluster.ports import free_port
    from sweep.cluster.twin_mlflow import wait_http

    tmp = tmp_path_factory.mktemp("gated")
    port, log = free_port(), tmp / "server.log"
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    command += ["--backend-store-uri", f"sqlite:///{tmp}/mlflow.db", "--artifacts-destination", str(tmp / "artifacts")]
    with open(log, "w") as out:
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}  # as cluster.yaml starts it
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp, env=env)
    loop = asyncio.new_event_loop()
    try:
        wait_http(f"http://127.0.0.1:{port}/health", "the MLflow server", 120, log, server)
        opened = loop.run_until_complete(open_gate(gate_app(f"http://127.0.0.1:{port}", "s3cret-token"), "127.0.0.1", 0))
        threading.Thread(target=loop.run_forever, daemon=True).start()
        yield f"http://127.0.0.1:{opened.port}", tmp
        asyncio.run_coroutine_threadsafe(opened.close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
    finally:
        os.killpg(server.pid, 15)
        server.wait()


@pytest.mark.slow
def test_every_write_and_read_of_mlflows_client_passes_the_gate_to_a_real_server(real_gate, monkeypatch, tmp_path):
    """Bodies reach the server whole (the gate once streamed them chunked, which MLflow's server
    read as empty: no experiment, run, param or artifact could be written through it)."""
    import requests
    from mlflow.tracking import MlflowClient

    url, _ = real_gate
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "s3cret-token")
    client = MlflowClient(url)
    experiment = client.create_experiment("through-the-gate")
    run = client.create_run(experiment, run_name="gated-run")
    client.log_param(run.info.run_id, "gamma", "0.27")
    client.log_metric(run.info.run_id, "val/top1", 0.9, step=3)
    artifact = tmp_path / "weights.bin"
    artifact.write_bytes(os.urandom(300_000))  # more than one chunk each way
    client.log_artifact(run.info.run_id, str(artifact), "model")
    client.set_terminated(run.info.run_id)

    assert "through-the-gate" in {e.name for e in client.search_experiments()}
    found = client.search_runs([experiment])
    assert [r.info.run_name for r in found] == ["gated-run"] and found[0].data.params == {"gamma": "0.27"}
    assert found[0].info.status == "FINISHED" and found[0].data.metrics == {"val/top1": 0.9}
    back = client.download_artifacts(run.info.run_id, "model/weights.bin", str(tmp_path / "back"))
    assert Path(back).read_bytes() == artifact.read_bytes()

    # a client that sends its body chunked (no Content-Length) is read whole and passed on with its length
    body = b'{"name": "chunked-in"}'
    answer = requests.post(
        f"{url}/api/2.0/mlflow/experiments/create",
        data=iter([body[:7], body[7:]]),
        headers={"Authorization": "Bearer s3cret-token", "Content-Type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert client.get_experiment_by_name("chunked-in") is not None


@pytest.mark.slow
def test_a_browser_opens_the_ui_through_the_gate_once_given_the_token_and_nothing_without(real_gate):
    """The UI link a sweep prints for the twin answered 401: a browser sends no bearer token. The
    gate asks for it once (a form, never in a URL) and leaves a cookie that is not the token."""
    import requests

    url, _ = real_gate
    browser = requests.Session()  # keeps cookies and follows redirects, as a browser does
    html = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    link = f"{url}/#/experiments/0/runs"
    asked = browser.get(link, headers=html, timeout=30)
    assert asked.status_code == 401 and 'name="token"' in asked.text and "mlflow-ui-container" not in asked.text
    wrong = browser.post(f"{url}/mjp-gate/login", data={"token": "s3cret-tokem", "next": "/"}, headers=html, timeout=30)
    assert wrong.status_code == 401 and not browser.cookies
    elsewhere = browser.post(
        f"{url}/mjp-gate/login", data={"token": "s3cret-token", "next": "//evil.example/"}, allow_redirects=False, timeout=30
    )
    assert elsewhere.status_code == 303 and elsewhere.headers["Location"] == "/"  # never a redirect off the gate
    browser.cookies.clear()

    opened = browser.post(
        f"{url}/mjp-gate/login", data={"token": "s3cret-token", "next": "/#/experiments/0/runs"}, headers=html, timeout=30
    )
    assert opened.status_code == 200 and "mlflow-ui-container" in opened.text, opened.text[:300]  # MLflow's own UI page
    set_cookie = opened.history[0].headers["Set-Cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie and "s3cret-token" not in set_cookie
    api = browser.post(f"{url}/ajax-api/2.0/mlflow/experiments/search", json={"max_results": 10}, timeout=30)
    assert api.status_code == 200 and "Default" in api.text  # what the UI's page asks next

    stranger = requests.Session()
    for cookie in (None, "s3cret-token"):  # no cookie, then the token itself as the cookie
        if cookie:
            stranger.cookies.set("mjp_gate", cookie)
        assert stranger.get(link, headers=html, timeout=30).status_code == 401
        assert stranger.post(f"{url}/ajax-api/2.0/mlflow/experiments/search", json={"max_results": 10}, timeout=30).status_code == 401
