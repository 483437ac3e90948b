"""A ``TrainConfig`` (``config/schema.py``) built from YAML and ``--set`` overrides, validated before
anything starts, every error one line per key; and the config as flat params.

Flat dotted keys (``optim.base_lr``, ``mjp.mask_ratio``) are the one spelling used by ``--set``,
Tune's search spaces, MLflow params and the analysis columns. Pure pydantic: importing this
module costs no torch, so a bad key is reported in well under a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from trainables.config.overrides import apply_overrides, did_you_mean, did_you_mean_key, flatten, parse_overrides
from trainables.config.schema import TrainConfig
from trainables.config.yaml_files import read_yaml_mapping
from trainables.errors import ConfigError, shown


def known_keys(model: type[BaseModel] = TrainConfig) -> list[str]:
    """Every dotted key of a config class (``optim.epochs``, ``eval.privacy.images``, ...)."""
    keys: list[str] = []
    for name, field in model.model_fields.items():
        inner = [a for a in getattr(field.annotation, "__args__", (field.annotation,)) if isinstance(a, type) and issubclass(a, BaseModel)]
        if inner:
            keys += [f"{name}.{k}" for k in known_keys(inner[0])]
        else:
            keys.append(name)
    return keys


#: pydantic's error types this project words itself (the bound comes from the error's context)
_BOUNDS = {"greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"), "less_than_equal": ("le", "<="), "less_than": ("lt", "<")}


def _plain(error: Any) -> str:
    """The message of one pydantic error in this project's words where pydantic's read oddly."""
    kind, ctx = error["type"], error.get("ctx", {})
    if kind in _BOUNDS:
        name, op = _BOUNDS[kind]
        bound = ctx[name]
        return f"must be {op} {bound:g}" if isinstance(bound, float) else f"must be {op} {bound}"
    if kind == "extra_forbidden":
        return "not a key of this section"
    return error["msg"].removeprefix("Value error, ")


def describe_validation_error(err: ValidationError, prefix: str = "", candidates: list[str] | None = None) -> str:
    """Every problem on one line, separated by "; ": the dotted key, what is wrong, the value given
    (cut short: ``shown``); a suggestion for a key that does not exist (``optim.epoch`` -> ``optim.epochs``)."""
    candidates = known_keys() if candidates is None else candidates
    lines = []
    for e in err.errors():
        loc = [str(p) for p in e["loc"] if not str(p).startswith("function-")]
        key = ".".join(loc) or "(config)"
        given = e.get("input")
        got = "" if isinstance(given, dict) or e["type"] == "missing" else f" (got {shown(given)})"
        hint = ""
        if e["type"] == "extra_forbidden":
            parent = ".".join(loc[:-1])
            if parent:
                hint = did_you_mean_key(key, candidates)
            else:  # a top-level key: the config's sections, not their dotted keys
                sections = sorted({c.split(".")[0] for c in candidates})
                hint = f"{did_you_mean(key, sections)}; the top level has: {', '.join(sections)}"
        elif e["type"] == "literal_error" and isinstance(given, str):
            hint = did_you_mean(given, [s.strip(" '") for s in str(e.get("ctx", {}).get("expected", "")).replace(" or ", ",").split(",")])
        msg = _plain(e)
        if not loc:  # a whole-config check (the Table 4 row), whose message names its key
            lines.append(f"{msg}{got}{hint}")
            continue
        lines.append(f"{prefix}{key}: {msg}{got}{hint}")
    return "; ".join(lines)


def build_config(tree: dict[str, Any], overrides: dict[str, Any] | None = None, *, source: str = "config") -> TrainConfig:
    """Validate a nested dict plus dotted overrides; raises ``ConfigError`` naming every bad key."""
    tree = apply_overrides(tree, overrides or {})
    try:
        return TrainConfig.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(f"invalid {source}: {describe_validation_error(err)}") from None
    except ValueError as err:  # raised by the before-validator (an unknown variant)
        raise ConfigError(f"invalid {source}: {err}") from None


def load_config(path: str | Path, overrides: list[str] | None = None) -> TrainConfig:
    """Read a YAML config and apply ``key=value`` overrides."""
    tree = read_yaml_mapping(path, "config file")
    return build_config(tree, parse_overrides(overrides or []), source=str(path))


def flat_params(cfg: TrainConfig) -> dict[str, Any]:
    """Every key of the config, dotted, as MLflow params and Tune config keys."""
    return flatten(cfg.model_dump(mode="json"))
