"""Signals to a sweep's driver and to a training, as a terminal, `ray job stop`, systemd or a batch
scheduler sends them: the command stops with 130 or 143, its runs end KILLED, and it says how to
go on; also during the final analysis, after Tune's own handler is gone."""

from __future__ import annotations

import signal

import mlflow
import pytest

from tests.test_faults import RACED_EPOCHS, children, mjp, read_until, study, wait_for
from trainables.tracking import schema


@pytest.mark.slow
def test_sigterm_to_the_sweep_driver_stops_it_as_ctrl_c_does(tmp_path):
    """What `ray job stop`, systemd and batch schedulers send: the parent and every child run end
    KILLED (none RUNNING), the resume hint is printed, exit 143; no traceback or Ray abort (134)."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    first = mjp(tmp_path, "sweep", "run", study(tmp_path, epochs=RACED_EPOCHS))
    read_until(first, "finished ")  # the first trial is done, the second starts
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("faults").experiment_id
    wait_for(  # the signal must find a child RUNNING
        "a second trial's open run",
        lambda: bool(client.search_runs([experiment], f"tags.`{schema.TAG_PARENT}` != '' and attributes.status = 'RUNNING'")),
    )
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 143, out + err
    assert "interrupted: the parent run is marked KILLED; continue with `mjp sweep resume" in err
    assert "Traceback" not in out + err and "core dumped" not in err
    parent, kids = children(uri)
    assert parent.info.status == "KILLED" and len(kids) >= 2
    assert "RUNNING" not in {k.info.status for k in kids} and "KILLED" in {k.info.status for k in kids}


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_during_the_final_analysis_stops_the_command(tmp_path, sig, status):
    """After the trials, while the end-of-sweep tables and report are made: the signal stops the
    command with 130 or 143 (Tune's handler, left installed after its run, swallowed it: exit 0).
    The trial had finished, so the parent run stays FINISHED."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    proc = mjp(tmp_path, "sweep", "run", study(tmp_path, epochs=1, variants=("A",)))
    read_until(proc, "sweep faults: 1 of 1 trials finished")  # the first line of the final analysis
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == status, out + err
    assert "logs: " not in out, "the signal came after the final analysis: the case was not tested"
    assert "interrupted" in err and "Traceback" not in out + err
    parent, kids = children(uri)
    assert parent.info.status == "FINISHED" and [k.info.status for k in kids] == ["FINISHED"]


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_on_train_exits_130_or_143_with_the_run_killed_and_no_results_table(tmp_path, sig, status):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    overrides = [
        "optim.epochs=30",
        "model.kwargs.patch_size=2",
        "model.kwargs.embed_dim=32",
        "model.kwargs.depth=2",
        "model.kwargs.num_heads=2",
        "data.train_limit=256",
        "data.val_limit=64",
        "tracking.experiment=faults",
        f"tracking.storage_path={tmp_path / 'runs'}",
    ]
    proc = mjp(tmp_path, "train", "trainables/configs/digits_vit_tiny.yaml", *(a for o in overrides for a in ("--set", o)))
    read_until(proc, "epoch 1/30")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == status, out + err
    assert "Traceback" not in out + err and "KILLED" in err
    assert "(MLflow run " not in out and "MLflow UI:" not in out  # no results table as if training had ended
    client = mlflow.MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("faults").experiment_id])
    assert run.info.status == "KILLED"
