"""Bad input to the other commands: `mjp cluster check`, `mjp config show`, `mjp data`."""

from __future__ import annotations

from pathlib import Path

from tests.bad_inputs_made import folders_without_images, imagefolder, write

#: cluster files
CLUSTER = [
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
]

#: config show and data check / prepare
COMMANDS = [
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
