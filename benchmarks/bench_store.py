"""A new SQLite MLflow store, made as the platform makes every one (``create_store_whole``: aside,
its journal in memory and no syncs, then synced whole and linked into place) and as MLflow makes one
itself (in place: each of its schema statements committed with a journal file written, synced and
deleted), in one process: wall and CPU seconds per store, median of ``--repeats`` interleaved stores
of each way, after one warm-up store of each. The stores go to a new folder in ``--dir`` (default:
the system's temporary folder); the disk under it decides what a sync costs.

    python benchmarks/bench_store.py [--repeats 8] [--dir DIR] [--out BENCHMARKS.md]
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainables.launch.ray_runtime import prepare_environment  # noqa: E402

prepare_environment()  # MLflow's telemetry off before it is imported

import mlflow  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from benchmarks.published import publish  # noqa: E402
from trainables.tracking.store import create_store_whole  # noqa: E402
from trainables.tracking.store_schema import engine_disposed, schema_work_unlogged  # noqa: E402


def by_mlflow(path: Path) -> None:
    """The store MLflow makes on its first open of ``path``, where it is: what a command did before
    the platform made its stores aside (and what ``mlflow`` does for a user)."""
    uri = f"sqlite:///{path}"
    with schema_work_unlogged():
        MlflowClient(uri).search_experiments(max_results=1)
    engine_disposed(uri)


WAYS: dict[str, Callable[[Path], None]] = {
    "as shipped (create_store_whole)": create_store_whole,
    "MLflow itself, in place": by_mlflow,
}


def timed(make: Callable[[Path], None], path: Path) -> tuple[float, float]:
    """Wall and CPU seconds (this process's) of making one store at ``path``, which must not exist."""
    wall, cpu = time.perf_counter(), time.process_time()
    make(path)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=8, help="stores of each way (default: 8)")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores are made (default: the temporary folder)")
    parser.add_argument("--out", help="append the table to this Markdown file")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.dir is not None and not args.dir.is_dir():
        parser.error(f"--dir {args.dir}: no such folder")
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in WAYS}
    with tempfile.TemporaryDirectory(prefix="bench-store-", dir=args.dir) as tmp:
        folder = Path(tmp)
        for k, make in enumerate(WAYS.values()):  # MLflow's migration scripts read once, the page cache warm
            make(folder / f"warm-{k}.db")
        for i in range(args.repeats):
            for k, (name, make) in enumerate(WAYS.items()):
                path = folder / f"store-{i}-{k}.db"
                times[name].append(timed(make, path))
                if not path.is_file():
                    raise SystemExit(f"{name}: no store at {path}")
        filesystem = subprocess.run(["df", "--output=fstype", tmp], capture_output=True, text=True).stdout.split()[-1:]
    baseline = list(WAYS)[1]
    base_wall = statistics.median(w for w, _ in times[baseline])
    base_cpu = statistics.median(c for _, c in times[baseline])
    lines = [
        f"### bench_store: a new SQLite MLflow store ({platform.machine()}, {os.cpu_count()} cores, "
        f"{filesystem[0] if filesystem else 'unknown'} file system), median of {args.repeats} interleaved stores",
        f"MLflow {mlflow.__version__}; one process, after one warm-up store of each way",
        "",
        "| made | wall s | CPU s | wall vs MLflow's | CPU vs MLflow's |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name in WAYS:
        wall = statistics.median(w for w, _ in times[name])
        cpu = statistics.median(c for _, c in times[name])
        lines.append(f"| {name} | {wall:.2f} | {cpu:.2f} | {wall / base_wall:.2f}x | {cpu / base_cpu:.2f}x |")
    publish(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
