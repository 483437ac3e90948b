"""`mjp sweep plan` and `mjp sweep run` accept and refuse the same studies: both call one validation
(``check_study``; the plan without the checks that read data files, which the cluster holds), so a
study the plan prices is one the run starts, and one the run refuses the plan refuses in the same
words, before any measurement or Ray."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import ray
import yaml

from sweep.cli import main

CONFIG = "trainables/configs/digits_vit_tiny.yaml"


def study_file(tmp: Path, space: dict, algorithm: str = "grid") -> str:
    body = {
        "name": "s",
        "base": CONFIG,
        "objective": {"metric": "val/top1"},
        "search": {"algorithm": algorithm},
        "budget": {"trials": 2},
        "space": space,
    }
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


BAD = [
    ("ratio 1.5", {"mjp.mask_ratio": {"type": "grid", "values": [0.27, 1.5]}}, "grid", "mjp.mask_ratio: must be <= 1 (got 1.5)"),
    ("ratio -0.1", {"mjp.mask_ratio": {"type": "grid", "values": [-0.1]}}, "grid", "mjp.mask_ratio: must be >= 0 (got -0.1)"),
    (
        "ratio NaN",
        {"mjp.mask_ratio": {"type": "grid", "values": [math.nan]}},
        "grid",
        "mjp.mask_ratio: Input should be a finite number (got nan)",
    ),
    (
        "range to NaN",
        {"mjp.mask_ratio": {"type": "uniform", "low": 0.1, "high": math.nan}},
        "tpe",
        "space.mjp.mask_ratio.uniform.high: Input should be a finite number (got nan)",
    ),
    (
        "unknown space key",
        {"optim.epoch": {"type": "grid", "values": [1, 2]}},
        "grid",
        "space.optim.epoch is not a TrainConfig key (did you mean optim.epochs?)",
    ),
    (
        "ratio selecting one patch",
        {"mjp.mask_ratio": {"type": "choice", "values": [0.07, 0.27]}},
        "tpe",
        "mjp.mask_ratio=0.07 selects round(16 x 0.07) = 1 of the 16 patches",
    ),
]


def no_ray(*args, **kwargs):
    raise AssertionError("Ray was started for a bad study")


def no_measurement(*args, **kwargs):
    raise AssertionError("the plan measured a study it should have refused")


@pytest.mark.parametrize("space, algorithm, message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_plan_and_run_refuse_the_same_study_in_the_same_words(space, algorithm, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr("sweep.cluster.plan.measure_cpu_img_per_s", no_measurement)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/unused/mlflow.db")
    path = study_file(tmp_path, space, algorithm)
    said = {}
    for command in ("run", "plan"):
        capsys.readouterr()
        assert main(["sweep", command, path]) == 2, command
        said[command] = capsys.readouterr().err
        assert said[command].count("\n") == 1 and message in said[command], (command, said[command])
    assert said["run"] == said["plan"]
    assert not (tmp_path / "unused").exists()


def test_a_study_the_run_accepts_is_planned(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    path = study_file(tmp_path, {"mjp.mask_ratio": {"type": "grid", "values": [0.27, 0.5]}})
    assert main(["sweep", "plan", path]) == 0
    assert "study s: 2 trials x 30 epochs" in capsys.readouterr().out


def test_the_plan_prices_a_grid_the_run_refuses_and_names_the_flag(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    path = study_file(
        tmp_path,
        {
            "optim.base_lr": {"type": "grid", "values": [0.01 * i for i in range(1, 41)]},
            "runtime.seed": {"type": "grid", "values": list(range(40))},
        },
    )
    assert main(["sweep", "plan", path]) == 0
    out = capsys.readouterr().out
    assert "1600 trials" in out and "note: `mjp sweep run` refuses more than 1,000 trials unless given --max-trials 1600" in out, out


def test_a_broken_image_folder_here_is_refused_by_the_plan_as_by_the_run(tmp_path, capsys, monkeypatch):
    """The published figures stand in only for data that is not on this machine; a folder that is
    here with one class is refused, not priced as ImageNet."""
    from PIL import Image

    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.setattr("sweep.cluster.plan.measure_cpu_img_per_s", no_measurement)
    root = tmp_path / "folder"
    for split in ("train", "val"):
        (root / split / "cat").mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(root / split / "cat" / "0.png")
    body = {
        "name": "s",
        "base": CONFIG,
        "train": {"data": {"name": "imagefolder", "root": str(root), "img_size": 8}},
        "objective": {"metric": "val/top1"},
        "search": {"algorithm": "grid"},
        "space": {"mjp.variant": {"type": "grid", "values": ["A", "J"]}},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(body))
    assert main(["sweep", "plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "class" in err and "ImageNet" not in err
