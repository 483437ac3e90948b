"""The files the training side writes for later (a data folder's manifest, the shards and their
marker) are whole or absent after a full disk or a kill, and a link at their name is replaced,
never written through: the manifest once was written in place."""

import json
import subprocess
import sys

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
