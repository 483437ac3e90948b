"""Fixtures the sweep tests share."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def fake_fashion(tmp_path_factory):
    """Four tiny Fashion-MNIST IDX files (256 images a split), for studies whose base reads them."""
    from tests.trainables.data.test_datasets import write_idx

    root = tmp_path_factory.mktemp("fashion")
    for split in ("train", "t10k"):
        write_idx(root / f"{split}-images-idx3-ubyte.gz", np.zeros((256, 28, 28)))
        write_idx(root / f"{split}-labels-idx1-ubyte.gz", np.arange(256) % 10)
    return root
