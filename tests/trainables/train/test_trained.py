"""Loading a trained model back: from a checkpoint file with its config, weights only, the exact
tensors saved; a checkpoint that does not fit the config is one line, never torch's traceback."""

import pytest
import torch

from trainables.config.build import load_config
from trainables.data.info import data_info
from trainables.errors import UserError
from trainables.train.engine import build_model
from trainables.train.state import CheckpointError
from trainables.train.trained import load_trained

CONFIG = "trainables/configs/digits_vit_tiny.yaml"
SMALL = "model.kwargs={patch_size: 2, embed_dim: 32, depth: 2, num_heads: 2}"


def saved(tmp_path, overrides):
    cfg = load_config(CONFIG, overrides)
    torch.manual_seed(0)
    model = build_model(cfg, data_info(cfg).shape)
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)
    return model, path


def test_a_checkpoint_file_loads_the_exact_weights_in_eval_mode(tmp_path):
    model, path = saved(tmp_path, [SMALL])
    trained = load_trained(checkpoint=str(path), config=CONFIG, overrides=[SMALL])
    assert trained.run_id is None and trained.uri is None and not trained.model.training
    assert trained.cfg.variant == "jp_unk_dal_mlp"
    for (name, mine), (other, theirs) in zip(model.state_dict().items(), trained.model.state_dict().items()):
        assert name == other and torch.equal(mine, theirs)


def test_a_checkpoint_of_another_model_is_named_in_one_line(tmp_path):
    _, path = saved(tmp_path, [SMALL])
    with pytest.raises(CheckpointError, match="does not fit .* as configured .*give the config it was trained with") as err:
        load_trained(checkpoint=str(path), config=CONFIG, overrides=["model.kwargs={patch_size: 2, embed_dim: 48, depth: 2, num_heads: 2}"])
    assert "\n" not in str(err.value)


def test_a_checkpoint_without_its_config_is_refused(tmp_path):
    _, path = saved(tmp_path, [SMALL])
    with pytest.raises(UserError, match="give the TrainConfig it was trained with as --config"):
        load_trained(checkpoint=str(path))


def test_a_pickle_that_would_run_code_is_never_loaded(tmp_path):
    import pickle

    marker = tmp_path / "ran"

    class Planted:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    path = tmp_path / "model.pt"
    path.write_bytes(pickle.dumps({"model": Planted()}))
    with pytest.raises(CheckpointError):
        load_trained(checkpoint=str(path), config=CONFIG, overrides=[SMALL])
    assert not marker.exists()


def test_a_damaged_checkpoint_of_a_run_is_named_by_the_run_and_its_download_is_gone(tmp_path, monkeypatch):
    import mlflow

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    run = client.create_run(client.create_experiment("t", artifact_location=str(tmp_path / "artifacts"))).info.run_id
    bad = tmp_path / "model.pt"
    bad.write_bytes(b"not a checkpoint")
    client.log_artifact(run, str(bad), "checkpoint")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    with pytest.raises(CheckpointError) as err:
        load_trained(run=run, uri=uri)
    assert str(err.value) == f"MLflow run {run}'s checkpoint/model.pt is not a PyTorch checkpoint (not a torch.save archive)"
    assert list(scratch.iterdir()) == []  # the download, read and gone (before: a folder in /tmp it named)
