"""The files the training side writes (a data folder's manifest, the shards and their marker, a
training checkpoint) are whole or absent after a full disk or a kill, and a link at their name is
replaced, never written through: they once were written in place."""

import json
import subprocess
import sys

import torch

from sweep.study.names import PROJECT_DIR
from tests.trainables.data.test_datasets import make_imagefolder


def _foreign_link(at, tmp_path):
    """A 0444 file outside the folder, and a link to it at ``at``: the target's text."""
    target = tmp_path / f"not-the-platform's-{at.name}"
    target.write_text("someone else's file\n")
    target.chmod(0o444)
    at.symlink_to(target)
    return target


def test_the_manifest_replaces_a_link_at_its_name_and_leaves_the_target_as_it_was(tmp_path):
    from trainables.data.folder.manifest import MANIFEST_FILE, write_manifest

    images = tmp_path / "images"
    make_imagefolder(images)
    target = _foreign_link(images / MANIFEST_FILE, tmp_path)
    path = write_manifest(images)
    assert not path.is_symlink() and json.loads(path.read_text())["train_images"] == 4
    assert target.read_text() == "someone else's file\n"


def _in_child(code: str, limit: int) -> subprocess.CompletedProcess:
    """``code`` run in a child whose files may not grow past ``limit`` bytes (as on a full disk)."""
    script = f"import resource\nresource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n{code}"
    return subprocess.run([sys.executable, "-c", script], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300)


def test_shards_cut_by_a_full_disk_are_absent_not_torn_and_no_marker_claims_them(tmp_path):
    from trainables.data.folder.shards import SHARD_MARKER

    images = tmp_path / "images"
    make_imagefolder(images, per_class=6)
    sizes = [p.stat().st_size for p in (images / "train").rglob("*.png")]
    out = tmp_path / "shards"
    done = _in_child(
        f"from trainables.data.folder.prepare import prepare_shards\nprepare_shards({str(images)!r}, {str(out)!r}, images_per_shard=3)",
        limit=sum(sorted(sizes)[:2]),  # less than any shard of three images holds
    )
    assert done.returncode != 0 and "File too large" in done.stderr, done.stderr[-2000:]
    assert [p.name for p in out.rglob("*") if p.is_file()] == [], "a torn shard, a part file or a marker was left"
    assert not (out / SHARD_MARKER).exists()


def _checkpoint(tmp_path, epoch: int):
    from trainables.train.state import TrainState

    model = torch.nn.Linear(64, 64)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    state = TrainState(model, optimizer, scheduler, torch.amp.GradScaler("cpu", enabled=False), total_steps=10, epoch=epoch)
    return state, state.save(tmp_path)


def test_a_checkpoint_written_into_a_full_disk_leaves_the_old_one_whole(tmp_path):
    from trainables.train.state import load_safely

    _, path = _checkpoint(tmp_path, epoch=3)
    before = path.read_bytes()
    code = (
        "import torch\n"
        "from tests.trainables.test_written_by_the_rooms import _checkpoint\n"
        "from pathlib import Path\n"
        f"_checkpoint(Path({str(tmp_path)!r}), epoch=4)\n"
    )
    done = _in_child(code, limit=len(before) // 2)
    assert done.returncode != 0 and "cannot write the checkpoint" in done.stderr, done.stderr[-2000:]
    assert path.read_bytes() == before and load_safely(path)["epoch"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name], "nothing left aside"


def test_a_checkpoint_replaces_a_link_at_its_name(tmp_path):
    from trainables.train.state import CHECKPOINT_FILE

    target = _foreign_link(tmp_path / CHECKPOINT_FILE, tmp_path)
    _, path = _checkpoint(tmp_path, epoch=1)
    assert not path.is_symlink() and path.stat().st_size > 1000
    assert target.read_text() == "someone else's file\n"
