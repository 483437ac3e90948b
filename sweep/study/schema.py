"""``StudyConfig``: what a sweep searches, toward what, with what budget. Validated before Ray starts.

A study file (YAML in ``sweep/studies/``)::

    name: mask_ratio
    base: trainables/configs/imagenet_deit_small.yaml   # a TrainConfig file (relative to the project)
    train: {optim: {epochs: 100}}                       # nested overrides of the base
    space:
      mjp.mask_ratio: {type: grid, values: [0, 0.03, 0.09]}
      mjp.dal_weight: {type: loguniform, low: 0.001, high: 0.1, when: {mjp.dal: [pca, linear, mlp]}}
    objective: {metric: val/top1, mode: max}            # or a list of them (multi-objective, NSGA-II)
    search: {algorithm: tpe, seed: 0}                   # tpe | random | grid | nsga2
    budget: {trials: 16, max_concurrent: 4, time_budget_s: null}
    scheduler: {type: asha, grace_period: 5}            # or fifo
    smoke: {base: ..., train: {...}, trials: 2, scheduler: {type: asha, grace_period: 1}}  # --smoke, one machine
    paper: [3]                                          # the paper's tables this study measures

Every sampled key is a flat dotted ``TrainConfig`` key; every combination of choices is checked
against ``TrainConfig`` (and the model pre-flight) before launch.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sweep.study.names import STUDY_NAME_PATTERN
from trainables.config.overrides import did_you_mean


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Param(_Strict):
    #: sample only when every listed key took one of the listed values
    when: dict[str, list[Any]] | None = None


class _Categorical(_Param):
    values: list[Any] = Field(min_length=1)
    #: label -> dotted TrainConfig overrides: the sampled value is a label that sets several keys
    presets: dict[str, dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _presets_cover_values(self) -> _Categorical:
        if self.presets is not None:
            missing = [v for v in self.values if v not in self.presets]
            if missing:
                raise ValueError(f"values {missing} have no entry in presets (presets: {sorted(self.presets)})")
        return self


class Choice(_Categorical):
    type: Literal["choice"]


class Grid(_Categorical):
    type: Literal["grid"]


class Fixed(_Param):
    type: Literal["fixed"]
    value: Any


class _Range(_Param):
    low: float = Field(allow_inf_nan=False)
    high: float = Field(allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> _Range:
        if self.low > self.high:
            raise ValueError(f"low={self.low} > high={self.high}")
        return self


class Uniform(_Range):
    type: Literal["uniform"]


class LogUniform(_Range):
    type: Literal["loguniform"]

    @model_validator(mode="after")
    def _positive(self) -> LogUniform:
        if self.low <= 0:
            raise ValueError(f"loguniform needs low > 0, got {self.low}")
        return self


class IntRange(_Range):
    type: Literal["int"]
    step: int = Field(1, ge=1)


Param = Annotated[Choice | Grid | Fixed | Uniform | LogUniform | IntRange, Field(discriminator="type")]


class Objective(_Strict):
    metric: str
    mode: Literal["max", "min"] = "max"


class Search(_Strict):
    algorithm: Literal["tpe", "random", "grid", "nsga2"] = "tpe"
    seed: int = 0


class Budget(_Strict):
    trials: int = Field(4, ge=1, description="ignored by grid search: the grid's size decides")
    max_concurrent: int = Field(2, ge=1)
    time_budget_s: float | None = Field(None, gt=0)


class Scheduler(_Strict):
    type: Literal["fifo", "asha"] = "fifo"
    metric: str | None = Field(None, description="ASHA's metric (default: the first objective)")
    mode: Literal["max", "min"] | None = None
    grace_period: int = Field(1, ge=1, description="epochs")
    reduction_factor: float = Field(2.0, gt=1)


class Smoke(_Strict):
    base: str | None = None
    seeds: list[int] | None = None
    #: replaces entries of ``space`` (same keys) at smoke size, e.g. tiny models per preset
    space: dict[str, Param] = Field(default_factory=dict)
    train: dict[str, Any] = Field(default_factory=dict)
    trials: int | None = Field(None, ge=1)
    max_concurrent: int | None = Field(None, ge=1)
    #: replaces ``scheduler`` at smoke size (an ASHA grace period fitted to the smoke epochs)
    scheduler: Scheduler | None = None


class StudyConfig(_Strict):
    name: str = Field(pattern=STUDY_NAME_PATTERN, max_length=100)
    #: shown as the sweep's and the experiment's description in MLflow (a run tag holds 8,000 characters)
    description: str = Field("", max_length=4000)
    base: str | None = Field(None, description="a TrainConfig YAML, relative to the project directory")
    train: dict[str, Any] = Field(default_factory=dict)
    space: dict[str, Param] = Field(default_factory=dict)
    objective: Objective | list[Objective]
    search: Search = Search()
    budget: Budget = Budget()
    scheduler: Scheduler = Scheduler()
    driver_cpus: float = Field(0.25, ge=0, description="CPUs Tune reserves for each trial's driver")
    #: repeat every grid point with these ``runtime.seed`` values (error bars); grid search only
    seeds: list[int] | None = None
    smoke: Smoke = Smoke()
    #: the paper's tables this study measures (``mjp analyze tables --paper`` prints them beside ours)
    paper: list[Literal[1, 2, 3, 4, 5, 6, "s2", "s4"]] = Field(default_factory=list)

    @property
    def objectives(self) -> list[Objective]:
        return self.objective if isinstance(self.objective, list) else [self.objective]

    @property
    def grid(self) -> dict[str, list[Any]]:
        return {k: p.values for k, p in self.space.items() if isinstance(p, Grid)}

    @property
    def num_trials(self) -> int:
        if self.search.algorithm == "grid":
            return math.prod(len(v) for v in self.grid.values())
        return self.budget.trials

    @model_validator(mode="after")
    def _coherent(self) -> StudyConfig:
        if (self.seeds or self.smoke.seeds) and self.search.algorithm != "grid":
            raise ValueError(f"seeds repeat grid points; they need search.algorithm: grid (got {self.search.algorithm!r})")
        if "runtime.seed" in self.space and (self.seeds or self.smoke.seeds):
            raise ValueError("give repeated seeds either as seeds: or as space.runtime.seed, not both")
        unknown = [k for k in self.smoke.space if k not in self.space]
        if unknown:
            raise ValueError(f"smoke.space.{unknown[0]} replaces nothing: it is not an entry of space")
        algo, grid = self.search.algorithm, self.grid
        sampled = [k for k, p in self.space.items() if not isinstance(p, Fixed)]
        if algo == "grid":
            not_grid = [k for k in sampled if k not in grid]
            if not_grid:
                raise ValueError(f"search.algorithm='grid' samples only grid entries; space.{not_grid[0]} is not type: grid")
            if not grid and not (self.seeds or self.smoke.seeds):
                raise ValueError("search.algorithm='grid' needs at least one space entry of type: grid (or seeds:)")
        elif grid:
            raise ValueError(f"space.{next(iter(grid))} is type: grid, which needs search.algorithm: grid (got {algo!r})")
        multi = len(self.objectives) > 1
        if multi and algo not in ("nsga2", "random"):
            raise ValueError(f"{len(self.objectives)} objectives need search.algorithm 'nsga2' or 'random' (got {algo!r})")
        for where, sched in (("scheduler", self.scheduler), ("smoke.scheduler", self.smoke.scheduler)):
            if multi and sched is not None and sched.type == "asha" and sched.metric is None:
                raise ValueError(f"{where}.type='asha' with several objectives needs {where}.metric")
        if not sampled and algo in ("tpe", "random", "nsga2") and self.budget.trials > 1:
            raise ValueError(
                f"search.algorithm={algo!r} with budget.trials={self.budget.trials} but space samples nothing: "
                "every trial would be identical; add space entries, or use seeds: with search.algorithm: grid for repeats"
            )
        for key, p in self.space.items():
            for cond, allowed in (p.when or {}).items():
                if cond not in self.space or list(self.space).index(cond) > list(self.space).index(key):
                    raise ValueError(f"space.{key}.when refers to {cond!r}, which must be a space entry listed before it")
                possible = _possible_values(self.space[cond])
                if possible is not None:
                    never = [v for v in allowed if v not in possible]
                    if never:
                        raise ValueError(
                            f"space.{key}.when.{cond} lists {never}, which space.{cond} never takes "
                            f"(its values: {possible}){did_you_mean(never[0], possible)}"
                        )
        self._presets_do_not_collide()
        return self

    def _presets_do_not_collide(self) -> None:
        setters: dict[str, str] = {}
        for key, p in self.space.items():
            for label, sets in (getattr(p, "presets", None) or {}).items():
                for k in sets:
                    if k in self.space and k != key:
                        raise ValueError(
                            f"space.{key}.presets.{label} sets {k}, which space.{k} also samples; "
                            f"the preset would silently override the sample: keep one"
                        )
                    if k in setters and setters[k] != key:
                        raise ValueError(
                            f"space.{setters[k]} and space.{key} both have presets that set {k}; "
                            f"which one wins is ambiguous: keep it in one"
                        )
                    setters[k] = key


def _possible_values(param: Any) -> list[Any] | None:
    """The values a categorical entry can take (None for ranges, whose conditions are not checked)."""
    if isinstance(param, (Choice, Grid)):
        return list(param.values)
    if isinstance(param, Fixed):
        return [param.value]
    return None


def is_active(param: Any, chosen: dict[str, Any]) -> bool:
    """Whether ``param``'s ``when`` conditions hold for the values chosen so far."""
    return all(chosen.get(key) in allowed for key, allowed in (param.when or {}).items())
