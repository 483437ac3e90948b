"""Sweeps end to end on CPU: Ray Tune + Optuna + in-process trials + a temporary SQLite MLflow,
read back by the analysis; the console as a user in a pipe sees it."""

import io

import mlflow
import pytest
import yaml

from analysis.runs import load_runs, load_sweeps
from analysis.tables import paper_table
from mjp import keys
from sweep.run import resume_sweep, run_sweep
from sweep.study import load_study

pytestmark = pytest.mark.slow

TINY = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 2, "num_heads": 2}},
    "data": {"batch_size": 32, "train_limit": 256, "val_limit": 64},
    "optim": {"epochs": 2},
    "eval": {"shuffle_ratios": [0.0, 0.9]},
    "tracking": {"experiment": "sweep-test"},
}


def study_file(tmp_path, space, **extra):
    path = tmp_path / "study.yaml"
    study = {
        "name": "e2e", "base": "trainables/configs/digits_vit_tiny.yaml", "train": TINY, "space": space,
        "objective": {"metric": "val/top1", "mode": "max"}, "search": {"algorithm": "grid"}, "budget": {"max_concurrent": 2}, **extra,
    }
    path.write_text(yaml.safe_dump(study))
    return str(path)


def test_two_trial_sweep_makes_one_parent_and_two_children(tmp_path, local_ray):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    space = {
        "mjp.variant": {"type": "grid", "values": ["A", "J"]},
        "speed": {"type": "grid", "values": ["fast"], "presets": {"fast": {"optim.base_lr": 0.05}}},
    }
    study = load_study(study_file(tmp_path, space), overrides={"tracking.uri": uri})
    console = io.StringIO()
    outcome = run_sweep(study, storage=str(tmp_path / "ray"), stream=console)
    assert len(outcome.trials) == 2 and not outcome.failed and not outcome.interrupted

    text = console.getvalue()
    assert "Traceback" not in text and "\x1b[" not in text, text
    assert "A baseline fast seed 0" in text and "J jp_unk_dal_mlp fast seed 0" in text
    assert len(text.splitlines()) < 20, text

    sweeps = load_sweeps(uri, "e2e")
    assert len(sweeps) == 1 and sweeps.run_id[0] == outcome.parent_run_id and sweeps.status[0] == "FINISHED"
    runs = load_runs(uri, "sweep-test", parent_run_id=outcome.parent_run_id)
    assert len(runs) == 2 and set(runs.status) == {"FINISHED"}
    assert set(runs["run_name"]) == {"A-baseline-fast-s0", "J-jp_unk_dal_mlp-fast-s0"}
    assert set(runs["variant"]) == {"baseline", "jp_unk_dal_mlp"} and set(runs["optim.base_lr"]) == {0.05}  # the preset reached the trial
    for key in ("val/top1", "val/consistency", "val/diff_norm", "val/top1_shuffled_0.9"):
        assert runs[key].between(0, 100).all(), key
    assert len(mlflow.search_runs(experiment_names=["sweep-test"])) == 3  # nothing else was created

    client = mlflow.MlflowClient(uri)
    parent = client.get_run(outcome.parent_run_id).data
    assert parent.params["search.algorithm"] == "grid" and "best/val/top1" in parent.metrics
    child = runs.run_id[0]
    assert [m.step for m in client.get_metric_history(child, keys.VAL_TOP1)] == [1, 2]
    assert [m.step for m in client.get_metric_history(child, keys.VAL_CONSISTENCY)] == [0]  # once, no epoch axis
    assert not client.get_metric_history(child, "epoch")
    assert list(paper_table(runs)["mjp.variant"]) == ["A: baseline", "J: jp_unk_dal_mlp"]

    import optuna  # the sweep as an Optuna study beside the MLflow store, for optuna-dashboard

    mirrored = optuna.load_study(study_name=parent.params["experiment_dir"].rsplit("/", 1)[1], storage=f"sqlite:///{tmp_path}/optuna.db")
    assert sorted(t.params["mjp.variant"] for t in mirrored.trials) == ["A", "J"]
    assert {t.state.name for t in mirrored.trials} == {"COMPLETE"} and all(sorted(t.intermediate_values) == [1, 2] for t in mirrored.trials)


def test_interrupted_sweep_resumes_every_trial_once(tmp_path, local_ray):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    # the second trial dies after its first epoch's checkpoint, as a killed node would
    space = {"runtime.fail_after_epoch": {"type": "grid", "values": [None, 1]}}
    study = load_study(study_file(tmp_path, space), overrides={"tracking.uri": uri})
    console = io.StringIO()
    first = run_sweep(study, storage=str(tmp_path / "ray"), stream=console)
    assert len(first.failed) == 1 and "injected failure" in first.failed[0].error
    failed_line = [line for line in console.getvalue().splitlines() if "FAILED" in line]
    assert len(failed_line) == 1 and "InjectedFailure: runtime.fail_after_epoch=1" in failed_line[0] and "full error:" in failed_line[0]
    before = load_runs(uri, "sweep-test", parent_run_id=first.parent_run_id)
    assert sorted(before.status) == ["FAILED", "FINISHED"]
    failed_run = before[before.status == "FAILED"].iloc[0]
    assert failed_run["error"] == "InjectedFailure: runtime.fail_after_epoch=1: injected failure after the checkpoint"

    second = resume_sweep(first.experiment_dir, stream=io.StringIO())
    assert second.parent_run_id == first.parent_run_id
    assert len(second.trials) == 2 and not second.failed
    after = load_runs(uri, "sweep-test", parent_run_id=first.parent_run_id)
    assert len(after) == 2 and set(after.status) == {"FINISHED"}
    assert set(after.run_id) == set(before.run_id)  # re-attached, no duplicates
    assert len(load_sweeps(uri)) == 1
    client = mlflow.MlflowClient(uri)
    resumed = after[after["sample.runtime.fail_after_epoch"] == 1].run_id.iloc[0]
    assert [m.step for m in client.get_metric_history(resumed, keys.VAL_TOP1)] == [1, 2]  # each epoch once
    history = {k: [m.value for m in client.get_metric_history(first.parent_run_id, k)] for k in ("sweep/trials", "sweep/failed")}
    assert history == {"sweep/trials": [2.0], "sweep/failed": [1.0, 0.0]}  # an unchanged value is not logged twice


def test_asha_leaves_every_child_run_with_a_final_status(tmp_path, local_ray):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    space = {"optim.base_lr": {"type": "loguniform", "low": 1e-5, "high": 0.1}}
    study = load_study(study_file(
        tmp_path, space, search={"algorithm": "random", "seed": 3}, budget={"trials": 4, "max_concurrent": 2},
        scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2}, train={**TINY, "optim": {"epochs": 4}},
    ), overrides={"tracking.uri": uri})
    outcome = run_sweep(study, storage=str(tmp_path / "ray"), stream=io.StringIO())
    assert len(outcome.trials) == 4 and not outcome.failed
    runs = load_runs(uri, "sweep-test", parent_run_id=outcome.parent_run_id)
    assert len(runs) == 4 and set(runs.status) == {"FINISHED"}
    epochs = {r.run_id: len(mlflow.MlflowClient(uri).get_metric_history(r.run_id, keys.VAL_TOP1)) for r in runs.itertuples()}
    stopped = [r for r in runs.itertuples() if epochs[r.run_id] < 4]
    assert stopped, "ASHA stopped no trial: the test space is too easy"
    for r in stopped:
        assert keys.TAG_STOPPED in mlflow.MlflowClient(uri).get_run(r.run_id).data.tags
