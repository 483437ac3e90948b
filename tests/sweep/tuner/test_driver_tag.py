"""The ``mjp.driver`` tag names a sweep's driver so that a pid Linux reused does not read as the
driver, and ``mjp sweep status`` says "driver gone" for such a sweep; tags written before it
(``host:pid``) are still read."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from sweep.cli import main
from sweep.tuner.owner import driver_alive, driver_tag
from trainables.process_identity import identity
from trainables.tracking import schema

HOST = socket.gethostname()


def test_the_tag_names_this_process_by_its_identity_and_reads_as_alive():
    assert driver_tag() == f"{HOST}:{identity()}"
    assert driver_alive(driver_tag()) is True


def test_a_reused_pid_is_not_the_driver():
    """This process's pid with another start time: the driver that had this pid has ended, and
    the pid now runs this process. A ``host:pid`` tag cannot tell them apart."""
    boot_ns, _, started = identity().rpartition(".")
    assert driver_alive(f"{HOST}:{boot_ns}.{int(started) - 1}") is False
    assert driver_alive(f"{HOST}:{os.getpid()}") is True  # the old form: alive


def test_an_ended_driver_is_gone_in_either_form():
    done = subprocess.run(
        [sys.executable, "-c", "import os; from trainables.process_identity import identity; print(os.getpid(), identity())"],
        check=True,
        capture_output=True,
        text=True,
    )
    pid, named = done.stdout.split()
    assert driver_alive(f"{HOST}:{named}") is False
    assert driver_alive(f"{HOST}:{pid}") is (pid == str(os.getpid()))  # False, unless the pid came round to this process


def test_what_cannot_be_told_here_is_unknown():
    here = identity()
    other_boot = "0" * 32 + here[32:]
    unknown = (None, "", "no-colon", f"elsewhere:{here}", f"{HOST}:{other_boot}", f"{HOST}:١٢", f"{HOST}:junk", f"elsewhere:{os.getpid()}")
    for tag in unknown:
        assert driver_alive(tag) is None, tag


def test_status_says_driver_gone_where_the_drivers_pid_runs_another_process(tmp_path, capsys):
    from trainables.tracking.runs import RunTracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    boot_ns, _, started = identity().rpartition(".")
    RunTracker.create(
        uri,
        "e",
        run_name="s-1",
        tags={schema.TAG_KIND: "sweep", schema.TAG_DRIVER: f"{HOST}:{boot_ns}.{int(started) - 1}", schema.TAG_EXPERIMENT_DIR: "/x/s-1"},
    )
    running = {schema.TAG_KIND: "sweep", schema.TAG_DRIVER: driver_tag(), schema.TAG_EXPERIMENT_DIR: "/x/s-2"}
    RunTracker.create(uri, "e", run_name="s-2", tags=running)
    capsys.readouterr()
    assert main(["sweep", "status", "--uri", uri]) == 0
    out = capsys.readouterr().out
    assert "s-1  [driver gone (killed?), trials stopped]" in out and "resume: mjp sweep resume /x/s-1" in out, out
    assert "s-2  [running]" in out and "mjp sweep resume /x/s-2" not in out, out


def test_a_driver_that_ends_while_status_reads_its_sweep_reads_the_same_for_the_sweep_and_its_trials(tmp_path, capsys, monkeypatch):
    """``mjp sweep status`` asks once whether a sweep's driver runs: one that ends between two
    asks showed "[running]" above a trial "stopped with its driver", or the reverse."""
    from sweep.commands import status
    from trainables.tracking.runs import RunTracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tags = {schema.TAG_KIND: "sweep", schema.TAG_DRIVER: driver_tag(), schema.TAG_EXPERIMENT_DIR: "/x/s-1"}
    parent = RunTracker.create(uri, "e", run_name="s-1", tags=tags)
    RunTracker.create(uri, "e", run_name="trial-0", parent_run_id=parent.run_id)  # RUNNING, as its driver left it
    answers = iter([True, False])  # alive when first asked, ended by the second ask
    monkeypatch.setattr(status, "driver_alive", lambda tag: next(answers, False))
    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()
    assert main(["sweep", "status", "--uri", uri]) == 0
    out = capsys.readouterr().out
    assert "s-1  [running]  1 running of ? trials" in out, out
    assert next(line.split()[:2] for line in out.splitlines() if "trial-0" in line) == ["trial-0", "running"], out
    assert "mjp sweep resume /x/s-1" not in out, out
