"""The local twin's processes, as ``mjp cluster down`` finds them: a process that left the head's
process group for one of its own and renamed itself (as Ray's workers do: ``ray::IDLE``, no
session path on its command line) is still the twin's while it is in the head's session, and
``down`` ends it with the rest instead of leaving it to notice its raylet gone a minute later."""

from __future__ import annotations

import subprocess
import sys

from sweep.cluster.processes import session_processes
from sweep.cluster.twin import down

# a "head" in a session of its own whose child leaves the head's process group, then both wait
LEADER = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import os, sys; os.setpgid(0, 0); print(os.getpid(), flush=True); sys.stdin.read()"],
                         stdout=subprocess.PIPE, text=True)
print(child.stdout.readline().strip(), flush=True)
sys.stdin.read()
"""


def test_a_process_in_its_own_group_but_the_head_s_session_is_the_twin_s_and_down_ends_it(tmp_path):
    session = tmp_path / "twin"
    session.mkdir()
    head = subprocess.Popen(
        [sys.executable, "-c", LEADER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        worker = int(head.stdout.readline())
        assert worker not in session_processes(session)  # not named, not in a group the twin recorded
        (session / "ray-head.pgid").write_text(str(head.pid))  # what `up` records
        found = session_processes(session)
        assert head.pid in found and worker in found
        ended = down(session, grace_s=5)
        assert worker in ended and session_processes(session) == []
    finally:
        head.kill()
        head.wait()
