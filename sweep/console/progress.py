"""One line of progress with an ETA for a long command (``mjp attack``): redrawn in place on a
terminal, a plain line at most every ``plain_s`` seconds on a pipe or a log file; silent for work
that ends within ``quiet_s`` seconds. The work reports ``(done, total)``; the clock is injectable."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from sweep.console.table import clock as format_clock


class ProgressLine:
    """``label: 120/2400 (5%) · 0:12 elapsed · ETA 3:48``, called as ``progress(done, total)``."""

    def __init__(
        self,
        label: str,
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        quiet_s: float = 2.0,
        plain_s: float = 10.0,
        redraw_s: float = 0.25,
    ):
        self.label, self.stream, self.clock = label, stream or sys.stderr, clock
        self.quiet_s, self.plain_s, self.redraw_s = quiet_s, plain_s, redraw_s
        self.tty = self.stream.isatty()
        self.started = clock()
        self.drawn_at: float | None = None
        self.last = ""

    def text(self, done: int, total: int, now: float) -> str:
        elapsed = now - self.started
        eta = elapsed / done * (total - done) if done else None
        left = f"ETA {format_clock(eta)}" if eta is not None else "ETA -"
        return f"{self.label}: {done}/{total} ({100 * done / max(total, 1):.0f}%) · {format_clock(elapsed)} elapsed · {left}"

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if now - self.started < self.quiet_s:
            return
        every = self.redraw_s if self.tty else self.plain_s
        if self.drawn_at is not None and now - self.drawn_at < every and done < total:
            return
        self.drawn_at = now
        self.last = self.text(done, total, now)
        self.stream.write(f"\r{self.last}\x1b[K" if self.tty else f"{self.last}\n")
        self.stream.flush()

    def close(self) -> None:
        """End the line (on a terminal, the cursor goes to the next line)."""
        if self.tty and self.drawn_at is not None:
            self.stream.write("\n")
            self.stream.flush()
