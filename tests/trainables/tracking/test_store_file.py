"""A store a killed process left inside a transaction (its hot journal beside it) is the store
as its last commit left it: commands read it, resume into it and save it; none calls it
unreadable or asks for a restore."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.killed_writer import die_inside_a_transaction, killed_while_making
from trainables.tracking.store import check_store_readable, check_store_writable, create_store_whole, ready_store
from trainables.tracking.store_file import TrackingError


def store_with_an_experiment(tmp: Path) -> tuple[str, Path]:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp}/mlflow.db"
    MlflowClient(uri).create_experiment("kept")
    return uri, tmp / "mlflow.db"


def experiments(db: Path) -> set[str]:
    with sqlite3.connect(db) as con:
        return {name for (name,) in con.execute("SELECT name FROM experiments")}


def test_a_store_a_killed_writer_left_mid_transaction_reads_as_its_last_commit(tmp_path, capsys):
    from sweep.cli import main

    uri, db = store_with_an_experiment(tmp_path)
    journal = die_inside_a_transaction(db, "UPDATE experiments SET name = name || ' (half-written)'")
    check_store_readable(uri)  # `mjp sweep status`, `analyze`: before, "cannot be read: attempt to write a readonly database"
    assert not journal.exists(), "SQLite rolled the transaction back"
    assert experiments(db) == {"Default", "kept"}
    assert main(["sweep", "status", "--uri", uri]) == 0, capsys.readouterr().err
    die_inside_a_transaction(db, "DELETE FROM experiments")
    check_store_writable(uri)  # `mjp sweep resume`, `sweep run` into it
    assert experiments(db) == {"Default", "kept"}


def test_a_store_with_a_hot_journal_that_cannot_be_written_names_the_journal(tmp_path):
    uri, db = store_with_an_experiment(tmp_path)
    journal = die_inside_a_transaction(db, "UPDATE experiments SET name = name || ' (half-written)'")
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i (a file even root cannot write) is not available here")
    try:
        with pytest.raises(TrackingError) as err:
            check_store_readable(uri)
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)
    assert str(err.value) == (
        f"the MLflow store {db} holds a transaction a killed process left unfinished ({journal}), and this process "
        "cannot write to the store to roll it back; run the command as a user who can write to it"
    )
    check_store_readable(uri)
    assert experiments(db) == {"Default", "kept"}


def test_a_writer_killed_just_after_the_check_does_not_hide_a_study_s_sweeps(tmp_path, monkeypatch):
    """``sweep_studies`` reads the store right after checking it; a transaction killed between
    the two is rolled back there too, not read as a store without sweeps."""
    from mlflow.tracking import MlflowClient

    from trainables.tracking import schema, store_file
    from trainables.tracking.sqlite_sweeps import sweep_studies

    uri, db = store_with_an_experiment(tmp_path)
    client = MlflowClient(uri)
    kept = client.get_experiment_by_name("kept").experiment_id
    client.create_run(kept, tags={schema.TAG_KIND: schema.KIND_SWEEP, schema.TAG_STUDY: "quickstart"})
    checked = store_file.check_store_file

    def check_then_a_writer_dies(path: Path) -> None:
        checked(path)
        die_inside_a_transaction(db, "DELETE FROM tags")

    monkeypatch.setattr(store_file, "check_store_file", check_then_a_writer_dies)
    assert sweep_studies(uri) == {"quickstart"}  # before: None, the read-only open refused by the hot journal
    assert not db.with_name(db.name + "-journal").exists()


@pytest.mark.parametrize("at", [5, 200])  # among the first tables; amid the migrations (of some 440 statements)
def test_a_command_killed_while_it_creates_the_store_leaves_none_and_the_next_creates_it_whole(tmp_path, at):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    killed_while_making(f"from trainables.tracking.store import ready_store; ready_store({uri!r})", at=at)
    assert not (tmp_path / "mlflow.db").exists(), "a store cut short was left where the next command opens it"
    ready_store(uri).create_experiment("after the kill")
    check_store_readable(uri)
    assert "after the kill" in experiments(tmp_path / "mlflow.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"], "the killed creator's aside file is gone"


@pytest.mark.parametrize("served", [False, True], ids=["a command's", "the tracking server's"])
def test_a_new_store_is_made_without_mlflow_s_log_lines_on_the_console(tmp_path, capfd, served):
    """MLflow logs "Creating initial MLflow database tables..." and "Updating database tables" to the
    console with a handler of its own (``mjp cluster up --local`` printed both on a new store); the
    logger is left at the level it had, so that its warnings still show."""
    import logging
    import logging.handlers

    logger, seen = logging.getLogger("mlflow.store.db.utils"), logging.handlers.BufferingHandler(capacity=1000)
    level = logger.level
    logger.setLevel(logging.INFO)  # as MLflow sets it up, whatever an earlier test of this process did
    logger.addHandler(seen)
    try:
        create_store_whole(tmp_path / "mlflow.db", served=served)
        assert logger.level == logging.INFO
    finally:
        logger.removeHandler(seen)
        logger.setLevel(level)
    assert experiments(tmp_path / "mlflow.db") == {"Default"}
    assert [r.getMessage() for r in seen.buffer] == [] and capfd.readouterr().err == ""


def test_a_store_made_aside_skips_the_disk_syncs_and_is_published_as_mlflow_makes_it(tmp_path):
    """The aside file's connections journal in memory and do not sync (``scratch_writes``); a database
    opened meanwhile keeps SQLite's defaults, and the store published is MLflow's own: the schema and
    revision of one MLflow makes by itself, with SQLite's default journal when next opened."""
    from mlflow.tracking import MlflowClient
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import Engine

    seen: dict[str, tuple[str, int]] = {}

    def modes(connection, _record, _proxy):  # at each checkout: after every "connect" listener
        name = connection.execute("PRAGMA database_list").fetchone()[2]
        journal, sync = (connection.execute(f"PRAGMA {pragma}").fetchone()[0] for pragma in ("journal_mode", "synchronous"))
        seen[Path(name).name] = (journal, sync)

    def meanwhile(connection, _record):  # another database, opened while the store is made
        if "other.db" not in seen:
            seen["other.db"] = ("not opened", -1)
            other = create_engine(f"sqlite:///{tmp_path}/other.db")
            with other.connect():
                pass
            other.dispose()

    (tmp_path / "made").mkdir()
    event.listen(Engine, "checkout", modes)
    event.listen(Engine, "connect", meanwhile)
    try:
        create_store_whole(tmp_path / "made" / "mlflow.db")
    finally:
        event.remove(Engine, "connect", meanwhile)
        event.remove(Engine, "checkout", modes)
    aside = [name for name in seen if name.endswith(".creating")]
    assert aside and {seen[name] for name in aside} == {("memory", 0)}, seen
    assert seen["other.db"] == ("delete", 2), "a database other than the one made aside keeps SQLite's journal and syncs"

    (tmp_path / "mlflow").mkdir()
    MlflowClient(f"sqlite:///{tmp_path}/mlflow/mlflow.db").search_experiments(max_results=1)  # MLflow alone

    def schema(db: Path) -> tuple[list, list, str]:
        """Each table and index with its definition's clauses, in an order of their own: MLflow's
        migrations write a table's constraints in an order that varies with PYTHONHASHSEED."""
        with sqlite3.connect(db) as con:
            rows = con.execute("SELECT type, name, sql FROM sqlite_master")
            tables = sorted((kind, name, sorted(part.strip() for part in (sql or "").split(","))) for kind, name, sql in rows)
            revision = con.execute("SELECT version_num FROM alembic_version").fetchall()
            return tables, revision, con.execute("PRAGMA journal_mode").fetchone()[0]

    made, alone = schema(tmp_path / "made" / "mlflow.db"), schema(tmp_path / "mlflow" / "mlflow.db")
    assert made == alone and made[2] == "delete"
