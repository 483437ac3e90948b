"""Bad input, as a careless or hostile user gives it: every case ends with one ``error:`` line
that names the key or file, the value and what is allowed; exit status 2; no traceback; Ray
never started; nothing created that was not there. One table: configs, studies, CLI arguments,
data, checkpoints, MLflow stores and cluster files, its rows by kind of input in tests/bad_inputs/."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import ray

from sweep.cli import main
from tests.bad_inputs import TRAIN
from tests.bad_inputs.commands import CLUSTER, COMMANDS
from tests.bad_inputs.configs import CONFIGS
from tests.bad_inputs.costs import COSTLY, RESOURCES
from tests.bad_inputs.data import DATA
from tests.bad_inputs.evaluation import EVALUATION
from tests.bad_inputs.models import CHECKPOINTS, MODELS
from tests.bad_inputs.stores import DAMAGED_STORES, STORES
from tests.bad_inputs.studies import STUDIES
from tests.bad_inputs_made import mlflow_store

#: (id, argv: tmp -> list, message fragment)
CASES = CONFIGS + MODELS + DATA + EVALUATION + STORES + CHECKPOINTS + STUDIES + COSTLY + RESOURCES + DAMAGED_STORES + CLUSTER + COMMANDS


def no_ray(*args, **kwargs):
    raise AssertionError("Ray was started for bad input")


@pytest.mark.parametrize("name, argv, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_line_before_ray_starts(name, argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # an earlier test's Ray must not stand in for a new start
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/unused/mlflow.db")
    args = argv(tmp_path)
    capsys.readouterr()  # what setting the case up printed (MLflow creating a store)
    before = set(tmp_path.rglob("*"))
    sizes = {p: p.stat().st_size for p in before if p.is_file()}
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err, err
    assert err.count("\n") == 1 and len(err) < 2100, err  # one line, short whatever the input held
    assert message in err and "weights_only=False" not in err, err
    assert not (tmp_path / "pwned").exists(), "a checkpoint ran code"
    assert not (tmp_path / "unused").exists() and not (tmp_path / "missing").exists(), "a store was created"
    assert set(tmp_path.rglob("*")) == before, "the command wrote files"
    assert not (tmp_path / "mlflow.db").exists() or (tmp_path / "mlflow.db").stat().st_size in (0, sizes[tmp_path / "mlflow.db"]), (
        "a store was written"
    )


def test_the_corpus_is_large():
    assert len(CASES) >= 40


def test_a_read_only_store_is_named_before_launch(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # an earlier test's Ray must not stand in for a new start
    uri = mlflow_store(tmp_path)
    capsys.readouterr()
    db = tmp_path / "mlflow.db"
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (root ignores file permissions, so nothing else makes the store read-only)")
    try:
        assert main(TRAIN + ["--set", f"tracking.uri={uri}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: the MLflow store is read-only") and str(db) in err and "Traceback" not in err, err
    finally:
        subprocess.run(["chattr", "-i", str(db)])


def test_a_warmup_longer_than_the_training_is_named_before_ray_starts(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # an earlier test's Ray must not stand in for a new start
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    with pytest.raises(AssertionError, match="Ray was started"):
        main(TRAIN + ["--set", "optim.epochs=1", "--set", "optim.warmup_epochs=50", "--set", f"tracking.storage_path={tmp_path}"])
    out = capsys.readouterr().out
    assert (
        "warning: optim.warmup_epochs=50 is longer than optim.epochs=1: the learning rate never reaches optim.base_lr; set "
        "optim.warmup_epochs to at most 1" in out
    ), out
