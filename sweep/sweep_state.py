"""A sweep's state file, ``<experiment dir>/mjp_sweep.json``: what ``mjp sweep resume`` follows
(the study, its digest, the overrides, the tracking URI, the parent run, the Optuna storage).
Plain JSON, signed with the sweep's pickles (``sweep.signatures``): an edited copy is refused,
and so is a study whose files changed since the sweep started."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.fs

from sweep.signatures import STATE_FILE, sign_files
from sweep.study import PROJECT_DIR, Study, check_study, load_study
from trainables.errors import UserError


def filesystem(path: str) -> tuple[pyarrow.fs.FileSystem, str]:
    if "://" in path:
        return pyarrow.fs.FileSystem.from_uri(path)
    return pyarrow.fs.LocalFileSystem(), str(Path(path).resolve())


def write_state(experiment_dir: str, state: dict[str, Any]) -> None:
    fs, path = filesystem(experiment_dir)
    fs.create_dir(path, recursive=True)
    content = json.dumps(state, indent=2).encode()
    with fs.open_output_stream(f"{path}/{STATE_FILE}") as fh:
        fh.write(content)
    sign_files(experiment_dir, {STATE_FILE: content})  # a resume follows this file: an edit is refused


def read_state(experiment_dir: str) -> dict[str, Any]:
    fs, path = filesystem(experiment_dir)
    try:
        with fs.open_input_stream(f"{path}/{STATE_FILE}") as fh:
            return json.loads(fh.read().decode())
    except (FileNotFoundError, OSError, json.JSONDecodeError):
        raise UserError(f"{experiment_dir} is not a sweep directory (no readable {STATE_FILE}); pass the directory `mjp sweep run` printed") from None


def in_project(path: str) -> str | None:
    """``path`` relative to the project, when it lies inside it (a shipped study, or a study file
    of a Ray job's working directory, which a later job unpacks elsewhere); else None."""
    try:
        return str(Path(path).resolve().relative_to(PROJECT_DIR))
    except ValueError:
        return None


def study_of_state(state: dict[str, Any], *, check: bool = True) -> Study:
    """The study a sweep's state names, as the sweep started it: found at its recorded path, or
    at the same place in this copy of the project; refused in one line when its files changed
    since (before the pre-flight, which ``check`` runs)."""
    path = state["study"]
    if not Path(path).is_file() and state.get("study_in_project") and (PROJECT_DIR / state["study_in_project"]).is_file():
        path = str(PROJECT_DIR / state["study_in_project"])
    study = load_study(path, smoke=state["smoke"], overrides=state["extra"], check=False)
    if state.get("study_digest", study.digest) != study.digest:  # a sweep from before the digest: nothing to compare
        raise UserError(f"the study {path} or its base config changed since sweep {state['name']} started; a resume trains what "
                        "the sweep started with: put the files back as they were, or start a new sweep with `mjp sweep run`")
    if check:
        check_study(study)
    return study
