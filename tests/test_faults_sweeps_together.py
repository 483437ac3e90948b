"""Sweeps started together: each gets its own name in the same second, and all create their runs
in a store that none of them has created yet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlflow

ROOT = Path(__file__).resolve().parents[1]


def test_two_sweeps_started_in_the_same_second_get_their_own_names(tmp_path):
    from sweep.tuner.storage import claim_sweep_name

    first, second = (claim_sweep_name(str(tmp_path / "ray"), "faults-20261124-031500") for _ in range(2))
    assert (first, second) == ("faults-20261124-031500", "faults-20261124-031500-2")
    assert (tmp_path / "ray" / first).is_dir() and (tmp_path / "ray" / second).is_dir()


RACE = """
import sys, time
from trainables.tracking.runs import RunTracker
print("imported", flush=True)
sys.stdin.readline()  # the start: every process has imported MLflow
began = time.monotonic()
RunTracker.create(sys.argv[1], "race", run_name="sweep")
print(began, time.monotonic(), flush=True)
"""


def test_sweeps_starting_together_on_a_fresh_store_all_create_their_runs(tmp_path):
    """Three processes create their first run in a store that does not exist yet, at the same
    moment: without a lock, two of them run MLflow's migrations over each other and die. They
    start when all three have imported MLflow (a line each on stdin), and the test checks that
    the three creations overlapped in time: the race it is about did happen."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, uri], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    for p in procs:
        assert p.stdout.readline() == "imported\n", p.communicate()[1]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    ends = [p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in ends]
    spans = [tuple(map(float, out.split())) for out, _ in ends]
    assert max(began for began, _ in spans) < min(ended for _, ended in spans), f"the creations did not overlap: {spans}"
    client = mlflow.MlflowClient(uri)
    assert len(client.search_runs([client.get_experiment_by_name("race").experiment_id])) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db", "mlartifacts"] or sorted(p.name for p in tmp_path.iterdir()) == [
        "mlflow.db"
    ]
