"""The live view's table, as pure layout: a row per trial (label, state, epochs, where its epoch
is, the objectives latest and best, its time), a summary line with the run's ETA, the columns
that fit a terminal's width (dropped in ``DROP_ORDER`` when narrow) and the same as plain text.
Tune is not needed to build or test it; ``console/view.py`` feeds it from Tune's hooks."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from analysis.markdown import format_value
from trainables.tracking.progress import Progress, describe

FINAL_STATES = ("done", "failed", "stopped")


@dataclass
class Row:
    label: str
    epochs: int
    state: str = "pending"
    epoch: int = 0
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    latest: dict[str, float] = field(default_factory=dict)
    best: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    progress: Progress | None = None  # within the epoch being trained, when the trial reports it
    progress_line_at: float = 0.0  # when a plain progress line was last printed

    @property
    def epochs_done(self) -> float:
        """Epochs done, the running one counted by its share of steps."""
        return self.epoch + (self.progress.epoch_fraction if self.progress is not None else 0.0)

    @property
    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started


def clock(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on."""
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else f"{seconds // 60}:{seconds % 60:02d}"


class ConsoleTable:
    """The rows of a sweep (or a training) and how they are drawn.

    ``objectives``: ``(metric, mode)`` pairs; ``with_progress``: a "this epoch" column (the
    trials report their progress within an epoch); ``rows``: trial id -> ``Row``, filled by the view.
    """

    def __init__(self, title: str, objectives: list[tuple[str, str]], total_trials: int, with_progress: bool = False):
        self.title, self.objectives, self.total_trials, self.with_progress = title, objectives, total_trials, with_progress
        self.rows: dict[str, Row] = {}
        self.started = time.monotonic()

    def eta(self) -> float | None:
        """Seconds left for the whole run at the pace of the trials themselves: epochs left over
        the epochs per second of the running trials, each timed from its own start (the sweep's
        start-up is not a pace). None before a running trial has done any epoch."""
        running = [r for r in self.rows.values() if r.state not in FINAL_STATES]
        pace = sum(r.epochs_done / r.elapsed for r in running if r.epochs_done > 0 and r.elapsed > 0)
        if not pace:
            return None
        per_trial = max((r.epochs for r in self.rows.values()), default=0)
        left = sum(r.epochs - r.epochs_done for r in running) + per_trial * max(0, self.total_trials - len(self.rows))
        return max(0.0, left) / pace

    def cells(self, row: Row, plain: bool = False) -> list[str]:
        cells = [row.label, row.state, f"{row.epoch}/{row.epochs}"]
        if self.with_progress and not plain:
            cells.append(describe(row.progress, clock) if row.progress is not None and row.state == "running" else "")
        for metric, _ in self.objectives:
            cells += [format_value(metric, row.latest.get(metric)), format_value(metric, row.best.get(metric))]
        return cells + [clock(row.elapsed)]

    def headers(self, plain: bool = False) -> list[str]:
        headers = ["trial", "state", "epoch"] + (["this epoch"] if self.with_progress and not plain else [])
        for metric, _ in self.objectives:
            headers += [metric, "best"]
        return headers + ["time"]

    def summary(self) -> str:
        states = [r.state for r in self.rows.values()]
        counts = ", ".join(f"{states.count(s)} {s}" for s in ("running", "done", "stopped", "failed", "retrying") if states.count(s))
        eta = self.eta()
        left = f" · ETA {clock(eta)}" if eta is not None and any(s not in FINAL_STATES for s in states) else ""
        return (
            f"{self.title} · {len(self.rows)}/{self.total_trials} trials started ({counts or 'starting'}) "
            f"· {clock(time.monotonic() - self.started)}{left}"
        )

    #: columns dropped first when the terminal is narrow (htop's way): the in-epoch detail, the
    #: bar, the best values, the time, then every objective but the first; trial, state, epoch
    #: and the first objective always stay
    DROP_ORDER = ("this epoch", "progress", "best", "time")
    BAR_WIDTH = 16
    #: the narrowest the trial column gets: a longer label folds onto more lines
    TRIAL_MIN = 24

    def widths(self) -> dict[tuple[str, int], int]:
        """Each column of the full live table (header, position) and the width its cells need."""
        headers = self.headers()
        shown = headers[:2] + ["progress"] + headers[2:]
        rows = [self.cells(r) for r in self.rows.values()]

        def need(header: str, i: int) -> int:
            if header == "progress":
                return self.BAR_WIDTH
            j = i - 1 if i > 2 else i  # cells have no "progress" entry
            return max([len(header)] + [len(r[j]) for r in rows])

        return {(h, i): need(h, i) for i, h in enumerate(shown)}

    def fitted_widths(self, width: int) -> dict[tuple[str, int], int]:
        """The columns that fit ``width`` columns of terminal, in display order, and the width each
        gets: whole cells everywhere; only the trial column may be narrower than its longest label
        (down to ``TRIAL_MIN``), its labels wrapping."""
        widths = self.widths()
        trial = next(k for k in widths if k[0] == "trial")
        fixed = {k: w for k, w in widths.items() if k != trial}
        extra_objectives = [(m, i) for (m, i) in fixed if m in [metric for metric, _ in self.objectives[1:]]]
        victims = [[k for k in fixed if k[0] == name] for name in self.DROP_ORDER] + [[k] for k in reversed(extra_objectives)]
        for victim in [[], *victims]:
            fixed = {k: w for k, w in fixed.items() if k not in victim}
            room = width - 1 - sum(w + 3 for w in fixed.values()) - 3
            if room >= min(widths[trial], self.TRIAL_MIN):
                break
        kept = {trial: max(min(widths[trial], room), 1), **fixed}
        return {k: kept[k] for k in widths if k in kept}

    def rich(self, width: int | None = None) -> Any:
        """The live table (rich), its columns chosen to fit ``width`` terminal columns (None: every column)."""
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        width = width or 10**6
        fitted = self.fitted_widths(width)
        table = Table(title=self.summary(), title_justify="left", expand=False)
        for (header, _), w in fitted.items():
            table.add_column(
                header,
                justify="left" if header in ("trial", "state", "this epoch") else "right" if header != "progress" else "left",
                no_wrap=header != "trial",
                overflow="fold",
                width=w,
            )
        for row in self.rows.values():
            cells = self.cells(row)
            bar = ProgressBar(
                total=max(row.epochs, 1), completed=row.epochs if row.state == "done" else row.epochs_done, width=self.BAR_WIDTH
            )
            # a column's display position counts the bar, which has no cell
            table.add_row(*[bar if header == "progress" else cells[i - 1 if i > 2 else i] for header, i in fitted])
        return table

    def plain(self) -> str:
        """The view as plain text (no ANSI codes)."""
        rows = [self.headers(plain=True)] + [self.cells(r, plain=True) for r in self.rows.values()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
        return "\n".join([self.summary(), *lines])
