"""A sweep's trials in an Optuna study on disk (``optuna.db`` beside the MLflow store), one study
per sweep named after it, so ``optuna-dashboard`` shows the sweep live and the report can draw
Optuna's optimisation history and parameter importances.

The searcher itself keeps its state in memory, pickled with Tune's experiment: after a SIGKILL,
Tune restores the searcher from its last checkpoint, which may be older than a database the
searcher wrote to directly (Optuna then refuses to update a trial it already closed). So the
database is a mirror: each trial is added once, when it ends, with its per-epoch values, its
real start and end (the start of its MLflow run, else when Tune started it), the objectives'
names, and user attributes naming its MLflow run (``mlflow_run_id``), its variant and its label,
so optuna-dashboard shows durations, named objectives and which run each trial is.
"""

from __future__ import annotations

import contextlib
import datetime
from pathlib import Path
from typing import Any, Literal

import optuna
from ray import tune

from sweep.study.schema import Choice, Fixed, Grid, IntRange, LogUniform, StudyConfig, Uniform
from trainables.tracking import schema

MIRROR_ATTR = "tune_trial_id"


def distributions(study: StudyConfig) -> dict[str, optuna.distributions.BaseDistribution]:
    """Optuna's distribution of every sampled entry of the space (seeds are categorical)."""
    out: dict[str, optuna.distributions.BaseDistribution] = {}
    for key, p in study.space.items():
        if isinstance(p, (Choice, Grid)):
            out[key] = optuna.distributions.CategoricalDistribution(p.values)
        elif isinstance(p, LogUniform):
            out[key] = optuna.distributions.FloatDistribution(p.low, p.high, log=True)
        elif isinstance(p, Uniform):
            out[key] = optuna.distributions.FloatDistribution(p.low, p.high)
        elif isinstance(p, IntRange):
            out[key] = optuna.distributions.IntDistribution(int(p.low), int(p.high), step=p.step)
        elif not isinstance(p, Fixed):
            raise TypeError(f"no Optuna distribution for {type(p).__name__}")
    return out


def open_study(url: str | optuna.storages.BaseStorage, name: str, study: StudyConfig) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    directions: list[Literal["maximize", "minimize"]] = ["maximize" if o.mode == "max" else "minimize" for o in study.objectives]
    opened = optuna.create_study(storage=url, study_name=name, directions=directions, load_if_exists=True)
    names = [o.metric for o in study.objectives]
    if opened.metric_names != names:
        import warnings

        with warnings.catch_warnings():  # "experimental since Optuna 3.2"; optuna-dashboard reads it
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            opened.set_metric_names(names)
    return opened


def check_storage(url: str, name: str, study: StudyConfig) -> None:
    """Open (or create) the sweep's Optuna study before any trial runs: a storage that cannot be
    read is one ``UserError`` line here, not a traceback from Tune's loop with runs left RUNNING.
    Created under the store's folder lock (two sweeps may start together on a fresh ``optuna.db``),
    whole or not at all (``_create_whole``)."""
    from trainables.errors import UserError
    from trainables.tracking.store_file import store_lock

    path = Path(url[len("sqlite:///") :]) if url.startswith("sqlite:///") else None
    try:
        if path is not None:
            with store_lock(path):
                if not path.exists():
                    _create_whole(path, name, study)
                _require_unique_study_names(path)
                open_study(url, name, study).get_trials(deepcopy=False)
        else:
            open_study(url, name, study).get_trials(deepcopy=False)
    except Exception as err:  # sqlite, SQLAlchemy, alembic or Optuna: a store this sweep cannot use
        first = (str(err).strip().splitlines() or [""])[0][:200]
        where = path or url
        raise UserError(
            f"the sweep's Optuna storage {where} cannot be read ({type(err).__name__}: {first}); "
            f"move it aside (the MLflow runs do not depend on it) and run the command again"
        ) from None


def _create_whole(path: Path, name: str, study: StudyConfig) -> None:
    """A new storage at ``path`` with the study, made aside and published whole (``made_aside``).

    SQLite commits each of Optuna's ``CREATE`` statements on its own: a driver killed between two of
    them (the ``studies`` table made, its unique index on the name not yet) left a storage in which
    every later open created the study again, and the sweep's next open failed inside Tune's loop
    (``MultipleResultsFound``)."""
    from trainables.written import made_aside

    with made_aside(path) as aside:
        storage = optuna.storages.RDBStorage(f"sqlite:///{aside}")
        try:
            open_study(storage, name, study)
        finally:
            storage.engine.dispose()  # its connections closed before the file moves


def _require_unique_study_names(path: Path) -> None:
    """Refuse a storage whose ``studies`` table lacks Optuna's unique index on the study's name
    (one cut short before ``_create_whole`` existed): opened, it would add the study again."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'studies'").fetchone():
            return  # not made yet: Optuna makes it whole on open, under the lock
        unique = db.execute(
            "SELECT 1 FROM pragma_index_list('studies') AS i"
            " WHERE i.\"unique\" = 1 AND (SELECT group_concat(name) FROM pragma_index_info(i.name)) = 'study_name'"
        ).fetchone()
    if not unique:
        raise ValueError("its studies table has no unique index on study_name: its creation was cut short")


class OptunaMirror(tune.Callback):
    """Adds every ended trial to the Optuna study ``name`` at ``url`` (once, keyed by Tune's trial id)."""

    def __init__(self, url: str, name: str, study: StudyConfig, epochs: int, tracking: tuple[str, str, str] | None = None):
        """``tracking``: (MLflow URI, experiment, parent run id) to find each trial's MLflow run."""
        self.url, self.name, self.config, self.epochs, self.tracking = url, name, study, epochs, tracking
        self.objectives = [o.metric for o in study.objectives]
        self.values: dict[str, dict[int, float]] = {}
        self.started: dict[str, datetime.datetime] = {}
        self._study: optuna.Study | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_study": None}

    @property
    def study(self) -> optuna.Study:
        if self._study is None:
            self._study = open_study(self.url, self.name, self.config)
        return self._study

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.started.setdefault(trial.trial_id, datetime.datetime.now())

    def _mlflow_run(self, trial: Any) -> tuple[dict[str, str], datetime.datetime | None]:
        """User attributes naming the trial's MLflow run, and the run's start."""
        if self.tracking is None:
            return {}, None
        from trainables.launch.trial import find_child_run

        uri, experiment, parent = self.tracking
        tracker = find_child_run(uri, experiment, parent, trial.trial_id)
        if tracker is None:
            return {}, None
        run = tracker.run()
        tags = run.data.tags
        attrs = {
            "mlflow_run_id": run.info.run_id,
            "mlflow_run_name": run.info.run_name or "",
            "variant": tags.get(schema.TAG_VARIANT, ""),
            "label": tags.get(schema.TAG_LABEL, ""),
        }
        return {k: v for k, v in attrs.items() if v}, datetime.datetime.fromtimestamp(run.info.start_time / 1000)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        first = self.objectives[0]
        if first in result and "epoch" in result:
            self.values.setdefault(trial.trial_id, {})[int(result["epoch"])] = float(result[first])

    def _add(self, trial: Any, state: optuna.trial.TrialState) -> None:
        if any(t.user_attrs.get(MIRROR_ATTR) == trial.trial_id for t in self.study.get_trials(deepcopy=False)):
            return
        dists = distributions(self.config)
        params = {k: v for k, v in (trial.config or {}).items() if k in dists}
        result = trial.last_result or {}
        values = [float(result[m]) for m in self.objectives] if all(m in result for m in self.objectives) else None
        if state == optuna.trial.TrialState.COMPLETE and int(result.get("epoch", 0)) < self.epochs:
            state = optuna.trial.TrialState.PRUNED  # stopped early by the scheduler
        elif values is None and state == optuna.trial.TrialState.COMPLETE:
            state = optuna.trial.TrialState.FAIL
        run_attrs, run_start = self._mlflow_run(trial)
        frozen = optuna.trial.create_trial(
            params=params,
            distributions={k: dists[k] for k in params},
            values=values if state == optuna.trial.TrialState.COMPLETE else None,
            state=state,
            intermediate_values=self.values.get(trial.trial_id, {}),
            user_attrs={MIRROR_ATTR: trial.trial_id, **run_attrs},
        )
        frozen.datetime_complete = datetime.datetime.now()
        frozen.datetime_start = min(run_start or self.started.get(trial.trial_id) or frozen.datetime_complete, frozen.datetime_complete)
        self.study.add_trial(frozen)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._add(trial, optuna.trial.TrialState.COMPLETE)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._add(trial, optuna.trial.TrialState.FAIL)
