"""Faults around the trials rather than in them: Ray's wrapped errors and raylet messages, lost
workers, zombies, and images that cannot be read. Each ends in one line that says what happened and
what to do. A disk that fills is tests/test_faults_full_disk.py's, sweeps started together
tests/test_faults_sweeps_together.py's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


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
    from trainables.process_identity import is_running

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
