"""A SQLite writer killed inside its transaction, as SIGKILL, the OOM killer or a lost machine
leave one: the store's pages half-written and a hot journal (``<db>-journal``) beside it; and a
process killed while it makes a store's schema (``killed_while_making``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_WRITER = """
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA cache_size=2")  # pages spill into the file before the commit
db.execute("BEGIN")
for statement in sys.argv[2:]:
    db.execute(statement)
db.execute("CREATE TABLE half_done (x BLOB)")
for _ in range(16):
    db.execute("INSERT INTO half_done VALUES (zeroblob(65536))")
os.kill(os.getpid(), 9)
"""


def die_inside_a_transaction(db: Path, *statements: str) -> Path:
    """Run ``statements`` (and a table ``half_done`` of 1 MiB) in one transaction on ``db`` in a
    process SIGKILLed before it commits; the hot journal it leaves."""
    done = subprocess.run([sys.executable, "-c", _WRITER, str(db), *statements], capture_output=True, text=True)
    assert done.returncode == -9, done.stderr
    journal = db.with_name(db.name + "-journal")
    assert journal.stat().st_size > 0, "the writer left no journal: nothing to roll back"
    return journal


_MAKER = """
import os, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine

made = 0

@event.listens_for(Engine, "before_cursor_execute")
def cut(conn, cursor, statement, *args):
    global made
    if statement.lstrip().upper().startswith(("CREATE", "ALTER", "DROP", "INSERT", "UPDATE")):
        made += 1
        before = os.environ["CUT_BEFORE"]
        if made == int(os.environ["CUT_AT"]) or (before and statement.lstrip().startswith(before)):
            os.kill(os.getpid(), 9)

exec(sys.argv[1])
"""


def killed_while_making(code: str, *, at: int = 0, before: str = "") -> None:
    """Run ``code`` in a process SIGKILLed as SQLAlchemy is about to run its ``at``-th schema
    statement, or the first beginning with ``before``: SQLite commits each of them on its own, so
    a store or storage being made is left cut short there."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "CUT_AT": str(at), "CUT_BEFORE": before, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", _MAKER, code], env=env, cwd=root, capture_output=True, text=True)
    assert done.returncode == -9, f"the cut never came: {done.stderr[-2000:]}"
