"""The study files of the end-to-end sweep tests: a grid over a search space of tiny ViTs on 256
digits, two epochs, two trials at a time, written where the test says."""

import yaml

TINY = {
    "model": {"kwargs": {"patch_size": 2, "embed_dim": 32, "depth": 2, "num_heads": 2}},
    "data": {"batch_size": 32, "train_limit": 256, "val_limit": 64},
    "optim": {"epochs": 2},
    "eval": {"shuffle_ratios": [0.0, 0.9]},
    "tracking": {"experiment": "sweep-test"},
}


def study_file(tmp_path, space, **extra):
    path = tmp_path / f"study{len(list(tmp_path.glob('study*.yaml')))}.yaml"
    study = {
        "name": "e2e",
        "base": "trainables/configs/digits_vit_tiny.yaml",
        "train": TINY,
        "space": space,
        "objective": {"metric": "val/top1", "mode": "max"},
        "search": {"algorithm": "grid"},
        "budget": {"max_concurrent": 2},
        **extra,
    }
    path.write_text(yaml.safe_dump(study))
    return str(path)
