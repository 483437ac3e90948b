"""SIGTERM and SIGHUP stop a command as Ctrl-C does: ``ray job stop``, systemd and batch schedulers
send SIGTERM, a closed terminal or a dropped SSH session SIGHUP, and a driver must then close its
MLflow runs (KILLED), save Tune's state and say how to resume, as after Ctrl-C, instead of dying
at once (SIGHUP's default) or inside Ray.

``sigterm_as_ctrl_c()`` routes SIGTERM to whatever SIGINT does at that moment: Tune's own handler
while ``Tuner.fit`` runs (a graceful stop: the trials end, the experiment is saved, ``fit``
returns), else Python's, which raises ``KeyboardInterrupt`` in the main thread. ``ray.init``
installs a SIGTERM handler of its own (it exits at once, leaving runs RUNNING), so
``trainables.launch.ray_runtime.ensure_ray`` calls this again after it. ``interrupted_status()``
is the exit status of an interrupted command: 143 after SIGTERM, 129 after SIGHUP, 130 after SIGINT.
``ctrl_c_restored_after()`` wraps ``Tuner.fit``: Tune leaves its handler installed when no signal
ended the run, which would swallow a Ctrl-C or SIGTERM during the final analysis. It also lets
``signal_received()`` see a Ctrl-C that Tune's handler took.

A stop is never lost in a finalizer. Python runs a signal's handler in the main thread between two
bytecodes; when those are a finalizer's (a ``__del__``, a weak reference's callback such as
SQLAlchemy's during a garbage collection) the ``KeyboardInterrupt`` cannot reach the code the
finalizer interrupted: Python prints it as "Exception ignored in ..." and drops it, and the
command went on to exit 0. ``sigterm_as_ctrl_c()`` also installs an unraisable hook that takes
such a dropped stop silently and has a thread of this module send the signal again to the main
thread, whose handler raises once the finalizer has returned (or, in another finalizer, is
dropped and sent again).
"""

from __future__ import annotations

import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

_received: list[int] = []
_under_tune: list[object] = []  # the SIGINT handler ``ctrl_c_restored_after`` gave Tune to put back


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)  # Tune's handler, or Python's default_int_handler (KeyboardInterrupt)
    else:  # SIG_DFL or SIG_IGN: stop as Python's default would
        raise KeyboardInterrupt


_dropped_stops: queue.SimpleQueue[None] = queue.SimpleQueue()
_hook_before: list[Callable[[sys.UnraisableHookArgs], object]] = []  # the unraisable hook before this module's


def _queue_dropped_stops(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: a stop raised in a finalizer is queued for ``_send_dropped_stops``;
    anything else goes to the hook that was there before. The hook itself sends nothing: a signal
    handled while it runs would be raised inside it, and Python drops that one for good."""
    if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        _dropped_stops.put(None)
    else:
        _hook_before[0](unraisable)


def _send_dropped_stops() -> None:
    """Send each dropped stop to the main thread again, as a signal (so that one blocked in a
    system call wakes): the SIGTERM or SIGHUP it was, else SIGINT."""
    while True:
        _dropped_stops.get()
        signal.pthread_kill(threading.main_thread().ident or 0, _received[-1] if _received else signal.SIGINT)


def sigterm_as_ctrl_c() -> None:
    """Route SIGTERM and SIGHUP to SIGINT's handler, and have a stop raised in a finalizer sent
    again instead of dropped (only the main thread may set handlers; elsewhere nothing changes)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
        signal.signal(signal.SIGHUP, _on_sigterm)
        if not _hook_before:  # once a process
            _hook_before.append(sys.unraisablehook)
            sys.unraisablehook = _queue_dropped_stops
            threading.Thread(target=_send_dropped_stops, name="mjp-dropped-stops", daemon=True).start()


def signal_received() -> bool:
    """Whether SIGTERM or SIGHUP has come to this process, or, in ``ctrl_c_restored_after``'s block,
    a Ctrl-C that Tune's handler took (Tune then puts back the handler it found there, the block's)."""
    return bool(_received) or (bool(_under_tune) and signal.getsignal(signal.SIGINT) is _under_tune[-1])


def interrupted_status() -> int:
    """128 + the signal that interrupted this process: 143 for SIGTERM, 129 for SIGHUP, else 130 (Ctrl-C)."""
    return 128 + (_received[-1] if _received else signal.SIGINT)


@contextmanager
def ctrl_c_restored_after() -> Iterator[None]:
    """SIGINT's handler as it was before, once the block (``Tuner.fit``) ends. Tune installs its
    own for the run and puts the old one back only when a signal arrives: after a run no signal
    ended, a Ctrl-C or SIGTERM during the final analysis (the outcome, the tables, the report)
    set a flag nothing read any more, and the command went on to exit 0.

    In the block SIGINT's handler is one of this module's that does what ``before`` does: Tune
    saves it and puts it back when it takes a stop signal, which is how ``signal_received()``
    knows of a Ctrl-C that only Tune saw (Tune's handler cannot be wrapped: it is made in ``fit``).
    With ``TUNE_DISABLE_SIGINT_HANDLER=1`` Tune installs none, and ``signal_received()`` would
    answer yes in the block; the project never sets it."""
    before = signal.getsignal(signal.SIGINT)
    main = threading.current_thread() is threading.main_thread()

    def as_before(signum: int, frame: FrameType | None) -> None:  # a second Ctrl-C, after Tune's stop
        if callable(before):
            before(signum, frame)
        elif before != signal.SIG_IGN:
            raise KeyboardInterrupt

    if main:
        signal.signal(signal.SIGINT, as_before)
        _under_tune.append(as_before)
    try:
        yield
    finally:
        if main:
            _under_tune.remove(as_before)
            if before is not None:  # None: not set from Python; ``as_before`` stays, raising KeyboardInterrupt
                signal.signal(signal.SIGINT, before)
