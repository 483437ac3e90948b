"""The child runs of a sweep's parent run, across interruptions and resumes: none is left
RUNNING when a driver is interrupted or lost, a run whose trial a resume does not restore is
an orphan for the re-proposed trial to adopt, and one no trial adopted says why at the end."""

from __future__ import annotations

from trainables.tracking import schema
from trainables.tracking.runs import RunTracker


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
