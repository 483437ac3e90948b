"""A finished sweep's outcome: each trial's label, parameters and final metrics, the Pareto front
of a multi-objective study (logged as an artifact of the parent run), the parent run closed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep.study.load import Study
from sweep.tuner.recorder import SweepRecorder, close_orphans, close_running_children
from trainables.launch.trial import TrialSpec
from trainables.tracking import schema
from trainables.tracking.runs import RunTracker


@dataclass
class TrialOutcome:
    trial_id: str
    label: str
    params: dict[str, Any]
    metrics: dict[str, Any]
    error: str | None


@dataclass
class SweepOutcome:
    parent_run_id: str
    experiment_dir: str
    trials: list[TrialOutcome]
    best: TrialOutcome | None = None
    pareto: list[TrialOutcome] = field(default_factory=list)
    interrupted: bool = False
    expected_trials: int = 0
    log_file: str | None = None
    finished: int = 0  # trials that ran to their end (an interrupted trial's metrics do not count)
    uri: str = ""  # the sweep's own tracking store (from its state file; never the current directory's)
    parent_deleted: str | None = None  # "run"/"experiment": the parent run was deleted while the sweep ran

    @property
    def failed(self) -> list[TrialOutcome]:
        return [t for t in self.trials if t.error]


def _outcomes(spec: TrialSpec, grid: Any) -> list[TrialOutcome]:
    trials = []
    for result in grid:
        params = {k: v for k, v in (result.config or {}).items()}
        metrics = dict(result.metrics or {})
        trials.append(
            TrialOutcome(
                trial_id=str(metrics.get("trial_id") or Path(result.path or "").name),
                label=spec.label(params).display,
                params=params,
                metrics=metrics,
                error=str(result.error).strip().splitlines()[-1][:300] if result.error else None,
            )
        )
    return trials


def pareto_front(trials: list[TrialOutcome], objectives: list[tuple[str, str]]) -> list[TrialOutcome]:
    """The trials no other trial dominates (at least as good on every objective, better on one)."""

    def signed(t: TrialOutcome) -> list[float]:
        return [t.metrics[m] if mode == "max" else -t.metrics[m] for m, mode in objectives]

    values = [signed(t) for t in trials]
    front = []
    for i, v in enumerate(values):
        dominated = any(all(a >= b for a, b in zip(w, v)) and any(a > b for a, b in zip(w, v)) for j, w in enumerate(values) if j != i)
        if not dominated:
            front.append(trials[i])
    return front


def finish_sweep(
    study: Study, spec: TrialSpec, parent: RunTracker, grid: Any, experiment_dir: str, recorder: SweepRecorder, log: Path
) -> SweepOutcome:
    trials = _outcomes(spec, grid)
    objectives = study.config.objectives
    ended = recorder.finished_ids if recorder.interrupted else None  # a sweep that ran through: every trial ended
    done = [
        t for t in trials if t.error is None and all(o.metric in t.metrics for o in objectives) and (ended is None or t.trial_id in ended)
    ]
    outcome = SweepOutcome(
        parent.run_id,
        experiment_dir,
        trials,
        interrupted=recorder.interrupted,
        expected_trials=study.num_trials,
        log_file=str(log),
        finished=len(done),
        uri=spec.uri,
        parent_deleted=parent.deleted(),
    )
    if outcome.parent_deleted:  # MLflow refuses every write to it; the trials' own runs are whole
        return outcome
    summary: dict[str, float] = {"sweep/trials": len(trials), "sweep/failed": len(outcome.failed)}
    if len(objectives) == 1 and done:
        o = objectives[0]
        outcome.best = (max if o.mode == "max" else min)(done, key=lambda t: t.metrics[o.metric])
        summary[f"best/{o.metric}"] = outcome.best.metrics[o.metric]
        parent.set_tags({schema.TAG_BEST_TRIAL: outcome.best.label, schema.TAG_BEST_PARAMS: json.dumps(outcome.best.params)})
    elif done:
        outcome.pareto = pareto_front(done, [(o.metric, o.mode) for o in objectives])
        summary["pareto/size"] = len(outcome.pareto)
        rows = [
            {"trial": t.label, "trial_id": t.trial_id, **t.params, **{o.metric: t.metrics[o.metric] for o in objectives}}
            for t in outcome.pareto
        ]
        parent.log_text(json.dumps(rows, indent=2), schema.ARTIFACT_PARETO)
    if outcome.interrupted:
        close_running_children(parent)
        parent.set_tags(
            {schema.TAG_INTERRUPTED: f"{len(done)} of {study.num_trials} trials finished; `mjp sweep resume {experiment_dir}` continues"}
        )
        parent.set_status("KILLED")
    else:
        close_orphans(parent)
        parent.log_new_metrics(summary)
        parent.delete_tag(schema.TAG_INTERRUPTED)
        parent.set_status("FINISHED")
    return outcome
