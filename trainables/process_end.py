"""How a command's process ends (``mjp``, a step of the GPU check): its exit handlers run, its output
is flushed, and then it exits without Python's finalization.

Python's finalization, after the exit handlers, frees every module and object one by one and runs
the garbage collector over them several times. With torch, timm (which pulls torch._dynamo and
sympy through torchvision), Ray and MLflow loaded, that takes 1 to 3 s of CPU, long after the
command's last line was printed: 1.5 s after importing torch and timm alone, 3 s in a sweep's
driver, and 0.8 to 1.1 s less in the whole of ``mjp sweep status`` and ``mjp sweep plan``
(``benchmarks/process/bench_process_end.py``, BENCHMARKS.md). Nothing the commands
write depends on it: files are written whole and closed (``trainables/written.py``), MLflow and
Optuna commit as they go, and what must happen at exit is an exit handler (``atexit``), which
still runs: Ray's shutdown, the removal of the AWS key folder, MLflow's end of an open run,
``multiprocessing``'s clean-up, ``weakref.finalize`` objects. Threads that are not daemons are
joined first, as the interpreter always does.

The handler that ends the process is registered before the command imports anything (exit
handlers run last in, first out), so it runs after every handler the command's libraries add.
A command that raises instead of returning a status (a bug: a traceback) ends the usual way.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Callable
from typing import NoReturn

#: the status of the command that returned, once it has
_RETURNED: list[int] = []


def run_and_exit(command: Callable[[], int | None]) -> NoReturn:
    """Run ``command`` as the process's whole work and exit with the status it returns (None: 0)."""
    atexit.register(_exit_now)
    status = command() or 0
    _RETURNED.append(status)
    sys.exit(status)


def _exit_now() -> None:
    if not _RETURNED:
        return  # raised: Python's own exit, with its traceback
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader gone (a closed pipe), a stream closed
            stream.flush()
    if "logging" in sys.modules:
        import logging

        logging.shutdown()  # its handlers flushed and closed, as its own exit handler would
    os._exit(_RETURNED[0])
