"""Input that costs more than it says: a few hundred bytes of nested YAML aliases, nesting thousands
deep, or a file of megabytes is refused in one short line, in well under a second and without
building what it would expand to; small anchors (cluster.yaml's one AMI for three node types) stay
allowed, and PyYAML's multi-line errors become one line."""

from __future__ import annotations

import resource
import time

import pytest

from trainables.config.yaml_files import MAX_EXPANDED_NODES, read_yaml_mapping
from trainables.errors import ConfigError


def billion_laughs(levels: int = 9) -> str:
    """``a`` holds 10 values, each next key 10 aliases of the one before: 10^levels values in all."""
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, levels):
        prev, name = chr(96 + i), chr(97 + i)
        text += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]\n"
    return text


CASES = [
    ("billion laughs", billion_laughs(), f"its aliases expand to more than {MAX_EXPANDED_NODES:,} values"),
    (
        "billion laughs in a study's train section",
        "name: s\ntrain:\n  " + billion_laughs().replace("\n", "\n  ") + "\n",
        "its aliases expand to more than",
    ),
    ("recursive anchor", "a: &a [1, *a]\n", "an alias refers to a node that contains it"),
    ("nesting thousands deep", "a: " + "[" * 100_000 + "]" * 100_000 + "\n", "lists and mappings nest more than 64 deep"),
    (
        "a python tag",
        "optim: !!python/object/apply:os.system ['true']\n",
        "is not valid YAML (line 1, column 8: could not determine a constructor for the tag",
    ),
    ("malformed flow", "optim: {epochs: [1, 2}\n", "is not valid YAML (line 1, column"),
]


@pytest.mark.parametrize("text, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_costly_or_broken_yaml_is_one_short_line_at_once(tmp_path, text, message):
    path = tmp_path / "study.yaml"
    path.write_text(text)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        read_yaml_mapping(path, "study file")
    assert time.perf_counter() - start < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: nothing expanded
    text = str(caught.value)
    assert message in text and str(path) in text, text
    assert "\n" not in text and len(text) < 400, text


def test_a_file_of_megabytes_is_refused_by_its_size_before_it_is_read(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("name: s\ndescription: " + "x" * 5_000_000 + "\n")
    with pytest.raises(ConfigError, match=r"is 5,000,0\d\d bytes; a YAML file read here may hold at most 262,144") as caught:
        read_yaml_mapping(path, "study file")
    assert len(str(caught.value)) < 300


def test_small_anchors_and_aliases_still_read(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("ami: &ami ami-123\nhead: {image: *ami}\nworkers: {image: *ami, more: &m [1, 2]}\nagain: *m\n")
    assert read_yaml_mapping(path, "cluster config") == {
        "ami": "ami-123",
        "head": {"image": "ami-123"},
        "workers": {"image": "ami-123", "more": [1, 2]},
        "again": [1, 2],
    }
