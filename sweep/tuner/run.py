"""Run and resume a sweep over a study as a Tune experiment (one training: ``sweep.tuner.training``).

Each trial is ``trainables.launch.trial.tune_trial`` and an MLflow run (a child of the sweep's parent
run). The sweep's state (parent run id, study, overrides, Optuna storage) is kept in
``<experiment dir>/mjp_sweep.json`` so ``mjp sweep resume <dir>`` re-attaches to the same parent,
children and Optuna study; Tune restores the searcher with the rest of the experiment.
Trial processes are reused from one trial to the next (``reuse_actors``): torch, timm and
MLflow are imported once per slot, not once per trial.

A run and a resume differ in how they begin (a new parent run and state, or the recorded ones
re-opened); from Ray's start to the outcome they are one path, ``_fit``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ray import tune

from sweep.security.signatures import signing_key
from sweep.security.signing_callback import sign_tuner_file
from sweep.security.sweep_files import remove_file, write_file
from sweep.study.load import Study, check_study
from sweep.tuner.callbacks import attached, store_guard, sweep_callbacks
from sweep.tuner.outcome import SweepOutcome, finish_sweep
from sweep.tuner.owner import claim, driver_tag, release
from sweep.tuner.recorder import SweepRecorder, reopen_children, run_closed_on_error
from sweep.tuner.state import Resumable, SweepFinished, SweepState, in_project, in_store, load_resumable, write_state
from sweep.tuner.storage import (
    SweepPaths,
    announce,
    claim_sweep_name,
    link_ray_logs,
    remove_sweep_dirs,
    restored_trial_ids,
    saved_trial_statuses,
    start_logging,
    storage_root,
)
from sweep.tuner.tuner import (
    check_launchable,
    cpus_needed,
    failure_config,
    objectives_checked_at_the_end,
    trial_spec,
    tuner_parts,
    uses_ray_train,
)
from trainables.launch.ray_runtime import ensure_ray
from trainables.launch.signals import ctrl_c_restored_after
from trainables.tracking import schema
from trainables.tracking.runs import RunTracker
from trainables.tracking.store import check_store_writable, optuna_storage_url, tracking_uri


@dataclass
class _Sweep:
    """One driver's sweep from its parent run on: what ``_fit`` needs of a run or a resume."""

    study: Study
    state: SweepState
    paths: SweepPaths
    parent: RunTracker
    recorder: SweepRecorder
    log: Path
    address: str | None
    verbose: bool
    stream: TextIO | None


def run_sweep(
    study: Study,
    *,
    storage: str | None = None,
    address: str | None = None,
    uri: str | None = None,
    verbose: bool = False,
    stream: TextIO | None = None,
    command: str | None = None,
) -> SweepOutcome:
    """Launch a validated study; returns when every trial has ended (or the sweep was interrupted).
    A sweep that fails (or is interrupted) before its first trial starts leaves no directory.
    ``uri``: the MLflow store (default: the study's ``tracking.uri``), resolved here once, and
    returned in the outcome; ``command``: what started it (default ``mjp sweep run <study>``),
    tagged on the parent run."""
    check_launchable(study, address)
    base = study.base
    signing_key(create=True)  # a key others can read is refused here, before any run or directory exists
    for warning in base.warnings():
        announce(stream, f"warning: {warning}")
    uri = tracking_uri(uri or base.tracking.uri)
    check_store_writable(uri)
    storage = storage_root(storage)
    if study.max_parameters:
        from trainables.launch.preflight import check_disk_space

        check_disk_space(storage, 12 * study.max_parameters, f"the study's largest model ({study.max_parameters / 1e6:.1f}M parameters)")
    paths = SweepPaths(storage, claim_sweep_name(storage, f"{study.name}-{time.strftime('%Y%m%d-%H%M%S')}"))  # smoke: -smoke
    recorder = SweepRecorder(uri, base.tracking.experiment, None, study.num_trials, study.config.budget.time_budget_s)
    try:
        claim(paths.experiment_dir)  # made just now, exclusively: this driver owns it until it ends (a resume meanwhile is refused)
        command = command or f"mjp sweep run {study.config.name}" + (" --smoke" if study.smoke else "")
        log = start_logging(paths.experiment_dir, paths.name, verbose)
        announce(stream, f"sweep {paths.name}: {study.num_trials} trials, {study.max_concurrent} at a time\n  logs: {log}")
        parent = _parent_run(study, paths, uri, base.tracking.experiment, command)
        recorder.parent_run_id = parent.run_id

        # closed FAILED/KILLED on any error from here; before the first trial the sweep's directory is
        # removed (below), so the way on is to run the command again, after it a resume
        def then() -> str:
            return f"`mjp sweep resume {paths.experiment_dir}` continues the sweep" if recorder.trials_started else "run the command again"

        with run_closed_on_error(parent, then):
            state = _record_start(study, paths, parent, uri)
            return _fit(_Sweep(study, state, paths, parent, recorder, log, address, verbose, stream), restore=False)
    except BaseException:
        if not recorder.trials_started:
            remove_sweep_dirs(paths)
        raise
    finally:
        release(paths.experiment_dir)


def _parent_run(study: Study, paths: SweepPaths, uri: str, experiment: str, command: str) -> RunTracker:
    tags = {
        schema.TAG_KIND: schema.KIND_SWEEP,
        schema.TAG_STUDY: study.name,
        schema.TAG_SMOKE: str(study.smoke),
        schema.TAG_DRIVER: driver_tag(),
        schema.TAG_EXPERIMENT_DIR: paths.experiment_dir,
        schema.TAG_COMMAND: command,
    }
    return RunTracker.create(uri, experiment, run_name=paths.name, tags=tags)


def _record_start(study: Study, paths: SweepPaths, parent: RunTracker, uri: str) -> SweepState:
    """The new sweep's signed state file, written first (a driver killed from here on leaves a
    sweep that `mjp sweep resume` continues), then its params, study file and notes."""
    state = SweepState(
        study=study.source,
        study_in_project=in_project(study.source),
        study_digest=study.digest,
        smoke=study.smoke,
        extra=study.extra,
        uri=uri,
        experiment=study.base.tracking.experiment,
        parent_run_id=parent.run_id,
        name=paths.name,
        optuna_storage=optuna_storage_url(uri),
    )
    write_state(paths.experiment_dir, state)
    _record_on_parent(study, paths, parent, uri)
    if state.optuna_storage:
        from sweep.tuner.optuna_mirror import check_storage

        check_storage(state.optuna_storage, paths.name, study.config)
    return state


def _record_on_parent(study: Study, paths: SweepPaths, parent: RunTracker, uri: str) -> None:
    """The sweep's params, study file and notes on its parent run; again on a resume of a sweep
    whose first driver may have died before (params already there are kept)."""
    from trainables.tracking.store import set_experiment_note

    c = study.config
    parent.log_params(
        schema.SweepParams(
            study=study.name,
            search_algorithm=c.search.algorithm,
            search_seed=c.search.seed,
            objectives=tuple((o.metric, o.mode) for o in c.objectives),
            trials=study.num_trials,
            max_concurrent=study.max_concurrent,
            scheduler=c.scheduler.type,
            smoke=study.smoke,
            space=tuple(c.space),
            experiment_dir=paths.experiment_dir,
            paper_tables=tuple(map(str, c.paper)),
        ).to_params()
    )
    parent.log_artifact(study.source, schema.ARTIFACT_STUDY_DIR)
    description = " ".join(c.description.split())
    parent.set_note(f"{description}\n\n(the table and the report appear here when the sweep ends)")
    set_experiment_note(
        uri,
        study.base.tracking.experiment,
        f"{description}\n\nEach sweep of study `{study.name}` is a parent run; its trials are child runs named by what they train. "
        f"`mjp analyze report --study {study.name}` writes the study's report.",
    )


def _fit(sweep: _Sweep, *, restore: bool) -> SweepOutcome:
    """Ray, the Tuner (new, or restored from the sweep's directory) with this driver's callbacks,
    every trial to its end, then the outcome."""
    study, state, paths = sweep.study, sweep.state, sweep.paths
    ensure_ray(
        sweep.address, num_cpus=None if sweep.address else cpus_needed(study), verbose=sweep.verbose, dashboard=uses_ray_train(study)
    )
    link_ray_logs(paths.experiment_dir)
    spec = trial_spec(study, state, paths)
    trainable, tune_config = tuner_parts(study, spec)
    guard = store_guard(spec, paths)
    with attached(state.name, sweep_callbacks(study, spec, state, paths, sweep.recorder, guard, sweep.stream)) as callbacks:
        if restore:
            tuner = tune.Tuner.restore(paths.experiment_dir, trainable=trainable, resume_unfinished=True, resume_errored=True)
        else:
            run_config = tune.RunConfig(
                name=paths.name,
                storage_path=paths.storage,
                callbacks=[callbacks],
                verbose=2 if sweep.verbose else 0,
                failure_config=failure_config(study.base),
            )
            tuner = tune.Tuner(trainable, tune_config=tune_config, run_config=run_config)
            sign_tuner_file(paths.experiment_dir)
        with objectives_checked_at_the_end(study), ctrl_c_restored_after():
            grid = guard.fit(tuner)  # a lost store or a full disk: its one line, whatever Tune raised
    return finish_sweep(study, spec, sweep.parent, grid, paths.experiment_dir, sweep.recorder, sweep.log)


def resume_sweep(
    experiment_dir: str,
    loaded: Resumable | None = None,
    *,
    address: str | None = None,
    verbose: bool = False,
    stream: TextIO | None = None,
    uri: str | None = None,
) -> SweepOutcome:
    """Continue an interrupted sweep: unfinished and errored trials run again under their own
    MLflow child runs; finished trials are kept; the Optuna state is restored by Tune.
    ``loaded``: the directory's ``load_resumable``, when the caller has read it already; ``uri``:
    the sweep's MLflow store at a new address (checked to hold its parent run), else the recorded one.
    The directory is this driver's while it runs: a second run or resume of it is refused."""
    paths = SweepPaths.of(experiment_dir)
    claim(paths.experiment_dir)
    try:
        return _resume(paths, loaded, address, verbose, stream, uri)
    finally:
        release(paths.experiment_dir)


def _refuse_finished(experiment_dir: str, state: SweepState, study: Study) -> None:
    statuses = saved_trial_statuses(experiment_dir)
    if len(statuses) < study.num_trials or set(statuses.values()) != {"TERMINATED"}:
        return
    if RunTracker(state.uri, state.parent_run_id).status != "FINISHED":  # Ctrl-C also leaves trials TERMINATED
        return
    raise SweepFinished(
        f"sweep {state.name} has finished: its {len(statuses)} trials ended and its MLflow parent run "
        f"{state.parent_run_id} is FINISHED; nothing to resume, nothing changed (`mjp sweep status {experiment_dir}` "
        f"shows it, `mjp analyze report --study {study.name}` its report)"
    )


def _resume(
    paths: SweepPaths, loaded: Resumable | None, address: str | None, verbose: bool, stream: TextIO | None, uri: str | None
) -> SweepOutcome:
    experiment_dir = paths.experiment_dir
    state, study, cut = loaded or load_resumable(experiment_dir)  # before Ray opens (and unpickles) anything in it
    check_study(study)
    moved = in_store(state, uri, experiment_dir)  # the store holds the sweep's parent run, before any write
    check_launchable(study, address)  # as a run checks it: no GPU or CPUs a local Ray would wait for forever
    check_store_writable(moved.uri)
    # what a driver ended in the middle of Tune's copy left empty (Tune would fail reading it), as loaded
    for relpath, content in cut.restored.items():
        write_file(experiment_dir, relpath, content)  # the state files of the last whole save, before Tune reads any
    for relpath in cut.emptied:
        remove_file(experiment_dir, relpath)  # Tune writes them again
    # a driver killed between the state file and the Tuner (Ray starting) left no Tune experiment
    # and started no trial: the resume starts the experiment the run would have, in the same directory
    restore = tune.Tuner.can_restore(experiment_dir)
    _refuse_finished(experiment_dir, moved, study)  # before anything is written: a finished sweep stays as it is
    if moved != state:
        write_state(experiment_dir, moved)  # signed: the next resume and `mjp sweep status` follow the store's new address
        announce(stream, f"sweep {state.name} continues in the MLflow store at {moved.uri} (recorded: {state.uri})")
        state = moved
    log = start_logging(experiment_dir, state.name, verbose)
    if state.optuna_storage:
        from sweep.tuner.optuna_mirror import check_storage

        check_storage(state.optuna_storage, state.name, study.config)
    begins = "" if restore else " (its driver was lost before Tune saved anything: no trial had started, every trial runs now)"
    mended = "".join(f"\n  {line}" for line in cut.said())
    announce(stream, f"resuming sweep {state.name}{begins}{mended}\n  logs: {log}")
    parent = RunTracker(state.uri, state.parent_run_id)
    with run_closed_on_error(parent, f"`mjp sweep resume {experiment_dir}` continues the sweep"):
        parent.set_status("RUNNING")
        parent.set_tags({schema.TAG_DRIVER: driver_tag()})
        if not restore:
            _record_on_parent(study, paths, parent, state.uri)
        reopen_children(parent, restored_trial_ids(experiment_dir))
        recorder = SweepRecorder(state.uri, state.experiment, parent.run_id, study.num_trials, study.config.budget.time_budget_s)
        return _fit(_Sweep(study, state, paths, parent, recorder, log, address, verbose, stream), restore=restore)
