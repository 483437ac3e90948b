"""A process named by pid, start time and pid namespace: a reused pid is not the process it named."""

import os
import subprocess
import sys

from trainables.process_identity import identity, identity_running, is_running, start_time


def test_this_process_is_named_and_runs_and_a_reused_pid_is_not_it():
    me = identity()
    namespace, pid, started = me.split(".")
    assert int(pid) == os.getpid() and int(started) == start_time(os.getpid()) and namespace.isdigit()
    assert identity_running(me) is True
    assert identity_running(f"{namespace}.{pid}.{int(started) + 1}") is False  # the pid, another process's start
    assert is_running(os.getpid()) and not is_running(os.getpid(), int(started) + 1)


def test_an_ended_process_no_longer_runs_and_what_cannot_be_told_is_unknown():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    named = identity(child.pid)
    assert identity_running(named) is True
    child.stdin.close()
    child.wait()
    assert identity(child.pid) is None and identity_running(named) is False and start_time(child.pid) is None
    namespace = named.split(".")[0]
    other_namespace = f"{int(namespace) + 1}.{child.pid}.1"  # pids of another namespace mean nothing here
    for unknown in ("", "unknown", "1.2", "a.b.c", "1.2.3.4", other_namespace):
        assert identity_running(unknown) is None, unknown
