"""Sweeps end to end on CPU: Ray Tune + Optuna + Ray Train + a temporary SQLite MLflow, read back by analysis."""

import mlflow
import yaml

from analysis.runs import load_runs, load_sweeps
from analysis.tables import paper_table
from sweep.run import resume_sweep, run_sweep
from sweep.study import load_study

TINY = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 2, "num_heads": 2}},
    "data": {"batch_size": 32, "train_limit": 256, "val_limit": 64},
    "optim": {"epochs": 2},
    "eval": {"shuffle_ratios": [0.0, 0.9]},
    "tracking": {"experiment": "sweep-test"},
}


def study_file(tmp_path, space):
    path = tmp_path / "study.yaml"
    study = {
        "name": "e2e", "base": "trainables/configs/digits_vit_tiny.yaml", "train": TINY, "space": space,
        "objective": {"metric": "val/top1", "mode": "max"}, "search": {"algorithm": "grid"}, "budget": {"max_concurrent": 2},
    }
    path.write_text(yaml.safe_dump(study))
    return str(path)


def test_two_trial_sweep_makes_one_parent_and_two_children(tmp_path, local_ray):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    presets = {"base": {"mjp.variant": "A"}, "mjp": {"mjp.variant": "J", "mjp.mask_ratio": 0.5}}
    space = {"setup": {"type": "grid", "values": ["base", "mjp"], "presets": presets}}
    study = load_study(study_file(tmp_path, space), overrides={"tracking.uri": uri})
    outcome = run_sweep(study, storage=str(tmp_path / "ray"))
    assert len(outcome.trials) == 2 and not any(t["error"] for t in outcome.trials)

    sweeps = load_sweeps(uri, "e2e")
    assert len(sweeps) == 1 and sweeps.run_id[0] == outcome.parent_run_id and sweeps.status[0] == "FINISHED"
    runs = load_runs(uri, "sweep-test", parent_run_id=outcome.parent_run_id)
    assert len(runs) == 2 and set(runs.status) == {"FINISHED"}
    assert set(runs["sample.setup"]) == {"base", "mjp"} and set(runs["variant"]) == {"baseline", "jp_unk_dal_mlp"}
    assert set(runs["mjp.dal"]) == {"none", "mlp"} and set(runs["optim.epochs"]) == {2}
    assert runs.set_index("sample.setup").loc["mjp", "mjp.mask_ratio"] == 0.5  # the preset reached the trial
    for key in ("val/top1", "val/consistency", "val/diff_norm", "val/top1_shuffled_0.9"):
        assert runs[key].between(0, 100).all(), key
    assert len(mlflow.search_runs(experiment_names=["sweep-test"])) == 3  # nothing else was created

    parent = mlflow.MlflowClient(uri).get_run(outcome.parent_run_id).data
    assert parent.params["search.algorithm"] == "grid" and "best/val/top1" in parent.metrics
    table = paper_table(runs)
    assert list(table["setup"]) == ["base", "mjp"] and "Δ top-1" in table


def test_interrupted_sweep_resumes_every_trial_once(tmp_path, local_ray):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    # the second trial dies after its first epoch's checkpoint, as a killed node would
    space = {"runtime.fail_after_epoch": {"type": "grid", "values": [None, 1]}}
    study = load_study(study_file(tmp_path, space), overrides={"tracking.uri": uri})
    first = run_sweep(study, storage=str(tmp_path / "ray"))
    assert sorted(t["error"] is not None for t in first.trials) == [False, True]
    before = load_runs(uri, "sweep-test", parent_run_id=first.parent_run_id)
    assert sorted(before.status) == ["FAILED", "FINISHED"]

    second = resume_sweep(first.experiment_dir)
    assert second.parent_run_id == first.parent_run_id
    assert len(second.trials) == 2 and not any(t["error"] for t in second.trials)
    after = load_runs(uri, "sweep-test", parent_run_id=first.parent_run_id)
    assert len(after) == 2 and set(after.status) == {"FINISHED"}
    assert set(after.run_id) == set(before.run_id)  # re-attached, no duplicates
    assert len(load_sweeps(uri)) == 1
    resumed = after[after["sample.runtime.fail_after_epoch"] == 1].run_id.iloc[0]
    epochs = [m.step for m in mlflow.MlflowClient(uri).get_metric_history(resumed, "epoch")]
    assert sorted(set(epochs)) == [1, 2]
