"""A store whose schema MLflow did not leave whole or current (a command stopped while MLflow made
or upgraded it, before stores were made aside; a newer MLflow's store) is one line naming it and
what to do, never MLflow's traceback; what can be refused before MLflow writes is left as it was."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from tests.killed_writer import killed_while_making
from tests.mjp_here import mjp_here
from trainables.tracking.store import check_store_readable, check_store_writable, ready_store
from trainables.tracking.store_file import TrackingError


def cut_short(tmp: Path, **cut) -> tuple[str, Path]:
    """The store a command killed while MLflow made its schema left in place (MLflow's own open,
    as this project's commands opened a new store before they made it aside)."""
    db = tmp / "mlflow.db"
    uri = f"sqlite:///{db}"
    killed_while_making(f"from mlflow import MlflowClient; MlflowClient({uri!r}).search_experiments()", **cut)
    return uri, db


def digest(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


def refusal(check, uri: str) -> str:
    with pytest.raises(TrackingError) as err:
        check(uri)
    message = str(err.value)
    assert "\n" not in message
    return message


# the cuts below are statement numbers in MLflow 3.17's making of a store (about 440 statements); each
# lands in one class: 3 among the first tables, 30 inside a migration whose table is made, 430 in the last
# migrations, with every table there
def test_a_store_cut_among_its_first_tables_is_refused_untouched(tmp_path):
    uri, db = cut_short(tmp_path, at=3)
    before = digest(db)
    for check in (check_store_readable, check_store_writable):
        message = refusal(check, uri)
        assert message.startswith(f"the MLflow store {db} was cut short while MLflow made its schema"), message
        assert "move it away and a new store is made there" in message
    assert digest(db) == before


def test_a_store_left_inside_a_batch_migration_is_refused_untouched(tmp_path):
    uri, db = cut_short(tmp_path, before="INSERT INTO _alembic_tmp_")  # the copy table made, not yet filled
    before = digest(db)
    message = refusal(check_store_writable, uri)
    assert message.startswith(f"the MLflow store {db} was left part-way through a change of its schema (its table _alembic_tmp_"), message
    assert digest(db) == before


def test_a_store_whose_migration_meets_its_own_table_is_one_line_and_a_new_store_after_moving_it(tmp_path, capsys):
    uri, db = cut_short(tmp_path, at=30)
    out = mjp_here(capsys, "sweep", "status", "--uri", uri)
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"error: the MLflow store {db} was left part-way through a change of its schema (revision "), line
    assert "already exists" in line and "it holds 0 runs" in line and "Traceback" not in out.stderr
    db.rename(tmp_path / "cut.db")  # what the line says to do
    ready_store(uri).create_experiment("after")
    check_store_readable(uri)


def test_a_store_at_an_older_revision_names_the_upgrade_and_the_way_out(tmp_path):
    uri, db = cut_short(tmp_path, at=430)
    message = refusal(check_store_writable, uri)
    assert message.startswith(f"the MLflow store {db} has an older schema (revision "), message
    assert f".venv/bin/mlflow db upgrade sqlite:///{db}" in message and "move it away" in message


def test_a_store_of_a_newer_mlflow_is_refused_before_mlflow_opens_it(tmp_path, capsys):
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    ready_store(uri).create_run(experiment_id="0")
    with sqlite3.connect(db) as con:
        con.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
    con.close()
    before = digest(db)
    message = refusal(check_store_readable, uri)
    assert message.startswith(f"the MLflow store {db} was made by a newer MLflow than this project's "), message
    assert "revision ffffffffffff is unknown here; it holds 1 run)" in message
    assert digest(db) == before


def test_a_reader_does_not_wait_on_the_lock_a_serving_slurm_job_holds_on_the_store_s_folder(tmp_path):
    """`mjp sweep status` on the shared store while a job serves it (the job's ``flock`` on the folder,
    held for its whole run) reads it, as before the schema check; were it to wait, the test's timeout ends it."""
    import fcntl
    import os

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    ready_store(uri)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as sweep/cluster/slurm/job.py's _lock_store
        check_store_readable(uri)
    finally:
        os.close(fd)
