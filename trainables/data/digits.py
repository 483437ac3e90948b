"""scikit-learn's bundled digits, read without importing scikit-learn: its CSV file (found, not
imported) and the platform's fixed split. ``import sklearn`` alone costs about a second of CPU, in
every trial process and every command that reads digits.

The split is the one the platform has always used, scikit-learn's
``train_test_split(range(1797), test_size=0.2, random_state=0, stratify=target)``, kept as its
indices in ``digits_split.json`` (tests/trainables/data/test_digits.py checks it against
scikit-learn)."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np

from trainables.errors import DataError

SPLIT_FILE = Path(__file__).with_name("digits_split.json")


def digits_csv() -> Path:
    """Where scikit-learn keeps the digits (``sklearn/datasets/data/digits.csv.gz``), found without
    running scikit-learn's ``__init__``."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("data.name=digits reads scikit-learn's bundled copy, and scikit-learn is not installed; `make setup` installs it")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    if not path.is_file():
        raise DataError(f"data.name=digits reads scikit-learn's bundled copy, and {path} is missing; reinstall scikit-learn (`make setup`)")
    return path


def load_digits_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The training and validation images and labels: ``x_train [1437, 1, 8, 8]``, ``x_val [360, 1,
    8, 8]`` (float32 in [0, 1], as ``load_digits().images / 16``), ``y_train [1437]``, ``y_val
    [360]`` (int64, 0-9), each split in the order ``train_test_split`` returns it."""
    with gzip.open(digits_csv(), "rt") as fh:
        table = np.loadtxt(fh, delimiter=",")  # [1797, 65]: 64 pixels 0-16, then the label
    images = (table[:, :64].reshape(-1, 1, 8, 8) / 16.0).astype(np.float32)
    labels = table[:, 64].astype(np.int64)
    split = json.loads(SPLIT_FILE.read_text())
    train, val = np.asarray(split["train"]), np.asarray(split["val"])
    return images[train], images[val], labels[train], labels[val]
