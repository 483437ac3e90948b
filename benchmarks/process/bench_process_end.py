"""How long an ``mjp`` command takes from start to exit, ended as it is (``trainables/process_end.py``:
exit handlers, then no finalization) and with Python's usual exit (``sys.exit(main())``), in one
run: wall and CPU seconds of the whole process (its children included), median of ``--repeats``
interleaved runs each. Commands that load the heavy libraries show the difference: ``sweep plan``
(torch, timm, Optuna, the pre-flight) and ``sweep status`` (MLflow) on an empty store.

    python benchmarks/process/bench_process_end.py [--repeats 5] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile

from benchmarks.process.timing import SET_COLLECTOR, bench_args, command_env, timed
from benchmarks.published import publish

COMMANDS = (("sweep", "plan", "quickstart"), ("sweep", "status"))
#: the command as ``mjp`` runs it (its collector set first, ``trainables/process_start.py``), ended the usual way
USUAL_EXIT = "import sys; " + SET_COLLECTOR + "from sweep.cli.run import main; sys.exit(main())"
WAYS = {
    "as shipped (process_end)": [sys.executable, "-m", "sweep.cli"],
    "usual exit (sys.exit(main()))": [sys.executable, "-c", USUAL_EXIT],
}


def main() -> None:
    args = bench_args(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        env = command_env(tmp)
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
