"""Input that costs more than it says (aliases, megabytes, grids of millions), and resources the machine does not have."""

from __future__ import annotations

import os

import yaml

from tests.bad_inputs import TRAIN
from tests.bad_inputs_made import CONFIG, imagefolder, laughs, study, write

#: input that costs more than it says
COSTLY = [
    (
        "nested aliases in a study",
        lambda t: [
            "sweep",
            "run",
            write(t / "bomb.yaml", "name: s\nobjective: {metric: val/top1}\ntrain:\n  " + laughs(6).replace("\n", "\n  ")),
        ],
        "its aliases expand to more than 100,000 values",
    ),
    (
        "nested aliases in a plan",
        lambda t: [
            "sweep",
            "plan",
            write(t / "bomb.yaml", "name: s\nobjective: {metric: val/top1}\ntrain:\n  " + laughs(6).replace("\n", "\n  ")),
        ],
        "its aliases expand to more than 100,000 values",
    ),
    (
        "nested aliases in a config",
        lambda t: ["train", write(t / "bomb.yaml", laughs(6))],
        "its aliases expand to more than 100,000 values",
    ),
    (
        "a description of megabytes",
        lambda t: [
            "sweep",
            "run",
            write(
                t / "big.yaml",
                yaml.safe_dump({"name": "s", "base": CONFIG, "objective": {"metric": "val/top1"}, "description": "x" * 5_000_000}),
            ),
        ],
        "a YAML file read here may hold at most 262,144",
    ),
    (
        "a description MLflow cannot keep",
        lambda t: ["sweep", "run", study(t, description="x" * 5000)],
        "description: String should have at most 4000 characters (got 'xxxxx",
    ),
    ("a value of megabytes", lambda t: TRAIN + ["--set", "mjp.variant=" + "K" * 5_000_000], "mjp.variant='KKKKKKKK"),
    (
        "a grid of a million trials",
        lambda t: [
            "sweep",
            "run",
            study(
                t,
                search={"algorithm": "grid"},
                space={
                    "optim.base_lr": {"type": "grid", "values": [0.001 * i for i in range(1, 101)]},
                    "optim.weight_decay": {"type": "grid", "values": [0.001 * i for i in range(100)]},
                    "runtime.seed": {"type": "grid", "values": list(range(100))},
                },
            ),
        ],
        "has 1,000,000 trials (a grid of 100 x 100 x 100), more than the 1,000 a sweep starts without asking; see what it costs with "
        "`mjp sweep plan s`, then shrink it or pass --max-trials 1000000",
    ),
    (
        "a 10,000-value choice list, refused by its count before a model is built for each value",
        lambda t: [
            "sweep",
            "run",
            study(t, search={"algorithm": "grid"}, space={"model.kwargs.embed_dim": {"type": "grid", "values": list(range(8, 10_008))}}),
        ],
        "has 10,000 trials (a grid of 10000), more than the 1,000 a sweep starts without asking",
    ),
    (
        "a config error is one line",
        lambda t: TRAIN + ["--set", "optim.epochs=0", "--set", "optim.lrr=1"],
        f"error: invalid {CONFIG}: optim.epochs: must be >= 1 (got 0); optim.lrr: not a key",
    ),
    (
        "a yaml tag is one line",
        lambda t: ["train", write(t / "tag.yaml", "optim: !!python/object/apply:os.system ['true']\n")],
        "is not valid YAML (line 1, column 8: could not determine a constructor for the tag",
    ),
]

#: resources the machine does not have
RESOURCES = [
    (
        "more CPUs than this machine has",
        lambda t: TRAIN + ["--set", "scaling.cpus_per_worker=4096"],
        f"scaling.num_workers=1 x scaling.cpus_per_worker=4096 = 4096 CPUs per trial, but this machine has {os.cpu_count()}",
    ),
    (
        "more CPUs in a sweep",
        lambda t: ["sweep", "run", "quickstart", "--smoke", "--set", "scaling.cpus_per_worker=4096"],
        "= 4096 CPUs per trial, but this machine has",
    ),
    (
        "more GPUs than this machine has",
        lambda t: TRAIN + ["--set", "scaling.use_gpu=true", "--set", "scaling.gpus_per_worker=4096"],
        "scaling.use_gpu=true asks for 4096 GPU(s) per trial (scaling.num_workers=1 x scaling.gpus_per_worker=4096), but this machine has",
    ),
    (
        "tokens a CPU cannot train",
        lambda t: (
            TRAIN
            + [
                "--set",
                "data.name=imagefolder",
                "--set",
                f"data.root={imagefolder(t)}",
                "--set",
                "data.img_size=224",
                "--set",
                "data.batch_size=2",
            ]
        ),
        "data.img_size=224 with model.kwargs.patch_size=2 makes 12,544 tokens per image: on a CPU (scaling.use_gpu=false) one image's "
        "attention, forward and backward, is 483 GFLOP",
    ),
    (
        "tokens a CPU cannot train in a plan",
        lambda t: [
            "sweep",
            "plan",
            "quickstart",
            "--set",
            "data.name=imagefolder",
            "--set",
            f"data.root={imagefolder(t)}",
            "--set",
            "data.img_size=224",
            "--set",
            "data.batch_size=2",
        ],
        "data.img_size=224 with model.kwargs.patch_size=2 makes 12,544 tokens per image: on a CPU (scaling.use_gpu=false) one image's "
        "attention, forward and backward, is 483 GFLOP",
    ),
]
