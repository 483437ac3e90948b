"""MLflow -> a tidy pandas DataFrame: one row per training run.

Columns: ``run_id``, ``parent_run_id``, ``status``, ``study``, ``trial_id``, ``variant``, every
config key (``mjp.mask_ratio``, ...; numbers parsed), every metric (``val/top1``, ...), and
``sample.<key>`` for each value a sweep sampled.
"""

from __future__ import annotations

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient

TAG_COLUMNS = {
    "tags.mjp.study": "study",
    "tags.mjp.trial_id": "trial_id",
    "tags.mjp.variant": "variant",
    "tags.mlflow.parentRunId": "parent_run_id",
    "tags.mlflow.runName": "run_name",
    "tags.mjp.kind": "kind",
    "tags.mjp.error": "error",
}


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
        return pd.DataFrame(columns=["run_id", "status", *TAG_COLUMNS.values()])
    out = pd.DataFrame({"run_id": raw["run_id"], "status": raw["status"], "start_time": raw["start_time"]})
    for col, name in TAG_COLUMNS.items():
        out[name] = raw[col] if col in raw else None
    for col in raw.columns:
        if col.startswith("params."):
            out[col[len("params.") :]] = raw[col].map(_parse)
        elif col.startswith("metrics."):
            out[col[len("metrics.") :]] = raw[col]
        elif col.startswith("tags.mjp.sample."):
            out["sample." + col[len("tags.mjp.sample.") :]] = raw[col].map(_parse)
    return out.copy()


def load_runs(uri: str, experiment: str | None = None, *, parent_run_id: str | None = None) -> pd.DataFrame:
    """Training runs (not sweep parents) of ``experiment`` (all experiments when None)."""
    mlflow.set_tracking_uri(uri)
    query = f"tags.`mlflow.parentRunId` = '{parent_run_id}'" if parent_run_id else ""
    if experiment is not None:
        if MlflowClient(uri).get_experiment_by_name(experiment) is None:
            raise LookupError(f"no MLflow experiment named {experiment!r} at {uri}")
        raw = mlflow.search_runs(experiment_names=[experiment], filter_string=query, output_format="pandas")
    else:
        raw = mlflow.search_runs(search_all_experiments=True, filter_string=query, output_format="pandas")
    runs = tidy(raw)
    return runs[runs["kind"] != "sweep"].reset_index(drop=True)


def load_sweeps(uri: str, study: str | None = None) -> pd.DataFrame:
    """Sweep parent runs (newest first), optionally of one study."""
    mlflow.set_tracking_uri(uri)
    query = "tags.`mjp.kind` = 'sweep'" + (f" and tags.`mjp.study` = '{study}'" if study else "")
    raw = mlflow.search_runs(search_all_experiments=True, filter_string=query, order_by=["attributes.start_time DESC"], output_format="pandas")
    return tidy(raw)
