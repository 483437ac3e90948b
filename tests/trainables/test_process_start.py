"""How a platform process starts (``trainables/process_start.py``): its imports run no full garbage
collection, while the young and middle generations are collected as before; the ``mjp`` command
and every Ray worker of a driver's job, Tune's trials with their own ``env_vars`` included, start so."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

from trainables.process_start import OLDEST_THRESHOLD

ROOT = Path(__file__).resolve().parents[2]

IMPORTS = """
import gc, sys
if sys.argv[1] == "set":
    from trainables.process_start import fewer_full_collections
    fewer_full_collections()
import torch
print(gc.get_stats()[2]["collections"], *gc.get_threshold())
"""


def full_collections_and_threshold(how: str) -> list[int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", IMPORTS, how], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return [int(x) for x in done.stdout.split()]


def test_importing_torch_runs_no_full_collection_and_the_younger_generations_keep_python_s_thresholds():
    usual = full_collections_and_threshold("usual")
    assert usual[0] >= 1, "importing torch ran no full collection at Python's thresholds: nothing to compare"
    assert full_collections_and_threshold("set") == [0, usual[1], usual[2], OLDEST_THRESHOLD]


def test_the_mjp_command_sets_it_before_it_runs_anything(monkeypatch):
    from sweep.cli.run import command

    ran_with: list[tuple[int, int, int]] = []
    monkeypatch.setattr("trainables.process_end.run_and_exit", lambda main: ran_with.append(gc.get_threshold()))
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's own
    try:
        command()
    finally:
        gc.set_threshold(*saved)
    assert ran_with == [(700, 10, OLDEST_THRESHOLD)]


def test_every_ray_worker_of_the_job_starts_with_it_a_trial_with_its_own_env_vars_too(local_ray):
    import ray

    @ray.remote(num_cpus=0)
    def task() -> int:
        return gc.get_threshold()[2]

    @ray.remote(num_cpus=0)
    class Trial:  # as Tune starts a trial: an actor with a runtime env of its own env_vars (class_cache)
        def seen(self) -> tuple[int, str]:
            return gc.get_threshold()[2], os.environ["TRIAL_VARIABLE"]

    trial = Trial.options(runtime_env={"env_vars": {"TRIAL_VARIABLE": "kept"}}).remote()
    assert ray.get(task.remote()) == OLDEST_THRESHOLD
    assert ray.get(trial.seen.remote()) == (OLDEST_THRESHOLD, "kept")
    ray.kill(trial)
