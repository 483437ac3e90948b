"""ASHA end to end on CPU: the trials it stops early and those it lets finish each end with a final
status, their metrics and progress, and the Optuna mirror holds every trial."""

import io
import os

import mlflow
import optuna
import pytest

from analysis.runs import load_runs
from mjp import keys
from sweep.study.load import load_study
from sweep.tuner.run import run_sweep
from tests.sweep.tuner.tiny_studies import TINY, study_file
from trainables.tracking import schema
from trainables.tracking.progress import Progress

pytestmark = pytest.mark.slow


def test_asha_leaves_every_child_run_with_a_final_status(tmp_path, local_ray):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    # Two learning rates, one that learns and one that cannot; seed 2 draws them good, good, good,
    # bad: the bad trial reaches rung 1 after good ones, below their median, whatever the timing.
    space = {"optim.base_lr": {"type": "choice", "values": [0.5, 1e-7]}}
    study = load_study(
        study_file(
            tmp_path,
            space,
            search={"algorithm": "random", "seed": 2},
            budget={"trials": 4, "max_concurrent": 2},
            scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2},
            train={**TINY, "optim": {"epochs": 4, "warmup_epochs": 0}},
        ),
        overrides={"tracking.uri": uri, "tracking.system_metrics_s": 0.2, "runtime.log_every": 2},
    )
    outcome = run_sweep(study, storage=str(tmp_path / "ray"), stream=io.StringIO())
    assert len(outcome.trials) == 4 and not outcome.failed
    runs = load_runs(uri, "sweep-test", parent_run_id=outcome.parent_run_id)
    assert len(runs) == 4 and set(runs.status) == {"FINISHED"}
    epochs = {r.run_id: len(mlflow.MlflowClient(uri).get_metric_history(r.run_id, keys.VAL_TOP1)) for r in runs.itertuples()}
    stopped = [r for r in runs.itertuples() if epochs[r.run_id] < 4]
    assert stopped, "ASHA stopped no trial: the test space is too easy"
    client = mlflow.MlflowClient(uri)
    for r in runs.itertuples():  # ASHA ends every trial, even at its last epoch: only the early ones are "stopped"
        run = client.get_run(r.run_id)
        assert (schema.TAG_STOPPED in run.data.tags) == (epochs[r.run_id] < 4)
        wait = [m.value for m in client.get_metric_history(r.run_id, "perf/data_wait_frac")]
        assert len(wait) == epochs[r.run_id] and all(0 <= w < 1 for w in wait)
        assert Progress.from_tag(run.data.tags["mjp.progress"]).steps == 8  # 256 images / 32 per batch
    full = [r.run_id for r in runs.itertuples() if epochs[r.run_id] == 4]
    assert any("system/cpu_utilization_percentage" in client.get_run(i).data.metrics for i in full)
    # the Optuna mirror: every trial, named objective, a real duration, its MLflow run and variant
    mirrored = optuna.load_study(study_name=os.path.basename(outcome.experiment_dir), storage=f"sqlite:///{tmp_path}/optuna.db")
    assert mirrored.metric_names == ["val/top1"] and len(mirrored.trials) == 4
    assert {t.user_attrs["mlflow_run_id"] for t in mirrored.trials} == set(runs.run_id)
    assert all(t.duration.total_seconds() > 0 and t.user_attrs["variant"] for t in mirrored.trials)
