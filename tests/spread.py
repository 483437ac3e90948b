"""How ``make test`` spreads the suite over its processes (pytest-xdist, ``--dist loadgroup``).

Each test goes to whichever process is free, except where tests share something expensive that
lives in one process: the cluster tests share one twin (group ``twin``), and the tests of a module
that share a module- or class-scoped fixture (one sweep read by many checks) stay together. The
longest work is handed out first, so neither process is left with a long tail: the twin's tests,
then the other end-to-end (``slow``) tests, then the rest, each in the order they were collected.
A run in one process (plain ``pytest``) is left as collected.
"""

from __future__ import annotations

import pytest

#: fixture scopes whose value lives in one process and is shared by several tests
SHARED = {"package", "module", "class"}
TWIN = "twin"


def spread_over_processes(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("dist", "no") != "loadgroup":
        return
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=_longest_first)  # stable: collection order within each rank


def group_of(item: pytest.Item) -> str | None:
    """The group a test must run in, or None where it may run in any process."""
    if item.get_closest_marker("cluster"):
        return TWIN
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    if any(d.scope in SHARED for defs in definitions for d in defs):
        return item.nodeid.split("::", 1)[0]
    return None


def _longest_first(item: pytest.Item) -> int:
    if item.get_closest_marker("cluster"):
        return 0
    return 1 if item.get_closest_marker("slow") else 2
