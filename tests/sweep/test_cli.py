"""The CLI answers at once: help, listing, resolved configs and status read no torch and start no Ray."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [["train"], ["sweep", "run"], ["sweep", "resume"], ["sweep", "status"], ["sweep", "list"], ["config", "show"],
            ["analyze", "tables"], ["analyze", "report"], ["attack"], ["evaluate"], ["data", "check"], ["data", "prepare"],
            ["cluster", "check"], ["demo"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_help_answers(command, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([*command, "--help"])
    assert done.value.code == 0 and "usage: mjp" in capsys.readouterr().out


def test_a_mistyped_command_gets_a_suggestion(capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["sweep", "statsu"])
    assert done.value.code == 2 and "did you mean 'status'?" in capsys.readouterr().err


def test_help_imports_nothing_heavy():
    code = "import sys; from sweep.cli import main\ntry: main(['--help'])\nexcept SystemExit: pass\nprint(sorted(m for m in ('torch', 'timm', 'ray', 'mlflow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stderr


def test_sweep_list_shows_every_shipped_study_with_its_size(capsys):
    assert main(["sweep", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("quickstart", "mask_ratio", "variants", "backbones", "tune", "pareto", "fashion", "privacy"):
        assert f"| {name} |" in out
    assert "| 4 x 30 ep | digits | 4 x 3 ep |" in out  # quickstart: trials x epochs, smoke size


def test_config_show_prints_the_resolved_config(capsys):
    assert main(["config", "show", "trainables/configs/digits_vit_tiny.yaml", "--set", "optim={epochs: 3}", "--set", "runtime.seed=2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# trainables/configs/digits_vit_tiny.yaml: Table 4 row J jp_unk_dal_mlp")
    cfg = yaml.safe_load(out)
    assert cfg["optim"]["epochs"] == 3 and cfg["optim"]["base_lr"] == 0.04  # the mapping merged
    from trainables.seeds import derive_seed

    assert cfg["mjp"]["seed"] == derive_seed(2, "jigsaw") and cfg["eval"]["seed"] == derive_seed(2, "eval")


def test_config_show_of_a_study_gives_its_base(capsys):
    assert main(["config", "show", "mask_ratio", "--smoke"]) == 0
    cfg = yaml.safe_load(capsys.readouterr().out)
    assert cfg["data"]["name"] == "digits" and cfg["model"]["kwargs"]["patch_size"] == 1


def test_status_names_a_sweep_whose_driver_is_gone(tmp_path, capsys):
    from mjp import keys
    from trainables.tracking import RunTracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    RunTracker.create(uri, "e", run_name="s-1", tags={keys.TAG_KIND: "sweep", "mjp.driver": f"{os.uname().nodename}:{dead.pid}", "mjp.experiment_dir": "/x/s-1"})
    capsys.readouterr()
    assert main(["sweep", "status", "--uri", uri]) == 0
    out = capsys.readouterr().out
    assert "s-1  [driver gone (killed?), trials stopped; resume: mjp sweep resume /x/s-1]" in out
