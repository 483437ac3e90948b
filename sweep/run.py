"""Run and resume a sweep over a study as a Tune experiment (one training: ``sweep.training``).

Each trial is ``trainables.driver.tune_trial`` and an MLflow run (a child of the sweep's parent
run). The sweep's state (parent run id, study, overrides, Optuna storage) is kept in
``<experiment dir>/mjp_sweep.json`` so ``mjp sweep resume <dir>`` re-attaches to the same parent,
children and Optuna study; Tune restores the searcher with the rest of the experiment.
Trial processes are reused from one trial to the next (``reuse_actors``): torch, timm and
MLflow are imported once per slot, not once per trial.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import socket
import time
from dataclasses import dataclass, field
from collections.abc import Callable
from pathlib import Path
from typing import Any, Iterator, TextIO

import pyarrow.fs
from ray import tune
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.optuna import OptunaSearch

from mjp import keys
from sweep.console import ConsoleView, failure_reason
from sweep.signatures import signing_key
from sweep.signing_callback import SweepSigner, sign_tuner_file
from sweep.space import define_by_run, make_sampler
from sweep.child_runs import close_orphans, close_running_children, reopen_children
from sweep.study import Study, check_study
from sweep.sweep_state import SweepState, filesystem, in_project, load_resumable, write_state
from trainables.config import TrainConfig
from trainables.driver import TrialResources, TrialSpec, find_child_run, tune_trial
from trainables.errors import DiskFullError, UserError, disk_full_reason
from trainables.ray_runtime import check_local_resources, console_logs_to, ensure_ray, ray_session_logs, require_cluster
from trainables.tracking import MlflowProgress, RunTracker, check_store_writable, optuna_storage_url, require_server, tracking_uri

LOG_FILE = "sweep.log"


@dataclass
class TrialOutcome:
    trial_id: str
    label: str
    params: dict[str, Any]
    metrics: dict[str, Any]
    error: str | None


@dataclass
class SweepOutcome:
    parent_run_id: str
    experiment_dir: str
    trials: list[TrialOutcome]
    best: TrialOutcome | None = None
    pareto: list[TrialOutcome] = field(default_factory=list)
    interrupted: bool = False
    expected_trials: int = 0
    log_file: str | None = None
    finished: int = 0  # trials that ran to their end (an interrupted trial's metrics do not count)
    uri: str = ""  # the sweep's own tracking store (from its state file; never the current directory's)

    @property
    def failed(self) -> list[TrialOutcome]:
        return [t for t in self.trials if t.error]


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

    def _mark(self, trial: Any, status: str, tags: dict[str, str]) -> None:
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
            self._mark(trial, "FINISHED", {keys.TAG_STOPPED: f"stopped early by the scheduler at epoch {epoch}" + (f"/{self.epochs}" if self.epochs else "")})

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._mark(trial, "FAILED", {keys.TAG_ERROR: failure_reason(trial)})

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        unfinished = [t for t in trials if t.status not in ("TERMINATED", "ERROR")]
        # Ctrl-C leaves the running trials TERMINATED too, without on_trial_complete; a trial that
        # finished in an earlier run of a resumed sweep has its final result marked done
        self.finished_ids = {t.trial_id for t in trials if t.status == "TERMINATED" and (t.trial_id in self._completed or (t.last_result or {}).get("done"))}
        # a trial Ctrl-C stopped is TERMINATED without having ended: the run was interrupted (the
        # last trial of a sweep, or the one trial of `mjp train`)
        stopped = [t for t in trials if t.status == "TERMINATED" and t.trial_id not in self.finished_ids]
        out_of_time = self.time_budget_s is not None and time.monotonic() - self.started >= self.time_budget_s
        self.interrupted = bool(unfinished) or (bool(stopped) and not out_of_time) or (len(trials) < self.expected and not out_of_time)
        if out_of_time:
            for trial in stopped:
                self._mark(trial, "KILLED", {keys.TAG_STOPPED: f"stopped by the sweep's time budget (budget.time_budget_s={self.time_budget_s:g})"})
            stopped = []
        for trial in unfinished + stopped:
            self._mark(trial, "KILLED", {keys.TAG_INTERRUPTED: "the sweep was interrupted; `mjp sweep resume` continues it"})


def storage_root(path: str | None) -> str:
    """Where Tune keeps experiments: ``--storage``, ``$MJP_SWEEP_STORAGE`` or ./ray_results."""
    path = path or os.environ.get("MJP_SWEEP_STORAGE") or "ray_results"
    return absolute(path)


def absolute(path: str) -> str:
    """A local path made absolute (pyarrow and Tune refuse relative ones); a URI as it is."""
    return path if "://" in path else str(Path(path).resolve())


def log_file_for(experiment_dir: str, name: str, file_name: str = LOG_FILE) -> Path:
    """The log file (a sweep's ``sweep.log``, a training's ``train.log``): in the experiment
    directory when that is local, else ./logs/."""
    return Path(experiment_dir) / file_name if "://" not in experiment_dir else Path("logs").resolve() / f"{name}.log"


def asha_rungs(study: Study) -> tuple[int, ...]:
    """The epochs at which ASHA decides (grace period x reduction factor^k, up to the last epoch)."""
    s = study.config.scheduler
    if s.type != "asha":
        return ()
    last, rungs, t = study.train_config({}).optim.epochs, [], float(s.grace_period)
    while t < last:
        rungs.append(int(round(t)))
        t *= s.reduction_factor
    return tuple(rungs)


def _uses_ray_train(study: Study) -> bool:
    """Whether trials run as multi-worker ``TorchTrainer`` runs (checked on the base config and
    every combination the pre-flight checks)."""
    return any(not study.train_config(p).scaling.in_process for p in [{}, *study.combinations()])


def _cpus_needed(study: Study) -> int:
    s = study.train_config({}).scaling
    per_trial = s.cpus_per_worker if s.in_process else study.config.driver_cpus + s.num_workers * s.cpus_per_worker
    return max(os.cpu_count() or 1, math.ceil(study.max_concurrent * per_trial))


def _spec(study: Study, state: SweepState, storage: str) -> TrialSpec:
    return TrialSpec(
        name=state.name, base_tree=study.base_tree, uri=state.uri, experiment=state.experiment,
        storage=f"{storage}/{state.name}-trials", extra=study.extra, presets=study.presets, study=study.name,
        parent_run_id=state.parent_run_id, checkpoint_epochs=asha_rungs(study), driver_cpus=study.config.driver_cpus,
    )


def _searcher(study: Study) -> Any:
    """Optuna's sampler behind Tune; its state is pickled with the experiment (see optuna_mirror)."""
    c = study.config
    objectives = c.objectives
    searcher = OptunaSearch(
        space=define_by_run(c),
        metric=[o.metric for o in objectives] if len(objectives) > 1 else objectives[0].metric,
        mode=[o.mode for o in objectives] if len(objectives) > 1 else objectives[0].mode,
        sampler=make_sampler(c),
    )
    return ConcurrencyLimiter(searcher, max_concurrent=study.max_concurrent)


@contextlib.contextmanager
def objectives_checked_at_the_end(study: Study) -> Iterator[None]:
    """Tune refuses every result that lacks one of the searcher's metrics, but val/consistency,
    val/diff_norm and the other metrics of the final evaluation come with a trial's last epoch
    only. With several objectives Optuna reads them from that final result alone (NSGA-II takes no
    intermediate values), so while such a study's trials run Tune's per-epoch check is off."""
    objectives = study.config.objectives
    if len(objectives) < 2 or all(o.metric in keys.EPOCH_METRICS for o in objectives):
        yield
        return
    name = "TUNE_DISABLE_STRICT_METRIC_CHECKING"
    before = os.environ.get(name)
    os.environ[name] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _callbacks(study: Study, spec: TrialSpec, state: SweepState, recorder: "SweepRecorder", stream: TextIO | None, experiment_dir: str) -> list[tune.Callback]:
    recorder.epochs = study.train_config({}).optim.epochs
    callbacks: list[tune.Callback] = [recorder, SweepSigner(experiment_dir, experiment_dir.rstrip("/").rsplit("/", 1)[-1])]
    if state.optuna_storage:
        from sweep.optuna_mirror import OptunaMirror

        callbacks.append(OptunaMirror(state.optuna_storage, state.name, study.config, study.train_config({}).optim.epochs,
                                      tracking=(state.uri, state.experiment, state.parent_run_id)))
    return callbacks + [_view(study, spec, stream)]


def make_scheduler(study: Study) -> FIFOScheduler | ASHAScheduler:
    """Tune's trial scheduler for the study (ASHA's ``max_t``: the trials' epochs)."""
    c = study.config
    objectives = c.objectives
    if c.scheduler.type == "asha":
        return ASHAScheduler(
            metric=c.scheduler.metric or objectives[0].metric, mode=c.scheduler.mode or objectives[0].mode,
            time_attr="training_iteration", grace_period=c.scheduler.grace_period,
            reduction_factor=c.scheduler.reduction_factor, max_t=study.train_config({}).optim.epochs,
        )
    return FIFOScheduler()


def _tuner_parts(study: Study, spec: TrialSpec) -> tuple[Any, tune.TuneConfig]:
    c = study.config
    objectives = c.objectives
    scheduler = make_scheduler(study)
    # Tune refuses a metric given to both the scheduler and the TuneConfig: ASHA keeps its own.
    single = len(objectives) == 1 and c.scheduler.type != "asha"
    tune_config = tune.TuneConfig(
        search_alg=_searcher(study), scheduler=scheduler, num_samples=study.num_trials,
        time_budget_s=c.budget.time_budget_s, reuse_actors=True,
        metric=objectives[0].metric if single else None, mode=objectives[0].mode if single else None,
    )
    trainable = tune.with_resources(tune.with_parameters(tune_trial, spec=spec), TrialResources(spec))
    return trainable, tune_config


def failure_config(cfg: TrainConfig) -> tune.FailureConfig:
    """Tune restarts a trial whose process was lost (``runtime.max_failures`` times) from its last
    checkpoint; a multi-worker trial's ``TorchTrainer`` also retries its own workers, and its
    restarted trial process re-attaches to the Ray Train run of the same name. An error in the
    input (``UserError``) or one that would recur from the checkpoint (a non-finite loss, out of
    memory) is not retried (``trainables.driver.tune_trial``); other errors are, up to
    ``runtime.max_failures`` times."""
    return tune.FailureConfig(max_failures=cfg.runtime.max_failures)


def _view(study: Study, spec: TrialSpec, stream: TextIO | None) -> ConsoleView:
    return ConsoleView(
        f"sweep {spec.name}", lambda p: spec.label(p).display, lambda p: spec.config(p).optim.epochs,
        [(o.metric, o.mode) for o in study.config.objectives], study.num_trials, stream=stream,
        progress_of=MlflowProgress(spec.uri, spec.experiment, spec.parent_run_id),
    )


def announce(stream: TextIO | None, text: str) -> None:
    import sys

    print(text, file=stream or sys.stdout, flush=True)


def start_logging(experiment_dir: str, name: str, verbose: bool, file_name: str = LOG_FILE) -> Path:
    log = log_file_for(experiment_dir, name, file_name)
    console_logs_to(log, verbose)
    return log


def _link_ray_logs(experiment_dir: str) -> None:
    logs = ray_session_logs()
    link = Path(experiment_dir) / "ray_logs"
    if logs is not None and "://" not in experiment_dir and not link.exists():
        link.symlink_to(logs, target_is_directory=True)


def check_launchable(study: Study, address: str | None = None) -> None:
    """What the launch builds from the study, built before any directory or run exists: Tune's
    scheduler, and the configs of the first trials the study's sampler proposes (each also
    checked for resources the Ray it will run on cannot have)."""
    from sweep.space import sampled_params

    require_cluster(address)
    try:
        make_scheduler(study)
    except AssertionError as err:  # Ray checks its arguments with asserts
        raise UserError(f"study {study.name!r}: Tune refuses its scheduler {study.config.scheduler.model_dump()}: {err}") from None
    for params in sampled_params(study.config, min(study.num_trials, 8)):
        check_local_resources(study.train_config(params), address)


def claim_sweep_name(storage: str, base: str) -> str:
    """A sweep name that no other sweep in ``storage`` has, by construction: its directory is
    created here, exclusively, so a second sweep started in the same second gets ``<base>-2``
    (its own directory, MLflow parent run and Optuna study). A remote storage gets a random suffix."""
    if "://" in storage:
        import secrets

        return f"{base}-{secrets.token_hex(3)}"
    Path(storage).mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        name = base if n == 1 else f"{base}-{n}"
        try:
            (Path(storage) / name).mkdir()
        except FileExistsError:
            continue
        return name
    raise AssertionError("unreachable")


def remove_sweep_dirs(experiment_dir: str, name: str) -> None:
    """Remove a local sweep's directories (its experiment directory and its trials' storage)."""
    import shutil

    if "://" in experiment_dir:
        return
    root = Path(experiment_dir)
    for path in (root, root.parent / f"{name}-trials"):
        shutil.rmtree(path, ignore_errors=True)


def run_sweep(study: Study, *, storage: str | None = None, address: str | None = None, uri: str | None = None, verbose: bool = False, stream: TextIO | None = None) -> SweepOutcome:
    """Launch a validated study; returns when every trial has ended (or the sweep was interrupted).
    A sweep that fails (or is interrupted) before its first trial starts leaves no directory."""
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
        from trainables.preflight import check_disk_space

        check_disk_space(storage, 12 * study.max_parameters, f"the study's largest model ({study.max_parameters / 1e6:.1f}M parameters)")
    run_name = claim_sweep_name(storage, f"{study.name}-{time.strftime('%Y%m%d-%H%M%S')}")  # a smoke study's name ends in -smoke
    experiment_dir = f"{storage}/{run_name}"
    recorder = SweepRecorder(uri, experiment, None, study.num_trials, study.config.budget.time_budget_s)
    try:
        return _launch(study, storage, address, uri, verbose, stream, experiment, run_name, experiment_dir, recorder)
    except BaseException:
        if not recorder.trials_started:
            remove_sweep_dirs(experiment_dir, run_name)
        raise


def _launch(study: Study, storage: str, address: str | None, uri: str, verbose: bool, stream: TextIO | None,
            experiment: str, run_name: str, experiment_dir: str, recorder: SweepRecorder) -> SweepOutcome:
    log = start_logging(experiment_dir, run_name, verbose)
    announce(stream, f"sweep {run_name}: {study.num_trials} trials, {study.max_concurrent} at a time · logs: {log}")
    parent = RunTracker.create(uri, experiment, run_name=run_name, tags={
        keys.TAG_KIND: "sweep", keys.TAG_STUDY: study.name, keys.TAG_SMOKE: str(study.smoke),
        "mjp.driver": f"{socket.gethostname()}:{os.getpid()}", "mjp.experiment_dir": experiment_dir,
    })
    recorder.parent_run_id = parent.run_id
    # closed FAILED/KILLED on any error from here; before the first trial the sweep's directory is
    # removed (run_sweep), so the way on is to run the command again, after it a resume
    then = lambda: f"`mjp sweep resume {experiment_dir}` continues the sweep" if recorder.trials_started else "run the command again"  # noqa: E731
    with run_closed_on_error(parent, then):
        c = study.config
        parent.log_params({
            "study": study.name, "search.algorithm": c.search.algorithm, "search.seed": c.search.seed,
            "objectives": ",".join(f"{o.metric}:{o.mode}" for o in c.objectives), "trials": study.num_trials,
            "max_concurrent": study.max_concurrent, "scheduler": c.scheduler.type, "smoke": study.smoke,
            "space": ",".join(c.space), "experiment_dir": experiment_dir, "paper_tables": ",".join(map(str, c.paper)),
        })
        parent.log_artifact(study.source, "study")
        from trainables.tracking import set_experiment_note

        description = " ".join(study.config.description.split())
        parent.set_note(f"{description}\n\n(the table and the report appear here when the sweep ends)")
        set_experiment_note(uri, experiment, f"{description}\n\nEach sweep of study `{study.name}` is a parent run; its trials are child runs named by what they train. `mjp analyze report --study {study.name}` writes the study's report.")
        state = SweepState(study=study.source, study_in_project=in_project(study.source), study_digest=study.digest, smoke=study.smoke, extra=study.extra,
                           uri=uri, experiment=experiment, parent_run_id=parent.run_id, name=run_name, optuna_storage=optuna_storage_url(uri))
        write_state(experiment_dir, state)
        if state.optuna_storage:
            from sweep.optuna_mirror import check_storage

            check_storage(state.optuna_storage, run_name, study.config)
        ensure_ray(address, num_cpus=None if address else _cpus_needed(study), verbose=verbose, dashboard=_uses_ray_train(study))
        _link_ray_logs(experiment_dir)
        spec = _spec(study, state, storage)
        trainable, tune_config = _tuner_parts(study, spec)
        tuner = tune.Tuner(trainable, tune_config=tune_config, run_config=tune.RunConfig(
            name=run_name, storage_path=storage, callbacks=_callbacks(study, spec, state, recorder, stream, experiment_dir), verbose=2 if verbose else 0,
            failure_config=failure_config(study.train_config({})),
        ))
        sign_tuner_file(experiment_dir)
        with objectives_checked_at_the_end(study):
            grid = tuner.fit()
        return _finish(study, spec, parent, grid, experiment_dir, recorder, log)


class run_closed_on_error:
    """A sweep (or a training) that crashes leaves its (parent) run FAILED (Ctrl-C during set-up:
    KILLED), never RUNNING. A full disk becomes one ``DiskFullError`` line saying what to do
    (``then``); the run is closed if the store can still be written, else by the resume."""

    def __init__(self, parent: RunTracker, then: str | Callable[[], str] = "run the command again"):
        self.parent, self.then = parent, then

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, err: BaseException | None, tb: Any) -> bool:
        if kind is None:
            return False
        full = disk_full_reason(err) if err is not None else None
        try:
            if issubclass(kind, KeyboardInterrupt):
                self.parent.set_tags({keys.TAG_INTERRUPTED: "interrupted before the trials started"})
                self.parent.set_status("KILLED")
            else:
                self.parent.set_tags({keys.TAG_ERROR: f"{type(err).__name__}: {err}"[:2000]})
                self.parent.set_status("FAILED")
        except Exception as closing:
            if full is None and disk_full_reason(closing) is None:
                raise
            full = full or disk_full_reason(closing)
        if full is not None:
            raise DiskFullError(f"a disk this command writes to is full ({full}); free some space (the MLflow store {self.parent.uri}, the run's storage), then {self.then() if callable(self.then) else self.then}") from None
        return False


def resume_sweep(experiment_dir: str, loaded: tuple[SweepState, Study] | None = None, *, address: str | None = None, verbose: bool = False,
                 stream: TextIO | None = None) -> SweepOutcome:
    """Continue an interrupted sweep: unfinished and errored trials run again under their own
    MLflow child runs; finished trials are kept; the Optuna state is restored by Tune.
    ``loaded``: the directory's ``load_resumable``, when the caller has read it already."""
    experiment_dir = absolute(experiment_dir)
    state, study = loaded or load_resumable(experiment_dir)  # before Ray opens (and unpickles) anything in it
    check_study(study)
    require_server(state.uri)  # the store the sweep was started in, and its cluster, before any write
    require_cluster(address)
    check_store_writable(state.uri)
    if not tune.Tuner.can_restore(experiment_dir):
        raise UserError(f"{experiment_dir} holds no restorable Tune experiment")
    log = start_logging(experiment_dir, state.name, verbose)
    if state.optuna_storage:
        from sweep.optuna_mirror import check_storage

        check_storage(state.optuna_storage, state.name, study.config)
    announce(stream, f"resuming sweep {state.name} · logs: {log}")
    parent = RunTracker(state.uri, state.parent_run_id)
    storage = experiment_dir.rstrip("/").rsplit("/", 1)[0]
    with run_closed_on_error(parent, f"`mjp sweep resume {experiment_dir}` continues the sweep"):
        parent.set_status("RUNNING")
        parent.set_tags({"mjp.driver": f"{socket.gethostname()}:{os.getpid()}"})
        reopen_children(parent, restored_trial_ids(experiment_dir))
        ensure_ray(address, num_cpus=None if address else _cpus_needed(study), verbose=verbose, dashboard=_uses_ray_train(study))
        _link_ray_logs(experiment_dir)
        spec = _spec(study, state, storage)
        trainable, _ = _tuner_parts(study, spec)
        recorder = SweepRecorder(state.uri, state.experiment, parent.run_id, study.num_trials, study.config.budget.time_budget_s)
        tuner = tune.Tuner.restore(experiment_dir, trainable=trainable, resume_unfinished=True, resume_errored=True)
        _replace_callbacks(tuner, _callbacks(study, spec, state, recorder, stream, experiment_dir))
        with objectives_checked_at_the_end(study):
            grid = tuner.fit()
        return _finish(study, spec, parent, grid, experiment_dir, recorder, log)


def restored_trial_ids(experiment_dir: str) -> set[str]:
    """The trial ids in the sweep's newest saved experiment state: the trials a resume restores.
    Read as plain JSON (the trials' states are JSON strings; nothing is unpickled)."""
    fs, path = filesystem(experiment_dir)
    states = [i.path for i in fs.get_file_info(pyarrow.fs.FileSelector(path)) if i.base_name.startswith("experiment_state-") and i.base_name.endswith(".json")]
    if not states:
        return set()
    with fs.open_input_stream(max(states)) as fh:
        saved = json.loads(fh.read().decode())
    ids = set()
    for trial_state, _ in saved.get("trial_data", []):
        trial_id = json.loads(trial_state).get("trial_id")
        if isinstance(trial_id, str):
            ids.add(trial_id)
    return ids


def _replace_callbacks(tuner: tune.Tuner, callbacks: list[tune.Callback]) -> None:
    """A restored Tuner keeps the callbacks pickled with the first run (inert copies of its
    console); ``Tuner.restore`` takes no new ``RunConfig``, so this sets them on the one it
    restored. Private attribute: the resume tests fail if a Ray upgrade moves it."""
    tuner._local_tuner._run_config.callbacks = callbacks  # noqa: SLF001


def _outcomes(spec: TrialSpec, grid: Any) -> list[TrialOutcome]:
    trials = []
    for result in grid:
        params = {k: v for k, v in (result.config or {}).items()}
        metrics = dict(result.metrics or {})
        trials.append(TrialOutcome(
            trial_id=str(metrics.get("trial_id") or Path(result.path or "").name),
            label=spec.label(params).display, params=params, metrics=metrics,
            error=str(result.error).strip().splitlines()[-1][:300] if result.error else None,
        ))
    return trials


def pareto_front(trials: list[TrialOutcome], objectives: list[tuple[str, str]]) -> list[TrialOutcome]:
    """The trials no other trial dominates (at least as good on every objective, better on one)."""

    def signed(t: TrialOutcome) -> list[float]:
        return [t.metrics[m] if mode == "max" else -t.metrics[m] for m, mode in objectives]

    values = [signed(t) for t in trials]
    front = []
    for i, v in enumerate(values):
        dominated = any(all(a >= b for a, b in zip(w, v)) and any(a > b for a, b in zip(w, v)) for j, w in enumerate(values) if j != i)
        if not dominated:
            front.append(trials[i])
    return front


def _finish(study: Study, spec: TrialSpec, parent: RunTracker, grid: Any, experiment_dir: str, recorder: SweepRecorder, log: Path) -> SweepOutcome:
    trials = _outcomes(spec, grid)
    objectives = study.config.objectives
    ended = recorder.finished_ids if recorder.interrupted else None  # a sweep that ran through: every trial ended
    done = [t for t in trials if t.error is None and all(o.metric in t.metrics for o in objectives) and (ended is None or t.trial_id in ended)]
    outcome = SweepOutcome(parent.run_id, experiment_dir, trials, interrupted=recorder.interrupted, expected_trials=study.num_trials, log_file=str(log), finished=len(done), uri=spec.uri)
    summary: dict[str, float] = {"sweep/trials": len(trials), "sweep/failed": len(outcome.failed)}
    if len(objectives) == 1 and done:
        o = objectives[0]
        outcome.best = (max if o.mode == "max" else min)(done, key=lambda t: t.metrics[o.metric])
        summary[f"best/{o.metric}"] = outcome.best.metrics[o.metric]
        parent.set_tags({keys.TAG_BEST_TRIAL: outcome.best.label, keys.TAG_BEST_PARAMS: json.dumps(outcome.best.params)})
    elif done:
        outcome.pareto = pareto_front(done, [(o.metric, o.mode) for o in objectives])
        summary["pareto/size"] = len(outcome.pareto)
        rows = [{"trial": t.label, "trial_id": t.trial_id, **t.params, **{o.metric: t.metrics[o.metric] for o in objectives}} for t in outcome.pareto]
        parent.log_text(json.dumps(rows, indent=2), "pareto/pareto_front.json")
    if outcome.interrupted:
        close_running_children(parent)
        parent.set_tags({keys.TAG_INTERRUPTED: f"{len(done)} of {study.num_trials} trials finished; `mjp sweep resume {experiment_dir}` continues"})
        parent.set_status("KILLED")
    else:
        close_orphans(parent)
        parent.log_new_metrics(summary)
        parent.client.delete_tag(parent.run_id, keys.TAG_INTERRUPTED) if keys.TAG_INTERRUPTED in parent.client.get_run(parent.run_id).data.tags else None
        parent.set_status("FINISHED")
    return outcome
