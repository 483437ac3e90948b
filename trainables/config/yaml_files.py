"""Reading YAML files that must hold a mapping: safe (no Python objects), strict (no duplicate keys).

PyYAML's ``safe_load`` keeps the last of two equal keys without a word; a config with
``epochs: 30`` and, further down, ``epochs: 3`` would silently train 3 epochs. Here that is an
error naming the key and both lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainables.errors import ConfigError


class _StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses a mapping with the same key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(f"duplicate key {key!r} on lines {seen[key]} and {line}; keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _StrictLoader.construct_mapping)


def parse_yaml(text: str) -> Any:
    """YAML text -> Python data (safe types only; duplicate keys are a ``ConfigError``)."""
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_yaml_mapping(path: str | Path, what: str, *, allow_empty: bool = False) -> dict[str, Any]:
    """A YAML file that must hold a mapping; ``ConfigError`` naming ``what`` and the path otherwise."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} {str(path)!r} is a directory; give a YAML file")
    if not path.is_file():
        raise ConfigError(f"{what} {str(path)!r} does not exist")
    try:
        tree = parse_yaml(path.read_text())
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from None
    if tree is None:
        if allow_empty:
            return {}
        raise ConfigError(f"{what} {str(path)!r} is empty; it must hold a YAML mapping (see trainables/configs/ for examples)")
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a YAML mapping, got a {type(tree).__name__}")
    return tree
