"""A tracking URI's ``user:password@`` never reaches a record: it moves into MLflow's own
variables (``MLFLOW_TRACKING_USERNAME``/``PASSWORD``), the URI goes on without it, and MLflow
still authenticates with it; what is recorded anyway (params, tags) is redacted."""

from __future__ import annotations

import base64

import pytest

from sweep.cli import main
from tests.stand_in_mlflow import StandInMlflow
from trainables.errors import UserError
from trainables.tracking.credentials import PASSWORD, USERNAME, redact, scrub_environment, scrub_overrides, without_credentials


@pytest.fixture
def clean_env(monkeypatch):
    for name in (USERNAME, PASSWORD, "MLFLOW_TRACKING_URI"):
        monkeypatch.setenv(name, "")  # recorded: whatever a test moves into them is undone after it
        monkeypatch.delenv(name)
    return monkeypatch


def test_redact_hides_the_user_info_of_every_url_in_a_text():
    text = "at http://bob:s3cret@10.0.0.5:5000/#/x, also https://tok@h and postgresql://u:p@db/m; not sqlite:////a@b.db nor me@example.com"
    assert redact(text) == (
        "at http://***@10.0.0.5:5000/#/x, also https://***@h and postgresql://***@db/m; not sqlite:////a@b.db nor me@example.com"
    )


def test_a_server_s_credentials_move_into_mlflow_s_variables(clean_env):
    import os

    assert without_credentials("http://bob:s3cr%40t@10.0.0.5:5000") == "http://10.0.0.5:5000"
    assert (os.environ[USERNAME], os.environ[PASSWORD]) == ("bob", "s3cr@t")
    assert scrub_overrides(["tracking.uri=https://al:pw@h:1", "optim.epochs=3"]) == ["tracking.uri=https://h:1", "optim.epochs=3"]
    assert (os.environ[USERNAME], os.environ[PASSWORD]) == ("al", "pw")
    clean_env.setenv("MLFLOW_TRACKING_URI", "http://env:pw2@h:2")
    scrub_environment()
    assert (os.environ["MLFLOW_TRACKING_URI"], os.environ[USERNAME], os.environ[PASSWORD]) == ("http://h:2", "env", "pw2")
    assert without_credentials("sqlite:////tmp/mlflow.db") == "sqlite:////tmp/mlflow.db"


def test_a_database_password_in_the_uri_is_refused_in_one_line_without_showing_it(clean_env):
    assert without_credentials("postgresql://user@db/mlflow") == "postgresql://user@db/mlflow"
    with pytest.raises(UserError) as err:
        without_credentials("postgresql://user:hunter2@db/mlflow")
    assert "hunter2" not in str(err.value) and "~/.pgpass" in str(err.value) and "\n" not in str(err.value)


def test_a_command_given_credentials_prints_none_and_still_authenticates(clean_env, capsys):
    with StandInMlflow({}) as server:
        clean_env.setenv("MLFLOW_TRACKING_URI", f"http://alice:hunter2@127.0.0.1:{server.port}")
        assert main(["sweep", "status"]) == 0
        out, err = capsys.readouterr()
        assert f"no sweeps recorded in http://127.0.0.1:{server.port}" in out and "hunter2" not in out + err
        assert f"Basic {base64.b64encode(b'alice:hunter2').decode()}" in [auth for _, auth in server.seen]  # MLflow authenticated with them


def test_a_config_holding_credentials_logs_its_params_and_tags_redacted(tmp_path, clean_env):
    from trainables.tracking.runs import RunTracker

    run = RunTracker.create(f"sqlite:///{tmp_path}/mlflow.db", "creds", run_name="r")
    run.log_params({"tracking.uri": "http://alice:hunter2@10.0.0.5:5000"})
    run.set_tags({"note": "see http://alice:hunter2@10.0.0.5:5000"})
    data = run.run().data
    assert data.params["tracking.uri"] == "http://***@10.0.0.5:5000" and data.tags["note"] == "see http://***@10.0.0.5:5000"


def test_a_password_holding_an_at_sign_moves_whole_and_other_keys_are_left_alone(monkeypatch):
    import os

    from trainables.tracking.credentials import redact, scrub_overrides, without_credentials

    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    assert without_credentials("http://alice:p@ss@host:5000") == "http://host:5000"
    assert os.environ["MLFLOW_TRACKING_PASSWORD"] == "p@ss"
    assert redact("at http://alice:p@ss@host:5000/api and http://host:5000/a@b") == "at http://***@host:5000/api and http://host:5000/a@b"
    # only the tracking section's values move into MLflow's variables; a data root is not a tracking server
    assert scrub_overrides(["data.root=s3://key:secret@bucket/x", "tracking.uri=http://bob:pw@h:1"]) == [
        "data.root=s3://key:secret@bucket/x",
        "tracking.uri=http://h:1",
    ]
