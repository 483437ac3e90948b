"""Faults, as they happen to a sweep: Ctrl-C, SIGTERM and SIGKILL of the driver, a trial process killed
mid-epoch, a full disk under a checkpoint. The interrupted sweep says so and resumes with every
trial exactly once; nothing is logged twice; what the local default started is cleaned up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import mlflow
import pytest
import yaml

from mjp import keys
from tests.mjp_here import mjp_here
from trainables.errors import UserError
from trainables.tracking import schema

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 2, "num_heads": 2}},
    "data": {"batch_size": 32, "train_limit": 256, "val_limit": 64},
    "eval": {"shuffle_ratios": [0.0, 0.9]},
    "tracking": {"experiment": "faults"},
}


#: epochs of each trial where a signal or a kill must find the second trial still training: one
#: epoch of TINY takes about 0.3 s here once the trial's process is up, so two epochs let the second
#: trial end before the test saw it running (the race was lost, idle, at nice 0)
RACED_EPOCHS = 16


def study(tmp: Path, epochs: int = 2, variants: tuple[str, ...] = ("A", "G", "J")) -> str:
    path = tmp / "study.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "faults",
                "base": "trainables/configs/digits_vit_tiny.yaml",
                "train": {**TINY, "optim": {"epochs": epochs}},
                "space": {"mjp.variant": {"type": "grid", "values": list(variants)}},
                "objective": {"metric": "val/top1"},
                "search": {"algorithm": "grid"},
                "budget": {"max_concurrent": 1},
            }
        )
    )
    return str(path)


def mjp(tmp: Path, *args: str, cwd: Path = ROOT, **env_vars: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db",
        "MJP_SWEEP_STORAGE": str(tmp / "ray"),
        "MJP_REPORTS_DIR": str(tmp / "reports"),  # not the checkout's reports/
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT),
        **env_vars,
    }
    env = {k: v for k, v in env.items() if v}  # an empty value: unset
    return subprocess.Popen(
        [sys.executable, "-m", "sweep.cli", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def read_until(proc: subprocess.Popen, marker: str) -> list[str]:
    """stdout lines up to and including the first that contains ``marker`` (blocking reads)."""
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if marker in line:
            return lines
    raise AssertionError(f"{marker!r} never printed; stdout: {''.join(lines)}; stderr: {proc.stderr.read()}")


def children(uri: str) -> list:
    client = mlflow.MlflowClient(uri)
    parent = client.search_runs([client.get_experiment_by_name("faults").experiment_id], f"tags.`{schema.TAG_KIND}` = 'sweep'")
    assert len(parent) == 1
    kids = client.search_runs([parent[0].info.experiment_id], f"tags.`{schema.TAG_PARENT}` = '{parent[0].info.run_id}'")
    return parent[0], kids


def trials_reported(uri: str) -> int:
    """How many child runs have logged an epoch's val/top1."""
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("faults")
    runs = client.search_runs([experiment.experiment_id], f"tags.`{schema.TAG_PARENT}` != ''") if experiment else []
    return sum(keys.VAL_TOP1 in r.data.metrics for r in runs)


def wait_for(what: str, happened: Callable[[], bool], seconds: float = 300) -> None:
    """Poll until ``happened()`` holds; fail, naming ``what``, if it never does. A fault is
    injected on this event, never after a time: the bound only keeps a broken sweep from
    hanging the suite, and a test that cannot see its event fails instead of testing nothing."""
    deadline = time.monotonic() + seconds
    while not happened():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never happened (waited {seconds:g} s)")
        time.sleep(0.2)


def sweep_status(uri: str, capsys: pytest.CaptureFixture) -> subprocess.CompletedProcess:
    return mjp_here(capsys, "sweep", "status", "--uri", uri)


def experiment_dir(tmp: Path) -> str:
    (found,) = [p for p in (tmp / "ray").iterdir() if (p / "mjp_sweep.json").is_file()]
    return str(found)


def assert_each_trial_once(uri: str, epochs: int = RACED_EPOCHS) -> None:
    parent, kids = children(uri)
    assert parent.info.status == "FINISHED" and schema.TAG_INTERRUPTED not in parent.data.tags
    assert sorted(k.data.tags[schema.TAG_VARIANT] for k in kids) == ["baseline", "jp_unk", "jp_unk_dal_mlp"]
    assert {k.info.status for k in kids} == {"FINISHED"}
    client = mlflow.MlflowClient(uri)
    for k in kids:
        steps = [m.step for m in client.get_metric_history(k.info.run_id, keys.VAL_TOP1)]
        assert steps == sorted(set(steps)) == list(range(1, epochs + 1)), (k.info.run_name, steps)
    assert [m.value for m in client.get_metric_history(parent.info.run_id, "sweep/trials")] == [3.0]


@pytest.mark.slow
def test_ctrl_c_then_sigkill_then_a_resume_from_another_directory_runs_every_trial_exactly_once(tmp_path, capsys):
    """The driver is interrupted (Ctrl-C), resumed, killed (SIGKILL) while a trial trains, and
    resumed again from another directory with no tracking URI in the environment. Each time the
    sweep says what happened and the killed driver's processes go away. The kill comes after the
    resume's only experiment-state save (the trial started since is unknown to the restored
    experiment, and Tune proposes it again under a new id). At the end every trial ran exactly once,
    none stays RUNNING, the summary was logged once, the records are in the sweep's own store and no
    stray mlflow.db appears where the last command was typed."""
    from trainables.launch.ray_cleanup import descendants, is_running

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    first = mjp(tmp_path, "sweep", "run", study(tmp_path, epochs=RACED_EPOCHS))
    seen = read_until(first, "finished ")  # the first trial is done, the second is running
    # the running trial has logged an epoch: its metrics must not count as finished
    wait_for("a second trial's first epoch", lambda: trials_reported(uri) >= 2)
    first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 130, err
    assert "interrupted: the parent run is marked KILLED; continue with `mjp sweep resume" in err and "Traceback" not in err + out
    # the summary counts what the live view showed finishing, not the trials that merely reported
    finished = sum("] finished " in line for line in seen + out.splitlines())
    assert f"sweep faults: {finished} of 3 trials finished" in out, out
    parent, kids = children(uri)
    assert parent.info.status == "KILLED" and parent.data.tags[schema.TAG_INTERRUPTED].startswith(f"{finished} of 3 trials finished")
    assert "RUNNING" not in {k.info.status for k in kids}
    # the race happened: the signal stopped a trial that had reported an epoch but not ended
    assert [k for k in kids if k.info.status == "KILLED" and keys.VAL_TOP1 in k.data.metrics], [
        (k.info.run_name, k.info.status, sorted(k.data.metrics)) for k in kids
    ]

    second = mjp(tmp_path, "sweep", "resume", experiment_dir(tmp_path), TUNE_GLOBAL_CHECKPOINT_S="3600")
    read_until(second, "finished ")  # the interrupted trial is done, the third is starting
    wait_for("the third trial's first epoch", lambda: trials_reported(uri) >= 3)
    left = {p: s for p, s in descendants(second.pid).items() if "ray_cleanup" not in Path(f"/proc/{p}/cmdline").read_text()}
    assert left, "the driver started no process"
    second.kill()
    second.communicate()
    _, kids = children(uri)
    assert "RUNNING" in {k.info.status for k in kids}, "the kill found no trial running: nothing was left for the resume to adopt"
    # the watcher ends them (SIGTERM, then SIGKILL after 5 s)
    wait_for(f"the end of the killed driver's processes {sorted(left)}", lambda: not any(is_running(p) for p in left), seconds=120)
    status = sweep_status(uri, capsys)
    assert "driver gone (killed?)" in status.stdout, status.stdout + status.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    third = mjp(tmp_path, "sweep", "resume", experiment_dir(tmp_path), cwd=elsewhere, MLFLOW_TRACKING_URI="")
    out, err = third.communicate(timeout=600)
    assert third.returncode == 0, out + err
    assert "Traceback" not in out + err
    assert_each_trial_once(uri)
    assert not (elsewhere / "mlflow.db").exists()
    status = sweep_status(uri, capsys)
    assert "3 finished of 3 trials" in status.stdout, status.stdout + status.stderr


def resumable(tmp: Path) -> bool:
    """Whether a sweep directory under the test's storage has its state file written and signed."""
    from sweep.tuner.state import load_resumable

    try:
        load_resumable(experiment_dir(tmp))
    except (ValueError, OSError, UserError):  # no directory yet, or its state file not yet whole and signed
        return False
    return True


@pytest.mark.slow
def test_a_driver_killed_before_tune_saved_anything_resumes_from_its_state_file(tmp_path, capsys):
    """SIGKILL as soon as mjp_sweep.json is written and signed, while Ray starts: Tune has saved
    nothing (no tuner.pkl) and no trial started. `mjp sweep status` offers the resume, and the
    resume runs the sweep's one trial under the recorded parent run, which ends FINISHED."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    first = mjp(tmp_path, "sweep", "run", study(tmp_path, epochs=1, variants=("A",)))
    wait_for("the sweep's signed state file", lambda: resumable(tmp_path))
    first.kill()
    first.communicate()
    directory = experiment_dir(tmp_path)
    assert not (Path(directory) / "tuner.pkl").exists(), "the kill came after Tune's first save: the case was not tested"
    status = sweep_status(uri, capsys)
    assert "driver gone (killed?)" in status.stdout and f"mjp sweep resume {directory}" in status.stdout, status.stdout + status.stderr

    resumed = mjp(tmp_path, "sweep", "resume", directory)
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out + err
    assert "no trial had started" in err + out and "Traceback" not in out + err
    parent, kids = children(uri)
    assert parent.info.status == "FINISHED" and [k.info.status for k in kids] == ["FINISHED"]
    assert parent.data.params["study"] == "faults" and parent.data.params["trials"] == "1"  # recorded by the run or the resume
    steps = [m.step for m in mlflow.MlflowClient(uri).get_metric_history(kids[0].info.run_id, keys.VAL_TOP1)]
    assert steps == [1]


@pytest.mark.slow
def test_a_store_deleted_mid_sweep_ends_it_in_one_line_naming_the_store_and_the_resume(tmp_path):
    """The SQLite MLflow store is deleted while a trial trains: the sweep stops within a Tune step,
    exit status 1, one error line naming the store and `mjp sweep resume DIR`; no traceback, no
    retry, and nothing the driver writes makes a new store at its path."""
    store = tmp_path / "mlflow.db"
    proc = mjp(tmp_path, "sweep", "run", study(tmp_path, epochs=6, variants=("A",)))
    wait_for("the trial's first epoch", lambda: trials_reported(f"sqlite:///{store}") >= 1)
    store.unlink()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, out + err
    assert "Traceback" not in out + err and "retrying" not in out, out + err
    (line,) = [x for x in err.splitlines() if x.startswith("error: ")]
    assert f"error: the MLflow store sqlite:///{store} was lost while the sweep ran (its file was deleted" in line, err
    assert f"`mjp sweep resume {experiment_dir(tmp_path)}` continues the sweep" in line
    assert "] finished " not in out, "the trial ran to its end: the store was deleted too late to test anything"
    assert not store.exists(), "a write after the loss made a new store at its path"


@pytest.mark.slow
def test_a_bad_image_ends_its_trial_at_once_naming_the_file(tmp_path):
    """A decompression bomb in the training images: the trial fails once, its console line and its
    run's error tag name the file (not only Pillow's innermost error), and no "retrying" line (a
    retry would read the same file)."""
    import numpy as np
    from PIL import Image

    from tests.test_faults_around_trials import bomb_png

    for split in ("train", "val"):
        for c in ("cat", "dog"):
            (tmp_path / "images" / split / c).mkdir(parents=True)
            for i in range(4):
                Image.fromarray(np.full((16, 16, 3), 40 * i, np.uint8)).save(tmp_path / "images" / split / c / f"{i}.png")
    bomb = bomb_png(tmp_path / "images" / "train" / "cat" / "bomb.png")
    path = Path(study(tmp_path, epochs=1, variants=("A",)))
    tree = yaml.safe_load(path.read_text())
    tree["train"]["data"] = {"name": "imagefolder", "root": str(tmp_path / "images"), "img_size": 16, "batch_size": 4}
    tree["train"]["data"].update(train_limit=None, val_limit=None)
    tree["train"]["model"]["kwargs"]["patch_size"] = 4
    path.write_text(yaml.safe_dump(tree))
    proc = mjp(tmp_path, "sweep", "run", str(path))
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, out + err
    assert "retrying" not in out and "Traceback" not in out + err, out + err
    assert f"UnreadableImage: cannot read image {bomb}: Image size (400000000 pixels) exceeds limit" in out, out
    _, (kid,) = children(f"sqlite:///{tmp_path}/mlflow.db")
    assert kid.info.status == "FAILED" and str(bomb) in kid.data.tags[schema.TAG_ERROR]
