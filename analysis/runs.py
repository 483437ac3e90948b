"""MLflow -> a tidy pandas DataFrame: one row per training run.

Columns: ``run_id``, ``parent_run_id``, ``status``, ``study``, ``trial_id``, ``variant``, every
config key (``mjp.mask_ratio``, ...; numbers parsed), every metric (``val/top1``, ...), and
``sample.<key>`` for each value a sweep sampled.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient

from trainables.tracking import schema

#: ``mlflow.search_runs``'s tag columns -> the tidy frame's
TAG_COLUMNS = {f"tags.{tag}": column for tag, column in schema.RUN_COLUMNS.items()}
SAMPLE_COLUMN = f"tags.{schema.TAG_SAMPLE_PREFIX}"


def _parse(value: object) -> object:
    if not isinstance(value, str):
        return value
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return {"True": True, "False": False, "None": None}.get(value, value)


def tidy(raw: pd.DataFrame) -> pd.DataFrame:
    """``mlflow.search_runs`` output -> the tidy frame described in the module doc."""
    if raw.empty:
        return pd.DataFrame(columns=["run_id", "experiment_id", "status", *TAG_COLUMNS.values()])
    columns: dict[str, pd.Series | None] = {
        "run_id": raw["run_id"],
        "experiment_id": raw["experiment_id"],
        "status": raw["status"],
        "start_time": raw["start_time"],
    }
    for col, name in TAG_COLUMNS.items():
        columns[name] = raw.get(col)
    for col in raw.columns:
        if col.startswith("params."):
            columns[col[len("params.") :]] = raw[col].map(_parse)
        elif col.startswith("metrics."):
            columns[col[len("metrics.") :]] = raw[col]
        elif col.startswith(SAMPLE_COLUMN):
            columns["sample." + col[len(SAMPLE_COLUMN) :]] = raw[col].map(_parse)
    # one frame built at once: hundreds of metric columns inserted one by one fragment it
    return pd.DataFrame({k: v if v is not None else pd.Series(None, index=raw.index, dtype=object) for k, v in columns.items()})


def load_runs(uri: str, experiment: str | None = None, *, parent_run_id: str | None = None) -> pd.DataFrame:
    """Training runs (not sweep parents) of ``experiment`` (all experiments when None)."""
    mlflow.set_tracking_uri(uri)
    query = schema.tag_filter(schema.TAG_PARENT, parent_run_id) if parent_run_id else ""
    if experiment is not None:
        if MlflowClient(uri).get_experiment_by_name(experiment) is None:
            raise LookupError(f"no MLflow experiment named {experiment!r} at {uri}")
        raw = mlflow.search_runs(experiment_names=[experiment], filter_string=query, output_format="pandas")
    else:
        raw = mlflow.search_runs(search_all_experiments=True, filter_string=query, output_format="pandas")
    runs = tidy(raw)
    return runs[runs["kind"] != "sweep"].reset_index(drop=True)


def _sweeps_query(study: str | None) -> str:
    """MLflow's filter for sweep parent runs (of ``study``)."""
    return schema.tag_filter(schema.TAG_KIND, schema.KIND_SWEEP) + (f" and {schema.tag_filter(schema.TAG_STUDY, study)}" if study else "")


def load_sweeps(uri: str, study: str | None = None) -> pd.DataFrame:
    """Sweep parent runs (newest first), optionally of one study."""
    mlflow.set_tracking_uri(uri)
    query = _sweeps_query(study)
    raw = mlflow.search_runs(
        search_all_experiments=True, filter_string=query, order_by=["attributes.start_time DESC"], output_format="pandas"
    )
    return tidy(raw)


def recorded_studies(uri: str) -> set[str]:
    """The names of the studies that have sweeps in the store."""
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=_sweeps_query(None), max_results=10_000) if experiments else []
    return {r.data.tags[schema.TAG_STUDY] for r in runs if schema.TAG_STUDY in r.data.tags}


@dataclass
class TrialSummary:
    """One trial of a sweep: its MLflow child run, state and latest metric values."""

    run_id: str
    name: str
    status: str
    tags: dict[str, str]
    metrics: dict[str, float]


@dataclass
class SweepSummary:
    """A sweep's parent run and its trials (oldest first)."""

    run_id: str
    run_name: str
    status: str
    tags: dict[str, str]
    params: schema.SweepParams
    trials: list[TrialSummary]
    deleted: bool = False  # the parent run, or its experiment, is deleted in MLflow

    @property
    def trial_states(self) -> Counter:
        return Counter(t.status.lower() for t in self.trials)


def _summary(client: MlflowClient, parent: Any) -> SweepSummary:
    children = client.search_runs(
        [parent.info.experiment_id],
        filter_string=schema.tag_filter(schema.TAG_PARENT, parent.info.run_id),
        order_by=["attributes.start_time ASC"],
    )
    trials = [TrialSummary(c.info.run_id, c.info.run_name, c.info.status, dict(c.data.tags), dict(c.data.metrics)) for c in children]
    return SweepSummary(
        parent.info.run_id,
        parent.info.run_name,
        parent.info.status,
        dict(parent.data.tags),
        schema.SweepParams.from_params(dict(parent.data.params)),
        trials,
        parent.info.lifecycle_stage == "deleted" or client.get_experiment(parent.info.experiment_id).lifecycle_stage == "deleted",
    )


def sweep_summaries(uri: str, study: str | None = None, limit: int = 10) -> list[SweepSummary]:
    """Newest first: every sweep parent run (of ``study``) and its trials."""
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    runs = client.search_runs(experiments, filter_string=_sweeps_query(study), order_by=["attributes.start_time DESC"], max_results=limit)
    return [_summary(client, s) for s in runs]


def sweep_named(uri: str, name: str) -> str | None:
    """The parent run id of the sweep named ``name`` (what ``mjp sweep run`` printed, e.g.
    ``quickstart-20261127-014200``), or None when the store has none of that name."""
    if "'" in name:  # no sweep's name has one (a study's name and a time); MLflow's filter could not quote it
        return None
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    query = f"{_sweeps_query(None)} and attributes.run_name = '{name}'"
    runs = client.search_runs(experiments, filter_string=query, max_results=1) if experiments else []
    return runs[0].info.run_id if runs else None


def sweep_summary(uri: str, parent_run_id: str) -> SweepSummary:
    """One sweep, by its parent run id."""
    client = MlflowClient(uri)
    return _summary(client, client.get_run(parent_run_id))


def load_histories(uri: str, run_ids: list[str], metric_keys: tuple[str, ...]) -> pd.DataFrame:
    """Per-epoch values of ``metric_keys`` for ``run_ids``: columns run_id, key, step, value."""
    client = MlflowClient(uri)
    rows = [(run_id, key, m.step, m.value) for run_id in run_ids for key in metric_keys for m in client.get_metric_history(run_id, key)]
    return pd.DataFrame(rows, columns=["run_id", "key", "step", "value"])


@dataclass
class SweepRecord:
    """What a sweep logged on its parent run: settings, tags, its study file, its Pareto front."""

    run_id: str
    run_name: str
    status: str
    params: schema.SweepParams
    tags: dict[str, str]
    study_yaml: str
    pareto: list[dict]


def sweep_record(uri: str, parent_run_id: str) -> SweepRecord:
    import json
    import tempfile
    from pathlib import Path

    client = MlflowClient(uri)
    run = client.get_run(parent_run_id)
    study_yaml, pareto = "", []
    with tempfile.TemporaryDirectory() as d:
        try:
            files = client.list_artifacts(parent_run_id, schema.ARTIFACT_STUDY_DIR)
            if files:
                study_yaml = Path(client.download_artifacts(parent_run_id, files[0].path, d)).read_text()
        except (mlflow.exceptions.MlflowException, OSError):  # an artifact store this machine cannot read
            study_yaml = ""
        try:
            pareto = json.loads(Path(client.download_artifacts(parent_run_id, schema.ARTIFACT_PARETO, d)).read_text())
        except (mlflow.exceptions.MlflowException, OSError):  # a single-objective sweep has no front
            pareto = []
    return SweepRecord(
        parent_run_id,
        run.info.run_name,
        run.info.status,
        schema.SweepParams.from_params(dict(run.data.params)),
        dict(run.data.tags),
        study_yaml,
        pareto,
    )


def run_artifact_bytes(uri: str, run_id: str, paths: tuple[str, ...]) -> dict[str, bytes]:
    """The artifacts at ``paths`` that the run has (e.g. ``figures/pe/umap_2d.png``), as bytes."""
    import tempfile
    from pathlib import Path

    client = MlflowClient(uri)
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for path in paths:
            try:
                out[path] = Path(client.download_artifacts(run_id, path, d)).read_bytes()
            except (mlflow.exceptions.MlflowException, OSError):  # not logged by this run, or unreadable here
                continue
    return out
