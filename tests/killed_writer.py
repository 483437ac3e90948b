"""A SQLite writer killed inside its transaction, as SIGKILL, the OOM killer or a lost machine
leave one: the store's pages half-written and a hot journal (``<db>-journal``) beside it."""

from __future__ import annotations

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
