"""A study as a sweep runs it: the file read and validated (``StudyConfig``, ``study/schema.py``),
its base ``TrainConfig`` and overrides merged, its smoke size, its digest (what a resume compares),
and the pre-flight of every combination it can sample."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sweep.study.names import PROJECT_DIR, shipped_studies, shipped_study, smoke_name
from sweep.study.schema import Choice, Fixed, Grid, IntRange, Objective, StudyConfig, is_active
from trainables.config.build import describe_validation_error, flat_params, known_keys
from trainables.config.overrides import did_you_mean, did_you_mean_key, merge
from trainables.config.recipe import TrialRecipe
from trainables.config.schema import TrackingSection, TrainConfig
from trainables.config.yaml_files import read_yaml_mapping
from trainables.errors import ConfigError
from trainables.evaluation.registry import reported_metrics


class Study:
    """A loaded study: its config (seeds folded into the space), its base ``TrainConfig`` tree,
    whether it is the smoke size, and the study file as read (``tree``, for its digest)."""

    def __init__(
        self, config: StudyConfig, base_tree: dict[str, Any], source: str, smoke: bool, extra: dict[str, Any], tree: dict[str, Any]
    ):
        seeds = (config.smoke.seeds if smoke and config.smoke.seeds else None) or config.seeds
        if smoke and config.smoke.space:
            config = config.model_copy(update={"space": {**config.space, **config.smoke.space}})
        if smoke and config.smoke.scheduler is not None:
            config = config.model_copy(update={"scheduler": config.smoke.scheduler})
        if seeds:
            config = config.model_copy(update={"space": {**config.space, "runtime.seed": Grid(type="grid", values=seeds)}})
        self.config, self.base_tree, self.source, self.smoke, self.extra = config, base_tree, source, smoke, extra
        self.tree = tree  # the study file as read
        #: how each trial's ``TrainConfig`` is made (base, --set overrides, its sampled params)
        self.recipe = TrialRecipe(base_tree, extra, self.presets, source=f"study {self.name!r}")
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
        return c.smoke.max_concurrent if self.smoke and c.smoke.max_concurrent else c.budget.max_concurrent

    @property
    def base(self) -> TrainConfig:
        """The config before sampling: what every trial shares (epochs, tracking, scaling)."""
        return self.recipe.config({})

    @property
    def presets(self) -> dict[str, dict[str, dict[str, Any]]]:
        """``{space key: {label: {dotted key: value}}}`` for every preset entry."""
        return {k: p.presets for k, p in self.config.space.items() if isinstance(p, (Choice, Grid)) and p.presets}

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


def trial_params(study: Study, picked: dict[str, Any]) -> dict[str, Any]:
    """``picked`` (values of the study's space keys, as a command line gives them) as a trial's
    sampled params; ``ConfigError`` naming the key and what its entry allows when a value is not
    one the study can sample (a preset's label, a choice, a range)."""
    for key, value in picked.items():
        entry = study.config.space[key]
        if isinstance(entry, (Choice, Grid)):
            if value not in entry.values:
                allowed = ", ".join(map(str, entry.values))
                raise ConfigError(f"study {study.name!r}: {key}={value!r} is not one of its values ({allowed})")
        elif isinstance(entry, Fixed):
            if value != entry.value:
                raise ConfigError(f"study {study.name!r}: {key} is fixed at {entry.value!r}, not {value!r}")
        elif not isinstance(value, (int, float)) or not entry.low <= value <= entry.high:
            raise ConfigError(f"study {study.name!r}: {key}={value!r} is outside its range [{entry.low}, {entry.high}]")
    return picked


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


def load_study(
    name_or_path: str, *, smoke: bool = False, overrides: dict[str, Any] | None = None, check: bool = True, files: bool = True
) -> Study:
    """Read, validate and (``check``) pre-flight a study: every key, every choice, every objective
    (the pre-flight builds models on the meta device, which costs a timm import). ``files=False``:
    the same checks less those that read data or weights files (``mjp sweep plan``)."""
    path = resolve_study_path(name_or_path)
    tree = read_yaml_mapping(path, "study file")
    try:
        config = StudyConfig.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(f"invalid study {path}: {describe_validation_error(err, candidates=known_keys(StudyConfig))}") from None
    base_file = config.smoke.base if smoke and config.smoke.base else config.base
    base_tree = read_yaml_mapping(PROJECT_DIR / base_file, f"study {path}: base") if base_file else {}
    base_tree = merge(base_tree, config.train)
    extra = dict(overrides or {})
    if smoke:
        base_tree, extra = _smoke_tree(config, path, base_tree, extra)
    study = Study(config, base_tree, str(path), smoke, extra, tree)
    if check:
        check_study(study, files=files)
    return study


def check_study(study: Study, *, files: bool = True) -> None:
    """The pre-flight of a loaded study: every key, every choice, every objective, the scheduler.
    The one validation ``mjp sweep run``, ``resume`` and ``plan`` share (``plan`` with
    ``files=False``: where the data is not readable here, its published shape)."""
    path = Path(study.source)
    _validate_space(study, path, files)
    _validate_scheduler(study, path)


#: the most trials a sweep starts without ``--max-trials`` (the shipped studies have at most 32)
MAX_TRIALS = 1000


def check_trial_count(study: Study, allowed: int | None = None) -> None:
    """A study of more trials than ``allowed`` (default ``MAX_TRIALS``) is refused before it
    starts: a grid of a few lists multiplies into a million trials in a 300-byte file, which
    `mjp sweep plan` prices in days; running it anyway takes ``--max-trials N``."""
    allowed = MAX_TRIALS if allowed is None else allowed
    if study.num_trials > allowed:
        grid = " x ".join(str(len(v)) for v in study.config.grid.values())
        what = f"a grid of {grid}" if study.config.search.algorithm == "grid" and grid else "budget.trials"
        raise ConfigError(
            f"study {study.name!r} has {study.num_trials:,} trials ({what}), more than the {allowed:,} a sweep starts without asking; "
            f"see what it costs with `mjp sweep plan {study.config.name}`, then shrink it or pass --max-trials {study.num_trials}"
        )


def _canonical(value: Any) -> Any:
    """``value`` with every mapping's keys as text (YAML allows ``{1: x}``), for a stable JSON."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def _smoke_tree(config: StudyConfig, path: Path, base_tree: dict[str, Any], extra: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The smoke size's base tree and overrides: ``smoke.train`` on top, and the MLflow experiment
    always the full study's (or the one given with ``--set``) plus ``-smoke``, never the full one."""
    if "experiment" in (config.smoke.train.get("tracking") or {}):
        raise ConfigError(
            f"{path}: smoke.train.tracking.experiment is not needed: "
            f"a smoke run always logs to the full study's experiment + '-smoke'; remove it"
        )
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
    epochs = study.base.optim.epochs
    if s.grace_period > epochs:
        where = "smoke.scheduler" if study.smoke and study.config.smoke.scheduler is not None else "scheduler"
        hint = (
            "; give the smoke size its own, e.g. smoke: {scheduler: {type: asha, grace_period: 1}}"
            if study.smoke and where == "scheduler"
            else ""
        )
        raise ConfigError(
            f"{path}: {where}.grace_period={s.grace_period} is more than the {epochs} epochs each trial trains"
            f"{' at smoke size' if study.smoke else ''} (optim.epochs); ASHA needs 1 <= grace_period <= optim.epochs{hint}"
        )
    sampled = [k for k in ("optim.epochs",) if k in study.config.space]
    if sampled:
        raise ConfigError(
            f"{path}: space.{sampled[0]} varies the epochs, but ASHA stops every trial at the base config's optim.epochs={epochs}; "
            f"fix optim.epochs in train: or use scheduler: {{type: fifo}}"
        )


def _validate_space(study: Study, path: Path, files: bool = True) -> None:
    base = study.base
    known = set(flat_params(base)) | {"mjp.variant"}

    def check_key(key: str, where: str) -> None:
        if key not in known and key != "model.kwargs" and not key.startswith("model.kwargs."):
            raise ConfigError(
                f"{path}: {where} is not a TrainConfig key{did_you_mean_key(key, known) or did_you_mean(key, known)} "
                f"(e.g. mjp.mask_ratio, optim.base_lr, mjp.dal)"
            )

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
            raise ConfigError(
                f"{path}: objective metric {obj.metric!r} is not reported by the trainable; allowed: {', '.join(sorted(available))}"
            )
    from trainables.launch.preflight import preflight

    checked: set[str] = set()
    for params in study.combinations():
        cfg = study.recipe.config(params)
        fingerprint = cfg.model_dump_json(include={"model", "mjp", "data"})
        if fingerprint not in checked:
            checked.add(fingerprint)
            study.max_parameters = max(study.max_parameters or 0, preflight(cfg, files=files).parameters)
