"""Scratch folders: gone after their block, also on an exception, and after a SIGKILL once the next
one is made; never a folder of a living process, of another pid namespace, not named so, or a link."""

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trainables.process_identity import identity
from trainables.scratch import SCRATCH_PREFIX, abandoned_removed, folder_for_this_process, scratch_folder

ROOT = Path(__file__).resolve().parents[2]

_HOLDS_A_FOLDER = r"""
import sys
from trainables.scratch import scratch_folder

with scratch_folder(parent=sys.argv[1]) as folder:
    (folder / "state.pt").write_bytes(b"x" * 1000)
    print(folder, flush=True)
    sys.stdin.readline()  # killed here
"""


def test_a_folder_is_gone_after_its_block_and_after_an_exception_in_it(tmp_path):
    with scratch_folder(parent=tmp_path) as folder:
        assert folder.parent == tmp_path and folder.name.startswith(f"{SCRATCH_PREFIX}{identity()}-")
        assert list(folder.iterdir()) == [] and folder.stat().st_mode & 0o777 == 0o700
        (folder / "state.pt").write_bytes(b"x")
    assert not folder.exists()
    with pytest.raises(RuntimeError), scratch_folder(parent=tmp_path) as folder:
        raise RuntimeError("a failed save")
    assert list(tmp_path.iterdir()) == []


def test_a_killed_process_folder_goes_when_the_next_is_made_and_nothing_else_does(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDS_A_FOLDER, str(tmp_path)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    held = Path(holder.stdout.readline().strip())  # the event: the folder is made and written
    boot, namespace, pid, started = identity().split(".")
    dead = f"{boot}.{namespace}.{holder.pid}.1"  # the holder's pid, another start: gone
    kept = {
        "living": tmp_path / f"{SCRATCH_PREFIX}{identity()}-a",  # this process: it runs
        "another namespace": tmp_path / f"{SCRATCH_PREFIX}{boot}.{int(namespace) + 1}.{holder.pid}.1-b",
        "another machine": tmp_path / f"{SCRATCH_PREFIX}{'0' * 32}.{namespace}.{holder.pid}.1-b",
        "not named so": tmp_path / f"{SCRATCH_PREFIX}notes",
        "a longer prefix": tmp_path / f"{SCRATCH_PREFIX}x-{dead}-c",
        "another prefix": tmp_path / f"mjp-other-{dead}-c",
        "an odd digit": tmp_path / f"{SCRATCH_PREFIX}{boot}.{namespace}.\u00b2.1-c",  # once a ValueError in every scratch_folder
    }
    for folder in kept.values():
        folder.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    link = tmp_path / f"{SCRATCH_PREFIX}{dead}-d"  # a dead owner's name, but a link
    link.symlink_to(target)
    reused = tmp_path / f"{SCRATCH_PREFIX}{boot}.{namespace}.{pid}.{int(started) + 1}-e"  # this pid, another start: its owner is gone
    reused.mkdir()

    assert abandoned_removed(parent=tmp_path) == [reused]  # the holder lives: its folder stays
    assert (held / "state.pt").stat().st_size == 1000
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert (held / "state.pt").stat().st_size == 1000  # nothing ran at the kill
    with scratch_folder(parent=tmp_path) as new:
        assert not held.exists()
    assert not new.exists()
    assert all(folder.is_dir() for folder in kept.values())
    assert link.is_symlink() and (target / "keep.txt").read_text() == "keep"


def test_a_folder_for_the_process_stays_while_it_runs_and_goes_after(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    mine = folder_for_this_process()
    with scratch_folder():
        assert mine.is_dir()  # its owner runs
    done = subprocess.run(
        [sys.executable, "-c", "from trainables.scratch import folder_for_this_process; print(folder_for_this_process())"],
        cwd=ROOT,
        env={"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = Path(done.stdout.strip())
    assert theirs.parent == tmp_path and theirs.is_dir()  # its process has ended: nothing removed it
    with scratch_folder():
        assert not theirs.exists() and mine.is_dir()
