"""A study's search space as an Optuna define-by-run function, and its sampler.

Define-by-run makes conditions exact: a parameter whose ``when`` does not hold is never
suggested, so Optuna never sees (and never models) ``mjp.dal_weight`` for a trial without DAL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import optuna

from sweep.study.schema import Choice, Fixed, Grid, IntRange, LogUniform, StudyConfig, Uniform, is_active


class DefineByRun:
    """``trial -> constants``: suggests every active sampled entry, returns the active fixed ones.

    A class rather than a closure: Tune pickles the searcher (with this) into its checkpoints.
    """

    def __init__(self, study: StudyConfig):
        self.study = study

    def __call__(self, trial: optuna.Trial) -> dict[str, Any] | None:
        chosen: dict[str, Any] = {}
        constants: dict[str, Any] = {}
        for key, p in self.study.space.items():
            if not is_active(p, chosen):
                continue
            if isinstance(p, Fixed):
                constants[key] = chosen[key] = p.value
            elif isinstance(p, (Choice, Grid)):
                chosen[key] = trial.suggest_categorical(key, p.values)
            elif isinstance(p, LogUniform):
                chosen[key] = trial.suggest_float(key, p.low, p.high, log=True)
            elif isinstance(p, Uniform):
                chosen[key] = trial.suggest_float(key, p.low, p.high)
            elif isinstance(p, IntRange):
                chosen[key] = trial.suggest_int(key, int(p.low), int(p.high), step=p.step)
        return constants or None


def define_by_run(study: StudyConfig) -> Callable[[optuna.Trial], dict[str, Any] | None]:
    return DefineByRun(study)


class TuneGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler without its end-of-grid ``study.stop()``: Tune ends the sweep (its
    ``num_samples`` is the grid's size), and ``stop()`` raises outside Optuna's own optimize loop."""

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, state: optuna.trial.TrialState, values: Any) -> None:
        return None


def make_sampler(study: StudyConfig) -> optuna.samplers.BaseSampler:
    seed = study.search.seed
    algo = study.search.algorithm
    if algo == "grid":
        return TuneGridSampler(study.grid, seed=seed)
    if algo == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if algo == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def sampled_params(study: StudyConfig, n: int) -> list[dict[str, Any]]:
    """The parameters of the first ``n`` trials the study's own sampler proposes (an in-memory
    Optuna study, every trial told a constant value): what a launch would try first, to check
    before anything is created."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    directions: list[Literal["maximize", "minimize"]] = ["maximize" if o.mode == "max" else "minimize" for o in study.objectives]
    opt = optuna.create_study(sampler=make_sampler(study), directions=directions)
    sample = define_by_run(study)
    out = []
    for _ in range(n):
        trial = opt.ask()
        constants = sample(trial) or {}
        out.append({**trial.params, **constants})
        opt.tell(trial, [0.0] * len(directions) if len(directions) > 1 else 0.0)
    return out
