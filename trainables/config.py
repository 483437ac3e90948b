"""``TrainConfig``: one training run, validated before anything starts.

Flat dotted keys (``optim.base_lr``, ``mjp.mask_ratio``) are the one spelling used by ``--set``,
Tune's search spaces, MLflow params and the analysis columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mjp.config import TABLE4, TABLE4_NAMES, MJPConfig

DatasetName = Literal["digits", "fashion_mnist", "imagefolder", "cifar10", "cifar100"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSection(_Section):
    name: str = "vit_tiny_patch16_224"
    #: a first block that APRIL's analytic attack can invert exactly (``mjp.privacy``)
    april_block: bool = False
    #: passed to ``timm.create_model`` (img_size, patch_size, embed_dim, depth, drop_path_rate, ...)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    #: a local timm checkpoint (``pretrained_cfg_overlay=dict(file=...)``); nothing downloads
    pretrained_file: str | None = None


class DataSection(_Section):
    name: DatasetName = "digits"
    root: str | None = Field(None, description="dataset directory (fashion_mnist, imagefolder, cifar*)")
    download: bool = Field(False, description="cifar only: let torchvision download it")
    img_size: int | None = Field(None, ge=8, description="resize target for imagefolder/cifar (default 224 / 32)")
    augment: Literal["none", "small", "deit"] = "small"
    batch_size: int = Field(64, ge=1, description="per worker")
    loader_workers: int = Field(0, ge=0)
    repeated_aug: int = Field(1, ge=1, description="repeats per sample (DeiT's repeated augmentation: 3)")
    train_limit: int | None = Field(None, ge=1, description="use only the first N training images")
    val_limit: int | None = Field(None, ge=1, description="use only the first N validation images")


class OptimSection(_Section):
    epochs: int = Field(10, ge=1)
    base_lr: float = Field(5e-4, gt=0, description="lr = base_lr * global_batch / lr_batch_ref (DeiT)")
    lr_batch_ref: int = Field(512, ge=1)
    min_lr: float = Field(1e-5, ge=0)
    weight_decay: float = Field(0.05, ge=0)
    warmup_epochs: float = Field(0.0, ge=0)
    clip_grad: float | None = Field(5.0, gt=0)
    label_smoothing: float = Field(0.1, ge=0, lt=1)
    mixup: float = Field(0.0, ge=0, description="mixup alpha (DeiT: 0.8)")
    cutmix: float = Field(0.0, ge=0, description="cutmix alpha (DeiT: 1.0)")
    jigsaw_warmup_epochs: int = Field(0, ge=0, description="reference code: no jigsaw during the first 20 epochs")
    dal_warmup_epochs: float = Field(0.0, ge=0, description="for mjp.dal_schedule=warmup_cosine")


class PrivacySection(_Section):
    """Gradient-inversion attacks at the end of training (Table 5), on the first ``images`` val images."""

    settings: tuple[Literal["a", "b", "c"], ...] = ("a", "b", "c")
    attack: Literal["april", "inversion"] = "april"
    images: int = Field(4, ge=1)
    ratio: float = Field(0.5, ge=0, le=1, description="shuffle ratio of x~ in settings b and c")
    inversion_steps: int = Field(200, ge=1)
    lpips_backbone: str | None = Field(None, description="torchvision AlexNet state dict; without it LPIPS is absent")


class EvalSection(_Section):
    consistency_ratio: float = Field(0.5, ge=0, le=1)
    privacy: PrivacySection | None = None
    shuffle_ratios: tuple[float, ...] = (0.0, 0.1, 0.3, 0.5, 0.9)
    seed: int = 0

    @field_validator("shuffle_ratios")
    @classmethod
    def _ratios_in_range(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        bad = [r for r in v if not 0 <= r <= 1]
        if bad:
            raise ValueError(f"ratios {bad} are outside [0, 1]")
        return v


class ScalingSection(_Section):
    num_workers: int = Field(1, ge=1, description="data-parallel workers (Ray Train)")
    use_gpu: bool = False
    cpus_per_worker: float = Field(1.0, gt=0)
    gpus_per_worker: float = Field(1.0, ge=0)


class RuntimeSection(_Section):
    seed: int = 0
    amp: Literal["none", "bf16", "fp16"] = "none"
    channels_last: bool = False
    compile: bool = False
    log_every: int = Field(50, ge=1, description="steps between host syncs for the running loss")
    max_failures: int = Field(0, ge=0, description="Ray Train restarts from the last checkpoint")
    fail_after_epoch: int | None = Field(None, ge=1, description="testing: raise once after this epoch's checkpoint")


class TrackingSection(_Section):
    experiment: str = "mjp"
    uri: str | None = Field(None, description="MLflow tracking URI; default $MLFLOW_TRACKING_URI or ./mlflow.db")
    run_name: str | None = None
    log_checkpoint: bool = True
    storage_path: str | None = Field(None, description="Ray results (checkpoints); default ./runs")


class TrainConfig(_Section):
    """A complete training run: model, data, recipe, MJP, evaluation, scaling, tracking."""

    model: ModelSection = ModelSection()
    data: DataSection = DataSection()
    optim: OptimSection = OptimSection()
    mjp: MJPConfig = MJPConfig()
    eval: EvalSection = EvalSection()
    scaling: ScalingSection = ScalingSection()
    runtime: RuntimeSection = RuntimeSection()
    tracking: TrackingSection = TrackingSection()

    @model_validator(mode="before")
    @classmethod
    def _expand_variant(cls, data: Any) -> Any:
        """``mjp: {variant: J, mask_ratio: 0.1}`` = Table 4 row J with one override."""
        if isinstance(data, dict) and isinstance(data.get("mjp"), dict) and "variant" in data["mjp"]:
            mjp = dict(data["mjp"])
            name = str(mjp.pop("variant"))
            key = TABLE4_NAMES.get(name.upper(), name) if len(name) == 1 else name
            if key not in TABLE4:
                allowed = ", ".join(f"{k}={v}" for k, v in TABLE4_NAMES.items())
                raise ValueError(f"mjp.variant={name!r} is not a Table 4 row; allowed: {allowed}")
            data = {**data, "mjp": {**TABLE4[key], **mjp}}
        return data

    @property
    def variant(self) -> str:
        """The Table 4 row this config's MJP switches match (``custom`` when none does)."""
        for name, row in TABLE4.items():
            if all(getattr(self.mjp, k) == v for k, v in row.items()):
                return name
        return "custom"


class ConfigError(ValueError):
    """A config that cannot run: the message names the key, the value and what is allowed."""


def describe_validation_error(err: ValidationError, prefix: str = "") -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(config)"
        given = e.get("input")
        shown = "" if isinstance(given, dict) or e["type"] == "missing" else f" (got {given!r})"
        lines.append(f"  {prefix}{key}: {e['msg']}{shown}")
    return "\n".join(lines)


def parse_override(item: str) -> tuple[str, Any]:
    """``"optim.base_lr=1e-3"`` -> ``("optim.base_lr", 0.001)`` (the value parsed as YAML)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set optim.epochs=3")
    key, raw = item.split("=", 1)
    value = yaml.safe_load(raw)
    if isinstance(value, str):  # YAML 1.1 reads "1e-3" as a string
        try:
            value = float(value)
        except ValueError:
            pass
    return key.strip(), value


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``tree`` with ``a.b.c = value`` set (missing levels are created)."""
    head, _, rest = key.partition(".")
    out = dict(tree)
    if rest:
        child = out.get(head, {})
        out[head] = set_dotted(child if isinstance(child, dict) else {}, rest, value)
    else:
        out[head] = value
    return out


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dict -> ``{"a.b": value}``; lists and tuples stay values."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        tree = set_dotted(tree, key, value)
    return tree


def expand_presets(params: dict[str, Any], presets: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Sampled params with each preset label (``presets[key][label]``) replaced by the keys it sets."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        out.update(presets[key][value] if key in presets else {key: value})
    return out


def build_config(tree: dict[str, Any], overrides: dict[str, Any] | None = None, *, source: str = "config") -> TrainConfig:
    """Validate a nested dict plus dotted overrides; raises ``ConfigError`` naming every bad key."""
    for key, value in (overrides or {}).items():
        tree = set_dotted(tree, key, value)
    try:
        return TrainConfig.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(f"invalid {source}:\n{describe_validation_error(err)}") from None


def read_yaml_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """A YAML file that must hold a mapping; ``ConfigError`` naming ``what`` otherwise."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what} {str(path)!r} does not exist")
    try:
        tree = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a mapping, got {type(tree).__name__}")
    return tree


def load_config(path: str | Path, overrides: list[str] | None = None) -> TrainConfig:
    """Read a YAML config and apply ``key=value`` overrides."""
    tree = read_yaml_mapping(path, "config file")
    return build_config(tree, dict(parse_override(o) for o in overrides or []), source=str(path))


def flat_params(cfg: TrainConfig) -> dict[str, Any]:
    """Every key of the config, dotted, as MLflow params and Tune config keys."""
    return flatten(cfg.model_dump(mode="json"))
