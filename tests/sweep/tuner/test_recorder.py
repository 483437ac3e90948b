"""What the recorder counts as finished when a resumed sweep ends."""

from types import SimpleNamespace

from sweep.tuner.recorder import SweepRecorder
from trainables.tracking import schema
from trainables.tracking.runs import RunTracker


def test_a_trial_that_finished_before_the_resume_is_finished_even_where_tune_saved_done_false(tmp_path):
    """Tune may save the experiment before a trial's final result: the demo's state holds a trial
    at 30 of 30 epochs with ``done: false``. Its MLflow run, closed FINISHED, says it ended; a trial
    Ctrl-C stopped (TERMINATED, its run still RUNNING) did not."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    parent = RunTracker.create(uri, "rec", run_name="sweep")
    ended = RunTracker.create(uri, "rec", tags={schema.TAG_TRIAL_ID: "ended"}, parent_run_id=parent.run_id)
    ended.set_status("FINISHED")
    RunTracker.create(uri, "rec", tags={schema.TAG_TRIAL_ID: "stopped"}, parent_run_id=parent.run_id)
    trials = [
        SimpleNamespace(trial_id="ended", status="TERMINATED", last_result={"epoch": 30, "done": False}),
        SimpleNamespace(trial_id="stopped", status="TERMINATED", last_result={"epoch": 12, "done": False}),
    ]
    recorder = SweepRecorder(uri, "rec", parent.run_id, expected=2, time_budget_s=None)
    recorder.on_experiment_end(trials)
    assert recorder.finished_ids == {"ended"} and recorder.interrupted
    assert ended.status == "FINISHED"

    trials[1].last_result = {"epoch": 30, "done": True}
    recorder = SweepRecorder(uri, "rec", parent.run_id, expected=2, time_budget_s=None)
    recorder.on_experiment_end(trials)
    assert recorder.finished_ids == {"ended", "stopped"} and not recorder.interrupted
