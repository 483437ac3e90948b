"""A sweep's state file, ``<experiment dir>/mjp_sweep.json``: what ``mjp sweep resume`` follows
(the study, its digest, the overrides, the tracking URI, the parent run, the Optuna storage).
Plain JSON, signed with the sweep's pickles (``sweep.security.signatures``): an edited copy is refused,
and so is a study whose files changed since the sweep started."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from sweep.security.signatures import STATE_FILE, CutCopies, cut_copies, sign_files
from sweep.security.sweep_files import write_file
from sweep.study.load import Study, check_study, load_study
from sweep.study.names import PROJECT_DIR
from trainables.errors import UserError


def filesystem(path: str) -> tuple[Any, str]:
    """``pyarrow.fs.FileSystem`` and path for a local path or a URI (pyarrow is imported when a
    state is read or written, not when this module is)."""
    import pyarrow.fs

    if "://" in path:
        return pyarrow.fs.FileSystem.from_uri(path)
    return pyarrow.fs.LocalFileSystem(), str(Path(path).resolve())


#: The code's layout of what Tune pickles (the trainable and its ``TrialSpec``, the callbacks, the
#: searcher): a sweep saved under another layout names modules or fields this code does not have.
#: 1: the flat trainables/ and sweep/ folders; 2: the rooms (docs/layout.md); 3: one callback
#: pickled by the sweep's name (``sweep/tuner/callbacks.py``), the trial's ``TrialRecipe``.
LAYOUT = 3
#: the last commit of each earlier layout: where a sweep saved under it resumes
LAYOUT_LAST_COMMIT = {1: "ca4b2b3", 2: "e5f0a54"}


@dataclass(frozen=True)
class SweepState:
    """What ``mjp sweep resume`` follows; the one reader and writer of ``mjp_sweep.json``.
    ``study_in_project``/``study_digest``/``optuna_storage`` are None in layout-1 sweeps, which
    ``check_resumable`` refuses; ``layout`` is 1 in sweeps started before the field existed."""

    name: str
    study: str
    uri: str
    experiment: str
    parent_run_id: str
    smoke: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    study_in_project: str | None = None
    study_digest: str | None = None
    optuna_storage: str | None = None
    layout: int = LAYOUT

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> SweepState:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{"layout": 1, **{k: v for k, v in raw.items() if k in known}})

    def check_resumable(self) -> None:
        """Refuse, in one line, a sweep Tune saved under another layout of the code's modules."""
        if self.layout != LAYOUT:
            commit = LAYOUT_LAST_COMMIT.get(self.layout)
            where = f"resume it from commit {commit} (`git checkout {commit}`, then `mjp sweep resume` again), or " if commit else ""
            raise UserError(
                f"sweep {self.name} was started under an {'older' if self.layout < LAYOUT else 'other'} layout of this code "
                f"(layout {self.layout}; this code's: {LAYOUT}): Tune's saved state names modules and fields this code does not "
                f"have: {where}start it anew with `mjp sweep run`"
            )


class SweepFinished(Exception):
    """The sweep a resume was asked for had finished: every trial ended and its parent run is
    FINISHED. Nothing was changed; the message says so and where its results are."""


def write_state(experiment_dir: str, state: SweepState) -> None:
    fs, path = filesystem(experiment_dir)
    fs.create_dir(path, recursive=True)
    content = state.to_json().encode()
    # a resume follows this file, so an edit is refused: signed first (the manifest keeps the old
    # signature too), then written whole (a kill or a full disk leaves the old state, still signed)
    sign_files(experiment_dir, {STATE_FILE: content})
    write_file(experiment_dir, STATE_FILE, content)


def read_state(experiment_dir: str) -> SweepState:
    fs, path = filesystem(experiment_dir)
    try:
        with fs.open_input_stream(f"{path}/{STATE_FILE}") as fh:
            return SweepState.from_json(fh.read().decode())
    except (FileNotFoundError, OSError, ValueError, TypeError):
        import pyarrow.fs

        try:
            gone = fs.get_file_info(path).type == pyarrow.fs.FileType.NotFound
        except OSError:  # a bucket that cannot be asked: say what is known
            gone = False
        what = "does not exist" if gone else f"is not a sweep directory (no readable {STATE_FILE})"
        raise UserError(f"{experiment_dir} {what}; pass the directory `mjp sweep run` printed (under ray_results/)") from None


def in_project(path: str) -> str | None:
    """``path`` relative to the project, when it lies inside it (a shipped study, or a study file
    of a Ray job's working directory, which a later job unpacks elsewhere); else None."""
    try:
        return str(Path(path).resolve().relative_to(PROJECT_DIR))
    except ValueError:
        return None


def study_of_state(state: SweepState, *, check: bool = True) -> Study:
    """The study a sweep's state names, as the sweep started it: found at its recorded path, or
    at the same place in this copy of the project; refused in one line when its files changed
    since (before the pre-flight, which ``check`` runs)."""
    path = state.study
    if not Path(path).is_file() and state.study_in_project and (PROJECT_DIR / state.study_in_project).is_file():
        path = str(PROJECT_DIR / state.study_in_project)
    study = load_study(path, smoke=state.smoke, overrides=state.extra, check=False)
    if state.study_digest != study.digest:
        raise UserError(
            f"the study {path} or its base config changed since sweep {state.name} started; a resume trains what "
            "the sweep started with: put the files back as they were, or start a new sweep with `mjp sweep run`"
        )
    if check:
        check_study(study)
    return study


class Resumable(NamedTuple):
    """A sweep directory as a resume found it: its state, its study, and what a driver ended in
    the middle of Tune's copy left for the resume to mend (``cut_copies``)."""

    state: SweepState
    study: Study
    cut: CutCopies


def load_resumable(experiment_dir: str) -> Resumable:
    """A sweep directory's state and study, each refused in one line before anything of the
    directory is unpickled: not a sweep, signatures that do not match, another layout of the
    code, changed study files. The study's pre-flight is the resume's to run. The directory's
    signed files are read once, here: the resume mends from ``cut`` what they showed."""
    state = read_state(experiment_dir)  # plain JSON: is this a sweep directory at all?
    cut = cut_copies(experiment_dir)  # every signed file verified (``verify_sweep_dir``'s checks)
    state.check_resumable()
    return Resumable(state, study_of_state(state, check=False), cut)


def in_store(state: SweepState, uri: str | None, experiment_dir: str) -> SweepState:
    """The state a resume follows, in the MLflow store at ``uri`` (a server that moved: a new
    twin, a replaced head), else at the recorded one: the store must hold the sweep's parent run,
    under its name and experiment. Refused in one line within seconds (MLflow's HTTP retries
    bounded) when it does not answer or is another store; nothing is written to either."""
    from trainables.tracking.runs import run_identity
    from trainables.tracking.store import TrackingError, check_store_readable, is_tracking_server, server_silence, tracking_uri

    target = tracking_uri(uri) if uri else state.uri
    moved = f"if its server moved (a new head or twin), continue in it with `mjp sweep resume {experiment_dir} --uri NEW_URI`"
    silence = server_silence(target, 5.0) if is_tracking_server(target) else None
    if silence is not None:
        raise TrackingError(f"sweep {state.name}'s MLflow store at {target} does not answer ({silence}); {moved}")
    check_store_readable(target)  # a missing SQLite file is not created
    found = run_identity(target, state.parent_run_id)
    if found != (state.name, state.experiment):
        what = (
            f"its run {state.parent_run_id} is {found[0]!r} in experiment {found[1]!r}"
            if isinstance(found, tuple)
            else f"no run {state.parent_run_id} ({found})"
        )
        then = "give the URI of the store the sweep started in" if uri else moved
        raise TrackingError(
            f"the MLflow store at {target} is not the store of sweep {state.name} (parent run {state.parent_run_id} in experiment "
            f"{state.experiment!r}): {what}; {then}"
        )
    from trainables.tracking.runs import RunTracker, restore_hint

    deleted = RunTracker(target, state.parent_run_id).deleted()
    if deleted:
        raise UserError(
            f"sweep {state.name}'s MLflow parent run {state.parent_run_id} is in a deleted {deleted} of the store at {target}; "
            f"a resume writes into it: restore it ({restore_hint(target, state.parent_run_id, deleted)}) and resume again, "
            "or start the study anew with `mjp sweep run`"
        )
    if target == state.uri:
        return state
    from trainables.tracking.store import optuna_storage_url

    return dataclasses.replace(state, uri=target, optuna_storage=optuna_storage_url(target) if state.optuna_storage else None)
