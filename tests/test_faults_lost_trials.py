"""Trials lost and found: a trial lost with its driver is adopted when proposed again, one no
searcher proposes again ends KILLED saying so, and a trial process killed mid-epoch resumes from
its checkpoint logging nothing twice."""

from __future__ import annotations

import os
import signal

import mlflow
import pytest

from mjp import keys
from tests.test_faults import TINY, children
from trainables.config.recipe import TrialRecipe
from trainables.tracking import schema


def test_a_trial_lost_with_the_driver_is_adopted_when_proposed_again_not_duplicated(tmp_path):
    """Run creation is idempotent per trial: a restored trial finds its run by trial id; a trial
    the resume lost (proposed again under a new id) adopts its orphaned run by its params."""
    from sweep.tuner.recorder import reopen_children
    from trainables.launch.trial import TrialSpec, _trial_run
    from trainables.tracking.runs import RunTracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    parent = RunTracker.create(uri, "faults", run_name="sweep", tags={schema.TAG_KIND: "sweep"})
    spec = TrialSpec(
        name="sweep", recipe=TrialRecipe(TINY), uri=uri, experiment="faults", storage=str(tmp_path), parent_run_id=parent.run_id
    )

    def run(variant: str, trial_id: str) -> RunTracker:
        params = {"mjp.variant": variant}
        return _trial_run(spec, spec.recipe.config(params), params, trial_id)

    saved, lost = run("A", "aaaa0001"), run("G", "aaaa0002")  # the driver is killed now; Tune had saved only the first
    reopen_children(parent, {"aaaa0001"})
    client = mlflow.MlflowClient(uri)
    assert {client.get_run(r.run_id).info.status for r in (saved, lost)} == {"KILLED"}
    assert run("A", "aaaa0001").run_id == saved.run_id
    again = run("G", "bbbb0003")
    assert again.run_id == lost.run_id and client.get_run(lost.run_id).data.tags[schema.TAG_TRIAL_ID] == "bbbb0003"
    assert schema.TAG_ORPHAN not in client.get_run(lost.run_id).data.tags
    new = run("J", "bbbb0004")
    assert new.run_id not in (saved.run_id, lost.run_id)
    _, kids = children(uri)
    assert len(kids) == 3 and {k.info.status for k in kids} == {"RUNNING"}


def test_a_lost_trial_that_no_searcher_proposes_again_ends_killed_saying_so(tmp_path):
    """A random or Bayesian searcher need not propose a lost trial's params again: at the end of
    the sweep its orphaned run stays KILLED, tagged with why, and `mjp sweep status` says so."""
    from sweep.commands.status import trial_state
    from sweep.tuner.recorder import LOST_NOT_PROPOSED, close_orphans, reopen_children
    from trainables.launch.trial import TrialSpec, _trial_run
    from trainables.tracking.runs import RunTracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    parent = RunTracker.create(uri, "faults", run_name="sweep", tags={schema.TAG_KIND: "sweep"})
    spec = TrialSpec(
        name="sweep", recipe=TrialRecipe(TINY), uri=uri, experiment="faults", storage=str(tmp_path), parent_run_id=parent.run_id
    )
    lost = _trial_run(spec, spec.recipe.config({"mjp.variant": "G"}), {"mjp.variant": "G"}, "aaaa0002")
    reopen_children(parent, set())  # the driver was lost before Tune saved this trial
    other = _trial_run(spec, spec.recipe.config({"mjp.variant": "J"}), {"mjp.variant": "J"}, "bbbb0003")  # the searcher proposed J instead
    other.set_status("FINISHED")
    assert close_orphans(parent) == 1
    run = mlflow.MlflowClient(uri).get_run(lost.run_id)
    assert run.info.status == "KILLED" and run.data.tags[schema.TAG_INTERRUPTED] == LOST_NOT_PROPOSED
    assert trial_state(type("Trial", (), {"status": run.info.status, "tags": run.data.tags})()) == "lost with a driver"
    assert mlflow.MlflowClient(uri).get_run(other.run_id).info.status == "FINISHED"


class KillAt:
    """A console stream that SIGKILLs the trial's process when ``marker`` is printed: mid-epoch,
    since the marker is the previous epoch's line."""

    def __init__(self, uri: str, marker: str):
        self.uri, self.marker, self.text, self.killed = uri, marker, "", None

    def isatty(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def write(self, text: str) -> int:
        self.text += text
        if self.killed is None and self.marker in text:
            (run,) = mlflow.MlflowClient(self.uri).search_runs(
                [mlflow.MlflowClient(self.uri).get_experiment_by_name("faults").experiment_id]
            )
            self.killed = int(run.data.tags[schema.TAG_PROCESS].rsplit(":", 1)[1])
            os.kill(self.killed, signal.SIGKILL)
        return len(text)


@pytest.mark.slow
def test_a_trial_process_killed_mid_epoch_resumes_from_its_checkpoint_logging_nothing_twice(tmp_path, local_ray, capfd):
    """By default (no runtime.max_failures given): a lost worker is survived, quietly."""
    from sweep.tuner.training import run_training
    from trainables.config.build import build_config

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = build_config(
        {**TINY, "optim": {"epochs": 4}},
        {
            "tracking.uri": uri,
            "tracking.storage_path": str(tmp_path / "runs"),
            "runtime.checkpoint_every": 2,
            "runtime.log_every": 2,
            "data.train_limit": 512,
        },
    )
    stream = KillAt(uri, "epoch 2/4")
    outcome = run_training(cfg, stream=stream)
    assert stream.killed and outcome.error is None, (outcome.error, stream.text)
    printed = capfd.readouterr()
    assert "A worker died" not in printed.out + printed.err and "(raylet)" not in printed.out + printed.err
    client = mlflow.MlflowClient(uri)
    assert client.get_run(outcome.run_id).info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(outcome.run_id, keys.VAL_TOP1)] == [1, 2, 3, 4]
    running = [m.step for m in client.get_metric_history(outcome.run_id, keys.TRAIN_LOSS + keys.RUNNING_SUFFIX)]
    assert running == sorted(set(running)) and len(running) == 4 * 8, running  # 16 steps an epoch, logged every 2
    assert "retrying" in stream.text
