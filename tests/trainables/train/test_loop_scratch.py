"""A trial killed while Ray copies its checkpoint leaves the checkpoint's folder behind (nothing runs at
a SIGKILL); the next checkpoint made on the machine removes it."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from trainables.scratch import SCRATCH_PREFIX, scratch_folder

ROOT = Path(__file__).resolve().parents[3]

#: the training loop in a process of its own, held in its first report of a checkpoint (where Ray
#: copies the folder) until it is killed
_KILLED_IN_A_REPORT = r"""
import sys

from tests.in_process_session import InProcessSession
from trainables.config.build import build_config
from trainables.config.worker import WorkerInput
from trainables.train.loop import train_loop

class HeldInItsReport(InProcessSession):
    def report(self, metrics, checkpoint_dir):
        if checkpoint_dir is not None:
            print(checkpoint_dir, flush=True)
            sys.stdin.readline()

tiny = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 16, "depth": 1, "num_heads": 2}},
    "data": {"batch_size": 32, "train_limit": 64, "val_limit": 32, "augment": "none", "loader_workers": 0},
    "optim": {"epochs": 1},
    "eval": {"shuffle_ratios": [0.0]},
}
train_loop(WorkerInput(build_config(tiny, {})), HeldInItsReport())
"""


def test_a_checkpoint_a_killed_trial_left_goes_with_the_next_one_made(tmp_path):
    with open(tmp_path / "trial.log", "w") as log:
        trial = subprocess.Popen(
            [sys.executable, "-c", _KILLED_IN_A_REPORT],
            cwd=ROOT,
            env={**os.environ, "TMPDIR": str(tmp_path)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    held = Path(trial.stdout.readline().strip())  # the event: the checkpoint is written, Ray would copy it now
    assert held.parent == tmp_path, (tmp_path / "trial.log").read_text()[-2000:]
    assert (held / "state.pt").stat().st_size > 0
    trial.send_signal(signal.SIGKILL)
    trial.wait()
    assert (held / "state.pt").is_file()
    with scratch_folder(parent=tmp_path):  # the next trial's first checkpoint on this machine
        assert not held.exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(SCRATCH_PREFIX)] == []
