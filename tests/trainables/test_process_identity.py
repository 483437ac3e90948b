"""A process named by boot, pid namespace, pid and start time: a reused pid is not the process it
named, and a name from another machine, boot or namespace is neither alive nor dead here."""

import os
import subprocess
import sys
from pathlib import Path

from trainables.process_identity import identity, identity_running, is_running, start_time


def test_this_process_is_named_and_runs_and_a_reused_pid_is_not_it():
    me = identity()
    boot, namespace, pid, started = me.split(".")
    assert boot == Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "") and namespace.isdigit()
    assert int(pid) == os.getpid() and int(started) == start_time(os.getpid())
    assert identity_running(me) is True
    assert identity_running(f"{boot}.{namespace}.{pid}.{int(started) + 1}") is False  # the pid, another process's start
    assert is_running(os.getpid()) and not is_running(os.getpid(), int(started) + 1)


def test_an_ended_process_no_longer_runs_and_what_cannot_be_told_is_unknown():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    named = identity(child.pid)
    assert identity_running(named) is True
    child.stdin.close()
    child.wait()
    assert identity(child.pid) is None and identity_running(named) is False and start_time(child.pid) is None
    boot, namespace, pid, started = named.split(".")
    unknown = [
        f"{boot}.{int(namespace) + 1}.{pid}.{started}",  # another pid namespace's pids mean nothing here
        f"{'0' * 32}.{namespace}.{pid}.{started}",  # another boot, or another machine sharing the folder
        f"{boot}.{namespace}.\u00b2.{started}",  # a digit to str.isdigit, not to int()
        f"{boot}.{namespace}.{pid}",
        f"{boot.upper()}.{namespace}.{pid}.{started}",
        "",
        "unknown",
        "1.2.3.4",
    ]
    for name in unknown:
        assert identity_running(name) is None, name
