"""How long an ``mjp`` command takes from start to exit, ended as it is (``trainables/process_end.py``:
exit handlers, then no finalization) and with Python's usual exit (``sys.exit(main())``), in one
run: wall and CPU seconds of the whole process (its children included), median of ``--repeats``
interleaved runs each. Commands that load the heavy libraries show the difference: ``sweep plan``
(torch, timm, Optuna, the pre-flight) and ``sweep status`` (MLflow) on an empty store.

    python benchmarks/bench_process_end.py [--repeats 5] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.published import publish

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = (("sweep", "plan", "quickstart"), ("sweep", "status"))
WAYS = {
    "as shipped (process_end)": [sys.executable, "-m", "sweep.cli"],
    "usual exit (sys.exit(main()))": [sys.executable, "-c", "import sys; from sweep.cli.run import main; sys.exit(main())"],
}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="append the table to this Markdown file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db", "MJP_HOME": tmp, "PYTHONPATH": str(ROOT)}
        make_store = "import mlflow, os; mlflow.MlflowClient(os.environ['MLFLOW_TRACKING_URI']).search_experiments()"
        subprocess.run([sys.executable, "-c", make_store], env=env, check=True, capture_output=True)
        for way in WAYS.values():  # warm the page cache before timing
            for command in COMMANDS:
                timed([*way, *command], env)
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.repeats):
            for command in COMMANDS:
                for name, way in WAYS.items():
                    times.setdefault((" ".join(command), name), []).append(timed([*way, *command], env))
    lines = [
        f"### bench_process_end: an `mjp` command from start to exit ({platform.machine()}, {os.cpu_count()} cores), "
        f"median of {args.repeats} interleaved runs",
        "",
        "| command | ended | wall s | CPU s | wall vs usual |",
        "| --- | --- | --- | --- | --- |",
    ]
    for command in COMMANDS:
        text = " ".join(command)
        usual = statistics.median(w for w, _ in times[(text, list(WAYS)[1])])
        for name in WAYS:
            wall = statistics.median(w for w, _ in times[(text, name)])
            cpu = statistics.median(c for _, c in times[(text, name)])
            lines.append(f"| `mjp {text}` | {name} | {wall:.2f} | {cpu:.2f} | {wall / usual:.2f}x |")
    table = "\n".join(lines) + "\n"
    publish(args.out, table)


if __name__ == "__main__":
    main()
