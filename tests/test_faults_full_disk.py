"""A disk that fills under a checkpoint, under the MLflow store while a run logs, and under the
store of a running sweep: each ends in one line that names what is full and what to do (free some
space, then resume), at once, without retries; nothing is half-written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
