"""Faults around the trials rather than in them: a disk that fills under a checkpoint or under the
store, Ray's wrapped errors and raylet messages, lost workers, zombies, and sweeps started together.
Each ends in one line that says what happened and what to do; nothing is half-written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_a_full_disk_under_a_checkpoint_is_one_line_naming_the_file(tmp_path):
    import torch

    from mjp import MJPConfig, create_model
    from trainables.train.state import CheckpointWriteError, TrainState

    model = create_model(
        "vit_tiny_patch16_224", mjp=MJPConfig(), num_classes=3, img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=2
    )
    opt = torch.optim.AdamW(model.parameters())
    state = TrainState(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0), torch.amp.GradScaler(enabled=False), 10, epoch=3)
    (tmp_path / "state.pt").symlink_to("/dev/full")  # every write: ENOSPC, as on a full disk
    with pytest.raises(CheckpointWriteError) as err:
        state.save(tmp_path)
    assert str(err.value) == f"cannot write the checkpoint {tmp_path / 'state.pt'} (epoch 3): No space left on device"


def test_one_line_reason_finds_the_cause_in_ray_s_wrapping():
    from trainables.launch.trial import one_line_reason

    class Wrapped(RuntimeError):
        pass

    text = (
        "Training failed due to worker errors:\n[Rank 0 Error Snippet]:\nTraceback (most recent call last):\n"
        '  File "/x/worker.py", line 95, in train_loop\n    raise NonFiniteLossError(msg)\n'
        "trainables.train.engine.NonFiniteLossError: train/loss is nan in epoch 3\n"
    )
    assert one_line_reason(Wrapped(text)) == "trainables.train.engine.NonFiniteLossError: train/loss is nan in epoch 3"
    try:
        try:
            raise ValueError("inner cause")
        except ValueError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as err:
        assert one_line_reason(err) == "ValueError: inner cause"


def test_a_zombie_counts_as_ended():
    """A killed driver's orphans are ended, then wait for a new parent to read their status: as
    zombies they still have a /proc entry, but they no longer run."""
    from trainables.launch.ray_cleanup import is_running

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # it has exited; not reaped, it stays a zombie
    assert Path(f"/proc/{child.pid}").exists() and not is_running(child.pid)
    child.wait()
    assert not is_running(os.getpid() + 10**7)  # no such process


def test_raylet_messages_go_to_the_log_not_the_console(capsys, caplog, monkeypatch):
    """Ray's driver prints the raylet's "A worker died" block from a thread of its own. Ray's
    logger is left as every command leaves it (``library_logs_to``: no handler of its own, its
    records go to the log file), whatever tests ran before in this process."""
    import logging

    from ray._private import worker

    monkeypatch.setattr(logging.getLogger("ray"), "handlers", [])
    monkeypatch.setattr(logging.getLogger("ray"), "propagate", True)

    from trainables.launch.ray_runtime import raylet_messages_to_log

    raylet_messages_to_log()
    worker.print_to_stdstream(
        {"lines": ["A worker died or was killed while executing a task by an unexpected system error."], "pid": "raylet", "is_err": False},
        ignore_prefix=False,
    )
    printed = capsys.readouterr()
    assert "A worker died" not in printed.out + printed.err
    assert "(raylet) A worker died or was killed" in caplog.text


def test_a_lost_worker_is_retried_by_default_and_an_error_that_would_recur_is_not():
    """Tune restarts a lost trial process from its last checkpoint by default, for an in-process
    trial and for the process that drives a multi-worker TorchTrainer; a NaN loss or an out-of-
    memory error, even wrapped by Ray, would recur from the checkpoint and ends the trial."""
    import torch

    from sweep.tuner.tuner import failure_config
    from trainables.config.build import build_config
    from trainables.launch.trial import recurs
    from trainables.train.engine import NonFiniteLossError

    for scaling in ({}, {"scaling.num_workers": 2}):
        cfg = build_config({}, scaling)
        assert cfg.runtime.max_failures == 2 and failure_config(cfg).max_failures == 2

    def wrapped(inner: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except BaseException as err:
                raise RuntimeError("Ray wrapped it") from err
        except RuntimeError as outer:
            return outer

    assert recurs(wrapped(NonFiniteLossError("loss is nan"))) and recurs(torch.OutOfMemoryError("CUDA out of memory"))
    assert not recurs(wrapped(ConnectionError("the node running the data tasks is gone"))) and not recurs(RuntimeError("worker died"))


def test_two_sweeps_started_in_the_same_second_get_their_own_names(tmp_path):
    from sweep.tuner.storage import claim_sweep_name

    first, second = (claim_sweep_name(str(tmp_path / "ray"), "faults-20261124-031500") for _ in range(2))
    assert (first, second) == ("faults-20261124-031500", "faults-20261124-031500-2")
    assert (tmp_path / "ray" / first).is_dir() and (tmp_path / "ray" / second).is_dir()


RACE = """
import sys, time
from trainables.tracking.runs import RunTracker
print("imported", flush=True)
sys.stdin.readline()  # the start: every process has imported MLflow
began = time.monotonic()
RunTracker.create(sys.argv[1], "race", run_name="sweep")
print(began, time.monotonic(), flush=True)
"""


def test_sweeps_starting_together_on_a_fresh_store_all_create_their_runs(tmp_path):
    """Three processes create their first run in a store that does not exist yet, at the same
    moment: without a lock, two of them run MLflow's migrations over each other and die. They
    start when all three have imported MLflow (a line each on stdin), and the test checks that
    the three creations overlapped in time: the race it is about did happen."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, uri], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    for p in procs:
        assert p.stdout.readline() == "imported\n", p.communicate()[1]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    ends = [p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in ends]
    spans = [tuple(map(float, out.split())) for out, _ in ends]
    assert max(began for began, _ in spans) < min(ended for _, ended in spans), f"the creations did not overlap: {spans}"
    client = mlflow.MlflowClient(uri)
    assert len(client.search_runs([client.get_experiment_by_name("race").experiment_id])) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db", "mlartifacts"] or sorted(p.name for p in tmp_path.iterdir()) == [
        "mlflow.db"
    ]


FULL_DISK = """
import os, sys
from pathlib import Path
from sweep.tuner.recorder import run_closed_on_error
from trainables.errors import DiskFullError
from trainables.tracking.runs import RunTracker

from trainables.launch.ray_runtime import library_logs_to

disk = Path(sys.argv[1])
library_logs_to(Path(sys.argv[2]))  # as the commands do: the libraries' records to the log file
uri = f"sqlite:///{disk}/mlflow.db"
parent = RunTracker.create(uri, "full", run_name="sweep")
fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
try:  # everything else on the disk is taken
    while True:
        os.write(fd, b"x" * 4096)
except OSError:
    os.close(fd)
try:
    with run_closed_on_error(parent, "`mjp sweep resume DIR` continues the sweep"):
        for step in range(100000):
            parent.log_metrics({f"m{i}": float(i) for i in range(50)}, step)
except DiskFullError as err:
    print(f"one line: {err}")
"""


@pytest.mark.skipif(
    subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0, reason="needs user namespaces to mount a small tmpfs"
)
def test_a_disk_filling_under_the_store_ends_in_one_line_naming_what_to_do(tmp_path):
    """A 2 MiB tmpfs (in a private mount namespace) holds the MLflow store and fills while a run
    logs: the error that ends the run is one line naming the store and the resume."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = tmp_path / "full.py"
    script.write_text(FULL_DISK)
    env, log = {**os.environ, "PYTHONPATH": str(ROOT)}, tmp_path / "full.log"
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size=2m tmpfs "{disk}" && exec "{sys.executable}" "{script}" "{disk}" "{log}"'],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("one line: ")]
    assert "a disk this command writes to is full (" in line and "database or disk is full" in line
    assert (
        f"free some space (the MLflow store sqlite:///{disk}/mlflow.db, the run's storage), then `mjp sweep resume DIR` continues the sweep"
        in line
    )


def bomb_png(path: Path, side: int = 20_000) -> Path:
    """A PNG whose header claims ``side`` x ``side`` grey pixels (over twice Pillow's limit, so
    opening it raises ``DecompressionBombError``) and whose data is a few bytes."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))
    return path


@pytest.mark.parametrize("workers", [0, 2])
def test_a_bad_image_in_training_is_named_and_not_retried(tmp_path, workers):
    """The line a failed trial shows (console, ``mjp.error``) names the file that cannot be read,
    not only the decoder's innermost error; and the error is final (a retry would read the same
    file), also when torch's DataLoader re-raised it from a worker process as text."""
    import numpy as np
    from PIL import Image
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    from trainables.data.folder.image_folder import readable_loader
    from trainables.launch.trial import one_line_reason, recurs

    (tmp_path / "cat").mkdir()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "cat" / "a.png")
    bomb = bomb_png(tmp_path / "cat" / "b.png")
    with pytest.raises(Exception) as raised:
        list(DataLoader(ImageFolder(str(tmp_path), loader=readable_loader), num_workers=workers, collate_fn=list))
    reason = one_line_reason(raised.value)
    assert f"UnreadableImage: cannot read image {bomb}: Image size (400000000 pixels) exceeds limit" in reason, reason
    assert recurs(raised.value)


FULL_SWEEP = """
import json, os, subprocess, sys, time
from pathlib import Path
import mlflow
from trainables.tracking.schema import TAG_PARENT

disk, tmp = Path(sys.argv[1]), Path(sys.argv[2])
uri = f"sqlite:///{disk}/mlflow.db"
env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MJP_SWEEP_STORAGE": str(tmp / "ray"), "PYTHONUNBUFFERED": "1"}
sweep = subprocess.Popen([sys.executable, "-m", "sweep.cli", "sweep", "run", sys.argv[3]], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
for line in sweep.stdout:  # the trial is running: it started, and its run holds an epoch
    if "started " in line:
        break
client = mlflow.MlflowClient(uri)
while not any("val/top1" in r.data.metrics for r in client.search_runs(
        [client.get_experiment_by_name("faults").experiment_id], f"tags.`{TAG_PARENT}` != ''")):
    assert sweep.poll() is None, sweep.communicate()
    time.sleep(0.2)
fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
try:  # everything else on the disk is taken
    while True:
        os.write(fd, b"x" * 65536)
except OSError:
    os.close(fd)
out, err = sweep.communicate(timeout=300)
print(json.dumps({"rc": sweep.returncode, "out": out, "err": err}))
"""


@pytest.mark.slow
@pytest.mark.skipif(
    subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0, reason="needs user namespaces to mount a small tmpfs"
)
def test_a_store_filling_mid_sweep_ends_it_at_once_without_retries(tmp_path):
    """The MLflow store's disk (a 32 MiB tmpfs in a private mount namespace) fills while a trial
    trains: the sweep ends at its first failed write in one line naming the store and the
    resume, exit status 1; the trial is not retried (each retry failed the same way, minutes each)."""
    import json

    from tests.test_faults import study

    disk = tmp_path / "disk"
    disk.mkdir()
    one_trial = study(tmp_path, epochs=6, variants=("A",))
    script = tmp_path / "full_sweep.py"
    script.write_text(FULL_SWEEP)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            f'mount -t tmpfs -o size=32m tmpfs "{disk}" && exec "{sys.executable}" "{script}" "{disk}" "{tmp_path}" "{one_trial}"',
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ran = json.loads(done.stdout.strip().splitlines()[-1])
    out, err = ran["out"], ran["err"]
    assert ran["rc"] == 1, out + err
    assert "Traceback" not in out + err and "retrying" not in out and "] finished " not in out, out + err
    (line,) = [x for x in err.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: a disk this command writes to is full (") and "database or disk is full" in line, line
    assert f"the MLflow store sqlite:///{disk}/mlflow.db" in line and "`mjp sweep resume " in line, line
