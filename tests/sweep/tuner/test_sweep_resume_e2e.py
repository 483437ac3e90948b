"""An interrupted sweep end to end on CPU: a trial lost after its checkpoint, then ``resume``, which
refuses what this sweep did not write (a planted or changed pickle, a corrupted Optuna storage) and
then runs every trial once, in its own child run; the local Ray listens on loopback only."""

import io
import os
import pickle
from pathlib import Path

import mlflow
import pytest

from analysis.runs import load_runs, load_sweeps
from mjp import keys
from sweep.study.load import load_study
from sweep.tuner.run import resume_sweep, run_sweep
from tests.sweep.tuner.tiny_studies import study_file
from trainables.errors import UserError

pytestmark = pytest.mark.slow


def test_interrupted_sweep_resumes_every_trial_once(tmp_path, local_ray, monkeypatch):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    # the second trial dies after its first epoch's checkpoint, as a killed node would, and is
    # not retried (runtime.max_failures=0): the resume continues it
    space = {"runtime.fail_after_epoch": {"type": "grid", "values": [None, 1]}}
    study = load_study(study_file(tmp_path, space), overrides={"tracking.uri": uri, "runtime.max_failures": 0})
    console = io.StringIO()
    first = run_sweep(study, storage=str(tmp_path / "ray"), stream=console)
    assert len(first.failed) == 1 and "injected failure" in first.failed[0].error
    failed_line = [line for line in console.getvalue().splitlines() if "FAILED" in line]
    assert len(failed_line) == 1 and "InjectedFailure: runtime.fail_after_epoch=1" in failed_line[0] and "full error:" in failed_line[0]
    before = load_runs(uri, "sweep-test", parent_run_id=first.parent_run_id)
    assert sorted(before.status) == ["FAILED", "FINISHED"]
    failed_run = before[before.status == "FAILED"].iloc[0]
    assert failed_run["error"] == "InjectedFailure: runtime.fail_after_epoch=1: injected failure after the checkpoint"

    # the local Ray this test session started (every process of it) listens on loopback only
    import ray

    from tests.listeners import tcp_listeners
    from trainables.launch.ray_cleanup import descendants

    assert ray.util.get_node_ip_address() == "127.0.0.1"
    listening = tcp_listeners(set(descendants(os.getpid())) | {os.getpid()})
    assert len(listening) >= 3 and all(ip == "127.0.0.1" for _, ip, _ in listening), listening

    # what Ray wrote is signed; a planted or changed pickle is refused before Ray opens it
    from tests.sweep.security.test_signatures import MakesMarker

    directory, marker = Path(first.experiment_dir), tmp_path / "marker"
    trial_dir = next(p for p in directory.iterdir() if (p / "params.pkl").is_file())
    (trial_dir / "evil.pkl").write_bytes(pickle.dumps(MakesMarker(marker)))
    with pytest.raises(UserError, match="evil.pkl was not written by this sweep"):
        resume_sweep(first.experiment_dir, stream=io.StringIO())
    (trial_dir / "evil.pkl").unlink()
    genuine = (directory / "tuner.pkl").read_bytes()
    (directory / "tuner.pkl").write_bytes(pickle.dumps(MakesMarker(marker)))
    with pytest.raises(UserError, match="tuner.pkl was changed after this sweep wrote it"):
        resume_sweep(first.experiment_dir, stream=io.StringIO())
    (directory / "tuner.pkl").write_bytes(genuine)
    assert not marker.exists()

    # a corrupted Optuna storage is one line before anything runs, and leaves no run RUNNING
    optuna_db = tmp_path / "optuna.db"
    kept = optuna_db.read_bytes()
    optuna_db.write_bytes(kept[:4096] + bytes(range(256)) * 64 + kept[4096 + 256 * 64 :])
    with pytest.raises(UserError, match=f"the sweep's Optuna storage {optuna_db} cannot be read .*; move it aside"):
        resume_sweep(first.experiment_dir, stream=io.StringIO())
    assert "RUNNING" not in set(load_runs(uri, "sweep-test", parent_run_id=first.parent_run_id).status)
    assert mlflow.MlflowClient(uri).get_run(first.parent_run_id).info.status != "RUNNING"
    optuna_db.write_bytes(kept)

    # a driver ended while Tune copied its state in (its Ray gone under it at a `scancel`) left the
    # trials' files and the experiment's state made and empty: the resume removes the trials' (Tune
    # writes them again) and puts the experiment's back from the sweep's last whole save
    emptied = sorted(p for p in directory.glob("*/*") if p.name in ("params.pkl", "params.json", "result.json"))
    (experiment_state,) = directory.glob("experiment_state-*.json")
    for path in [*emptied, experiment_state]:
        path.write_bytes(b"")

    monkeypatch.chdir(tmp_path)  # a relative path, as a user types it
    from sweep.security import signatures

    mended = []  # each verification of the directory that found an empty state file at its top

    def counted(*args):
        mended.append(args[0])
        return from_last_save(*args)

    from_last_save = signatures._from_last_save
    monkeypatch.setattr(signatures, "_from_last_save", counted)
    resumed_console = io.StringIO()
    second = resume_sweep(os.path.relpath(first.experiment_dir), stream=resumed_console)
    assert len(mended) == 1, mended  # the resume read and verified the directory's files once, not twice
    said = resumed_console.getvalue()
    assert f"put back 1 state file(s) from its last whole save: {experiment_state.name}" in said, said
    assert "removed 2 empty file(s) its driver's last copy left: " in said, said
    assert all(path.stat().st_size > 0 for path in emptied if path.name == "params.pkl")
    # Tune restored the experiment's one callback by the sweep's name: this driver's live view shows the trial
    assert any("finished" in line for line in resumed_console.getvalue().splitlines()), resumed_console.getvalue()
    assert second.parent_run_id == first.parent_run_id
    assert len(second.trials) == 2 and not second.failed
    after = load_runs(uri, "sweep-test", parent_run_id=first.parent_run_id)
    assert len(after) == 2 and set(after.status) == {"FINISHED"}
    assert set(after.run_id) == set(before.run_id)  # re-attached, no duplicates
    assert len(load_sweeps(uri)) == 1
    client = mlflow.MlflowClient(uri)
    resumed = after[after["sample.runtime.fail_after_epoch"] == 1].run_id.iloc[0]
    assert [m.step for m in client.get_metric_history(resumed, keys.VAL_TOP1)] == [1, 2]  # each epoch once
    history = {k: [m.value for m in client.get_metric_history(first.parent_run_id, k)] for k in ("sweep/trials", "sweep/failed")}
    assert history == {"sweep/trials": [2.0], "sweep/failed": [1.0, 0.0]}  # an unchanged value is not logged twice
