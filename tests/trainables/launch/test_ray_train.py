"""One training through Ray on CPU: in the trial's own process (1 worker) or through Ray Train's
``TorchTrainer`` (2 gloo workers), a real SQLite MLflow store, read back."""

import io

import mlflow
import pytest

from mjp import keys
from sweep.tuner.training import run_training
from trainables.config.build import build_config

pytestmark = pytest.mark.slow

TINY_RUN = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 2, "num_heads": 2}},
    "data": {"batch_size": 32, "train_limit": 256, "val_limit": 64, "augment": "none"},
    "optim": {"epochs": 2, "base_lr": 0.04},
    "eval": {"shuffle_ratios": [0.0, 0.5]},
}


def config(tmp_path, **overrides):
    return build_config(
        TINY_RUN,
        {
            "tracking.uri": f"sqlite:///{tmp_path}/mlflow.db",
            "tracking.storage_path": str(tmp_path / "runs"),
            "tracking.experiment": "t",
            **overrides,
        },
    )


def only_run(tmp_path):
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    df = mlflow.search_runs(experiment_names=["t"])
    assert len(df) == 1
    return df.iloc[0], mlflow.MlflowClient()


def test_two_gloo_workers_train_through_ray_train_and_recover_from_a_failure(tmp_path, local_ray):
    """The cluster path: a TorchTrainer of 2 gloo workers, a worker failure, the restart from the
    checkpoint (Ray Train's), and one MLflow run that logs nothing twice."""
    cfg = config(tmp_path, **{"scaling.num_workers": 2, "runtime.max_failures": 1, "runtime.fail_after_epoch": 1})
    outcome = run_training(cfg, stream=io.StringIO())
    assert outcome.error is None
    row, client = only_run(tmp_path)
    assert row.run_id == outcome.run_id and row.status == "FINISHED"
    assert row["params.scaling.num_workers"] == "2" and row["params.mjp.mask_ratio"] == "0.27"
    assert row["tags.mjp.variant"] == "jp_unk_dal_mlp" and row["tags.mlflow.runName"] == "vit_tiny_patch16_224-J-jp_unk_dal_mlp-s0"
    for key in ("val/top1", "val/top5", "val/consistency", "val/diff_norm", "val/top1_shuffled_0.5", "train/loss_dal"):
        assert 0 <= row[f"metrics.{key}"] < 100, key
    assert [m.step for m in client.get_metric_history(outcome.run_id, keys.VAL_TOP1)] == [1, 2]  # the re-run logs nothing twice
    assert {a.path for a in client.list_artifacts(outcome.run_id)} == {"checkpoint", "figures"}
    assert outcome.metrics["val/top1"] == pytest.approx(row["metrics.val/top1"])
    assert list((tmp_path / "runs").glob("*-train/*/checkpoint_*")), "the TorchTrainer kept its checkpoints"


def test_exhausted_retries_mark_the_run_failed_with_one_line(tmp_path, local_ray):
    cfg = config(tmp_path, **{"optim.epochs": 2, "runtime.fail_after_epoch": 1, "runtime.max_failures": 0})
    outcome = run_training(cfg, stream=io.StringIO())
    assert outcome.error == "InjectedFailure: runtime.fail_after_epoch=1: injected failure after the checkpoint"
    row, _ = only_run(tmp_path)
    assert row.status == "FAILED" and row["tags.mjp.error"] == outcome.error


def test_end_of_training_evaluations_are_logged_and_mjp_attack_and_evaluate_read_the_run(tmp_path, local_ray, capsys, monkeypatch):
    from sweep.cli import main

    cfg = config(
        tmp_path,
        **{
            "optim.epochs": 1,
            "model.april_block": True,
            "model.kwargs.embed_dim": 32,
            "eval.privacy": {"settings": ["a", "c"], "images": 2},
            "eval.robustness": {"images": 8, "corruptions": ["shot_noise", "pixelate"], "workers": 1},
            "eval.pe_analysis": {"umap": False, "attention_images": 2},
        },
    )
    outcome = run_training(cfg, stream=io.StringIO())
    assert outcome.error is None
    assert {"privacy/a_psnr", "privacy/c_psnr", "privacy/a_ssim", "privacy/c_fft2d"} <= outcome.metrics.keys()
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    assert "figures/privacy_reconstructions.png" in {a.path for a in client.list_artifacts(outcome.run_id, "figures")}
    tags = client.get_run(outcome.run_id).data.tags
    assert "lpips" in tags["mjp.privacy.notes"] and "ImageNet-A/O/R: absent" in tags["mjp.robustness.notes"]
    assert {"robust/shot_noise_err", "robust/pixelate_err", "robust/mce_unnormalized", "pe/ev_3", "pe/mae_2d"} <= outcome.metrics.keys()
    assert {"robustness/errors.json"} == {a.path for a in client.list_artifacts(outcome.run_id, "robustness")}
    assert {"figures/pe/cls_attention.png", "figures/robustness/errors_by_severity.png"} <= {
        a.path for a in client.list_artifacts(outcome.run_id, "figures/pe")
    } | {a.path for a in client.list_artifacts(outcome.run_id, "figures/robustness")}

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))  # where each command downloads the run's weights
    assert main(["attack", "--run", outcome.run_id, "--images", "2", "--setting", "a"]) == 0
    out = capsys.readouterr().out
    assert "attack: april (2 images x 1 setting)" in out and "april attack on 2 images of digits" in out and "| a |" in out

    assert main(["evaluate", "--run", outcome.run_id, "--what", "pe", "--set", "eval.pe_analysis.dims=[8]"]) == 0
    assert "pe/ev_8" in client.get_run(outcome.run_id).data.metrics  # logged into the same run
    assert list(scratch.iterdir()) == []  # before: a copy of the model's weights left by each command


def test_april_attack_on_a_model_without_the_block_fails_before_launch(tmp_path):
    from trainables.errors import ConfigError

    cfg = config(tmp_path, **{"eval.privacy": {"settings": ["a"]}})
    with pytest.raises(ConfigError, match="model.april_block=true, or eval.privacy.attack=inversion"):
        run_training(cfg)
