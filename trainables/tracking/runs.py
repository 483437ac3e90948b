"""One MLflow run, addressed by id: ``RunTracker`` (params, metrics, tags, artifacts, status, child
runs), the progress a trial reports, a run's config and its checkpoint read back.

Runs are addressed by id through ``MlflowClient`` (no global active run, so Ray workers and Tune
drivers can share a process safely). A resumed run re-attaches to its id: params already logged
are not logged again, and ``EpochLogger`` skips the steps logged before the interruption.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from trainables.scratch import scratch_folder
from trainables.tracking import schema
from trainables.tracking.credentials import redact
from trainables.tracking.progress import Progress
from trainables.tracking.store import TrackingError, check_store_readable, experiment_id, git_commit, ready_store


def _param_value(value: Any) -> str:
    text = redact(str(value))  # a URI's user:password never becomes a param (a config file may hold one)
    return text if len(text) <= 6000 else text[:5997] + "..."


def _now_ms() -> int:
    return int(time.time() * 1000)


class RunTracker:
    """One MLflow run, addressed by id."""

    def __init__(self, uri: str, run_id: str):
        self._client = MlflowClient(uri)
        self.uri, self.run_id = uri, run_id

    @classmethod
    def create(
        cls, uri: str, experiment: str, *, run_name: str | None = None, tags: dict[str, str] | None = None, parent_run_id: str | None = None
    ) -> RunTracker:
        client = ready_store(uri)
        all_tags = dict(tags or {})
        if parent_run_id:
            all_tags[schema.TAG_PARENT] = parent_run_id
        commit = git_commit()
        if commit:
            all_tags.setdefault(schema.TAG_GIT_COMMIT, commit)
        run = client.create_run(experiment_id(client, experiment), run_name=run_name, tags=all_tags)
        return cls(uri, run.info.run_id)

    @classmethod
    def find(cls, uri: str, experiment: str, tags: dict[str, str]) -> RunTracker | None:
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
        return self._client.get_run(self.run_id).info.status

    def deleted(self) -> str | None:
        """``"run"`` or ``"experiment"`` when this run, or its experiment, was deleted (MLflow keeps
        deleted ones until ``mlflow gc``, refusing writes to them); None while both are active."""
        run = self.run()
        if run.info.lifecycle_stage == "deleted":
            return "run"
        return "experiment" if self._client.get_experiment(run.info.experiment_id).lifecycle_stage == "deleted" else None

    def run(self) -> Any:
        """The run as MLflow has it now (an MLflow ``Run``: ``.info``, ``.data``)."""
        return self._client.get_run(self.run_id)

    def tags(self) -> dict[str, str]:
        return dict(self.run().data.tags)

    def delete_tag(self, key: str) -> None:
        """Remove ``key`` from the run's tags, if it is there."""
        if key in self.tags():
            self._client.delete_tag(self.run_id, key)

    def children(self, condition: str = "") -> list[Any]:
        """The child runs (MLflow ``Run`` entities: ``.info``, ``.data.tags``) meeting ``condition``
        (an MLflow filter joined with ``and``), oldest first."""
        experiment = self._client.get_run(self.run_id).info.experiment_id
        query = schema.tag_filter(schema.TAG_PARENT, self.run_id) + (f" and {condition}" if condition else "")
        return self._client.search_runs([experiment], filter_string=query, order_by=["attributes.start_time ASC"])

    def log_params(self, params: dict[str, Any]) -> None:
        """Log params not yet on the run (a resumed run keeps its originals)."""
        have = self._client.get_run(self.run_id).data.params
        items = [Param(k, _param_value(v)) for k, v in sorted(params.items()) if k not in have]
        for i in range(0, len(items), 100):
            self._client.log_batch(self.run_id, params=items[i : i + 100])

    def set_tags(self, tags: dict[str, Any]) -> None:
        self._client.log_batch(self.run_id, tags=[RunTag(k, redact(str(v))) for k, v in tags.items()])

    def set_note(self, text: str) -> None:
        """The run's description in the MLflow UI (Markdown), cut to what MLflow keeps in a tag."""
        self.set_tags({schema.TAG_NOTE: text if len(text) <= 8000 else text[:7997] + "..."})

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        ts = _now_ms()
        self._client.log_batch(self.run_id, metrics=[Metric(k, float(v), ts, step) for k, v in metrics.items()])

    def log_new_metrics(self, metrics: dict[str, float]) -> None:
        """Summary values, logged once: a key already holding the same value is not logged again;
        a changed value (a resumed sweep) is logged as the key's next step."""
        have = self._client.get_run(self.run_id).data.metrics
        for key, value in metrics.items():
            if key in have and have[key] == float(value):
                continue
            step = self.last_step(key) + 1 if key in have else 0
            self.log_metrics({key: value}, step)

    def last_step(self, key: str) -> int:
        """The largest step logged for ``key``; -1 when none is."""
        return max((m.step for m in self._client.get_metric_history(self.run_id, key)), default=-1)

    def log_dataset(self, name: str, digest: str, source: str, profile: dict[str, Any], context: str) -> None:
        """A dataset in the run's Dataset column (``mlflow.log_input``), once per context."""
        have = self._client.get_run(self.run_id).inputs
        for existing in have.dataset_inputs if have else []:
            if any(t.key == schema.TAG_DATA_CONTEXT and t.value == context for t in existing.tags):
                return
        dataset = Dataset(name=name, digest=digest, source_type="local", source=json.dumps({"uri": source}), profile=json.dumps(profile))
        self._client.log_inputs(self.run_id, datasets=[DatasetInput(dataset, tags=[InputTag(schema.TAG_DATA_CONTEXT, context)])])

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self._client.log_artifact(self.run_id, str(path), artifact_path)

    def log_text(self, text: str, artifact_file: str) -> None:
        self._client.log_text(self.run_id, text, artifact_file)

    def log_figure(self, figure: Any, name: str, artifact_dir: str = "figures") -> None:
        """Save a matplotlib figure as ``<artifact_dir>/<name>`` (``name`` may hold a sub-folder)."""
        sub = Path(artifact_dir) / name
        with scratch_folder() as d:
            path = d / sub.name
            figure.savefig(path, dpi=120, bbox_inches="tight")
            self.log_artifact(path, str(sub.parent))

    def set_status(self, status: str) -> None:
        """``RUNNING`` (re-attach), or a terminal ``FINISHED`` / ``FAILED`` / ``KILLED``."""
        if status == "RUNNING":
            self._client.update_run(self.run_id, status="RUNNING")
        else:
            self._client.set_terminated(self.run_id, status=status)


class MlflowProgress:
    """``trial_id -> Progress | None``: the progress tag of a trial's MLflow run (a sweep's child,
    found by its trial id under ``parent_run_id``, or the one training ``run_id``).

    A display's read, made from the driver's loop: tried once, for at most ``seconds``, and None
    when it fails. MLflow retries a server that stopped answering for minutes, and the loop, held in
    those retries, would not act on Ctrl-C or SIGTERM."""

    seconds = 5.0

    def __init__(self, uri: str, experiment: str, parent_run_id: str | None = None, run_id: str | None = None):
        self.uri, self.experiment, self.parent_run_id, self.run_id = uri, experiment, parent_run_id, run_id
        self._runs: dict[str, str] = {}  # trial id -> run id, looked up once

    def __call__(self, trial_id: str) -> Progress | None:
        from trainables.tracking.store import bounded_http

        with bounded_http(self.seconds):
            try:
                return self._read(trial_id)
            except Exception:  # noqa: BLE001 - a display's read: whatever failed, no progress is shown
                return None

    def _read(self, trial_id: str) -> Progress | None:
        run_id = self.run_id or self._runs.get(trial_id)
        if run_id is None:
            if self.parent_run_id is None:
                return None
            found = RunTracker.find(self.uri, self.experiment, {schema.TAG_TRIAL_ID: trial_id, schema.TAG_PARENT: self.parent_run_id})
            if found is None:
                return None
            run_id = self._runs[trial_id] = found.run_id
        return Progress.from_tag(MlflowClient(self.uri).get_run(run_id).data.tags.get(schema.TAG_PROGRESS))


def run_config_tree(uri: str, run_id: str) -> dict[str, Any]:
    """The nested TrainConfig dict a run logged as flat params."""
    import yaml

    from trainables.config.overrides import unflatten
    from trainables.config.schema import TrainConfig

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
        return Path(MlflowClient(uri).download_artifacts(run_id, schema.ARTIFACT_CHECKPOINT, into))
    except (mlflow.exceptions.MlflowException, OSError):
        raise TrackingError(
            f"MLflow run {run_id} has no {schema.ARTIFACT_CHECKPOINT} artifact "
            f"(was it trained with tracking.log_checkpoint=false, or did it fail?)"
        ) from None


def restore_hint(uri: str, run_id: str, deleted: str) -> str:
    """The commands that bring back a deleted run (or its experiment) of the store at ``uri``."""
    if deleted == "run":
        return f"`MLFLOW_TRACKING_URI={uri} mlflow runs restore --run-id {run_id}`"
    experiment = MlflowClient(uri).get_run(run_id).info.experiment_id
    return f"`MLFLOW_TRACKING_URI={uri} mlflow experiments restore --experiment-id {experiment}`"


def run_identity(uri: str, run_id: str) -> tuple[str, str] | str:
    """The run ``run_id`` in the store at ``uri`` as (run name, experiment name), or, in words, why
    the store did not give it: a check of which store this is, so MLflow's HTTP retries are
    bounded (``store.bounded_http``) and any failure is an answer, not a traceback."""
    from trainables.tracking.store import bounded_http

    with bounded_http():
        try:
            client = MlflowClient(uri)
            run = client.get_run(run_id)
            return run.info.run_name, client.get_experiment(run.info.experiment_id).name
        except Exception as err:  # noqa: BLE001 - any failure: not this run's store
            text = str(err).strip()
            return text.splitlines()[0][:200] if text else type(err).__name__
