"""Ray Train on CPU (gloo) end to end: real workers, a real SQLite MLflow store, read back."""

import mlflow
import pytest

from trainables.config import build_config
from trainables.driver import run_training

TINY_RUN = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 2, "num_heads": 2}},
    "data": {"batch_size": 32, "train_limit": 256, "val_limit": 64, "augment": "none"},
    "optim": {"epochs": 2, "base_lr": 0.04},
    "eval": {"shuffle_ratios": [0.0, 0.5]},
}


def config(tmp_path, **overrides):
    return build_config(
        TINY_RUN,
        {"tracking.uri": f"sqlite:///{tmp_path}/mlflow.db", "tracking.storage_path": str(tmp_path / "runs"), "tracking.experiment": "t", **overrides},
    )



def test_two_workers_log_one_run_to_mlflow(tmp_path, local_ray):
    cfg = config(tmp_path, **{"scaling.num_workers": 2})
    outcome = run_training(cfg)
    assert outcome.error is None
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    df = mlflow.search_runs(experiment_names=["t"])
    assert len(df) == 1 and df.run_id[0] == outcome.run_id and df.status[0] == "FINISHED"
    row = df.iloc[0]
    assert row["params.scaling.num_workers"] == "2" and row["params.mjp.mask_ratio"] == "0.27"
    assert row["tags.mjp.variant"] == "jp_unk_dal_mlp"
    for key in ("val/top1", "val/top5", "val/consistency", "val/diff_norm", "val/top1_shuffled_0.5", "train/loss_dal"):
        assert 0 <= row[f"metrics.{key}"] < 100, key
    client = mlflow.MlflowClient()
    assert [m.step for m in client.get_metric_history(outcome.run_id, "val/top1")] == [1, 2]
    assert {a.path for a in client.list_artifacts(outcome.run_id)} == {"checkpoint", "figures"}
    assert outcome.metrics["val/top1"] == pytest.approx(row["metrics.val/top1"])


def test_failure_after_a_checkpoint_resumes_into_the_same_run(tmp_path, local_ray):
    cfg = config(tmp_path, **{"optim.epochs": 3, "runtime.max_failures": 1, "runtime.fail_after_epoch": 2})
    outcome = run_training(cfg)
    assert outcome.error is None and outcome.metrics["epoch"] == 3
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    df = mlflow.search_runs(experiment_names=["t"])
    assert len(df) == 1 and df.run_id[0] == outcome.run_id and df.status[0] == "FINISHED"
    steps = [m.step for m in mlflow.MlflowClient().get_metric_history(outcome.run_id, "epoch")]
    assert sorted(set(steps)) == [1, 2, 3]  # an epoch after the last registered checkpoint may repeat


def test_exhausted_retries_mark_the_run_failed(tmp_path, local_ray):
    cfg = config(tmp_path, **{"optim.epochs": 2, "runtime.fail_after_epoch": 1})
    outcome = run_training(cfg)
    assert outcome.error is not None and "injected failure" in str(outcome.error)
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    df = mlflow.search_runs(experiment_names=["t"])
    assert list(df.status) == ["FAILED"] and "injected failure" in df["tags.mjp.error"][0]


def test_privacy_step_logs_scores_and_figure_and_mjp_attack_reads_the_run(tmp_path, local_ray, capsys, monkeypatch):
    from sweep.cli import main

    cfg = config(tmp_path, **{
        "optim.epochs": 1, "model.april_block": True, "model.kwargs.embed_dim": 32,
        "eval.privacy": {"settings": ["a", "c"], "images": 2},
    })
    outcome = run_training(cfg)
    assert outcome.error is None
    assert {"privacy/a_psnr", "privacy/c_psnr", "privacy/a_ssim", "privacy/c_fft2d"} <= outcome.metrics.keys()
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    assert "figures/privacy_reconstructions.png" in {a.path for a in client.list_artifacts(outcome.run_id, "figures")}
    assert "lpips" in client.get_run(outcome.run_id).data.tags["mjp.privacy.notes"]

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    assert main(["attack", "--run", outcome.run_id, "--images", "2", "--setting", "a"]) == 0
    out = capsys.readouterr().out
    assert "april attack on 2 images of digits" in out and "| a |" in out


def test_april_attack_on_a_model_without_the_block_fails_before_launch(tmp_path):
    from trainables.config import ConfigError

    cfg = config(tmp_path, **{"eval.privacy": {"settings": ["a"]}})
    with pytest.raises(ConfigError, match="model.april_block=true, or eval.privacy.attack=inversion"):
        run_training(cfg)
