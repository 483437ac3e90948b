"""A running trial's progress within its epoch, from the trial process to the console.

The engine reports the step within the epoch and the throughput so far with its running loss
(every ``runtime.log_every`` steps) and, where an epoch is shorter than a few of those, on its
own at least ``REPORTS_PER_EPOCH`` times an epoch (``progress_every``: the demo's 22-step epochs
report every 6 steps where the running loss comes every 50); rank 0's ``EpochLogger`` writes them as one JSON tag on the
trial's MLflow run (``mjp.progress``, overwritten each time, so it works wherever MLflow is
reachable, on one machine or a cluster); the sweep's console reads the tag of each running trial
(``trainables.tracking.runs.MlflowProgress``) and shows the step, img/s, the share of time spent waiting for data, and the epoch's ETA.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from typing import Any

#: per-epoch metric: time the training loop spent blocked on the data loader / the epoch's time
PERF_DATA_WAIT_FRAC = "perf/data_wait_frac"
#: keys of the running report besides the losses (not logged as metrics: they go into the tag)
EPOCH = "progress/epoch"
STEP = "progress/step"
STEPS = "progress/steps"
ELAPSED_S = "progress/elapsed_s"
IMG_PER_S = "perf/img_per_s"
#: the fewest in-epoch progress reports an epoch makes, however short it is
REPORTS_PER_EPOCH = 4


def progress_every(steps: int, log_every: int) -> int:
    """Steps between in-epoch progress reports: ``log_every``, or less where an epoch of ``steps``
    would then report fewer than ``REPORTS_PER_EPOCH`` times."""
    return max(1, min(log_every, math.ceil(steps / REPORTS_PER_EPOCH)))


@dataclass(frozen=True)
class Progress:
    """Where a running epoch is: ``step`` of ``steps`` in ``epoch`` (1-based), after ``elapsed_s``."""

    epoch: int
    step: int
    steps: int
    img_per_s: float
    data_wait_frac: float
    elapsed_s: float
    at: float  # unix time of the report

    @property
    def epoch_eta_s(self) -> float:
        """Seconds to the end of this epoch at the pace so far."""
        return self.elapsed_s / max(self.step, 1) * max(0, self.steps - self.step)

    @property
    def epoch_fraction(self) -> float:
        return min(1.0, self.step / max(self.steps, 1))

    def to_tag(self) -> str:
        return json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()})

    @classmethod
    def from_tag(cls, text: str | None) -> Progress | None:
        if not text:
            return None
        try:
            return cls(**json.loads(text))
        except (TypeError, ValueError):
            return None

    @classmethod
    def from_report(cls, metrics: dict[str, float]) -> Progress | None:
        """From the engine's running report (None when it carries no step)."""
        if STEP not in metrics:
            return None
        return cls(
            int(metrics[EPOCH]),
            int(metrics[STEP]),
            int(metrics[STEPS]),
            float(metrics[IMG_PER_S]),
            float(metrics[PERF_DATA_WAIT_FRAC]),
            float(metrics[ELAPSED_S]),
            time.time(),
        )


def pace(epoch: int, step: int, steps: int, images: int, waited_s: float, elapsed_s: float) -> dict[str, float]:
    """The progress entries of a running report: ``step`` of ``steps`` in ``epoch`` (1-based),
    ``images`` seen and ``waited_s`` blocked on the loader in ``elapsed_s`` since the epoch began."""
    elapsed_s = max(elapsed_s, 1e-9)
    return {
        EPOCH: epoch,
        STEP: step,
        STEPS: steps,
        ELAPSED_S: elapsed_s,
        IMG_PER_S: images / elapsed_s,
        PERF_DATA_WAIT_FRAC: waited_s / elapsed_s,
    }


def describe(p: Progress, clock: Any) -> str:
    """``step 120/2502 · 1,530 img/s · data wait 12% · epoch ETA 3:12`` (``clock`` formats seconds)."""
    return (
        f"step {p.step}/{p.steps} · {p.img_per_s:,.0f} img/s · data wait {100 * p.data_wait_frac:.0f}% · epoch ETA {clock(p.epoch_eta_s)}"
    )
