"""What ``trainables/process_start.py`` saves a process: CPU and wall seconds, from start to exit,
of an ``mjp`` command and of a trial's imports, each run as shipped (fewer full garbage
collections) and with Python's own thresholds, in one run: median of ``--repeats`` interleaved
runs each, full collections counted in the imports' case.

    python benchmarks/process/bench_process_start.py [--repeats 5] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile

from benchmarks.process.timing import ROOT, SET_COLLECTOR, bench_args, command_env, timed
from benchmarks.published import publish

#: what a trial's process imports before it trains (``trainables.launch.trial`` and the loop)
TRIAL_IMPORTS = "import trainables.launch.trial, trainables.train.loop"
#: the command as ``mjp`` runs it, except the collector: ``command()`` is ``fewer_full_collections`` + this
USUAL_COMMAND = "from trainables.process_end import run_and_exit; from sweep.cli.run import main; run_and_exit(main)"
CASES = {
    "`mjp sweep plan quickstart`": {
        "as shipped": [sys.executable, "-m", "sweep.cli", "sweep", "plan", "quickstart"],
        "Python's thresholds": [sys.executable, "-c", USUAL_COMMAND, "sweep", "plan", "quickstart"],
    },
    "a trial's imports": {
        "as shipped": [sys.executable, "-c", SET_COLLECTOR + TRIAL_IMPORTS],
        "Python's thresholds": [sys.executable, "-c", TRIAL_IMPORTS],
    },
}


def full_collections(code: str, env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-c", code + "; import gc; print(gc.get_stats()[2]['collections'])"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split()[-1])


def main() -> None:
    args = bench_args(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        env = command_env(tmp)
        for ways in CASES.values():  # warm the page cache before timing
            for command in ways.values():
                timed(command, env)
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.repeats):
            for case, ways in CASES.items():
                for way, command in ways.items():
                    times.setdefault((case, way), []).append(timed(command, env))
        shipped, usual = full_collections(SET_COLLECTOR + TRIAL_IMPORTS, env), full_collections(TRIAL_IMPORTS, env)
    lines = [
        f"### bench_process_start: a process from start to exit ({platform.machine()}, {os.cpu_count()} cores), "
        f"median of {args.repeats} interleaved runs",
        "",
        "| process | collector | wall s | CPU s | CPU vs Python's |",
        "| --- | --- | --- | --- | --- |",
    ]
    for case, ways in CASES.items():
        base = statistics.median(c for _, c in times[(case, "Python's thresholds")])
        for way in ways:
            wall = statistics.median(w for w, _ in times[(case, way)])
            cpu = statistics.median(c for _, c in times[(case, way)])
            lines.append(f"| {case} | {way} | {wall:.2f} | {cpu:.2f} | {cpu / base:.2f}x |")
    lines += ["", f"Full collections during a trial's imports: {shipped} as shipped, {usual} with Python's thresholds."]
    publish(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
