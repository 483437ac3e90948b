"""Dotted keys: ``--set`` overrides, merging config trees, flat <-> nested, and "did you mean".

One merge rule everywhere (``--set``, a study's ``train:`` overlay, presets): a mapping merges
into the section it names, key by key; any other value replaces. The exception is a free-form
mapping (``model.kwargs``, arguments for timm): given whole it replaces, so ``--set
model.kwargs={}`` clears it, while ``--set model.kwargs.depth=2`` sets one argument.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from trainables.errors import ConfigError, shown

#: words longer than this get no suggestion (difflib's cost grows with the word; no key is so long)
_SUGGEST_CHARS = 100

#: mappings that are values, not sections: replaced as a whole when given as a mapping
FREE_FORM: frozenset[str] = frozenset({"model.kwargs"})


def parse_override(item: str) -> tuple[str, Any]:
    """``"optim.base_lr=1e-3"`` -> ``("optim.base_lr", 0.001)`` (the value parsed as YAML)."""
    if "=" not in item:
        raise ConfigError(f"--set {shown(item)}: expected key=value, e.g. --set optim.epochs=3")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {shown(item)}: {shown(key)} is not a dotted key, e.g. optim.epochs")
    from trainables.config.yaml_files import parse_yaml

    try:
        value = parse_yaml(raw) if raw.strip() else None
    except (yaml.YAMLError, ConfigError) as err:
        raise ConfigError(f"--set {shown(item)}: the value is not valid YAML ({str(err).splitlines()[0][:200]})") from None
    if isinstance(value, str):  # YAML 1.1 reads "1e-3" as a string
        with contextlib.suppress(ValueError):
            value = float(value)
    return key, value


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """Several ``key=value`` items; a key given twice is an error (which one was meant?)."""
    out: dict[str, Any] = {}
    for item in items:
        key, value = parse_override(item)
        if key in out:
            raise ConfigError(f"--set {key[:100]} is given twice ({shown(out[key])} and {shown(value)}); keep one")
        out[key] = value
    return out


def merge(base: dict[str, Any], over: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``base`` with ``over`` merged in: mappings merge into sections, everything else replaces."""
    out = dict(base)
    for key, value in over.items():
        path = f"{prefix}{key}"
        current = out.get(key)
        if isinstance(value, dict) and isinstance(current, dict) and path not in FREE_FORM:
            out[key] = merge(current, value, path + ".")
        else:
            out[key] = value
    return out


def set_dotted(tree: dict[str, Any], key: str, value: Any, prefix: str = "") -> dict[str, Any]:
    """A copy of ``tree`` with ``a.b.c = value`` (missing levels created; a mapping merges)."""
    head, _, rest = key.partition(".")
    out = dict(tree)
    current = out.get(head)
    if rest:
        out[head] = set_dotted(current if isinstance(current, dict) else {}, rest, value, f"{prefix}{head}.")
    elif isinstance(value, dict) and isinstance(current, dict) and f"{prefix}{head}" not in FREE_FORM:
        out[head] = merge(current, value, f"{prefix}{head}.")
    else:
        out[head] = value
    return out


def apply_overrides(tree: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    for key, value in overrides.items():
        tree = set_dotted(tree, key, value)
    return tree


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dict -> ``{"a.b": value}``; lists, tuples and empty mappings stay values."""
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


def expand_presets(params: Mapping[str, Any], presets: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Sampled params with each preset label (``presets[key][label]``) replaced by the keys it sets."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        out.update(presets[key][value] if key in presets else {key: value})
    return out


def did_you_mean_key(key: str, candidates: Iterable[str]) -> str:
    """A suggestion for a dotted key that does not exist, from the keys of the same section,
    compared by their last part: ``optim.epoch`` -> ``optim.epochs``; where no key is clearly
    closest, the two nearest (``optim.lrr`` -> ``optim.min_lr or optim.base_lr``); where none is
    near, the section's keys (``budget.num_samples`` -> ``budget has: max_concurrent, ...``)."""
    if len(key) > _SUGGEST_CHARS:
        return ""
    section, _, leaf = key.rpartition(".")
    leaves = {c.rpartition(".")[2]: c for c in candidates if c.rpartition(".")[0] == section}
    close = difflib.get_close_matches(leaf, leaves, n=1, cutoff=0.6)
    if not close:  # compare with the words of each key (min_lr: min, lr), the last word first

        def score(name: str) -> tuple[float, bool, float]:
            words = name.split("_")
            best = max(words, key=lambda w: difflib.SequenceMatcher(None, leaf, w).ratio())
            return difflib.SequenceMatcher(None, leaf, best).ratio(), best == words[-1], difflib.SequenceMatcher(None, leaf, name).ratio()

        close = [n for n in sorted(leaves, key=score, reverse=True)[:2] if score(n)[0] >= 0.75]
    if close:
        return f" (did you mean {' or '.join(leaves[c] for c in close)}?)"
    return f" ({section} has: {', '.join(sorted(leaves))})" if leaves else ""


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``" (did you mean optim.epochs?)"`` for the closest candidate, or ``""``."""
    if len(str(word)) > _SUGGEST_CHARS:
        return ""
    close = difflib.get_close_matches(str(word), [str(c) for c in candidates], n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""
