"""SIGTERM stops a command as Ctrl-C does: it reaches SIGINT's handler (Tune's graceful stop while
``Tuner.fit`` runs, else ``KeyboardInterrupt``), a run open at that moment is closed KILLED, and
the exit status says which signal (143, or 130 for Ctrl-C). Each case in a process of its own:
signal handlers belong to a process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"},
    )


def test_sigterm_closes_an_open_run_killed_and_exits_143(tmp_path):
    code = """
import os, signal, sys
from sweep.tuner.recorder import run_closed_on_error
from trainables.launch.signals import interrupted_status, sigterm_as_ctrl_c
from trainables.tracking.runs import RunTracker
from trainables.tracking.store import tracking_uri
sigterm_as_ctrl_c()
run = RunTracker.create(tracking_uri(), "signals", run_name="r")
try:
    with run_closed_on_error(run):
        os.kill(os.getpid(), signal.SIGTERM)
        print("not stopped")
except KeyboardInterrupt:
    print(run.status, interrupted_status())
"""
    out = _python(code, tmp_path)
    assert out.stdout.split() == ["KILLED", "143"], out.stderr


def test_sighup_a_closed_terminal_closes_an_open_run_killed_and_exits_129(tmp_path):
    """SIGHUP's default ends a process at once: a driver whose terminal closed left its runs RUNNING."""
    code = """
import os, signal
from sweep.tuner.recorder import run_closed_on_error
from trainables.launch.signals import interrupted_status, sigterm_as_ctrl_c
from trainables.tracking.runs import RunTracker
from trainables.tracking.store import tracking_uri
sigterm_as_ctrl_c()
run = RunTracker.create(tracking_uri(), "signals", run_name="r")
try:
    with run_closed_on_error(run):
        os.kill(os.getpid(), signal.SIGHUP)
        print("not stopped")
except KeyboardInterrupt:
    print(run.status, interrupted_status())
"""
    out = _python(code, tmp_path)
    assert out.stdout.split() == ["KILLED", "129"], out.stderr


def test_sigterm_goes_to_the_handler_sigint_has_at_that_moment_and_ctrl_c_stays_130(tmp_path):
    code = """
import os, signal
from trainables.launch.signals import interrupted_status, sigterm_as_ctrl_c
print(interrupted_status())
seen = []
signal.signal(signal.SIGINT, lambda s, f: seen.append(s))  # as Tune's handler during Tuner.fit: a graceful stop, no exception
sigterm_as_ctrl_c()
os.kill(os.getpid(), signal.SIGTERM)
print(seen == [signal.SIGINT], interrupted_status())
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job's ignored SIGINT: SIGTERM still stops it
try:
    os.kill(os.getpid(), signal.SIGTERM)
except KeyboardInterrupt:
    print("stopped")
"""
    out = _python(code, tmp_path)
    assert out.stdout.split() == ["130", "True", "143", "stopped"], out.stderr


@pytest.mark.parametrize("finalizer", ["__del__", "weakref_callback_in_a_collection"])
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stop_that_lands_in_a_finalizer_still_stops_the_command(finalizer, sig, status):
    """Python drops an exception raised in a finalizer ("Exception ignored in ..."): a Ctrl-C
    that came while SQLAlchemy's weak-reference callback ran in a garbage collection let
    `mjp sweep run` finish its report and exit 0. The stop is sent again instead; nothing is
    printed. Without it this spins until its time limit."""
    code = f"""
import gc, signal, weakref
from trainables.launch.signals import interrupted_status, sigterm_as_ctrl_c
sigterm_as_ctrl_c()
class Finalized:
    def __del__(self):
        signal.raise_signal({int(sig)})
def stop_in_a_finalizer():
    if {finalizer!r} == "__del__":
        Finalized()  # its last reference gone at once
    else:
        cycle = type("Cycle", (), {{}})()
        cycle.itself = cycle
        found = weakref.ref(cycle, lambda ref: signal.raise_signal({int(sig)}))
        del cycle
        gc.collect()
try:
    stop_in_a_finalizer()
    while True:  # only the stop ends it (a wait in a system call could miss a signal sent just before it)
        pass
except KeyboardInterrupt:
    print("stopped", interrupted_status())
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)
    assert out.stdout.split() == ["stopped", str(status)], out.stderr
    assert out.stderr == ""


def test_the_ray_a_command_starts_leaves_sigterm_routed_to_ctrl_c(local_ray):
    """``ray.init`` installs a SIGTERM handler that exits at once (runs left RUNNING, Ray's C++
    dump, exit 134); ``ensure_ray`` puts this one back."""
    from trainables.launch.signals import _on_sigterm

    assert signal.getsignal(signal.SIGTERM) is _on_sigterm
