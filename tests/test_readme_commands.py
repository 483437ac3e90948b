"""Every ``mjp`` command in the code blocks of README.md and docs/*.md is one the CLI accepts (parsed with its real
parser, placeholders filled in), and the cheap ones run from a clean directory."""

import re
import shlex
from pathlib import Path

import pytest

from sweep.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[list[str]]:
    """The argument lists after ``mjp`` in the bash blocks of README.md and docs/*.md (comments and
    placeholders removed; ``mjp`` as typed, through ``uv run`` or as ``.venv/bin/mjp``)."""
    text = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"<[^>]+>", "PLACEHOLDER", line)
            words = shlex.split(line, comments=True)
            words = ["mjp" if w.endswith("/bin/mjp") else w for w in words]
            if "mjp" in words and (words[:2] == ["uv", "run"] or words[0] == "mjp" or "--" in words):
                commands.append(words[words.index("mjp") + 1 :])
    return commands


COMMANDS = readme_commands()


def test_the_readme_shows_the_commands_a_user_needs():
    firsts = {" ".join(c[:2]) for c in COMMANDS}
    assert {
        "sweep run",
        "sweep status",
        "sweep resume",
        "train trainables/configs/digits_vit_tiny.yaml",
        "evaluate --run",
        "attack --run",
    } <= firsts
    assert ["sweep", "run", "tune", "--smoke"] in COMMANDS
    assert ["sweep", "plan", "variants", "--cluster", "cluster.yaml"] in COMMANDS  # docs/cluster-aws.md


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_readme_command_parses(argv):
    args = build_parser().parse_args(argv)
    assert args.handler


@pytest.mark.parametrize(
    "argv",
    [c for c in COMMANDS if c[:2] in (["sweep", "list"], ["config", "show"], ["cluster", "check"]) or "--cluster" in c],
    ids=" ".join,
)
def test_the_cheap_readme_commands_run(argv, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # cluster.yaml is named relative to the project
    if argv[:2] != ["cluster", "check"] and "--cluster" not in argv:
        monkeypatch.chdir(tmp_path)  # from anywhere: nothing here but the command
    assert main(argv) == 0, capsys.readouterr().err


def test_the_cluster_pages_exports_are_every_variable_cluster_up_prints(tmp_path):
    """docs/cluster-local.md's export block once left out MLFLOW_TRACKING_TOKEN: pasted as written,
    every command through the twin's gate got 401 (tests/test_cluster_pasted_docs.py runs the block)."""
    from sweep.cluster.twin import DEFAULT_SESSION, TOKEN_FILE, LocalCluster

    block = re.findall(r"```bash\n(.*?)```", (ROOT / "docs" / "cluster-local.md").read_text(), flags=re.S)[0]
    export = next(line for line in block.replace("\\\n", " ").splitlines() if line.startswith("export "))
    given = dict(word.split("=", 1) for word in shlex.split(export)[1:])
    (tmp_path / TOKEN_FILE).write_text("t")
    printed = LocalCluster(session_dir=str(tmp_path), address="a", dashboard="d", tracking_uri="u", storage="s").environment()
    assert list(given) == list(printed)
    assert given["MLFLOW_TRACKING_TOKEN"] == f"$(cat {DEFAULT_SESSION}/{TOKEN_FILE})"  # as `up` prints it: the secret stays in its file
