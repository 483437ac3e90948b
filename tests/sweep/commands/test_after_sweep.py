"""What ``mjp sweep run`` prints when the sweep's parent run was deleted while it ran."""

from types import SimpleNamespace

from sweep.commands.sweeps import after_sweep
from sweep.tuner.outcome import SweepOutcome
from trainables.tracking.runs import RunTracker


def test_a_parent_deleted_during_the_sweep_is_one_line_naming_the_restore_and_exit_1(tmp_path, capsys):
    import mlflow

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    parent = RunTracker.create(uri, "deleted-parent", run_name="q-1")
    assert parent.deleted() is None
    mlflow.MlflowClient(uri).delete_run(parent.run_id)
    assert parent.deleted() == "run"
    outcome = SweepOutcome(parent.run_id, str(tmp_path / "q-1"), [], expected_trials=2, uri=uri, parent_deleted=parent.deleted())
    capsys.readouterr()  # MLflow's own lines as it made the store
    assert after_sweep(outcome, SimpleNamespace(name="quickstart")) == 1
    printed = capsys.readouterr()
    assert printed.err.count("\n") == 1 and "parent run was deleted (its run) while the sweep ran" in printed.err
    assert f"mlflow runs restore --run-id {parent.run_id}" in printed.err and "Traceback" not in printed.out + printed.err
