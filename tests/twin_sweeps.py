"""Sweeps on the local twin as tests/test_cluster_local.py writes and reads them: a study of tiny
trials on the twin's "GPU" nodes, the twin's MLflow server's runs, what a loss cost a trial, and a
folder of JPEGs for Ray Data to decode."""

from __future__ import annotations

import time
from pathlib import Path

import mlflow
import yaml

from mjp import keys
from sweep.cluster.twin_config import GPU_STANDIN
from trainables.tracking import schema

REPO = Path(__file__).resolve().parent.parent
TINY = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 2, "num_heads": 2}},
    "data": {"batch_size": 32, "train_limit": 256, "val_limit": 64},
    "eval": {"shuffle_ratios": [0.0]},
    "scaling": {"worker_resources": {GPU_STANDIN: 1}},  # the "GPU" nodes only
    "runtime": {"checkpoint_every": 1, "max_failures": 2},
}
TRACKING: dict[str, str] = {}  # the twin's tracking URI ("uri")


def study(twin, name: str, epochs: int, variants: list[str], **train) -> str:
    path = Path(twin.session_dir) / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "base": str(REPO / "trainables/configs/digits_vit_tiny.yaml"),
                "train": {**TINY, **train, "optim": {"epochs": epochs}, "tracking": {"experiment": name}},
                "space": {"mjp.variant": {"type": "grid", "values": variants}},
                "objective": {"metric": keys.VAL_TOP1, "mode": "max"},
                "search": {"algorithm": "grid"},
                "budget": {"max_concurrent": 2},
            }
        )
    )
    return str(path)


def tracking():
    """An MLflow client of the twin's server, named explicitly: neither MLflow's process-wide URI
    nor ``$MLFLOW_TRACKING_URI`` is changed for it, as other tests share this process."""

    return mlflow.MlflowClient(tracking_uri=TRACKING["uri"])


def child_runs(experiment: str, client=None) -> list:
    """The sweep's trial runs in ``experiment`` (none when it does not exist); ``client`` defaults to the twin's."""
    client = client or tracking()
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], filter_string=f"tags.`{schema.TAG_PARENT}` != ''")


def wait_for_epoch(experiment: str, epoch: int, seconds: float = 300):
    """The first child run that has logged ``epoch`` epochs of validation top-1."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for run in child_runs(experiment):
            history = tracking().get_metric_history(run.info.run_id, keys.VAL_TOP1)
            if any(m.step >= epoch for m in history):
                return run
        time.sleep(0.5)
    raise AssertionError(f"no trial of {experiment} reached epoch {epoch} within {seconds} s")


def seconds_lost(history: list, killed_at: float) -> float:
    """What a loss cost a trial: the time from its last epoch before ``killed_at`` to its last
    epoch, less what the epochs it still had to train take at its pace before the loss."""
    before = sorted((m for m in history if m.timestamp / 1000 <= killed_at), key=lambda m: m.step)
    pace = (before[-1].timestamp - before[0].timestamp) / 1000 / max(1, before[-1].step - before[0].step)
    end = max(m.timestamp for m in history) / 1000
    return end - before[-1].timestamp / 1000 - pace * (max(m.step for m in history) - before[-1].step)


def image_folder(root: Path, per_class: int = 32, size: int = 20) -> Path:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, count in (("train", per_class), ("val", 4)):
        for c in ("cat", "dog"):
            (root / split / c).mkdir(parents=True)
            for i in range(count):
                Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(root / split / c / f"{i}.jpg")
    return root
