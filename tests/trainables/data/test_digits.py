"""The digits read without scikit-learn are scikit-learn's own, split as ``train_test_split`` splits
them; and reading them imports no scikit-learn."""

from __future__ import annotations

import importlib.machinery
import subprocess
import sys

import numpy as np
import pytest

from trainables.data import digits
from trainables.data.digits import load_digits_split
from trainables.errors import DataError


def test_the_split_is_scikit_learns_stratified_split_of_its_own_digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    expected = train_test_split(
        digits.images.astype(np.float32)[:, None] / 16.0, digits.target, test_size=0.2, random_state=0, stratify=digits.target
    )
    got = load_digits_split()
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        np.testing.assert_array_equal(mine, theirs)
    assert [a.shape[0] for a in got] == [1437, 360, 1437, 360]
    per_class, in_val = np.bincount(digits.target), np.bincount(got[3], minlength=10)
    assert np.all(np.abs(in_val - 0.2 * per_class) <= 1), (in_val, per_class)  # stratified: a fifth of every class


def test_reading_the_digits_imports_no_scikit_learn():
    code = (
        "import sys; from trainables.data.digits import load_digits_split; load_digits_split(); "
        "print(sorted(m for m in sys.modules if m.startswith('sklearn')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_a_scikit_learn_without_the_digits_file_is_one_line_naming_it(tmp_path, monkeypatch):
    spec = importlib.machinery.ModuleSpec("sklearn", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(digits.importlib.util, "find_spec", lambda name: spec)
    with pytest.raises(DataError, match=f"{tmp_path}/datasets/data/digits.csv.gz is missing; reinstall scikit-learn"):
        load_digits_split()
    monkeypatch.setattr(digits.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DataError, match="scikit-learn is not installed"):
        load_digits_split()
