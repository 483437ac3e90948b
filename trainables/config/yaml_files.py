"""Reading YAML files that must hold a mapping: safe (no Python objects), strict (no duplicate keys),
bounded (no file, no nesting and no nest of aliases larger than a config can sensibly be).

PyYAML's ``safe_load`` keeps the last of two equal keys without a word; a config with
``epochs: 30`` and, further down, ``epochs: 3`` would silently train 3 epochs. Here that is an
error naming the key and both lines.

Anchors and aliases stay allowed (``cluster.yaml`` names one AMI for three node types), but a
500-byte file of aliases of aliases ("billion laughs") expands to billions of values, which
validating, digesting or quoting it in an error would walk: its expanded size is counted on the
composed node graph (linear in the file) and refused beyond ``MAX_EXPANDED_NODES``, before any
Python object is built. Every error is one line, whatever the file holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainables.errors import ConfigError, shown

#: the largest YAML file read as a config, study or cluster file (the shipped ones are a few KiB)
MAX_FILE_BYTES = 256 * 1024
#: the deepest nesting of lists and mappings read (a config is four or five levels deep)
MAX_DEPTH = 64
#: the most values (scalars, lists, mappings) a document may hold with every alias expanded
MAX_EXPANDED_NODES = 100_000


class _StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses a mapping with the same key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(f"duplicate key {shown(key)} on lines {seen[key]} and {line}; keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _StrictLoader.construct_mapping)


def expanded_size(root: yaml.Node | None) -> int:
    """How many nodes the document holds with every alias expanded (a shared node counts each time
    it is reached), counted once per distinct node; ``ConfigError`` for an alias that contains
    itself, or as soon as the count passes ``MAX_EXPANDED_NODES``."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise ConfigError(
                f"line {node.start_mark.line + 1}: an alias refers to a node that contains it (a recursive YAML anchor); "
                "write the values out"
            )
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        for child in children:
            total += size(child)
            if total > MAX_EXPANDED_NODES:
                raise ConfigError(
                    f"its aliases expand to more than {MAX_EXPANDED_NODES:,} values (nested YAML anchors, a 'billion laughs'); write the "
                    "values out or use fewer aliases"
                )
        open_nodes.discard(key)
        sizes[key] = total
        return total

    return 0 if root is None else size(root)


def check_depth(text: str) -> None:
    """``ConfigError`` when lists and mappings nest deeper than ``MAX_DEPTH`` (PyYAML composes a
    document recursively: thousands of ``[`` would take seconds to end in a RecursionError). The
    events are read with a stack, not recursion, and the pass stops at the first one too deep.
    libyaml reads them where installed: PyYAML's own scanner takes seconds on 100,000 ``[``."""
    depth = 0
    for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml: linear where PyYAML's scanner is not
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(
                    f"line {event.start_mark.line + 1}: lists and mappings nest more than {MAX_DEPTH} deep; a config is a few levels deep"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def parse_yaml(text: str) -> Any:
    """YAML text -> Python data (safe types only; duplicate keys, recursive anchors and aliases
    that expand past ``MAX_EXPANDED_NODES`` are a ``ConfigError``)."""
    check_depth(text)
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        expanded_size(node)
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def yaml_error_line(err: yaml.YAMLError) -> str:
    """PyYAML's error (context, problem and a quoted snippet over several lines) as one line:
    where, and what the problem is."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None)
    text = f"{context}, {problem}" if context and problem else problem
    return where + " ".join(str(text).split())[:200]


def read_yaml_mapping(path: str | Path, what: str, *, allow_empty: bool = False) -> dict[str, Any]:
    """A YAML file that must hold a mapping; ``ConfigError`` naming ``what`` and the path otherwise."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} {str(path)!r} is a directory; give a YAML file")
    if not path.is_file():
        raise ConfigError(f"{what} {str(path)!r} does not exist")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ConfigError(
            f"{what} {str(path)!r} is {size:,} bytes; a YAML file read here may hold at most {MAX_FILE_BYTES:,} "
            "(the shipped ones are a few KiB)"
        )
    try:
        tree = parse_yaml(path.read_text())
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML ({yaml_error_line(err)})") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path} is not valid YAML: not UTF-8 text (byte {err.start})") from None
    if tree is None:
        if allow_empty:
            return {}
        raise ConfigError(f"{what} {str(path)!r} is empty; it must hold a YAML mapping (see trainables/configs/ for examples)")
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a YAML mapping, got a {type(tree).__name__}")
    return tree
