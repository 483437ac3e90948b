"""Timing a command as a whole process, from its start to its exit (``bench_process_start``,
``bench_process_end``): the arguments those benchmarks share, the environment their commands run
in (an MLflow store, the project on the path) and one timed run."""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: what the ``mjp`` command does first (``trainables/process_start.py``), for a ``python -c`` way of running it
SET_COLLECTOR = "from trainables.process_start import fewer_full_collections; fewer_full_collections(); "


def bench_args(doc: str) -> argparse.Namespace:
    """``--repeats N --out FILE``, described by the first paragraph of ``doc``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="append the table to this Markdown file")
    return parser.parse_args()


def command_env(tmp: str) -> dict[str, str]:
    """This environment, with an MLflow store, ``MJP_HOME`` in ``tmp`` and the project on the path."""
    return {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db", "MJP_HOME": tmp, "PYTHONPATH": str(ROOT)}


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one process run to its end."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime
