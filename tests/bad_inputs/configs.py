"""Bad configs: config files, ``--set`` keys and values, numbers out of range."""

from __future__ import annotations

from tests.bad_inputs import TRAIN
from tests.bad_inputs_made import write

#: config files, --set keys and values
CONFIGS = [
    ("unknown key", lambda t: TRAIN + ["--set", "optim.lrr=1"], "optim.lrr: not a key of this section"),
    (
        "key typo names keys of its section",
        lambda t: TRAIN + ["--set", "optim.lrr=1"],
        "optim.lrr: not a key of this section (got 1) (did you mean optim.min_lr or optim.base_lr?)",
    ),
    ("typo with suggestion", lambda t: TRAIN + ["--set", "optim.epoch=3"], "did you mean optim.epochs?"),
    (
        "a YAML boolean for a number",
        lambda t: TRAIN + ["--set", "optim.epochs=yes"],
        "optim.epochs: a YAML boolean (yes/no/true/false/on/off) is not a number; give a number (got True)",
    ),
    (
        "a YAML boolean for a ratio",
        lambda t: TRAIN + ["--set", "mjp.mask_ratio=on"],
        "mjp.mask_ratio: a YAML boolean (yes/no/true/false/on/off) is not a number; give a number (got True)",
    ),
    ("workers zero", lambda t: TRAIN + ["--set", "scaling.num_workers=0"], "scaling.num_workers: must be >= 1 (got 0)"),
    ("dataset typo", lambda t: TRAIN + ["--set", "data.name=fashion"], "did you mean fashion_mnist?"),
    ("ratio above 1", lambda t: TRAIN + ["--set", "mjp.mask_ratio=2"], "mjp.mask_ratio: must be <= 1 (got 2)"),
    (
        "an infinite learning rate",
        lambda t: TRAIN + ["--set", "optim.base_lr=.inf"],
        "optim.base_lr: Input should be a finite number (got inf)",
    ),
    ("a NaN ratio", lambda t: TRAIN + ["--set", "mjp.mask_ratio=.nan"], "mjp.mask_ratio: Input should be a finite number (got nan)"),
    (
        "more loader processes than the worker's CPUs carry",
        lambda t: TRAIN + ["--set", "data.loader_workers=512"],
        "data.loader_workers=512 is more than 4 per CPU a worker reserves (scaling.cpus_per_worker=1): allowed 0-4",
    ),
    (
        "ratio selects 1 patch",
        lambda t: TRAIN + ["--set", "mjp.mask_ratio=0.07"],
        "mjp.mask_ratio=0.07 selects round(16 x 0.07) = 1 of the 16 patches, and a jigsaw needs at least 2",
    ),
    (
        "ratio selects no patch",
        lambda t: TRAIN + ["--set", "mjp.mask_ratio=0.01"],
        "mjp.mask_ratio=0.01 selects round(16 x 0.01) = 0 of the 16 patches, and a jigsaw needs at least 2; allowed: 0 (no shuffle) or "
        ">= 0.0938 (2 patches)",
    ),
    (
        "eval ratio selects no patch",
        lambda t: TRAIN + ["--set", "eval.shuffle_ratios=[0.03]"],
        "eval.shuffle_ratios=0.03 selects round(16 x 0.03) = 0 of the 16 patches, and a jigsaw needs at least 2",
    ),
    ("bad variant", lambda t: TRAIN + ["--set", "mjp.variant=K"], "mjp.variant='K' is not a Table 4 row"),
    (
        "unk without shuffle",
        lambda t: TRAIN + ["--set", "mjp.shuffle=none"],
        "pos_embed='unk' marks shuffled positions, but shuffle='none' never shuffles",
    ),
    ("missing config", lambda t: ["train", "no/such/config.yaml"], "config file 'no/such/config.yaml' does not exist"),
    ("directory as config", lambda t: ["train", str(t)], "is a directory; give a YAML file"),
    ("empty config", lambda t: ["train", write(t / "empty.yaml", "")], "is empty; it must hold a YAML mapping"),
    (
        "duplicate key",
        lambda t: ["train", write(t / "dup.yaml", "optim:\n  epochs: 30\n  epochs: 3\n")],
        "duplicate key 'epochs' on lines 2 and 3",
    ),
    (
        "python tag in yaml",
        lambda t: ["train", write(t / "evil.yaml", "optim: !!python/object/apply:os.system ['true']\n")],
        "is not valid YAML",
    ),
    ("list as config", lambda t: ["train", write(t / "list.yaml", "- a\n- b\n")], "expected a YAML mapping, got a list"),
    ("set without equals", lambda t: TRAIN + ["--set", "noequals"], "expected key=value"),
    ("set given twice", lambda t: TRAIN + ["--set", "optim.epochs=1", "--set", "optim.epochs=2"], "--set optim.epochs is given twice"),
    ("set bad yaml value", lambda t: TRAIN + ["--set", "optim={epochs: [1}"], "the value is not valid YAML"),
    ("absurd epochs", lambda t: TRAIN + ["--set", "optim.epochs=100000000"], "optim.epochs: must be <= 10000 (got 100000000)"),
    (
        "absurd epochs in a sweep",
        lambda t: ["sweep", "run", "quickstart", "--set", "optim.epochs=100000000"],
        "optim.epochs: must be <= 10000 (got 100000000)",
    ),
    (
        "absurd epochs in a plan",
        lambda t: ["sweep", "plan", "quickstart", "--set", "optim.epochs=100000000"],
        "optim.epochs: must be <= 10000 (got 100000000)",
    ),
]
