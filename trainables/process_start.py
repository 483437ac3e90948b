"""How a platform process starts: Python's cyclic garbage collector set for a process that loads
torch, timm, MLflow and Ray (the ``mjp`` command, the GPU check's steps, and through Ray's
``worker_process_setup_hook`` every Ray worker of a driver's job: trials, Ray Train's workers,
Ray Data's tasks), and set back once a trial's process has started.

Python (3.11, the project's interpreter) collects its oldest generation once more than 10
collections of the middle one have passed and the objects that survived them have grown by a
quarter. Imports make about a million objects that live as long as the process, so each full
collection walks everything loaded so far: a trial's imports (``trainables.launch.trial`` and the
training loop: torch, timm, MLflow, Ray Tune) ran 8 of them. Measured on this machine: 4.5 CPU-s
of imports with them and 3.8 without, in the process; 6.29 and 5.25 CPU-s for such a process from
start to exit (``benchmarks/process/bench_process_start.py``, BENCHMARKS.md).

``fewer_full_collections`` changes only the oldest generation's threshold, from 10 to
``OLDEST_THRESHOLD``: young and middle collections run as before. ``start_up_done``, called where
a trial's process begins to train, moves what the start-up made into the permanent generation,
which no collection walks until the process exits, and sets Python's thresholds back: a cycle
dropped in training is found as soon as Python would find it. The ``mjp`` command (a sweep's
driver, which holds no tensors) keeps the raised threshold to its end.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
from typing import Any

#: middle-generation collections between two full ones (Python's default: 10)
OLDEST_THRESHOLD = 1000

#: the thresholds the process started with (this module is imported before anything sets them)
_PYTHON_S = gc.get_threshold()


def fewer_full_collections() -> None:
    """Collect the oldest generation after more than ``OLDEST_THRESHOLD`` middle collections, not
    10; called first in a process, before its imports (Ray runs it by this name in each worker)."""
    gc.set_threshold(_PYTHON_S[0], _PYTHON_S[1], OLDEST_THRESHOLD)


def start_up_done() -> None:
    """The process has imported what it needs: freeze what exists now (``frozen_until_exit``)
    and collect as Python does."""
    frozen_until_exit()
    gc.set_threshold(*_PYTHON_S)


def frozen_until_exit() -> None:
    """Move every object that exists now into the permanent generation (``gc.freeze``), which no
    collection walks, until the process exits: then they go back (``gc.unfreeze``, at exit), so
    the interpreter's last collection frees them as it frees the rest. Left frozen, they are never
    freed, and an extension that counts its objects at exit reports them: triton's bindings (torch's
    compiler imports triton) printed "nanobind: leaked 64 types! ... leaked 514 functions!", 27
    lines, at the end of every trial's log and of every test process. That last collection walks
    the start-up's objects once (1.2 CPU-s here in a process holding torch, timm, MLflow and Ray),
    as it would have had they never been frozen."""
    gc.freeze()
    atexit.unregister(gc.unfreeze)  # once, however many trials a reused process starts
    atexit.register(gc.unfreeze)


def ray_job_runtime_env(address: str | None) -> dict[str, Any] | None:
    """The runtime env of a driver's Ray job (``ray.init``'s): every Ray worker of the job runs
    ``fewer_full_collections`` first, before it imports a trial or a task. Ray merges into it a
    submitted job's runtime env (``ray job submit --working-dir .``) and each Tune trial's
    ``env_vars``. None for a job submitted with a setup hook of its own, which keeps it (Ray
    refuses two), and through Ray Client (``ray://``), which does not pass the hook on; a new dict
    each time (``ray.init`` edits it)."""
    job = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR") or "{}")  # set by Ray's job manager
    if "worker_process_setup_hook" in (job.get("runtime_env") or {}) or (address or "").startswith("ray://"):
        return None
    return {"worker_process_setup_hook": f"{__name__}.{fewer_full_collections.__name__}"}
