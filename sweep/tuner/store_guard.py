"""The sweep's MLflow store, watched while the trials run: a SQLite store whose file was deleted
or replaced (another file made at its path), or a trial that failed on a full disk, ends the
sweep at once in one line naming the store and the command that continues. Nothing more is
written to a lost store (a write would make a new, empty one at its path) and no trial is
retried against a store it cannot write (each retry failed the same way, minutes apiece). A
tracking server that no longer answers when the sweep ends (a Slurm ``scancel`` signals the job's
server with its driver) ends it in one line too, at once, instead of MLflow's retries of every
write, for minutes, while Slurm waits ``KillWait`` and then kills the job before it cleaned up.

The guard raises the failure from its Tune hook: Tune stops every trial (a trial it had just
scheduled to retry included) and ``fit`` raises; the callbacks' ``on_experiment_end`` run on
the way out, and the recorder writes nothing there once ``holds()`` is false. ``fit`` raises the
failure itself only when a step's hook raised it: raised from a failed trial's hook (the trial
met the lost store before the driver's step did, as happens on a loaded machine), it reaches the
driver as a ``TuneError`` holding its traceback as text, so ``StoreGuard.fit`` raises the guard's
failure, whatever Tune raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray import tune

from sweep.console.view import trial_error
from trainables.errors import DiskFullError, UserError, disk_full_reason
from trainables.launch.signals import interrupted_status, signal_received
from trainables.tracking.store import is_tracking_server, server_silence, sqlite_path


class StoreUnreachableError(UserError):
    """The sweep's MLflow server did not answer as the sweep ended: the driver ends at once, writing
    nothing more to it (each write would be retried for minutes). Exit status: the signal's
    (``interrupted_status``: a Ctrl-C's 130 included) when a signal ended the sweep, as when a Slurm
    ``scancel`` ends the job's server with its driver, else 1."""

    store_lost = True  # what ``run_closed_on_error`` reads: the parent run is not written to

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class StoreLostError(UserError):
    """The sweep's MLflow store was deleted or replaced while it ran: a failure after the start
    (exit status 1); the message names the store and what to do."""

    exit_code = 1
    store_lost = True  # what ``run_closed_on_error`` reads: the parent run is not written to


def _identity(path: Path | None) -> tuple[int, int] | None:
    """The file's (device, inode): a file deleted and made again at the same path differs."""
    if path is None:
        return None
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


class StoreGuard(tune.Callback):
    """Watches the store at ``uri`` (a SQLite file; a server's store is its own to keep) from the
    driver's start; ``then``: the command that continues, for the one line."""

    def __init__(self, uri: str, then: str):
        self.uri, self.then = uri, then
        path = sqlite_path(uri)
        self.path = path.resolve() if path is not None else None
        self.identity = _identity(self.path)
        self.failure: UserError | None = None

    def _stop(self, failure: UserError) -> None:
        if self.failure is None:
            self.failure = failure

    def holds(self) -> bool:
        """Whether the store may still be read and written: no failure seen, and its file is the
        one the sweep started with (checked now: a ``stat``)."""
        if self.failure is None and self.identity is not None and _identity(self.path) != self.identity:
            how = "its file was deleted" if _identity(self.path) is None else "its file was deleted and another made at its path"
            self._stop(
                StoreLostError(
                    f"the MLflow store {self.uri} was lost while the sweep ran ({how}); nothing more was written to it: "
                    f"put the store back (from a copy), then {self.then}"
                )
            )
        return self.failure is None

    def _raise(self) -> None:
        if not self.holds() and self.failure is not None:
            raise self.failure

    def fit(self, tuner: tune.Tuner) -> tune.ResultGrid:
        """``tuner.fit()``; once the store was lost, stopped answering or its disk filled, that
        failure is raised in place of what Tune raised (a second Ctrl-C included), or returned."""
        try:
            grid = tuner.fit()
        except BaseException:
            if self.failure is not None:
                raise self.failure from None
            raise
        if self.failure is not None:
            raise self.failure
        return grid

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        self._raise()

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        """Before the recorder closes the runs (the guard's hooks run first): a tracking server is
        asked once, briefly, whether it still answers; if not, nothing more is written to it."""
        if self.failure is not None or not is_tracking_server(self.uri):
            return
        silence = server_silence(self.uri, seconds=5.0)
        if silence is not None:
            self._stop(
                StoreUnreachableError(
                    f"the MLflow server {self.uri} did not answer as the sweep ended ({silence}), so the runs it left RUNNING "
                    f"stay so until it answers again: then {self.then} and closes them",
                    interrupted_status() if signal_received() else 1,
                )
            )

    def _trial_failed(self, trial: Any) -> None:
        error = trial_error(trial)
        full = disk_full_reason(error) if error is not None else None
        if full is not None:
            self._stop(
                DiskFullError(
                    f"a disk this command writes to is full ({full}); free some space (the MLflow store {self.uri}, "
                    f"the run's storage), then {self.then}"
                )
            )

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._trial_failed(trial)
        self._raise()  # before the retry Tune just scheduled starts

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._trial_failed(trial)
        self._raise()
