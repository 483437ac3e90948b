"""Bad data: batch sizes, roots, Fashion-MNIST files, image folders."""

from __future__ import annotations

from tests.bad_inputs import TRAIN
from tests.bad_inputs_made import fashion, imagefolder

#: datasets and their files
DATA = [
    (
        "batch larger than the data",
        lambda t: TRAIN + ["--set", "data.batch_size=5000"],
        "data.batch_size=5000 x scaling.num_workers=1 = 5000 images per step, but the training set has 1437",
    ),
    (
        "root for bundled digits",
        lambda t: TRAIN + ["--set", "data.root=/tmp"],
        "data.name='digits' is bundled with scikit-learn and reads no directory",
    ),
    (
        "fashion missing",
        lambda t: TRAIN + ["--set", "data.name=fashion_mnist", "--set", f"data.root={t}"],
        "apt-get install dataset-fashion-mnist",
    ),
    (
        "fashion garbage",
        lambda t: TRAIN + ["--set", "data.name=fashion_mnist", "--set", f"data.root={fashion(t, magic=0x0D)}"],
        "is not an IDX file of 3-D unsigned bytes",
    ),
    (
        "fashion truncated",
        lambda t: TRAIN + ["--set", "data.name=fashion_mnist", "--set", f"data.root={fashion(t, truncate=100)}"],
        "the file is truncated or corrupt",
    ),
    ("imagefolder missing split", lambda t: TRAIN + ["--set", "data.name=imagefolder", "--set", f"data.root={t}"], "missing train/"),
    (
        "imagefolder of one class",
        lambda t: (
            TRAIN
            + [
                "--set",
                "data.name=imagefolder",
                "--set",
                f"data.root={imagefolder(t, classes=('cat',))}",
                "--set",
                "model.kwargs.patch_size=8",
                "--set",
                "data.img_size=16",
                "--set",
                "data.batch_size=1",
            ]
        ),
        "has 1 class folder (cat) in train/ and val/; a classifier needs at least 2 classes",
    ),
    (
        "imagefolder zero-byte image",
        lambda t: (
            TRAIN
            + [
                "--set",
                "data.name=imagefolder",
                "--set",
                f"data.root={imagefolder(t, empty_file=True)}",
                "--set",
                "model.kwargs.patch_size=8",
                "--set",
                "data.img_size=16",
                "--set",
                "data.batch_size=2",
            ]
        ),
        "1 zero-byte image(s)",
    ),
    ("cifar without download", lambda t: TRAIN + ["--set", "data.name=cifar10", "--set", f"data.root={t}"], "set data.download=true"),
]
