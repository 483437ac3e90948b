"""MLflow adapter: the only module of the training side that imports mlflow.

Runs are addressed by id through ``MlflowClient`` (no global active run, so Ray workers and Tune
drivers can share a process safely). A resumed run re-attaches to its id: params already logged
are not logged again, and ``EpochLogger`` skips the steps logged before the interruption.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import mlflow
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from mjp import keys
from trainables.errors import UserError
from trainables.progress import TAG as PROGRESS_TAG
from trainables.progress import Progress


class TrackingError(UserError):
    """The MLflow store cannot be used (missing, read-only, unreachable); the message says which and why."""


def tracking_uri(configured: str | None = None, base_dir: str | Path | None = None) -> str:
    """The tracking URI: ``configured``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<abs>/mlflow.db``.

    Relative SQLite paths become absolute (Ray workers run in other directories).
    """
    uri = configured or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
    _check_scheme(uri)
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = "sqlite:///" + str((Path(base_dir or Path.cwd()) / uri[len("sqlite:///") :]).resolve())
    elif "://" not in uri:  # a bare path: a SQLite file
        uri = "sqlite:///" + str((Path(base_dir or Path.cwd()) / uri).resolve())
    require_server(uri)
    return uri


def is_tracking_server(uri: str) -> bool:
    """Whether ``uri`` names an MLflow tracking server (which serves its own UI) rather than a store."""
    return uri.startswith(("http://", "https://"))


_ANSWERED: set[str] = set()  # tracking servers this process has heard from


def require_server(uri: str, seconds: float = 5.0) -> None:
    """``TrackingError`` in one line, within ``seconds``, when ``uri`` is a tracking server that does
    not answer: MLflow itself retries an absent server for minutes and ends in a long traceback
    (the local twin's exports left set after ``mjp cluster down``). Any HTTP answer will do."""
    if not is_tracking_server(uri) or uri in _ANSWERED:
        return
    silence = server_silence(uri, seconds)
    if silence is not None:
        source = "$MLFLOW_TRACKING_URI" if os.environ.get("MLFLOW_TRACKING_URI") == uri else "the tracking URI"
        raise TrackingError(f"no MLflow server answers at {uri} ({source}: {silence}); start it (the local twin: `mjp cluster up --local`, "
                            "then its exports), or `unset MLFLOW_TRACKING_URI` for the local store ./mlflow.db")
    _ANSWERED.add(uri)


def server_silence(uri: str, seconds: float) -> str | None:
    """Why the tracking server at ``uri`` did not answer its health check within ``seconds``; None
    when it answered (any HTTP answer: a proxy in front of it may want a login for /health)."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=seconds).close()
    except urllib.error.HTTPError:
        return None
    except OSError as err:
        return str(getattr(err, "reason", err))
    return None


#: the stores MLflow 3 opens (a database through SQLAlchemy, with an optional ``+driver``, a
#: tracking server, Databricks, a local folder)
STORE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks", "file")


def _check_scheme(uri: str) -> None:
    """A misspelt scheme fails here, in one line, not in MLflow after Ray has started."""
    if "://" not in uri:
        return
    scheme = uri.split("://", 1)[0].lower()
    if scheme.split("+", 1)[0] in STORE_SCHEMES:
        return
    import difflib

    close = difflib.get_close_matches(scheme.split("+", 1)[0], STORE_SCHEMES, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}://?)" if close else ""
    raise TrackingError(f"tracking URI {uri!r}: MLflow cannot open a '{scheme}://' store{hint}; allowed: {', '.join(s + '://' for s in STORE_SCHEMES)} or a path to a SQLite file")


def sqlite_path(uri: str) -> Path | None:
    return Path(uri[len("sqlite:///") :]) if uri.startswith("sqlite:///") else None


def optuna_storage_url(uri: str) -> str | None:
    """Optuna's study lives beside a SQLite MLflow store (``optuna.db``); None for other stores."""
    path = sqlite_path(uri)
    return f"sqlite:///{path.parent / 'optuna.db'}" if path is not None else None


def _artifact_root(uri: str) -> str | None:
    """Artifacts next to a SQLite store (absolute); a server decides its own."""
    path = sqlite_path(uri)
    return (path.parent / "mlartifacts").resolve().as_uri() if path else None


def check_store_readable(uri: str) -> None:
    """Reading commands never create a store: a SQLite file that does not exist is an error."""
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        raise TrackingError(f"no MLflow store at {path} (nothing has been run with this tracking URI); give --uri or run a sweep first")


def check_store_writable(uri: str) -> None:
    """Before launch: a SQLite store (and its artifact folder) must be creatable and writable."""
    path = sqlite_path(uri)
    if path is None:
        return
    parent = path.parent
    if not parent.is_dir():
        raise TrackingError(f"cannot create the MLflow store {path}: the directory {parent} does not exist")
    for target in (path if path.exists() else parent, parent / "mlartifacts"):
        if target.exists() and not os.access(target, os.W_OK):
            raise TrackingError(f"the MLflow store is read-only: cannot write {target} (check its permissions or give tracking.uri)")
    if path.exists():
        try:
            with sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=30) as db:
                db.execute("BEGIN IMMEDIATE")
                db.rollback()
        except sqlite3.DatabaseError as err:
            raise TrackingError(f"the MLflow store {path} cannot be written: {err}") from None


@contextlib.contextmanager
def store_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on the folder of a SQLite store (``flock`` on the folder itself, so no
    lock file is left beside it): two sweeps started together on a fresh store would otherwise
    both run its schema migrations, and one dies in alembic."""
    import fcntl

    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


_READY: set[str] = set()  # stores this process has created or checked


def ready_store(uri: str) -> MlflowClient:
    """A client of ``uri``, whose SQLite store (created on first use) is complete before anyone
    writes to it: its creation and migrations run under ``store_lock``, once per process."""
    path = sqlite_path(uri)
    if path is not None and uri not in _READY:
        with store_lock(path):
            MlflowClient(uri).search_experiments(max_results=1)  # creates and migrates the schema
        _READY.add(uri)
    return MlflowClient(uri)


#: the kind the MLflow UI shows for our experiments (model training, not GenAI); it still opens an
#: experiment on its overview, so the commands print the runs table's address (experiment_runs_page)
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


def experiment_id(client: MlflowClient, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None and exp.lifecycle_stage == "deleted":
        raise TrackingError(
            f"MLflow experiment {name!r} in {client.tracking_uri} is deleted; restore it "
            f"(mlflow experiments restore --experiment-id {exp.experiment_id}) or name another with tracking.experiment"
        )
    if exp is not None:
        return exp.experiment_id
    try:
        return client.create_experiment(name, artifact_location=_artifact_root(client.tracking_uri), tags=EXPERIMENT_KIND)
    except mlflow.exceptions.MlflowException as err:
        exp = client.get_experiment_by_name(name)  # created meanwhile by another process?
        if exp is None:
            raise TrackingError(f"cannot create MLflow experiment {name!r} in {client.tracking_uri}: {str(err).splitlines()[0][:300]}") from None
        return exp.experiment_id


def experiment_runs_page(uri: str, name: str, host: str = "http://127.0.0.1:5000") -> str:
    """The MLflow UI's address of the experiment's runs table (MLflow 3 opens an experiment on its
    GenAI overview otherwise); the UI's home when the experiment does not exist."""
    exp = MlflowClient(uri).get_experiment_by_name(name)
    return f"{host}/#/experiments/{exp.experiment_id}/runs" if exp is not None else host


def set_experiment_note(uri: str, name: str, text: str) -> None:
    """The experiment's description in the MLflow UI (``mlflow.note.content``)."""
    client = ready_store(uri)
    exp = experiment_id(client, name)
    client.set_experiment_tag(exp, keys.TAG_NOTE, text)
    for key, value in EXPERIMENT_KIND.items():
        client.set_experiment_tag(exp, key, value)


def git_commit(path: str | Path | None = None) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path or Path(__file__).parent, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _param_value(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 6000 else text[:5997] + "..."


def _now_ms() -> int:
    return int(time.time() * 1000)


class RunTracker:
    """One MLflow run, addressed by id."""

    def __init__(self, uri: str, run_id: str):
        self.client = MlflowClient(uri)
        self.uri, self.run_id = uri, run_id

    @classmethod
    def create(cls, uri: str, experiment: str, *, run_name: str | None = None, tags: dict[str, str] | None = None, parent_run_id: str | None = None) -> "RunTracker":
        client = ready_store(uri)
        all_tags = dict(tags or {})
        if parent_run_id:
            all_tags[keys.TAG_PARENT] = parent_run_id
        commit = git_commit()
        if commit:
            all_tags.setdefault("mlflow.source.git.commit", commit)
        run = client.create_run(experiment_id(client, experiment), run_name=run_name, tags=all_tags)
        return cls(uri, run.info.run_id)

    @classmethod
    def find(cls, uri: str, experiment: str, tags: dict[str, str]) -> "RunTracker | None":
        """The oldest run of ``experiment`` carrying all ``tags``, if any."""
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            return None
        query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
        runs = client.search_runs([exp.experiment_id], filter_string=query, order_by=["attributes.start_time ASC"], max_results=1)
        return cls(uri, runs[0].info.run_id) if runs else None

    @property
    def status(self) -> str:
        return self.client.get_run(self.run_id).info.status

    def log_params(self, params: dict[str, Any]) -> None:
        """Log params not yet on the run (a resumed run keeps its originals)."""
        have = self.client.get_run(self.run_id).data.params
        items = [Param(k, _param_value(v)) for k, v in sorted(params.items()) if k not in have]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def set_tags(self, tags: dict[str, Any]) -> None:
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def set_note(self, text: str) -> None:
        """The run's description in the MLflow UI (Markdown)."""
        self.set_tags({keys.TAG_NOTE: text})

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        ts = _now_ms()
        self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), ts, step) for k, v in metrics.items()])

    def log_new_metrics(self, metrics: dict[str, float]) -> None:
        """Summary values, logged once: a key already holding the same value is not logged again;
        a changed value (a resumed sweep) is logged as the key's next step."""
        have = self.client.get_run(self.run_id).data.metrics
        for key, value in metrics.items():
            if key in have and have[key] == float(value):
                continue
            step = self.last_step(key) + 1 if key in have else 0
            self.log_metrics({key: value}, step)

    def last_step(self, key: str) -> int:
        """The largest step logged for ``key``; -1 when none is."""
        return max((m.step for m in self.client.get_metric_history(self.run_id, key)), default=-1)

    def log_dataset(self, name: str, digest: str, source: str, profile: dict[str, Any], context: str) -> None:
        """A dataset in the run's Dataset column (``mlflow.log_input``), once per context."""
        have = self.client.get_run(self.run_id).inputs
        for existing in (have.dataset_inputs if have else []):
            if any(t.key == "mlflow.data.context" and t.value == context for t in existing.tags):
                return
        dataset = Dataset(name=name, digest=digest, source_type="local", source=json.dumps({"uri": source}), profile=json.dumps(profile))
        self.client.log_inputs(self.run_id, datasets=[DatasetInput(dataset, tags=[InputTag("mlflow.data.context", context)])])

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_text(self, text: str, artifact_file: str) -> None:
        self.client.log_text(self.run_id, text, artifact_file)

    def log_figure(self, figure: Any, name: str, artifact_dir: str = "figures") -> None:
        """Save a matplotlib figure as ``<artifact_dir>/<name>`` (``name`` may hold a sub-folder)."""
        sub = Path(artifact_dir) / name
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / sub.name
            figure.savefig(path, dpi=120, bbox_inches="tight")
            self.log_artifact(path, str(sub.parent))

    def set_status(self, status: str) -> None:
        """``RUNNING`` (re-attach), or a terminal ``FINISHED`` / ``FAILED`` / ``KILLED``."""
        if status == "RUNNING":
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            self.client.set_terminated(self.run_id, status=status)


class EpochLogger:
    """Rank 0's per-epoch, running and final metrics, skipping steps a previous attempt logged;
    the running reports' in-epoch progress as the run's ``mjp.progress`` tag (what the console
    shows); MLflow's system metrics every ``tracking.system_metrics_s`` seconds while it trains."""

    def __init__(self, tracker: RunTracker):
        self.tracker = tracker
        self.last_epoch = tracker.last_step(keys.VAL_TOP1)
        self.last_running = tracker.last_step(keys.TRAIN_LOSS + keys.RUNNING_SUFFIX)
        self.system_metrics = start_system_metrics(tracker)

    def running(self, metrics: dict[str, float], step: int) -> None:
        progress = Progress.from_report(metrics)
        if progress is not None:
            self.tracker.set_tags({PROGRESS_TAG: progress.to_tag()})
        if step > self.last_running:
            self.tracker.log_metrics({f"{k}{keys.RUNNING_SUFFIX}": v for k, v in metrics.items() if k.startswith("train/loss")}, step)

    def epoch(self, metrics: dict[str, float], epoch: int) -> None:
        if epoch > self.last_epoch:
            self.tracker.log_metrics(metrics, step=epoch)

    def final(self, metrics: dict[str, float]) -> None:
        """End-of-training evaluation: one value per key (no epoch axis); system metrics stop."""
        self.tracker.log_new_metrics(metrics)
        if self.system_metrics is not None:
            stop_system_metrics(self.system_metrics)
            self.system_metrics = None


class MlflowProgress:
    """``trial_id -> Progress | None``: the progress tag of a trial's MLflow run (a sweep's child,
    found by its trial id under ``parent_run_id``, or the one training ``run_id``)."""

    def __init__(self, uri: str, experiment: str, parent_run_id: str | None = None, run_id: str | None = None):
        self.uri, self.experiment, self.parent_run_id, self.run_id = uri, experiment, parent_run_id, run_id
        self._runs: dict[str, str] = {}  # trial id -> run id, looked up once

    def __call__(self, trial_id: str) -> Progress | None:
        run_id = self.run_id or self._runs.get(trial_id)
        if run_id is None:
            if self.parent_run_id is None:
                return None
            found = RunTracker.find(self.uri, self.experiment, {keys.TAG_TRIAL_ID: trial_id, keys.TAG_PARENT: self.parent_run_id})
            if found is None:
                return None
            run_id = self._runs[trial_id] = found.run_id
        return Progress.from_tag(MlflowClient(self.uri).get_run(run_id).data.tags.get(PROGRESS_TAG))


def start_system_metrics(tracker: RunTracker) -> Any:
    """MLflow's system-metrics monitor on ``tracker``'s run, sampling every
    ``tracking.system_metrics_s`` seconds as the run's params say (None when off). It stops at
    ``finish()`` or by itself once the run is no longer RUNNING. psutil comes with Ray (its
    vendored copy, importable once Ray is); GPU metrics need pynvml (``nvidia-ml-py``)."""
    interval = tracker.client.get_run(tracker.run_id).data.params.get("tracking.system_metrics_s")
    if interval in (None, "", "None"):
        return None
    try:
        import psutil  # noqa: F401
    except ImportError:
        tracker.set_tags({"mjp.system_metrics": "off: psutil is not importable in the training process"})
        return None
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    monitor = SystemMetricsMonitor(tracker.run_id, sampling_interval=float(interval), resume_logging=True, tracking_uri=tracker.uri)
    monitor.start()
    return monitor


def stop_system_metrics(monitor: Any) -> None:
    """Stop the monitor and log one last sample: MLflow's own ``finish()`` drops the interval in
    progress, so a training shorter than one interval would have none."""
    monitor.finish()
    monitor.collect_metrics()
    monitor.publish_metrics(monitor.aggregate_metrics())
    monitor.mlflow_logger.flush()


def run_config_tree(uri: str, run_id: str) -> dict[str, Any]:
    """The nested TrainConfig dict a run logged as flat params."""
    import yaml

    from trainables.overrides import unflatten

    from trainables.config import TrainConfig

    params = MlflowClient(uri).get_run(run_id).data.params
    sections = tuple(f"{name}." for name in TrainConfig.model_fields)  # table4.* and the like are not config
    return unflatten({k: yaml.safe_load(v) if v not in ("", "None") else None for k, v in params.items() if k.startswith(sections)})


def get_run_or_fail(uri: str, run_id: str) -> Any:
    """The MLflow run ``run_id``; ``TrackingError`` naming the id and the store when there is none."""
    check_store_readable(uri)
    try:
        return MlflowClient(uri).get_run(run_id)
    except mlflow.exceptions.MlflowException:
        raise TrackingError(f"no MLflow run with id {run_id!r} in {uri}; `mjp sweep status` lists the sweeps and their runs") from None


def download_run_checkpoint(uri: str, run_id: str, into: str) -> Path:
    """The model weights a run logged (``checkpoint/model.pt``), downloaded into ``into``."""
    try:
        return Path(MlflowClient(uri).download_artifacts(run_id, "checkpoint/model.pt", into))
    except (mlflow.exceptions.MlflowException, OSError):
        raise TrackingError(f"MLflow run {run_id} has no checkpoint/model.pt artifact (was it trained with tracking.log_checkpoint=false, or did it fail?)") from None
