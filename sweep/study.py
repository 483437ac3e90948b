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

import itertools
import math
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mjp import keys
from trainables.config import TrackingSection, TrainConfig, build_config, describe_validation_error, flat_params, known_keys
from sweep.study_names import PROJECT_DIR, shipped_study, shipped_studies
from trainables.errors import ConfigError
from trainables.overrides import did_you_mean, did_you_mean_key, expand_presets, merge
from trainables.yaml_files import read_yaml_mapping



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
    def _presets_cover_values(self) -> "_Categorical":
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
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self) -> "_Range":
        if self.low > self.high:
            raise ValueError(f"low={self.low} > high={self.high}")
        return self


class Uniform(_Range):
    type: Literal["uniform"]


class LogUniform(_Range):
    type: Literal["loguniform"]

    @model_validator(mode="after")
    def _positive(self) -> "LogUniform":
        if self.low <= 0:
            raise ValueError(f"loguniform needs low > 0, got {self.low}")
        return self


class IntRange(_Range):
    type: Literal["int"]
    step: int = Field(1, ge=1)


Param = Annotated[Union[Choice, Grid, Fixed, Uniform, LogUniform, IntRange], Field(discriminator="type")]


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
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
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
    def _coherent(self) -> "StudyConfig":
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
                        raise ValueError(f"space.{key}.presets.{label} sets {k}, which space.{k} also samples; the preset would silently override the sample: keep one")
                    if k in setters and setters[k] != key:
                        raise ValueError(f"space.{setters[k]} and space.{key} both have presets that set {k}; which one wins is ambiguous: keep it in one")
                    setters[k] = key


def _possible_values(param: Any) -> list[Any] | None:
    """The values a categorical entry can take (None for ranges, whose conditions are not checked)."""
    if isinstance(param, (Choice, Grid)):
        return list(param.values)
    if isinstance(param, Fixed):
        return [param.value]
    return None


def reported_metrics(cfg: TrainConfig) -> set[str]:
    """Every metric key the trainable reports for ``cfg`` (what objectives may name)."""
    final = {keys.VAL_CONSISTENCY, keys.VAL_DIFF_NORM} | {keys.top1_shuffled_key(r) for r in cfg.eval.shuffle_ratios}
    if cfg.eval.privacy is not None:
        final |= {keys.privacy_key(s, m) for s in cfg.eval.privacy.settings for m in ("mse", "psnr", "ssim", "fft2d")}
    return final | set(keys.EPOCH_METRICS)


class Study:
    """A loaded study: its config (seeds folded into the space), its base ``TrainConfig`` tree,
    whether it is the smoke size, and the study file as read (``tree``, for its digest)."""

    def __init__(self, config: StudyConfig, base_tree: dict[str, Any], source: str, smoke: bool, extra: dict[str, Any], tree: dict[str, Any]):
        seeds = (config.smoke.seeds if smoke and config.smoke.seeds else None) or config.seeds
        if smoke and config.smoke.space:
            config = config.model_copy(update={"space": {**config.space, **config.smoke.space}})
        if smoke and config.smoke.scheduler is not None:
            config = config.model_copy(update={"scheduler": config.smoke.scheduler})
        if seeds:
            config = config.model_copy(update={"space": {**config.space, "runtime.seed": Grid(type="grid", values=seeds)}})
        self.config, self.base_tree, self.source, self.smoke, self.extra = config, base_tree, source, smoke, extra
        self.tree = tree  # the study file as read
        #: the largest model among the pre-flighted trials (parameters); None until checked
        self.max_parameters: int | None = None

    @property
    def name(self) -> str:
        """The name its sweeps are recorded under: ``<name>-smoke`` at smoke size, so a smoke run
        has its own report folder, results file and status, and never stands in for the full study."""
        return smoke_name(self.config.name) if self.smoke else self.config.name

    @property
    def digest(self) -> str:
        """A digest of what the study trains: the study file as written (less its description),
        its base config with the study's ``train:`` merged in, the size and the command's
        overrides. A sweep records it; a resume, which reads the files again, refuses a study or
        base file edited since. Defaults the code fills in are not part of it."""
        import hashlib
        import json

        written = {k: v for k, v in self.tree.items() if k != "description"}
        text = json.dumps(_canonical({"study": written, "base": self.base_tree, "smoke": self.smoke, "extra": self.extra}), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def num_trials(self) -> int:
        c = self.config
        return c.smoke.trials if self.smoke and c.smoke.trials and c.search.algorithm != "grid" else c.num_trials

    @property
    def max_concurrent(self) -> int:
        c = self.config
        return (c.smoke.max_concurrent if self.smoke and c.smoke.max_concurrent else c.budget.max_concurrent)

    def train_config(self, params: dict[str, Any]) -> TrainConfig:
        """The ``TrainConfig`` of one trial: base, --set overrides, then the sampled ``params``
        (preset labels expanded into their keys)."""
        return build_config(self.base_tree, {**self.extra, **expand_presets(params, self.presets)}, source=f"study {self.name!r}" + (f" with {params}" if params else ""))

    @property
    def presets(self) -> dict[str, dict[str, dict[str, Any]]]:
        """``{space key: {label: {dotted key: value}}}`` for every preset entry."""
        return {k: p.presets for k, p in self.config.space.items() if getattr(p, "presets", None)}

    def combinations(self, limit: int = 256) -> list[dict[str, Any]]:
        """Parameter sets for pre-launch validation: every combination of choices and range ends
        when there are at most ``limit``; otherwise every value of every entry at least once
        (the other entries at their first value), so no choice goes unchecked."""
        options: dict[str, list[Any]] = {}
        for key, p in self.config.space.items():
            if isinstance(p, (Choice, Grid)):
                options[key] = list(p.values)
            elif isinstance(p, Fixed):
                options[key] = [p.value]
            elif isinstance(p, IntRange):
                options[key] = [int(p.low), int(p.high)]
            else:
                options[key] = [p.low, p.high]
        if math.prod(len(v) for v in options.values()) <= limit:
            full = [dict(zip(options, values)) for values in itertools.product(*options.values())]
        else:
            first = {k: v[0] for k, v in options.items()}
            full = [{**first, key: value} for key, values in options.items() for value in values]
        return [{k: v for k, v in params.items() if is_active(self.config.space[k], params)} for params in full]


def is_active(param: Any, chosen: dict[str, Any]) -> bool:
    """Whether ``param``'s ``when`` conditions hold for the values chosen so far."""
    return all(chosen.get(key) in allowed for key, allowed in (param.when or {}).items())


def resolve_study_path(name_or_path: str) -> Path:
    """A path, or the name of a shipped study (``quickstart`` -> ``sweep/studies/quickstart.yaml``);
    absolute, as the sweep's state records it for a resume from any directory."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path.absolute()
    shipped = shipped_study(name_or_path)
    if shipped is not None:
        return shipped
    names = ", ".join(shipped_studies())
    hint = did_you_mean(name_or_path, shipped_studies())
    raise ConfigError(f"study {name_or_path!r} is neither a file nor a shipped study{hint}; shipped: {names}")


def load_study(name_or_path: str, *, smoke: bool = False, overrides: dict[str, Any] | None = None, check: bool = True) -> Study:
    """Read, validate and (``check``) pre-flight a study: every key, every choice, every objective
    (the pre-flight builds models on the meta device, which costs a timm import)."""
    path = resolve_study_path(name_or_path)
    tree = read_yaml_mapping(path, "study file")
    try:
        config = StudyConfig.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(f"invalid study {path}:\n{describe_validation_error(err, candidates=known_keys(StudyConfig))}") from None
    base_file = config.smoke.base if smoke and config.smoke.base else config.base
    base_tree = read_yaml_mapping(PROJECT_DIR / base_file, f"study {path}: base") if base_file else {}
    base_tree = merge(base_tree, config.train)
    extra = dict(overrides or {})
    if smoke:
        base_tree, extra = _smoke_tree(config, path, base_tree, extra)
    study = Study(config, base_tree, str(path), smoke, extra, tree)
    if check:
        check_study(study)
    return study


def check_study(study: Study) -> None:
    """The pre-flight of a loaded study: every key, every choice, every objective, the scheduler."""
    path = Path(study.source)
    _validate_space(study, path)
    _validate_scheduler(study, path)


def _canonical(value: Any) -> Any:
    """``value`` with every mapping's keys as text (YAML allows ``{1: x}``), for a stable JSON."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def smoke_name(name: str) -> str:
    """What a study's smoke size is recorded as: its sweeps, MLflow experiment and report folder."""
    return f"{name}-smoke"


def _smoke_tree(config: StudyConfig, path: Path, base_tree: dict[str, Any], extra: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The smoke size's base tree and overrides: ``smoke.train`` on top, and the MLflow experiment
    always the full study's (or the one given with ``--set``) plus ``-smoke``, never the full one."""
    if "experiment" in (config.smoke.train.get("tracking") or {}):
        raise ConfigError(f"{path}: smoke.train.tracking.experiment is not needed: a smoke run always logs to the full study's experiment + '-smoke'; remove it")
    full_base = read_yaml_mapping(PROJECT_DIR / config.base, f"study {path}: base") if config.base else {}
    full = (merge(full_base, config.train).get("tracking") or {}).get("experiment", TrackingSection().experiment)
    tree = merge(merge(base_tree, config.smoke.train), {"tracking": {"experiment": smoke_name(str(full))}})
    if "tracking.experiment" in extra and not str(extra["tracking.experiment"]).endswith("-smoke"):
        extra = {**extra, "tracking.experiment": smoke_name(str(extra["tracking.experiment"]))}
    return tree, extra


def _validate_scheduler(study: Study, path: Path) -> None:
    """ASHA decides at ``grace_period`` x ``reduction_factor``^k epochs up to the trials' epochs
    (its ``max_t``): a grace period past the last epoch is refused here, not by Ray mid-launch."""
    s = study.config.scheduler
    if s.type != "asha":
        return
    epochs = study.train_config({}).optim.epochs
    if s.grace_period > epochs:
        where = "smoke.scheduler" if study.smoke and study.config.smoke.scheduler is not None else "scheduler"
        hint = "; give the smoke size its own, e.g. smoke: {scheduler: {type: asha, grace_period: 1}}" if study.smoke and where == "scheduler" else ""
        raise ConfigError(
            f"{path}: {where}.grace_period={s.grace_period} is more than the {epochs} epochs each trial trains"
            f"{' at smoke size' if study.smoke else ''} (optim.epochs); ASHA needs 1 <= grace_period <= optim.epochs{hint}"
        )
    sampled = [k for k in ("optim.epochs",) if k in study.config.space]
    if sampled:
        raise ConfigError(f"{path}: space.{sampled[0]} varies the epochs, but ASHA stops every trial at the base config's optim.epochs={epochs}; fix optim.epochs in train: or use scheduler: {{type: fifo}}")


def _validate_space(study: Study, path: Path) -> None:
    base = study.train_config({})
    known = set(flat_params(base)) | {"mjp.variant"}

    def check_key(key: str, where: str) -> None:
        if key not in known and key != "model.kwargs" and not key.startswith("model.kwargs."):
            raise ConfigError(f"{path}: {where} is not a TrainConfig key{did_you_mean_key(key, known) or did_you_mean(key, known)} (e.g. mjp.mask_ratio, optim.base_lr, mjp.dal)")

    for key, p in study.config.space.items():
        presets = getattr(p, "presets", None)
        if presets:
            for label, sets in presets.items():
                for k in sets:
                    check_key(k, f"space.{key}.presets.{label}.{k}")
        else:
            check_key(key, f"space.{key}")
    available = reported_metrics(base)
    for obj in study.config.objectives + ([Objective(metric=study.config.scheduler.metric)] if study.config.scheduler.metric else []):
        if obj.metric not in available:
            raise ConfigError(f"{path}: objective metric {obj.metric!r} is not reported by the trainable; allowed: {', '.join(sorted(available))}")
    from trainables.preflight import preflight

    checked: set[str] = set()
    for params in study.combinations():
        cfg = study.train_config(params)
        fingerprint = cfg.model_dump_json(include={"model", "mjp", "data"})
        if fingerprint not in checked:
            checked.add(fingerprint)
            study.max_parameters = max(study.max_parameters or 0, preflight(cfg).parameters)
