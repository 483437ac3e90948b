"""The console of a Tune run: one live view instead of Ray's logs.

In a terminal: a table that redraws in place, a row per trial labelled by what it is, with its
state, a progress bar over its epochs, where its current epoch is (step, img/s, share of time
waiting for data, the epoch's ETA: ``trainables.tracking.progress``, read from the trial's MLflow run
every few seconds, a quarter of an epoch where epochs are shorter), the objective (latest and best), its time, and the run's elapsed time
and ETA. Not in a terminal (CI, a pipe, a file): plain lines, no ANSI codes: one when a trial starts,
one when it ends (``mjp train``: one per epoch), a progress line per running trial once a
minute after its start, and the table once at the end. A trial that fails prints one line with its reason and
the path of its full error.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from ray import tune

from analysis.markdown import format_value
from sweep.console.table import ConsoleTable, Row, clock
from trainables.tracking.progress import Progress, describe

#: the shortest interval between two reads of the running trials' progress (MLflow queries)
MIN_POLL_S = 0.5


def restart_point(trial: Any) -> str:
    """Where a retried trial starts again, as its console line says it: its latest checkpoint's
    epoch, or the start when it had written none yet."""
    result = getattr(trial, "latest_checkpoint_result", None)
    epoch = (getattr(result, "metrics", None) or {}).get("epoch") if result is not None else None
    return f"from its epoch-{epoch} checkpoint" if epoch else "from the start (it had written no checkpoint yet)"


class ConsoleView(tune.Callback):
    """A Tune callback that is the whole console of a sweep or a training.

    ``label_of(params)`` and ``epochs_of(params)`` describe a trial from what was sampled;
    ``objectives`` are ``(metric, mode)`` pairs; ``per_epoch_lines``: print every epoch when not
    in a terminal (one training), else only starts and ends.
    """

    def __init__(
        self,
        title: str,
        label_of: Callable[[dict[str, Any]], str],
        epochs_of: Callable[[dict[str, Any]], int],
        objectives: list[tuple[str, str]],
        total_trials: int,
        *,
        per_epoch_lines: bool = False,
        stream: TextIO | None = None,
        progress_of: Callable[[str], Progress | None] | None = None,
        poll_s: float = 5.0,
        plain_progress_s: float = 60.0,
    ):
        """``progress_of(trial_id)``: the trial's progress within its epoch (polled every
        ``poll_s`` seconds for running trials; a plain line at most every ``plain_progress_s``)."""
        self.title, self.label_of, self.epochs_of = title, label_of, epochs_of
        self.objectives, self.total_trials, self.per_epoch_lines = objectives, total_trials, per_epoch_lines
        self.stream = stream or sys.stdout
        self.progress_of, self.poll_s, self.plain_progress_s = progress_of, poll_s, plain_progress_s
        self._polled_at: float | None = None
        self.table = ConsoleTable(title, objectives, total_trials, with_progress=progress_of is not None)
        self.rows, self.started = self.table.rows, self.table.started
        self.finished_trials: list[Any] = []
        self._live = None
        if self.stream.isatty():
            from rich.console import Console
            from rich.live import Live

            self._console = Console(file=self.stream)
            self._live = Live(
                console=self._console, get_renderable=lambda: self.table.rich(self._console.width), refresh_per_second=2, transient=False
            )
            self._live.start()

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its callbacks with the experiment; a restored copy draws nothing."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("stream", "_live", "_console", "label_of", "epochs_of", "progress_of")}
        return {**state, "_live": None, "progress_of": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.stream, self.label_of, self.epochs_of = sys.stdout, (lambda p: str(p)), (lambda p: 0)

    # --- Tune's hooks --------------------------------------------------------------------------
    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        row = self.rows.get(trial.trial_id)
        if row is None:
            row = self.rows[trial.trial_id] = Row(self.label_of(trial.config), self.epochs_of(trial.config))
        row.state, row.ended = "running", None
        self._line(f"started   {row.label}")

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        row = self.rows.get(trial.trial_id)
        if row is None:
            return
        row.epoch = int(result.get("epoch", row.epoch))
        row.progress = None  # that epoch is over
        for metric, mode in self.objectives:
            if metric in result:
                value = float(result[metric])
                row.latest[metric] = value
                better = max if mode == "max" else min
                row.best[metric] = better(row.best.get(metric, value), value)
        if self.per_epoch_lines:
            self._line(f"epoch {row.epoch}/{row.epochs}  {self._objective_text(row)}")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        row = self.rows.get(trial.trial_id)
        if row is None:
            return
        row.state = "done" if row.epoch >= row.epochs else "stopped"
        row.ended = time.monotonic()
        what = "finished" if row.state == "done" else f"stopped early at epoch {row.epoch}/{row.epochs} by the scheduler"
        self._line(f"{what}  {row.label}: {self._objective_text(row)} in {clock(row.elapsed)}")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        row = self.rows.get(trial.trial_id)
        if row is None:
            return
        row.state, row.ended = "failed", time.monotonic()
        row.error = failure_reason(trial)
        self._line(f"FAILED    {row.label}: {row.error} (full error: {error_file(trial)})")

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        from trainables.launch.trial import failure_is_final

        row = self.rows.get(trial.trial_id)
        if row is not None and not failure_is_final(trial_error(trial)):  # bad input: ends it
            row.state = "retrying"
            self._line(f"retrying  {row.label} {restart_point(trial)}: {failure_reason(trial)}")

    def poll_interval(self) -> float:
        """``poll_s``, or a quarter of the shortest running trial's epoch (at least ``MIN_POLL_S``):
        epochs of a few seconds (the demo's) are seen mid-way, not only after they ended."""
        epochs = [r.elapsed / r.epoch for r in self.rows.values() if r.state == "running" and r.epoch > 0]
        return min(self.poll_s, max(MIN_POLL_S, min(epochs) / 4)) if epochs else self.poll_s

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        """Tune's loop turns often: every ``poll_interval()`` seconds, read the running trials' progress."""
        now = time.monotonic()
        if self.progress_of is None or (self._polled_at is not None and now - self._polled_at < self.poll_interval()):
            return
        self._polled_at = now
        for trial_id, row in self.rows.items():
            if row.state == "running":
                self.update_progress(trial_id, row, now)

    def update_progress(self, trial_id: str, row: Row, now: float) -> None:
        """Take the trial's latest progress if it is about the epoch it is training."""
        try:
            progress = self.progress_of(trial_id) if self.progress_of else None
        except Exception:  # noqa: BLE001 - a busy or unreachable store must not end a sweep; the view just waits
            return
        if progress is None or progress.epoch <= row.epoch:
            return
        row.progress = progress
        if self._live is None and now - max(row.progress_line_at, row.started) >= self.plain_progress_s:  # a minute in, then each minute
            row.progress_line_at = now
            self._line(f"progress  {row.label}: epoch {progress.epoch}/{row.epochs} {describe(progress, clock)}")

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.finished_trials = list(trials)
        self.close()

    # --- output ----------------------------------------------------------------------------------
    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        elif self.rows and not self.per_epoch_lines:
            print(self.table.plain(), file=self.stream, flush=True)

    def _objective_text(self, row: Row) -> str:
        parts = []
        for metric, _ in self.objectives:
            if metric in row.latest:
                parts.append(f"{metric} {format_value(metric, row.latest[metric])} (best {format_value(metric, row.best[metric])})")
        return ", ".join(parts) or "no result yet"

    def _line(self, text: str) -> None:
        stamp = f"[{clock(time.monotonic() - self.started)}]"
        if self._live is not None:
            self._live.console.print(f"{stamp} {text}", highlight=False, markup=False)
        else:
            print(f"{stamp} {text}", file=self.stream, flush=True)


def error_file(trial: Any) -> str:
    """Where Tune keeps a failed trial's whole error (traceback included)."""
    return str(getattr(trial, "error_file", None) or getattr(trial, "path", ""))


def trial_error(trial: Any) -> BaseException | None:
    """The trial's latest error as Tune pickled it: from the driver's own copy, written as the error
    was handled (``get_pickled_error`` reads the storage's, which a hook called right then, as
    ``on_trial_recover`` is, finds missing or a failure old), else from the storage."""
    local = getattr(trial, "pickled_error_file", None)
    if local and Path(local).is_file():
        import cloudpickle

        with open(local, "rb") as fh:
            return cloudpickle.load(fh)
    return getattr(trial, "get_pickled_error", lambda: None)()


def failure_reason(trial: Any) -> str:
    """The last line of a trial's error (the ``TrialFailed`` message), without Ray's wrapping."""
    from trainables.launch.trial import failure_text

    error = trial_error(trial)
    if error is not None:
        return failure_text(error)
    try:
        with open(error_file(trial)) as fh:
            text = fh.read()
    except OSError:
        return "failed (no error recorded)"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "failed"
