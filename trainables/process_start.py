"""How a platform process starts: Python's cyclic garbage collector set for a process that loads
torch, timm, MLflow and Ray (the ``mjp`` command, and through Ray's ``worker_process_setup_hook``
every Ray worker of a sweep: trials, Ray Train's workers, Ray Data's tasks).

Python collects its oldest generation each time ten collections of the middle one have passed and
the objects that survived them have grown by a quarter. Imports make about a million objects that
live as long as the process, so each full collection walks everything loaded so far, and a trial's
imports (``trainables.launch.trial`` and the training loop: torch, timm, MLflow, Ray Tune) ran 8 of
them: 4.5 CPU-s with them, 3.8 without (process time, this machine). Starting a training then
costs about 1 CPU-s less in each of its processes, the driver and every trial.

Only the oldest generation's threshold changes, from 10 to ``OLDEST_THRESHOLD``: the young and
middle generations are collected as before, so cycles made and dropped in a training step are
freed within a few thousand allocations; an old cycle waits for the next full collection, which
Python still runs, after about ``OLDEST_THRESHOLD`` middle collections instead of 10.
"""

from __future__ import annotations

import gc

#: middle-generation collections between two full ones (Python's default: 10)
OLDEST_THRESHOLD = 1000


def fewer_full_collections() -> None:
    """Collect the oldest generation after ``OLDEST_THRESHOLD`` middle collections, not 10; called
    first thing in a process, before its imports (Ray runs it by this name in each worker)."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, OLDEST_THRESHOLD)
