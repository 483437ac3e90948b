"""What the sweep's driver records in MLflow of its trials: ``SweepRecorder`` (a Tune callback)
closes each child run FINISHED, FAILED or KILLED with its reason; ``run_closed_on_error`` closes
the parent run when the sweep itself fails or is interrupted, never leaving it RUNNING; and the
child runs across interruptions and resumes (``reopen_children``, ``close_running_children``,
``close_orphans``): none is left RUNNING when a driver is interrupted or lost, a run whose trial a
resume does not restore is an orphan for the re-proposed trial to adopt, and one no trial adopted
says why at the end."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from ray import tune

from sweep.console.view import failure_reason
from trainables.errors import DiskFullError, disk_full_reason
from trainables.launch.trial import find_child_run
from trainables.tracking import schema
from trainables.tracking.runs import RunTracker

if TYPE_CHECKING:
    from sweep.tuner.store_guard import StoreGuard


class SweepRecorder(tune.Callback):
    """Gives every child run a final status (also trials the driver never finished itself: ASHA
    stops them by ending the trial function) and notes whether the run was interrupted."""

    def __init__(self, uri: str, experiment: str, parent_run_id: str | None, expected: int, time_budget_s: float | None):
        self.uri, self.experiment, self.parent_run_id = uri, experiment, parent_run_id
        self.expected, self.time_budget_s = expected, time_budget_s
        self.started = time.monotonic()
        self.interrupted = False
        self.trials_started = 0
        #: the trials' epochs: a trial the scheduler ends at its last epoch finished, it was not stopped early
        self.epochs: int | None = None
        self.finished_ids: set[str] | None = None  # the trials that ran to their end, once Tune has ended
        self._completed: set[str] = set()  # on_trial_complete: ran to the end or stopped by the scheduler
        self.guard: StoreGuard | None = None  # a sweep's: nothing is read or written once its store was lost

    def _store_holds(self) -> bool:
        return self.guard is None or self.guard.holds()

    def _mark(self, trial: Any, status: str, tags: dict[str, str]) -> None:
        if not self._store_holds():
            return
        tracker = find_child_run(self.uri, self.experiment, self.parent_run_id, trial.trial_id)
        if tracker is None or tracker.status != "RUNNING":
            return
        tracker.set_tags(tags)
        tracker.set_status(status)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.trials_started += 1

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._completed.add(trial.trial_id)
        # ASHA also ends a trial at its last report (epoch == max_t), before the driver closes its run
        epoch = int((trial.last_result or {}).get("epoch", 0))
        if self.epochs is not None and epoch >= self.epochs:
            self._mark(trial, "FINISHED", {})
        else:
            self._mark(
                trial,
                "FINISHED",
                {schema.TAG_STOPPED: f"stopped early by the scheduler at epoch {epoch}" + (f"/{self.epochs}" if self.epochs else "")},
            )

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._mark(trial, "FAILED", {schema.TAG_ERROR: failure_reason(trial)})

    def _ended_before(self, trial: Any) -> bool:
        """Whether ``trial`` finished in an earlier run of a resumed sweep: its final result is
        marked done or, where Tune saved the experiment before that result (a trial at its last
        epoch with ``done: false``), its MLflow run was closed FINISHED."""
        if (trial.last_result or {}).get("done"):
            return True
        tracker = find_child_run(self.uri, self.experiment, self.parent_run_id, trial.trial_id)
        return tracker is not None and tracker.status == "FINISHED"

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        if not self._store_holds():  # the driver ends the sweep in one line naming the store
            self.interrupted = True
            return
        unfinished = [t for t in trials if t.status not in ("TERMINATED", "ERROR")]
        # Ctrl-C leaves the running trials TERMINATED too, without on_trial_complete
        self.finished_ids = {
            t.trial_id for t in trials if t.status == "TERMINATED" and (t.trial_id in self._completed or self._ended_before(t))
        }
        # a trial Ctrl-C stopped is TERMINATED without having ended: the run was interrupted (the
        # last trial of a sweep, or the one trial of `mjp train`)
        stopped = [t for t in trials if t.status == "TERMINATED" and t.trial_id not in self.finished_ids]
        out_of_time = self.time_budget_s is not None and time.monotonic() - self.started >= self.time_budget_s
        self.interrupted = bool(unfinished) or (bool(stopped) and not out_of_time) or (len(trials) < self.expected and not out_of_time)
        if out_of_time:
            for trial in stopped:
                self._mark(
                    trial,
                    "KILLED",
                    {schema.TAG_STOPPED: f"stopped by the sweep's time budget (budget.time_budget_s={self.time_budget_s:g})"},
                )
            stopped = []
        for trial in unfinished + stopped:
            self._mark(trial, "KILLED", {schema.TAG_INTERRUPTED: "the sweep was interrupted; `mjp sweep resume` continues it"})


class run_closed_on_error:
    """A sweep (or a training) that crashes leaves its (parent) run FAILED (Ctrl-C during set-up:
    KILLED), never RUNNING. A full disk becomes one ``DiskFullError`` line saying what to do
    (``then``); the run is closed if the store can still be written, else by the resume."""

    def __init__(self, parent: RunTracker, then: str | Callable[[], str] = "run the command again"):
        self.parent, self.then = parent, then

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, err: BaseException | None, tb: Any) -> Literal[False]:
        if kind is None or getattr(err, "store_lost", False):  # a lost store is not written to (a write would make a new one)
            return False
        full = disk_full_reason(err) if err is not None else None
        try:
            if issubclass(kind, KeyboardInterrupt):
                self.parent.set_tags({schema.TAG_INTERRUPTED: "interrupted before the trials started"})
                self.parent.set_status("KILLED")
            else:
                self.parent.set_tags({schema.TAG_ERROR: f"{type(err).__name__}: {err}"[:2000]})
                self.parent.set_status("FAILED")
        except Exception as closing:
            if full is None and disk_full_reason(closing) is None:
                raise
            full = full or disk_full_reason(closing)
        if full is not None:
            then = self.then() if callable(self.then) else self.then
            raise DiskFullError(
                f"a disk this command writes to is full ({full}); free some space (the MLflow store {self.parent.uri}, "
                f"the run's storage), then {then}"
            ) from None
        return False


def reopen_children(parent: RunTracker, restored: set[str]) -> None:
    """Before a resume starts any trial: no child run is still RUNNING (its driver is gone: it
    becomes KILLED, "interrupted"), and a child whose trial the resume does not restore (it started
    after Tune's last save) is tagged an orphan, so the trial Tune proposes again with the same
    params adopts it instead of making a second run (``trainables.launch.trial.adopt_orphan``). A
    failure marked final for the last run's retries is retried once more by the resume."""
    for run in parent.children():
        child = RunTracker(parent.uri, run.info.run_id)
        if run.info.status == "RUNNING":
            child.set_tags({schema.TAG_INTERRUPTED: "the sweep's driver was lost; `mjp sweep resume` continues it"})
            child.set_status("KILLED")
        if run.data.tags.get(schema.TAG_TRIAL_ID) not in restored:
            child.set_tags({schema.TAG_ORPHAN: "1"})
        if schema.TAG_ERROR_FINAL in run.data.tags:
            child.delete_tag(schema.TAG_ERROR_FINAL)


def close_running_children(parent: RunTracker) -> None:
    """After an interruption no child run of the sweep may stay RUNNING: the recorder closes the
    trials Tune still listed; this closes any other (a trial whose child run Tune no longer
    tracks) as KILLED, with the same "interrupted" tag, so `mjp sweep resume` continues it."""
    for run in parent.children("attributes.status = 'RUNNING'"):
        child = RunTracker(parent.uri, run.info.run_id)
        child.set_tags({schema.TAG_INTERRUPTED: "the sweep was interrupted; `mjp sweep resume` continues it"})
        child.set_status("KILLED")


#: why a child run ended KILLED when no trial of the resumed sweep adopted it
LOST_NOT_PROPOSED = (
    "lost with the sweep's driver before Tune saved its trial; the searcher did not propose these params "
    "again, so no trial continued this run"
)


def close_orphans(parent: RunTracker) -> int:
    """At the end of a sweep that ran through: every KILLED child run still tagged an orphan (its
    trial was lost with a driver and no trial adopted it; a random or Bayesian searcher need not
    propose the same params again) says so. The number of such runs. (An orphan that had finished
    before the driver was lost keeps its result and says nothing of the kind.)"""
    orphans = parent.children(f"{schema.tag_filter(schema.TAG_ORPHAN, '1')} and attributes.status = 'KILLED'")
    for run in orphans:
        RunTracker(parent.uri, run.info.run_id).set_tags({schema.TAG_INTERRUPTED: LOST_NOT_PROPOSED})
    return len(orphans)
