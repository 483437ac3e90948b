"""Run and resume a sweep: Ray Tune + OptunaSearch over a study, one MLflow parent run per sweep.

Each trial is ``trainables.driver.tune_trainable`` (which launches its own ``TorchTrainer``) and an
MLflow child run of the sweep's parent. The sweep's state (parent run id, study, overrides) is
kept in ``<experiment dir>/mjp_sweep.json`` so ``mjp sweep resume <dir>`` re-attaches to the same
parent and children; Tune restores the Optuna searcher with the rest of the experiment.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pyarrow.fs
import yaml
from ray import tune
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.optuna import OptunaSearch

from sweep.space import define_by_run, make_sampler
from sweep.study import Study, load_study
from trainables.driver import ensure_ray, find_child_run, tune_trainable
from trainables.tracking import TAG_KIND, TAG_STUDY, RunTracker, tracking_uri

STATE_FILE = "mjp_sweep.json"


@dataclass
class SweepOutcome:
    parent_run_id: str
    experiment_dir: str
    trials: list[dict[str, Any]]  # per trial: trial_id, status, params, metrics, error
    best: dict[str, Any] | None
    pareto: list[dict[str, Any]]


class MLflowTrialStatus(tune.Callback):
    """Give every child run a final status, also for trials the driver never finished itself
    (ASHA stops them by killing the driver function)."""

    def __init__(self, uri: str, experiment: str, parent_run_id: str):
        self.uri, self.experiment, self.parent_run_id = uri, experiment, parent_run_id

    def _mark(self, trial: Any, status: str, reason: str | None = None) -> None:
        tracker = find_child_run(self.uri, self.experiment, self.parent_run_id, trial.trial_id)
        if tracker is None or tracker.status != "RUNNING":
            return
        if reason:
            tracker.set_tags({"mjp.stopped": reason})
        tracker.set_status(status)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._mark(trial, "FINISHED", "early stop by the scheduler")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._mark(trial, "FAILED")


def _filesystem(path: str) -> tuple[pyarrow.fs.FileSystem, str]:
    if "://" in path:
        return pyarrow.fs.FileSystem.from_uri(path)
    return pyarrow.fs.LocalFileSystem(), str(Path(path).resolve())


def write_state(experiment_dir: str, state: dict[str, Any]) -> None:
    fs, path = _filesystem(experiment_dir)
    fs.create_dir(path, recursive=True)
    with fs.open_output_stream(f"{path}/{STATE_FILE}") as fh:
        fh.write(json.dumps(state, indent=2).encode())


def read_state(experiment_dir: str) -> dict[str, Any]:
    fs, path = _filesystem(experiment_dir)
    try:
        with fs.open_input_stream(f"{path}/{STATE_FILE}") as fh:
            return json.loads(fh.read().decode())
    except (FileNotFoundError, OSError):
        from sweep.cli import UserError

        raise UserError(f"{experiment_dir} is not a sweep directory (no {STATE_FILE}); pass the directory `mjp sweep run` printed") from None


def _storage(path: str | None) -> str:
    path = path or os.environ.get("MJP_SWEEP_STORAGE") or "ray_results"
    return path if "://" in path else str(Path(path).resolve())


def _tuner_parts(study: Study, sweep: dict[str, Any]) -> tuple[Any, tune.TuneConfig]:
    c = study.config
    objectives = c.objectives
    searcher = OptunaSearch(
        space=define_by_run(c),
        metric=[o.metric for o in objectives] if len(objectives) > 1 else objectives[0].metric,
        mode=[o.mode for o in objectives] if len(objectives) > 1 else objectives[0].mode,
        sampler=make_sampler(c),
    )
    if c.scheduler.type == "asha":
        scheduler = ASHAScheduler(
            metric=c.scheduler.metric or objectives[0].metric,
            mode=c.scheduler.mode or objectives[0].mode,
            time_attr="training_iteration",
            grace_period=c.scheduler.grace_period,
            reduction_factor=c.scheduler.reduction_factor,
            max_t=study.train_config({}).optim.epochs,
        )
    else:
        scheduler = FIFOScheduler()
    single = len(objectives) == 1
    tune_config = tune.TuneConfig(
        search_alg=ConcurrencyLimiter(searcher, max_concurrent=study.max_concurrent),
        scheduler=scheduler,
        num_samples=study.num_trials,
        time_budget_s=c.budget.time_budget_s,
        metric=objectives[0].metric if single else None,
        mode=objectives[0].mode if single else None,
    )
    trainable = tune.with_resources(tune.with_parameters(tune_trainable, sweep=sweep), {"CPU": c.driver_cpus})
    return trainable, tune_config


def _cpus_needed(study: Study) -> int:
    s = study.train_config({}).scaling
    per_trial = study.config.driver_cpus + s.num_workers * s.cpus_per_worker
    return max(os.cpu_count() or 1, math.ceil(study.max_concurrent * per_trial))


def run_sweep(study: Study, *, storage: str | None = None, address: str | None = None, uri: str | None = None) -> SweepOutcome:
    """Launch a validated study; returns when every trial has ended."""
    base = study.train_config({})
    uri = tracking_uri(uri or base.tracking.uri)
    experiment = base.tracking.experiment
    run_name = f"{study.name}{'-smoke' if study.smoke else ''}-{time.strftime('%Y%m%d-%H%M%S')}"
    storage = _storage(storage)
    experiment_dir = f"{storage}/{run_name}"
    parent = RunTracker.create(uri, experiment, run_name=run_name, tags={TAG_KIND: "sweep", TAG_STUDY: study.name, "mjp.smoke": str(study.smoke)})
    c = study.config
    parent.log_params({
        "study": study.name, "search.algorithm": c.search.algorithm, "search.seed": c.search.seed,
        "objectives": ",".join(f"{o.metric}:{o.mode}" for o in c.objectives), "trials": study.num_trials,
        "max_concurrent": study.max_concurrent, "scheduler": c.scheduler.type, "smoke": study.smoke,
        "space": ",".join(c.space), "experiment_dir": experiment_dir,
    })
    parent.log_artifact(study.source, "study")
    state = dict(study=study.source, smoke=study.smoke, extra=study.extra, uri=uri, experiment=experiment, parent_run_id=parent.run_id, name=run_name)
    write_state(experiment_dir, state)
    with _parent_failed_on_error(parent):
        ensure_ray(address, num_cpus=None if address else _cpus_needed(study))
        trainable, tune_config = _tuner_parts(study, _sweep_args(study, state, storage))
        tuner = tune.Tuner(
            trainable,
            tune_config=tune_config,
            run_config=tune.RunConfig(name=run_name, storage_path=storage, callbacks=[MLflowTrialStatus(uri, experiment, parent.run_id)]),
        )
        return _finish(study, parent, tuner.fit(), experiment_dir)


@contextlib.contextmanager
def _parent_failed_on_error(parent: RunTracker) -> Iterator[None]:
    """An interrupted or crashed sweep leaves its parent run KILLED / FAILED, never RUNNING."""
    try:
        yield
    except KeyboardInterrupt:
        parent.set_status("KILLED")
        raise
    except BaseException as err:
        parent.set_tags({"mjp.error": str(err)[:5000]})
        parent.set_status("FAILED")
        raise


def resume_sweep(experiment_dir: str, *, address: str | None = None) -> SweepOutcome:
    """Continue an interrupted sweep: unfinished and errored trials run again under their own
    MLflow child runs; finished trials are kept; the Optuna state is restored by Tune."""
    state = read_state(experiment_dir)
    study = load_study(state["study"], smoke=state["smoke"], overrides=state["extra"])
    parent = RunTracker(state["uri"], state["parent_run_id"])
    parent.set_status("RUNNING")
    storage = experiment_dir.rstrip("/").rsplit("/", 1)[0]
    ensure_ray(address, num_cpus=None if address else _cpus_needed(study))
    trainable, _ = _tuner_parts(study, _sweep_args(study, state, storage))
    if not tune.Tuner.can_restore(experiment_dir):
        from sweep.cli import UserError

        raise UserError(f"{experiment_dir} holds no restorable Tune experiment")
    with _parent_failed_on_error(parent):
        tuner = tune.Tuner.restore(experiment_dir, trainable=trainable, resume_unfinished=True, resume_errored=True)
        return _finish(study, parent, tuner.fit(), experiment_dir)


def _sweep_args(study: Study, state: dict[str, Any], storage: str) -> dict[str, Any]:
    return dict(
        name=study.name, base_tree=study.base_tree, extra=study.extra, presets=study.presets, uri=state["uri"],
        experiment=state["experiment"], parent_run_id=state["parent_run_id"], storage=f"{storage}/{state['name']}-trials",
    )


def _finish(study: Study, parent: RunTracker, grid: Any, experiment_dir: str) -> SweepOutcome:
    trials = []
    for result in grid:
        trials.append(dict(
            trial_id=result.metrics.get("trial_id") if result.metrics else None,
            params=dict(result.config or {}),
            metrics=dict(result.metrics or {}),
            error=str(result.error) if result.error else None,
        ))
    objectives = study.config.objectives
    done = [t for t in trials if t["error"] is None and all(o.metric in t["metrics"] for o in objectives)]
    best, pareto = None, []
    if len(objectives) == 1 and done:
        o = objectives[0]
        best = (max if o.mode == "max" else min)(done, key=lambda t: t["metrics"][o.metric])
        parent.log_metrics({f"best/{o.metric}": best["metrics"][o.metric]}, step=0)
        parent.set_tags({"mjp.best_trial": str(best["trial_id"]), "mjp.best_params": json.dumps(best["params"])})
    elif done:
        pareto = pareto_front(done, [(o.metric, o.mode) for o in objectives])
        parent.log_metrics({"pareto/size": len(pareto)}, step=0)
        _log_pareto(parent, pareto, objectives)
    failed = sum(t["error"] is not None for t in trials)
    parent.log_metrics({"sweep/trials": len(trials), "sweep/failed": failed}, step=0)
    parent.set_status("FINISHED")
    return SweepOutcome(parent.run_id, experiment_dir, trials, best, pareto)


def pareto_front(trials: list[dict[str, Any]], objectives: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The trials no other trial dominates (at least as good on every objective, better on one)."""

    def signed(t: dict[str, Any]) -> list[float]:
        return [t["metrics"][m] if mode == "max" else -t["metrics"][m] for m, mode in objectives]

    values = [signed(t) for t in trials]
    front = []
    for i, v in enumerate(values):
        dominated = any(all(a >= b for a, b in zip(w, v)) and any(a > b for a, b in zip(w, v)) for j, w in enumerate(values) if j != i)
        if not dominated:
            front.append(trials[i])
    return front


def _log_pareto(parent: RunTracker, pareto: list[dict[str, Any]], objectives: list[Any]) -> None:
    import tempfile

    rows = [{"trial_id": t["trial_id"], **t["params"], **{o.metric: t["metrics"][o.metric] for o in objectives}} for t in pareto]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "pareto_front.yaml"
        path.write_text(yaml.safe_dump(rows, sort_keys=False))
        parent.log_artifact(path, "pareto")
