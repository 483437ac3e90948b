"""MLflow adapter: the only module of the training side that imports mlflow.

Runs are addressed by id through ``MlflowClient`` (no global active run, so Ray workers and Tune
drivers can share a process safely). A resumed run re-attaches to its id; params already logged
are not logged again.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

#: MLflow tag names used across the platform.
TAG_PARENT = "mlflow.parentRunId"
TAG_TRIAL_ID = "mjp.trial_id"
TAG_STUDY = "mjp.study"
TAG_VARIANT = "mjp.variant"
TAG_KIND = "mjp.kind"  # "train" | "sweep"
TAG_SAMPLE_PREFIX = "mjp.sample."  # + sampled key: the value a sweep chose for this trial


def tracking_uri(configured: str | None = None, base_dir: str | Path | None = None) -> str:
    """The tracking URI: ``configured``, else ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<abs>/mlflow.db``.

    Relative SQLite paths become absolute (Ray workers run in other directories).
    """
    uri = configured or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = "sqlite:///" + str((Path(base_dir or Path.cwd()) / uri[len("sqlite:///") :]).resolve())
    elif "://" not in uri:  # a bare path: a SQLite file
        uri = "sqlite:///" + str((Path(base_dir or Path.cwd()) / uri).resolve())
    return uri


def _artifact_root(uri: str) -> str | None:
    """Artifacts next to a SQLite store (absolute); a server decides its own."""
    if uri.startswith("sqlite:///"):
        return (Path(uri[len("sqlite:///") :]).parent / "mlartifacts").resolve().as_uri()
    return None


def experiment_id(client: MlflowClient, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    try:
        return client.create_experiment(name, artifact_location=_artifact_root(client.tracking_uri))
    except mlflow.exceptions.MlflowException:  # created concurrently by another process
        return client.get_experiment_by_name(name).experiment_id


def git_commit(path: str | Path | None = None) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path or Path(__file__).parent, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


class RunTracker:
    """One MLflow run, addressed by id."""

    def __init__(self, uri: str, run_id: str):
        self.client = MlflowClient(uri)
        self.uri, self.run_id = uri, run_id

    @classmethod
    def create(cls, uri: str, experiment: str, *, run_name: str | None = None, tags: dict[str, str] | None = None, parent_run_id: str | None = None) -> "RunTracker":
        client = MlflowClient(uri)
        all_tags = dict(tags or {})
        if parent_run_id:
            all_tags[TAG_PARENT] = parent_run_id
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

    def set_tags(self, tags: dict[str, str]) -> None:
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        ts = _now_ms()
        self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), ts, step) for k, v in metrics.items()])

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_figure(self, figure: Any, name: str) -> None:
        """Save a matplotlib figure as ``figures/<name>``."""
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / name
            figure.savefig(path, dpi=120, bbox_inches="tight")
            self.log_artifact(path, "figures")

    def set_status(self, status: str) -> None:
        """``RUNNING`` (re-attach), or a terminal ``FINISHED`` / ``FAILED`` / ``KILLED``."""
        if status == "RUNNING":
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            self.client.set_terminated(self.run_id, status=status)


def _param_value(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 6000 else text[:5997] + "..."


def _now_ms() -> int:
    return int(time.time() * 1000)


def run_config_tree(uri: str, run_id: str) -> dict[str, Any]:
    """The nested TrainConfig dict a run logged as flat params."""
    from trainables.config import unflatten

    import yaml

    params = MlflowClient(uri).get_run(run_id).data.params
    return unflatten({k: yaml.safe_load(v) if v not in ("", "None") else None for k, v in params.items()})


def download_run_checkpoint(uri: str, run_id: str, into: str) -> Path:
    """The model weights a run logged (``checkpoint/model.pt``), downloaded into ``into``."""
    return Path(MlflowClient(uri).download_artifacts(run_id, "checkpoint/model.pt", into))
