"""How ``make test`` spreads the suite over its processes (pytest-xdist, ``--dist loadgroup``).

Each test goes to whichever process is free, except where tests share something expensive that
lives in one process: the cluster tests share one twin (group ``twin``), the Slurm tests one
test Slurm (group ``slurm``), the tests that need a local Ray one Ray (group ``ray``: one Ray
started instead of one in each process, and ended once they are done, ``tests/isolation.py``),
and the tests of a module that share a module- or class-scoped fixture (one sweep read by many
checks) stay together. The longest work is handed out first, so neither process is left with a
long tail: the twin's, the Slurm and the local Ray's tests, then the other end-to-end (``slow``)
tests, then the rest, each in the order they were collected.
A run in one process (plain ``pytest``) is left as collected.
"""

from __future__ import annotations

import pytest

#: fixture scopes whose value lives in one process and is shared by several tests
SHARED = {"package", "module", "class"}
TWIN = "twin"
SLURM = "slurm"
RAY = "ray"


def spread(config: pytest.Config) -> bool:
    """Whether this is a worker of ``--dist loadgroup``: pytest-xdist collects the tests in its
    workers, where it sets ``dist`` to "no" and keeps the choice in ``loadgroup``."""
    return bool(getattr(config.option, "loadgroup", False))


def mark_group(item: pytest.Item) -> None:
    """As each test is collected: its group, where it has one (pytest-xdist reads the marks in a
    ``pytest_collection_modifyitems`` that may run before any of ours)."""
    if spread(item.config) and (group := group_of(item)) is not None:
        item.add_marker(pytest.mark.xdist_group(group))


def longest_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    if spread(config):
        items.sort(key=_rank)  # stable: collection order within each rank


def group_of(item: pytest.Item) -> str | None:
    """The group a test must run in, or None where it may run in any process."""
    if item.get_closest_marker("cluster"):
        return TWIN
    if item.get_closest_marker("slurm"):
        return SLURM
    if "local_ray" in getattr(item, "fixturenames", ()):
        return RAY  # before the module's group: a module-scoped fixture that needs the Ray names it too
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    if any(d.scope in SHARED for defs in definitions for d in defs):
        return item.nodeid.split("::", 1)[0]
    return None


def _rank(item: pytest.Item) -> int:
    if group_of(item) in (TWIN, SLURM, RAY):
        return 0
    return 1 if item.get_closest_marker("slow") else 2
