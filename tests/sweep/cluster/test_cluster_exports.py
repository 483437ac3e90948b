"""The commands with a cluster's exports in the environment (``MLFLOW_TRACKING_URI``, ``RAY_ADDRESS``,
``MLFLOW_TRACKING_TOKEN``): one line where the servers they name are gone, and the MLflow UI hint for
a tracking server."""

from pathlib import Path

import pytest


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
