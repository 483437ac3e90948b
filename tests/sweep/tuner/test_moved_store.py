"""A sweep whose MLflow server moved: ``mjp sweep resume DIR --uri NEW`` continues in the store
at its new address once it holds the sweep's parent run; another store, and a recorded address
where nothing (or no MLflow) answers, are refused in one line within seconds, naming the flag."""

from __future__ import annotations

import http.server
import threading

import pytest

from sweep.cluster.ports import free_port
from sweep.tuner.state import SweepState, in_store
from trainables.errors import UserError
from trainables.tracking import schema
from trainables.tracking.runs import RunTracker


@pytest.fixture
def sweep(tmp_path):
    """A sweep's state and its parent run in a SQLite store."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    parent = RunTracker.create(uri, "mjp-quickstart", run_name="quickstart-1", tags={schema.TAG_KIND: schema.KIND_SWEEP})
    state = SweepState(
        name="quickstart-1",
        study="quickstart",
        uri=uri,
        experiment="mjp-quickstart",
        parent_run_id=parent.run_id,
        optuna_storage=f"sqlite:///{tmp_path}/optuna.db",
    )
    return state, tmp_path


def test_the_recorded_store_is_followed_when_it_holds_the_parent_run(sweep):
    state, _ = sweep
    assert in_store(state, None, "/r/quickstart-1") is state


def test_a_store_at_a_new_address_is_checked_and_then_recorded(sweep, tmp_path):
    state, _ = sweep
    gone = SweepState(**{**state.__dict__, "uri": f"http://127.0.0.1:{free_port()}", "optuna_storage": None})
    with pytest.raises(UserError) as err:  # the recorded server is gone: the flag, in one line
        in_store(gone, None, "/r/quickstart-1")
    text = str(err.value)
    assert "does not answer" in text and "`mjp sweep resume /r/quickstart-1 --uri NEW_URI`" in text and "\n" not in text
    moved = in_store(gone, state.uri, "/r/quickstart-1")
    assert moved.uri == state.uri and moved.parent_run_id == state.parent_run_id and moved.name == state.name


def test_another_store_is_refused_naming_what_it_holds(sweep, tmp_path):
    state, _ = sweep
    other = f"sqlite:///{tmp_path}/other.db"
    RunTracker.create(other, "mjp-quickstart", run_name="quickstart-1")  # same names, another parent run id
    with pytest.raises(UserError) as err:
        in_store(state, other, "/r/quickstart-1")
    text = str(err.value)
    assert text.startswith(f"the MLflow store at {other} is not the store of sweep quickstart-1") and "no run" in text and "\n" not in text
    with pytest.raises(UserError, match="no MLflow store at"):  # a missing SQLite file is refused, not created
        in_store(state, f"sqlite:///{tmp_path}/missing.db", "/r/quickstart-1")
    assert not (tmp_path / "missing.db").exists()


def test_a_run_of_the_same_id_under_another_name_is_not_the_sweep(sweep):
    state, _ = sweep
    renamed = SweepState(**{**state.__dict__, "name": "quickstart-2"})
    with pytest.raises(UserError, match="its run .* is 'quickstart-1' in experiment 'mjp-quickstart'"):
        in_store(renamed, None, "/r/quickstart-2")


class _NotMlflow(http.server.BaseHTTPRequestHandler):
    """Something else took the old port: it answers every request with 503, which MLflow retries."""

    def do_GET(self) -> None:
        self.send_response(503)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_a_server_that_answers_but_is_not_mlflow_is_refused_without_mlflow_retries(sweep):
    state, _ = sweep
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotMlflow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        squatted = SweepState(**{**state.__dict__, "uri": f"http://127.0.0.1:{server.server_address[1]}", "optuna_storage": None})
        with pytest.raises(UserError) as err:  # MLflow alone would retry 503 with back-off for minutes
            in_store(squatted, None, "/r/quickstart-1")
        assert "is not the store of sweep quickstart-1" in str(err.value) and "--uri NEW_URI" in str(err.value)
    finally:
        server.shutdown()
