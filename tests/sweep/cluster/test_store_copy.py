"""The MLflow store kept beyond the cluster (``mjp cluster store save`` / ``restore``): a copy that
is consistent while the server writes, restored only onto a disk that has none."""

import sqlite3

import pytest

from sweep.cli import main
from sweep.cluster.store_copy import restore_store, save_store
from tests.killed_writer import die_inside_a_transaction
from trainables.errors import ConfigError
from trainables.tracking.store import check_store_readable


def make_store(path, rows: int, wal: bool = True) -> None:
    """A SQLite file with ``rows`` rows; ``wal``: in write-ahead-log mode, some still only in the log
    (MLflow's own stores use SQLite's default, a rollback journal)."""
    db = sqlite3.connect(path)
    if wal:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA wal_autocheckpoint=0")  # what a busy server leaves: commits not yet in the main file
    db.execute("CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, name TEXT)")
    db.executemany("INSERT INTO runs (name) VALUES (?)", [(f"run {i}",) for i in range(rows)])
    db.commit()
    return db


def rows(path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute("SELECT name FROM runs ORDER BY id")]


def test_a_saved_store_restores_with_every_commit_even_those_still_in_the_write_ahead_log(tmp_path):
    live = make_store(tmp_path / "mlflow.db", 50)  # open, as the server holds it
    assert (tmp_path / "mlflow.db-wal").stat().st_size > 0
    kept = tmp_path / "bucket" / "mlflow" / "mlflow.db"
    assert save_store(tmp_path / "mlflow.db", str(kept)) > 0
    assert not (kept.parent / "mlflow.db.part").exists()
    new_head = tmp_path / "new-head" / "mlflow.db"
    assert restore_store(str(kept), new_head).startswith("restored")
    assert rows(new_head) == [f"run {i}" for i in range(50)]
    live.close()


def test_restore_never_replaces_a_store_on_the_disk_and_starts_fresh_without_a_copy(tmp_path):
    make_store(tmp_path / "kept.db", 3).close()
    head = tmp_path / "head.db"
    make_store(head, 5).close()
    assert restore_store(str(tmp_path / "kept.db"), head).startswith("kept")
    assert len(rows(head)) == 5, "the head's own store is the newer one"
    said = restore_store(str(tmp_path / "none.db"), tmp_path / "fresh.db")
    assert said == f"no saved store at {tmp_path}/none.db: a new store at {tmp_path}/fresh.db"
    # made whole here (not left to the server to make in place, cut short if the head stops meanwhile)
    check_store_readable(f"sqlite:///{tmp_path}/fresh.db")
    with sqlite3.connect(tmp_path / "fresh.db") as db:  # as the server would have made it: its artifacts are served
        assert db.execute("SELECT name, artifact_location FROM experiments").fetchall() == [("Default", "mlflow-artifacts:/0")]


def test_a_damaged_copy_or_a_missing_store_is_refused_in_one_line_and_changes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(ConfigError, match="not a readable SQLite file"):
        restore_store(str(bad), tmp_path / "head.db")
    assert list(tmp_path.iterdir()) == [bad]
    assert main(["cluster", "store", "save", str(tmp_path / "missing.db"), str(tmp_path / "kept.db")]) == 2
    assert "no MLflow store there to save" in capsys.readouterr().err
    assert main(["cluster", "store", "save", str(bad), str(tmp_path / "kept.db"), "--every", "1"]) == 2
    assert "--every 1: allowed 10 seconds or more" in capsys.readouterr().err
    assert not (tmp_path / "kept.db").exists()


def test_the_commands_say_what_they_did(tmp_path, capsys):
    make_store(tmp_path / "mlflow.db", 2).close()
    assert main(["cluster", "store", "save", str(tmp_path / "mlflow.db"), str(tmp_path / "kept" / "mlflow.db")]) == 0
    assert "saved" in capsys.readouterr().out
    assert main(["cluster", "store", "restore", str(tmp_path / "kept" / "mlflow.db"), str(tmp_path / "head" / "mlflow.db")]) == 0
    assert "restored" in capsys.readouterr().out and rows(tmp_path / "head" / "mlflow.db") == ["run 0", "run 1"]


def test_save_and_restore_never_write_through_a_link_and_leave_no_part_behind(tmp_path):
    make_store(tmp_path / "mlflow.db", 4).close()
    target = tmp_path / "someone-elses-file"
    target.write_text("not a store\n")
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    (bucket / "mlflow.db").symlink_to(target)  # a link where the copy is kept
    (bucket / "mlflow.db.part").symlink_to(target)  # and at the name a copy was once written to first
    save_store(tmp_path / "mlflow.db", str(bucket / "mlflow.db"))
    assert sorted(p.name for p in bucket.iterdir()) == ["mlflow.db", "mlflow.db.part"]
    assert not (bucket / "mlflow.db").is_symlink() and target.read_text() == "not a store\n"
    head = tmp_path / "head"
    head.mkdir()
    (head / "mlflow.db.part").symlink_to(target)
    assert restore_store(str(bucket / "mlflow.db"), head / "mlflow.db").startswith("restored")
    assert sorted(p.name for p in head.iterdir()) == ["mlflow.db", "mlflow.db.part"]  # the restore's own folder is gone
    assert len(rows(head / "mlflow.db")) == 4 and not (head / "mlflow.db").is_symlink()
    assert target.read_text() == "not a store\n"


#: a restore that stops mid-copy: it writes the first 4 KiB, says so on stdout, and waits to be killed
_KILLED_MID_COPY = """
import shutil, signal, sys
from sweep.cluster.store_copy import restore_store

def first_chunk_then_wait(src, dst, length=0):
    dst.write(src.read(4096))
    dst.flush()
    print("copying", flush=True)
    signal.pause()

shutil.copyfileobj = first_chunk_then_wait
restore_store(sys.argv[1], sys.argv[2])
"""


def test_a_restore_killed_mid_copy_leaves_its_folder_only_until_the_next_restore(tmp_path):
    """SIGKILL mid-download leaves the restore's folder with a partial copy beside the store (the
    store itself is not made); the next restore removes it, and leaves alone a folder of a restore
    that still runs and a folder it did not name."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from trainables.process_identity import identity

    make_store(tmp_path / "kept.db", 200).close()
    head = tmp_path / "head"
    killed = subprocess.Popen(
        [sys.executable, "-c", _KILLED_MID_COPY, str(tmp_path / "kept.db"), str(head / "mlflow.db")],
        cwd=Path(__file__).resolve().parents[3],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert killed.stdout.readline() == "copying\n"  # the event: the copy has begun
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    (abandoned,) = head.iterdir()
    here = identity().rsplit(".", 2)[0]  # this machine's boot and pid namespace
    assert abandoned.name.startswith(f".mlflow.db.restore-{here}.{killed.pid}.") and (abandoned / "mlflow.db").stat().st_size == 4096
    running = head / f".mlflow.db.restore-{identity()}-x"  # this process runs: a restore in progress
    running.mkdir()
    other = head / ".mlflow.db.restore-notes"
    other.mkdir()

    assert restore_store(str(tmp_path / "kept.db"), head / "mlflow.db").startswith("restored")
    assert sorted(p.name for p in head.iterdir()) == sorted(["mlflow.db", running.name, other.name])
    assert len(rows(head / "mlflow.db")) == 200


def test_a_store_a_killed_server_left_mid_transaction_is_saved_as_its_last_commit(tmp_path):
    make_store(tmp_path / "mlflow.db", 3, wal=False).close()
    journal = die_inside_a_transaction(tmp_path / "mlflow.db", "UPDATE runs SET name = 'half-written'")
    kept = tmp_path / "bucket" / "mlflow.db"
    assert save_store(tmp_path / "mlflow.db", str(kept)) > 0  # before: "not a readable SQLite store (attempt to write a readonly database)"
    assert not journal.exists()
    assert rows(kept) == ["run 0", "run 1", "run 2"]
