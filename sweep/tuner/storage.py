"""Where a sweep's files live: the storage root (``ray_results/`` or ``MJP_SWEEP_STORAGE``), a
sweep's unique directory name, its log file (and Ray's logs linked beside it), and the trials a
resume restores, read from Tune's saved experiment state as plain JSON."""

from __future__ import annotations

import itertools
import json
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import pyarrow.fs

from sweep.tuner.state import filesystem
from trainables.launch.ray_runtime import console_logs_to, ray_session_logs

LOG_FILE = "sweep.log"


def storage_root(path: str | None) -> str:
    """Where Tune keeps experiments: ``--storage``, ``$MJP_SWEEP_STORAGE`` or ./ray_results."""
    path = path or os.environ.get("MJP_SWEEP_STORAGE") or "ray_results"
    return absolute(path)


def absolute(path: str) -> str:
    """A local path made absolute (pyarrow and Tune refuse relative ones); a URI as it is."""
    return path if "://" in path else str(Path(path).resolve())


@dataclass(frozen=True)
class SweepPaths:
    """Where one sweep's files are: its Tune experiment ``storage/name`` and, beside it, the Ray
    Train state of its multi-worker trials ``storage/name-trials``. ``storage``: an absolute
    directory or a URI (``s3://...``)."""

    storage: str
    name: str

    @property
    def experiment_dir(self) -> str:
        return f"{self.storage}/{self.name}"

    @property
    def trials_dir(self) -> str:
        return f"{self.storage}/{self.name}-trials"

    @classmethod
    def of(cls, experiment_dir: str) -> SweepPaths:
        """The paths of the sweep whose experiment directory ``experiment_dir`` is (``mjp sweep resume DIR``)."""
        storage, name = posixpath.split(absolute(experiment_dir).rstrip("/"))
        return cls(storage, name)


def log_file_for(experiment_dir: str, name: str, file_name: str = LOG_FILE) -> Path:
    """The log file (a sweep's ``sweep.log``, a training's ``train.log``): in the experiment
    directory when that is local, else ./logs/."""
    return Path(experiment_dir) / file_name if "://" not in experiment_dir else Path("logs").resolve() / f"{name}.log"


def announce(stream: TextIO | None, text: str) -> None:
    import sys

    print(text, file=stream or sys.stdout, flush=True)


def start_logging(experiment_dir: str, name: str, verbose: bool, file_name: str = LOG_FILE) -> Path:
    log = log_file_for(experiment_dir, name, file_name)
    console_logs_to(log, verbose)
    return log


def link_ray_logs(experiment_dir: str) -> None:
    logs = ray_session_logs()
    link = Path(experiment_dir) / "ray_logs"
    if logs is None or "://" in experiment_dir:
        return
    if link.is_symlink():  # an earlier driver's Ray session (a resume: its folder may be gone with its node)
        link.unlink()
    if not link.exists():
        link.symlink_to(logs, target_is_directory=True)


def claim_sweep_name(storage: str, base: str) -> str:
    """A sweep name that no other sweep in ``storage`` has, by construction: its directory is
    created here, exclusively, so a second sweep started in the same second gets ``<base>-2``
    (its own directory, MLflow parent run and Optuna study). A remote storage gets a random suffix."""
    if "://" in storage:
        import secrets

        return f"{base}-{secrets.token_hex(3)}"
    Path(storage).mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        name = base if n == 1 else f"{base}-{n}"
        try:
            (Path(storage) / name).mkdir()
        except FileExistsError:
            continue
        return name
    raise AssertionError("unreachable")


def remove_sweep_dirs(paths: SweepPaths) -> None:
    """Remove a local sweep's directories (its experiment directory and its trials' storage)."""
    import shutil

    if "://" in paths.storage:
        return
    for path in (paths.experiment_dir, paths.trials_dir):
        shutil.rmtree(path, ignore_errors=True)


def restored_trial_ids(experiment_dir: str) -> set[str]:
    """The trial ids in the sweep's newest saved experiment state: the trials a resume restores."""
    return set(saved_trial_statuses(experiment_dir))


def saved_trial_statuses(experiment_dir: str) -> dict[str, str]:
    """``{trial id: Tune status}`` (``TERMINATED``, ``ERROR``, ``RUNNING``, ...) in the sweep's newest
    saved experiment state. Read as plain JSON (the trials' states are JSON strings; nothing is unpickled)."""
    fs, path = filesystem(experiment_dir)
    states = [
        i.path
        for i in fs.get_file_info(pyarrow.fs.FileSelector(path))
        if i.base_name.startswith("experiment_state-") and i.base_name.endswith(".json")
    ]
    if not states:
        return {}
    with fs.open_input_stream(max(states)) as fh:
        saved = json.loads(fh.read().decode())
    statuses = {}
    for trial_state, _ in saved.get("trial_data", []):
        trial = json.loads(trial_state)
        if isinstance(trial.get("trial_id"), str):
            statuses[trial["trial_id"]] = str(trial.get("status"))
    return statuses
