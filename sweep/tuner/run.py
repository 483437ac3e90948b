"""Run and resume a sweep over a study as a Tune experiment (one training: ``sweep.tuner.training``).

Each trial is ``trainables.launch.trial.tune_trial`` and an MLflow run (a child of the sweep's parent
run). The sweep's state (parent run id, study, overrides, Optuna storage) is kept in
``<experiment dir>/mjp_sweep.json`` so ``mjp sweep resume <dir>`` re-attaches to the same parent,
children and Optuna study; Tune restores the searcher with the rest of the experiment.
Trial processes are reused from one trial to the next (``reuse_actors``): torch, timm and
MLflow are imported once per slot, not once per trial.
"""

from __future__ import annotations

import os
import socket
import time
from typing import TextIO

from ray import tune

from sweep.security.signatures import signing_key
from sweep.security.signing_callback import sign_tuner_file
from sweep.study.load import Study, check_study
from sweep.tuner.child_runs import reopen_children
from sweep.tuner.outcome import SweepOutcome, finish_sweep
from sweep.tuner.owner import claim, release
from sweep.tuner.recorder import SweepRecorder, run_closed_on_error
from sweep.tuner.state import SweepState, in_project, in_store, load_resumable, write_state
from sweep.tuner.storage import (
    absolute,
    announce,
    claim_sweep_name,
    link_ray_logs,
    remove_sweep_dirs,
    restored_trial_ids,
    start_logging,
    storage_root,
)
from sweep.tuner.tuner import (
    check_launchable,
    cpus_needed,
    failure_config,
    objectives_checked_at_the_end,
    replace_callbacks,
    sweep_callbacks,
    trial_spec,
    tuner_parts,
    uses_ray_train,
)
from trainables.errors import UserError
from trainables.launch.ray_runtime import ensure_ray
from trainables.tracking import schema
from trainables.tracking.runs import RunTracker
from trainables.tracking.store import check_store_writable, optuna_storage_url, tracking_uri


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
    ``command``: what started it (default ``mjp sweep run <study>``), tagged on the parent run."""
    check_launchable(study, address)
    base = study.train_config({})
    signing_key(create=True)  # a key others can read is refused here, before any run or directory exists
    for warning in base.warnings():
        announce(stream, f"warning: {warning}")
    uri = tracking_uri(uri or base.tracking.uri)
    check_store_writable(uri)
    experiment = base.tracking.experiment
    storage = storage_root(storage)
    if study.max_parameters:
        from trainables.launch.preflight import check_disk_space

        check_disk_space(storage, 12 * study.max_parameters, f"the study's largest model ({study.max_parameters / 1e6:.1f}M parameters)")
    run_name = claim_sweep_name(storage, f"{study.name}-{time.strftime('%Y%m%d-%H%M%S')}")  # a smoke study's name ends in -smoke
    experiment_dir = f"{storage}/{run_name}"
    recorder = SweepRecorder(uri, experiment, None, study.num_trials, study.config.budget.time_budget_s)
    try:
        claim(experiment_dir)  # made just now, exclusively: this driver owns it until it ends (a resume meanwhile is refused)
        command = command or f"mjp sweep run {study.config.name}" + (" --smoke" if study.smoke else "")
        return _launch(study, storage, address, uri, verbose, stream, experiment, run_name, experiment_dir, recorder, command)
    except BaseException:
        if not recorder.trials_started:
            remove_sweep_dirs(experiment_dir, run_name)
        raise
    finally:
        release(experiment_dir)


def _launch(
    study: Study,
    storage: str,
    address: str | None,
    uri: str,
    verbose: bool,
    stream: TextIO | None,
    experiment: str,
    run_name: str,
    experiment_dir: str,
    recorder: SweepRecorder,
    command: str,
) -> SweepOutcome:
    log = start_logging(experiment_dir, run_name, verbose)
    announce(stream, f"sweep {run_name}: {study.num_trials} trials, {study.max_concurrent} at a time · logs: {log}")
    parent = RunTracker.create(
        uri,
        experiment,
        run_name=run_name,
        tags={
            schema.TAG_KIND: schema.KIND_SWEEP,
            schema.TAG_STUDY: study.name,
            schema.TAG_SMOKE: str(study.smoke),
            schema.TAG_DRIVER: f"{socket.gethostname()}:{os.getpid()}",
            schema.TAG_EXPERIMENT_DIR: experiment_dir,
            schema.TAG_COMMAND: command,
        },
    )
    recorder.parent_run_id = parent.run_id
    # closed FAILED/KILLED on any error from here; before the first trial the sweep's directory is
    # removed (run_sweep), so the way on is to run the command again, after it a resume
    then = lambda: f"`mjp sweep resume {experiment_dir}` continues the sweep" if recorder.trials_started else "run the command again"  # noqa: E731
    with run_closed_on_error(parent, then):
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
                experiment_dir=experiment_dir,
                paper_tables=tuple(map(str, c.paper)),
            ).to_params()
        )
        parent.log_artifact(study.source, schema.ARTIFACT_STUDY_DIR)
        from trainables.tracking.store import set_experiment_note

        description = " ".join(study.config.description.split())
        parent.set_note(f"{description}\n\n(the table and the report appear here when the sweep ends)")
        set_experiment_note(
            uri,
            experiment,
            f"{description}\n\nEach sweep of study `{study.name}` is a parent run; its trials are child runs named by what they train. `mjp analyze report --study {study.name}` writes the study's report.",
        )
        state = SweepState(
            study=study.source,
            study_in_project=in_project(study.source),
            study_digest=study.digest,
            smoke=study.smoke,
            extra=study.extra,
            uri=uri,
            experiment=experiment,
            parent_run_id=parent.run_id,
            name=run_name,
            optuna_storage=optuna_storage_url(uri),
        )
        write_state(experiment_dir, state)
        if state.optuna_storage:
            from sweep.tuner.optuna_mirror import check_storage

            check_storage(state.optuna_storage, run_name, study.config)
        ensure_ray(address, num_cpus=None if address else cpus_needed(study), verbose=verbose, dashboard=uses_ray_train(study))
        link_ray_logs(experiment_dir)
        spec = trial_spec(study, state, storage)
        trainable, tune_config = tuner_parts(study, spec)
        tuner = tune.Tuner(
            trainable,
            tune_config=tune_config,
            run_config=tune.RunConfig(
                name=run_name,
                storage_path=storage,
                callbacks=sweep_callbacks(study, spec, state, recorder, stream, experiment_dir),
                verbose=2 if verbose else 0,
                failure_config=failure_config(study.train_config({})),
            ),
        )
        sign_tuner_file(experiment_dir)
        with objectives_checked_at_the_end(study):
            grid = tuner.fit()
        return finish_sweep(study, spec, parent, grid, experiment_dir, recorder, log)


def resume_sweep(
    experiment_dir: str,
    loaded: tuple[SweepState, Study] | None = None,
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
    experiment_dir = absolute(experiment_dir)
    claim(experiment_dir)
    try:
        return _resume(experiment_dir, loaded, address, verbose, stream, uri)
    finally:
        release(experiment_dir)


def _resume(
    experiment_dir: str, loaded: tuple[SweepState, Study] | None, address: str | None, verbose: bool, stream: TextIO | None, uri: str | None
) -> SweepOutcome:
    state, study = loaded or load_resumable(experiment_dir)  # before Ray opens (and unpickles) anything in it
    check_study(study)
    moved = in_store(state, uri, experiment_dir)  # the store holds the sweep's parent run, before any write
    check_launchable(study, address)  # as a run checks it: no GPU or CPUs a local Ray would wait for forever
    check_store_writable(moved.uri)
    if not tune.Tuner.can_restore(experiment_dir):
        raise UserError(f"{experiment_dir} holds no restorable Tune experiment")
    if moved != state:
        write_state(experiment_dir, moved)  # signed: the next resume and `mjp sweep status` follow the store's new address
        announce(stream, f"sweep {state.name} continues in the MLflow store at {moved.uri} (recorded: {state.uri})")
        state = moved
    log = start_logging(experiment_dir, state.name, verbose)
    if state.optuna_storage:
        from sweep.tuner.optuna_mirror import check_storage

        check_storage(state.optuna_storage, state.name, study.config)
    announce(stream, f"resuming sweep {state.name} · logs: {log}")
    parent = RunTracker(state.uri, state.parent_run_id)
    storage = experiment_dir.rstrip("/").rsplit("/", 1)[0]
    with run_closed_on_error(parent, f"`mjp sweep resume {experiment_dir}` continues the sweep"):
        parent.set_status("RUNNING")
        parent.set_tags({schema.TAG_DRIVER: f"{socket.gethostname()}:{os.getpid()}"})
        reopen_children(parent, restored_trial_ids(experiment_dir))
        ensure_ray(address, num_cpus=None if address else cpus_needed(study), verbose=verbose, dashboard=uses_ray_train(study))
        link_ray_logs(experiment_dir)
        spec = trial_spec(study, state, storage)
        trainable, _ = tuner_parts(study, spec)
        recorder = SweepRecorder(state.uri, state.experiment, parent.run_id, study.num_trials, study.config.budget.time_budget_s)
        tuner = tune.Tuner.restore(experiment_dir, trainable=trainable, resume_unfinished=True, resume_errored=True)
        replace_callbacks(tuner, sweep_callbacks(study, spec, state, recorder, stream, experiment_dir))
        with objectives_checked_at_the_end(study):
            grid = tuner.fit()
        return finish_sweep(study, spec, parent, grid, experiment_dir, recorder, log)
