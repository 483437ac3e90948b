"""Bad input, as a careless or hostile user gives it: every case ends with one ``error:`` line
that names the key or file, the value and what is allowed; exit status 2; no traceback; Ray
never started; nothing created that was not there. One table: configs, studies, CLI arguments,
data, checkpoints, MLflow stores and cluster files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import ray
import yaml

from sweep.cli import main
from tests.bad_inputs_made import (
    CONFIG,
    damaged_store,
    empty_store,
    evil_checkpoint,
    fashion,
    folders_without_images,
    imagefolder,
    laughs,
    mlflow_store,
    study,
    weights,
    whole_model,
    write,
)

TRAIN = ["train", CONFIG]
RESNET = ["--set", "model.name=resnet18", "--set", "model.kwargs={}"]


#: (id, argv: tmp -> list, message fragment)
CASES = [
    # --- configs ------------------------------------------------------------------------------
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
    # --- models -------------------------------------------------------------------------------
    (
        "tens of thousands of tokens in a plan",
        lambda t: ["sweep", "plan", "variants", "--set", "model.kwargs.patch_size=2"],
        "data.img_size=224 with model.kwargs.patch_size=2 makes 12,544 tokens per image: one layer's attention for data.batch_size=128 "
        "has 120,846,286,848 scores, 450 GiB where they are materialised",
    ),
    (
        "tens of thousands of tokens",
        lambda t: (
            TRAIN
            + [
                "--set",
                "data.name=imagefolder",
                "--set",
                f"data.root={imagefolder(t)}",
                "--set",
                "data.img_size=512",
                "--set",
                "data.batch_size=2",
            ]
        ),
        "data.img_size=512 with model.kwargs.patch_size=2 makes 65,536 tokens per image: one layer's attention for data.batch_size=2 has "
        "34,359,738,368 scores, 128 GiB where they are materialised (more than an 80 GB GPU",
    ),
    ("unknown model", lambda t: TRAIN + ["--set", "model.name=no_such_net"], "model.name='no_such_net' is not a timm model"),
    ("model typo", lambda t: TRAIN + ["--set", "model.name=deit_smal_patch16_224"], "did you mean deit_small_patch16_224?"),
    (
        "vit kwargs on a resnet",
        lambda t: TRAIN + ["--set", "model.name=resnet18"],
        "model.kwargs {depth, embed_dim, num_heads, patch_size} are not arguments of 'resnet18' (a timm ResNet)",
    ),
    ("pe variant on a resnet", lambda t: TRAIN + RESNET, "has no absolute position embedding, so mjp.pos_embed='unk'"),
    (
        "resnet patch too big",
        lambda t: TRAIN + RESNET + ["--set", "mjp.variant=A"],
        "8x8 images do not split into 16x16 jigsaw patches; set mjp.patch_size",
    ),
    (
        "patch size zero",
        lambda t: TRAIN + ["--set", "model.kwargs.patch_size=0"],
        "model.kwargs.patch_size=0: allowed is a positive integer",
    ),
    (
        "width not divisible by heads",
        lambda t: TRAIN + ["--set", "model.kwargs.embed_dim=30"],
        "model.kwargs.embed_dim=30 is not divisible by model.kwargs.num_heads=4",
    ),
    (
        "patches larger than images",
        lambda t: TRAIN + ["--set", "model.kwargs={embed_dim: 64, depth: 2, num_heads: 4}"],
        "cuts images into 16x16 patches, which do not tile the 8x8 images",
    ),
    (
        "missing pretrained file",
        lambda t: TRAIN + ["--set", "model.pretrained_file=/no/such/weights.pth"],
        "model.pretrained_file='/no/such/weights.pth' does not exist",
    ),
    (
        "pretrained file that runs code",
        lambda t: TRAIN + ["--set", f"model.pretrained_file={evil_checkpoint(t)}"],
        "is a pickle that would call os.makedirs (a whole model saved with torch.save?); it is not loaded, since unpickling it can run "
        "code; allowed: a .safetensors file, or a torch.save'd state dict",
    ),
    (
        "pretrained file a whole model",
        lambda t: TRAIN + ["--set", f"model.pretrained_file={whole_model(t)}"],
        "is a pickle that would call timm.models",
    ),
    (
        "pretrained file not weights",
        lambda t: TRAIN + ["--set", f"model.pretrained_file={write(t / 'w.pth', 'not weights')}"],
        "is not a PyTorch weights file",
    ),
    (
        "pretrained safetensors broken",
        lambda t: TRAIN + ["--set", f"model.pretrained_file={write(t / 'w.safetensors', 'xx')}"],
        "is not a readable safetensors file",
    ),
    # --- data ---------------------------------------------------------------------------------
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
    # --- evaluation ---------------------------------------------------------------------------
    (
        "april without its block",
        lambda t: TRAIN + ["--set", "eval.privacy={settings: [a]}"],
        "model.april_block=true, or eval.privacy.attack=inversion",
    ),
    (
        "lpips backbone that runs code",
        lambda t: TRAIN + ["--set", "model.april_block=true", "--set", f"eval.privacy={{lpips_backbone: {evil_checkpoint(t)}}}"],
        "eval.privacy.lpips_backbone=",
    ),
    (
        "evaluate weights that run code",
        lambda t: ["evaluate", "--timm", "deit_small_patch16_224", "--pretrained-file", evil_checkpoint(t)],
        "--pretrained-file=",
    ),
    (
        "missing lpips backbone",
        lambda t: TRAIN + ["--set", "model.april_block=true", "--set", "eval.privacy={lpips_backbone: /nope.pth}"],
        "eval.privacy.lpips_backbone='/nope.pth' does not exist",
    ),
    (
        "unknown corruption",
        lambda t: TRAIN + ["--set", "eval.robustness={corruptions: [fogg]}"],
        "unknown corruptions ['fogg'] (did you mean fog?)",
    ),
    (
        "imagenet-a on digits",
        lambda t: TRAIN + ["--set", f"eval.robustness={{imagenet_a_root: {t}}}"],
        "eval.robustness.imagenet_a_root needs a model of the 1000 ImageNet-1K classes, but data.name='digits' has 10",
    ),
    (
        "imagenet-c without a corruption",
        lambda t: TRAIN + ["--set", f"eval.robustness={{imagenet_c_root: {t}}}"],
        "lacks 75 of the <corruption>/<severity> folders",
    ),
    ("pe folds below two", lambda t: TRAIN + ["--set", "eval.pe_analysis={folds: 1}"], "eval.pe_analysis.folds: must be >= 2 (got 1)"),
    (
        "evaluate unknown evaluation",
        lambda t: ["evaluate", "--run", "x", "--what", "pe,robustnes"],
        "--what 'pe,robustnes': unknown 'robustnes'; allowed: a comma-separated subset of shuffle, robustness, pe, privacy",
    ),
    (
        "evaluate weights without timm",
        lambda t: ["evaluate", "--run", "x", "--pretrained-file", CONFIG],
        "--pretrained-file goes with --timm",
    ),
    ("evaluate unknown timm model", lambda t: ["evaluate", "--timm", "deit_smal_patch16_224"], "did you mean deit_small_patch16_224?"),
    (
        "evaluate missing weights",
        lambda t: ["evaluate", "--timm", "deit_small_patch16_224", "--pretrained-file", str(t / "w.pth")],
        "--pretrained-file",
    ),
    (
        "evaluate an unknown run",
        lambda t: ["evaluate", "--run", "0123456789abcdef", "--uri", mlflow_store(t)],
        "no MLflow run with id '0123456789abcdef'",
    ),
    # --- MLflow stores ------------------------------------------------------------------------
    (
        "store in a missing directory",
        lambda t: TRAIN + ["--set", f"tracking.uri=sqlite:///{t}/missing/x.db"],
        "cannot create the MLflow store",
    ),
    ("misspelt store scheme", lambda t: TRAIN + ["--set", f"tracking.uri=sqlte:///{t}/x.db"], "tracking URI 'sqlte:///"),
    (
        "misspelt store scheme in a sweep",
        lambda t: ["sweep", "run", "quickstart", "--set", f"tracking.uri=sqlte:///{t}/x.db"],
        "MLflow cannot open a 'sqlte://' store (did you mean sqlite://?); allowed: sqlite://",
    ),
    ("misspelt store scheme for status", lambda t: ["sweep", "status", "--uri", "htp://localhost:5000"], "(did you mean http://?)"),
    (
        "status of a misspelt study",
        lambda t: ["sweep", "status", "--study", "quickstrat", "--uri", mlflow_store(t)],
        "study 'quickstrat' is neither a shipped study nor one with sweeps in",
    ),
    (
        "a report --out that cannot be written",
        lambda t: ["analyze", "report", "--study", "quickstart", "--uri", mlflow_store(t), "--out", write(t / "a-file", "x")],
        "cannot write the report to",
    ),
    ("analyze a misspelt study", lambda t: ["analyze", "tables", "--study", "fashon", "--uri", mlflow_store(t)], "(did you mean fashion?)"),
    (
        "analyze a study that does not exist",
        lambda t: ["analyze", "report", "--study", "nosuch", "--uri", mlflow_store(t)],
        "study 'nosuch' is neither a shipped study nor one with sweeps in",
    ),
    ("status of a missing store", lambda t: ["sweep", "status", "--uri", f"sqlite:///{t}/missing/x.db"], "no MLflow store at"),
    (
        "tables of a study never run",
        lambda t: ["analyze", "tables", "--study", "quickstart", "--uri", mlflow_store(t)],
        "no sweep of study 'quickstart'",
    ),
    (
        "attack an unknown run",
        lambda t: ["attack", "--run", "0123456789abcdef", "--uri", mlflow_store(t)],
        "no MLflow run with id '0123456789abcdef'",
    ),
    # --- checkpoints --------------------------------------------------------------------------
    (
        "checkpoint without config",
        lambda t: ["attack", "--checkpoint", write(t / "x.pt", "x")],
        "give the TrainConfig it was trained with as --config",
    ),
    (
        "checkpoint that is not one",
        lambda t: ["attack", "--checkpoint", write(t / "x.pt", "not a checkpoint"), "--config", CONFIG],
        "is not a PyTorch checkpoint",
    ),
    (
        "checkpoint that runs code",
        lambda t: ["attack", "--checkpoint", evil_checkpoint(t), "--config", CONFIG],
        "is not a safe checkpoint: it would call os.makedirs; refusing to load it",
    ),
    (
        "checkpoint of another model",
        lambda t: ["attack", "--checkpoint", str(weights(t)), "--config", CONFIG],
        "does not fit vit_tiny_patch16_224 as configured",
    ),
    # --- studies ------------------------------------------------------------------------------
    ("study typo", lambda t: ["sweep", "run", "quickstrat"], "did you mean quickstart?"),
    (
        "study low above high",
        lambda t: ["sweep", "run", study(t, space={"mjp.mask_ratio": {"type": "uniform", "low": 0.5, "high": 0.1}})],
        "low=0.5 > high=0.1",
    ),
    (
        "study unknown key",
        lambda t: ["sweep", "run", study(t, space={"optim.epoch": {"type": "choice", "values": [1]}})],
        "space.optim.epoch is not a TrainConfig key (did you mean optim.epochs?)",
    ),
    (
        "study unknown objective",
        lambda t: ["sweep", "run", study(t, objective={"metric": "val/top3"})],
        "objective metric 'val/top3' is not reported by the trainable",
    ),
    (
        "study field typo",
        lambda t: ["sweep", "run", study(t, budget={"trials": 2, "max_concurent": 2})],
        "budget.max_concurent: not a key of this section (got 2) (did you mean budget.max_concurrent?)",
    ),
    ("study samples nothing", lambda t: ["sweep", "run", study(t, budget={"trials": 4})], "every trial would be identical"),
    (
        "preset overrides a sample",
        lambda t: [
            "sweep",
            "run",
            study(
                t,
                space={
                    "mjp.mask_ratio": {"type": "choice", "values": [0.3, 0.5]},
                    "setup": {"type": "choice", "values": ["x"], "presets": {"x": {"mjp.mask_ratio": 0.5}}},
                },
            ),
        ],
        "space.setup.presets.x sets mjp.mask_ratio, which space.mjp.mask_ratio also samples",
    ),
    (
        "two presets set one key",
        lambda t: [
            "sweep",
            "run",
            study(
                t,
                space={
                    "a": {"type": "choice", "values": ["x"], "presets": {"x": {"optim.base_lr": 0.1}}},
                    "b": {"type": "choice", "values": ["y"], "presets": {"y": {"optim.base_lr": 0.2}}},
                },
            ),
        ],
        "space.a and space.b both have presets that set optim.base_lr",
    ),
    (
        "when value never taken",
        lambda t: [
            "sweep",
            "run",
            study(
                t,
                space={
                    "mjp.dal": {"type": "choice", "values": ["none", "mlp"]},
                    "mjp.dal_weight": {"type": "uniform", "low": 0.001, "high": 0.1, "when": {"mjp.dal": ["mpl"]}},
                },
            ),
        ],
        "space.mjp.dal_weight.when.mjp.dal lists ['mpl'], which space.mjp.dal never takes (its values: ['none', 'mlp']) (did you mean "
        "mlp?)",
    ),
    ("data for a bundled study", lambda t: ["sweep", "run", "quickstart", "--data", "/data"], "data.name='digits' is bundled"),
    ("data given twice", lambda t: ["sweep", "run", "fashion", "--data", "/a", "--set", "data.root=/b"], "both give the data root"),
    ("resume of a non-sweep", lambda t: ["sweep", "resume", str(t)], "is not a sweep directory"),
    ("resume of a missing path", lambda t: ["sweep", "resume", str(t / "nope")], "nope does not exist; pass the directory"),
    # --- input that costs more than it says -----------------------------------------------------
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
    # --- resources the machine does not have ----------------------------------------------------
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
    # --- damaged MLflow stores ------------------------------------------------------------------
    ("status of a damaged store", lambda t: ["sweep", "status", "--uri", damaged_store(t)], "/mlflow.db is damaged ("),
    (
        "report of a damaged store",
        lambda t: ["analyze", "report", "--study", "quickstart", "--uri", damaged_store(t)],
        "/mlflow.db is damaged (",
    ),
    (
        "sweep into a damaged store",
        lambda t: ["sweep", "run", "quickstart", "--smoke", "--set", f"tracking.uri={damaged_store(t)}"],
        "/mlflow.db is damaged (",
    ),
    (
        "status of an empty store",
        lambda t: ["sweep", "status", "--uri", empty_store(t)],
        "/mlflow.db is empty (0 bytes), not an MLflow store",
    ),
    (
        "report of an empty store",
        lambda t: ["analyze", "report", "--study", "quickstart", "--uri", empty_store(t)],
        "/mlflow.db is empty (0 bytes), not an MLflow store",
    ),
    (
        "sweep into an empty store",
        lambda t: ["sweep", "run", "quickstart", "--smoke", "--set", f"tracking.uri={empty_store(t)}"],
        "/mlflow.db is empty (0 bytes), not an MLflow store",
    ),
    (
        "results of an empty store",
        lambda t: ["analyze", "results", "--study", "quickstart", "--uri", empty_store(t)],
        "/mlflow.db is empty (0 bytes), not an MLflow store",
    ),
    # --- cluster ------------------------------------------------------------------------------
    (
        "cluster top-level typo",
        lambda t: ["cluster", "check", write(t / "c.yaml", Path("cluster.yaml").read_text().replace("max_workers:", "max_worker:", 1))],
        "max_worker",
    ),
    (
        "cluster provider typo",
        lambda t: ["cluster", "check", write(t / "c.yaml", Path("cluster.yaml").read_text().replace("region:", "regoin:", 1))],
        "provider.regoin is not a key of Ray's AWS provider (did you mean region?)",
    ),
    ("cluster missing", lambda t: ["cluster", "check", str(t / "none.yaml")], "does not exist"),
    # --- other commands -----------------------------------------------------------------------
    ("config show missing", lambda t: ["config", "show", "nope.yaml"], "neither a file nor a shipped study"),
    # a missing root is said to be missing, the same way by both (check said "is not a directory",
    # prepare "missing train/")
    ("data check of a missing root", lambda t: ["data", "check", str(t / "nothing")], "/nothing' does not exist; expected an image folder"),
    ("data prepare of a missing root", lambda t: ["data", "prepare", str(t / "nothing"), str(t / "out")], "/nothing' does not exist"),
    ("data check not a folder", lambda t: ["data", "check", write(t / "a-file", "x")], "a-file' is not a directory"),
    # what training refuses, data check refuses (it said "every image opens" and exit 0)
    (
        "data check of one class",
        lambda t: ["data", "check", imagefolder(t, classes=("cat",))],
        "has 1 class folder (cat) in train/ and val/; a classifier needs at least 2 classes",
    ),
    ("data check of no images", lambda t: ["data", "check", folders_without_images(t)], "train: class folders without images: cat, dog"),
]


def no_ray(*args, **kwargs):
    raise AssertionError("Ray was started for bad input")


@pytest.mark.parametrize("name, argv, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_line_before_ray_starts(name, argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # an earlier test's Ray must not stand in for a new start
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/unused/mlflow.db")
    args = argv(tmp_path)
    capsys.readouterr()  # what setting the case up printed (MLflow creating a store)
    before = set(tmp_path.rglob("*"))
    sizes = {p: p.stat().st_size for p in before if p.is_file()}
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err, err
    assert err.count("\n") == 1 and len(err) < 2100, err  # one line, short whatever the input held
    assert message in err and "weights_only=False" not in err, err
    assert not (tmp_path / "pwned").exists(), "a checkpoint ran code"
    assert not (tmp_path / "unused").exists() and not (tmp_path / "missing").exists(), "a store was created"
    assert set(tmp_path.rglob("*")) == before, "the command wrote files"
    assert not (tmp_path / "mlflow.db").exists() or (tmp_path / "mlflow.db").stat().st_size in (0, sizes[tmp_path / "mlflow.db"]), (
        "a store was written"
    )


def test_the_corpus_is_large():
    assert len(CASES) >= 40


def test_a_read_only_store_is_named_before_launch(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # an earlier test's Ray must not stand in for a new start
    uri = mlflow_store(tmp_path)
    capsys.readouterr()
    db = tmp_path / "mlflow.db"
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (root ignores file permissions, so nothing else makes the store read-only)")
    try:
        assert main(TRAIN + ["--set", f"tracking.uri={uri}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: the MLflow store is read-only") and str(db) in err and "Traceback" not in err, err
    finally:
        subprocess.run(["chattr", "-i", str(db)])


def test_a_warmup_longer_than_the_training_is_named_before_ray_starts(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # an earlier test's Ray must not stand in for a new start
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    with pytest.raises(AssertionError, match="Ray was started"):
        main(TRAIN + ["--set", "optim.epochs=1", "--set", "optim.warmup_epochs=50", "--set", f"tracking.storage_path={tmp_path}"])
    out = capsys.readouterr().out
    assert (
        "warning: optim.warmup_epochs=50 is longer than optim.epochs=1: the learning rate never reaches optim.base_lr; set "
        "optim.warmup_epochs to at most 1" in out
    ), out
