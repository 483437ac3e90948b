"""The CLI answers at once: help, listing, resolved configs and status read no torch and start no Ray."""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.cli import build_parser, main
from trainables.tracking import schema

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [
    ["train"],
    ["sweep", "run"],
    ["sweep", "resume"],
    ["sweep", "status"],
    ["sweep", "list"],
    ["config", "show"],
    ["analyze", "tables"],
    ["analyze", "report"],
    ["attack"],
    ["evaluate"],
    ["data", "check"],
    ["data", "prepare"],
    ["cluster", "check"],
    ["demo"],
]


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
    code = (
        "import sys; from sweep.cli import main\ntry: main(['--help'])\nexcept SystemExit: pass\n"
        "print(sorted(m for m in ('torch', 'timm', 'ray', 'mlflow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stderr


def test_sweep_list_shows_every_shipped_study_with_its_size(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["sweep", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("quickstart", "mask_ratio", "variants", "backbones", "tune", "pareto", "fashion", "privacy"):
        assert f"| {name} |" in out
    assert "| 4 x 30 ep | digits | 4 x 10 ep |" in out  # quickstart: trials x epochs, smoke size


def test_sweep_list_fits_80_columns_without_breaking_words(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["sweep", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 80
    assert ["quickstart", "4", "x", "30", "ep", "digits", "4", "x", "10", "ep"] in [line.split() for line in lines]
    assert any(line.startswith("  The MJP ablation in miniature on the bundled digits data") for line in lines)


def test_the_mlflow_ui_command_and_its_address_are_lines_of_their_own():
    from sweep.console.commands_shown import mlflow_ui_command

    command, address = mlflow_ui_command("sqlite:////x/mlflow.db", "mjp").splitlines()
    assert command.endswith("mlflow ui --backend-store-uri sqlite:////x/mlflow.db") and address.startswith("  then open http://")


def test_config_show_prints_the_resolved_config(capsys):
    assert main(["config", "show", "trainables/configs/digits_vit_tiny.yaml", "--set", "optim={epochs: 3}", "--set", "runtime.seed=2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# trainables/configs/digits_vit_tiny.yaml: Table 4 row J jp_unk_dal_mlp")
    cfg = yaml.safe_load(out)
    assert cfg["optim"]["epochs"] == 3 and cfg["optim"]["base_lr"] == 0.04  # the mapping merged
    from trainables.config.seeds import derive_seed

    assert cfg["mjp"]["seed"] == derive_seed(2, "jigsaw") and cfg["eval"]["seed"] == derive_seed(2, "eval")


def test_config_show_of_a_study_gives_its_base(capsys):
    assert main(["config", "show", "mask_ratio", "--smoke"]) == 0
    cfg = yaml.safe_load(capsys.readouterr().out)
    assert cfg["data"]["name"] == "digits" and cfg["model"]["kwargs"]["patch_size"] == 2


def test_status_names_a_sweep_whose_driver_is_gone(tmp_path, capsys):
    from trainables.tracking.runs import RunTracker

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    parent = RunTracker.create(
        uri,
        "e",
        run_name="s-1",
        tags={schema.TAG_KIND: "sweep", "mjp.driver": f"{os.uname().nodename}:{dead.pid}", "mjp.experiment_dir": "/x/s-1"},
    )
    # its trials' runs as the SIGKILL left them: one finished, two still RUNNING for the resume to take up
    for name in ("t-1", "t-2", "t-3"):
        trial = RunTracker.create(uri, "e", run_name=name, tags={schema.TAG_KIND: "trial"}, parent_run_id=parent.run_id)
        if name == "t-1":
            trial.set_status("FINISHED")
    capsys.readouterr()
    assert main(["sweep", "status", "--uri", uri]) == 0
    out = capsys.readouterr().out
    assert "s-1  [driver gone (killed?), trials stopped]  1 finished, 2 stopped with its driver of ? trials" in out, out
    assert "\n    resume: mjp sweep resume /x/s-1\n" in out
    states = {line.split()[0]: line.split()[1:-1] for line in out.splitlines() if line.strip().startswith("t-")}
    assert states == {"t-1": ["finished"], "t-2": ["stopped", "with", "its", "driver"], "t-3": ["stopped", "with", "its", "driver"]}, out
    assert " running" not in out, out


def _parsers(parser, path=("mjp",)):
    """Every parser of the CLI with its command path."""
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                assert helps.get(name), f"{' '.join(path)} {name} has no help line"
                yield from _parsers(sub, (*path, name))


def test_every_option_and_argument_has_a_help_line():
    import argparse

    seen = 0
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            seen += 1
            assert action.help and action.help != argparse.SUPPRESS, (
                f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest} has no help"
            )
    assert seen > 50


def test_version_is_the_package_version(capsys):
    import tomllib

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"mjp {version}"


def test_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for code, word in (("0", "done"), ("1", "failed"), ("2", "bad input"), ("130", "interrupted")):
        assert f"  {code} " in out and word in out.split(f"  {code} ", 1)[1].splitlines()[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "no/such.yaml"],
        ["sweep", "run", "quickstrat"],
        ["sweep", "resume", "no/such/dir"],
        ["sweep", "status", "quickstrat"],
        ["config", "show", "no/such.yaml"],
        ["analyze", "tables", "--study", "quickstart", "--uri", "sqlite:///no/such/mlflow.db"],
        ["analyze", "report", "--study", "quickstart", "--uri", "sqlite:///no/such/mlflow.db"],
        ["attack", "--run", "0123", "--uri", "sqlite:///no/such/mlflow.db"],
        ["evaluate", "--run", "0123", "--uri", "sqlite:///no/such/mlflow.db"],
        ["data", "check", "no/such/dir"],
        ["data", "prepare", "no/such/dir", "out"],
        ["cluster", "check", "no/such.yaml"],
        ["demo", "--set", "optim.epoch=3"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_bad_input_is_exit_2_with_one_error_line_in_every_command(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written, even here
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_retried_trial_says_where_it_starts_again():
    from types import SimpleNamespace

    from sweep.console.view import restart_point

    assert restart_point(SimpleNamespace(latest_checkpoint_result=SimpleNamespace(metrics={"epoch": 4}))) == "from its epoch-4 checkpoint"
    assert restart_point(SimpleNamespace(latest_checkpoint_result=None)) == "from the start (it had written no checkpoint yet)"


def test_a_full_disk_is_exit_1_like_any_failure_after_the_start(capsys, monkeypatch):
    """Not exit 2 (bad input, refused before anything started): the input was fine."""
    import sweep.commands.status
    from trainables.errors import DiskFullError

    def full(args):
        raise DiskFullError(
            "a disk this command writes to is full (OSError: No space left on device); free some space, then run the command again"
        )

    monkeypatch.setattr(sweep.commands.status, "cmd_sweep_status", full)
    assert main(["sweep", "status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: a disk this command writes to is full") and err.count("\n") == 1


def test_every_command_names_a_handler_that_exists():
    """The parser names handlers as ``module:function`` strings (imported only when run, so no
    import graph sees them): each one must import and be a function."""
    import importlib

    from sweep.cli import build_parser

    def handlers(parser: argparse.ArgumentParser) -> list[str]:
        found = [parser.get_default("handler")]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found += [h for sub in action.choices.values() for h in handlers(sub)]
        return [h for h in found if h]

    names = handlers(build_parser())
    assert len(names) >= 20
    for handler in names:
        module, _, function = handler.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), handler


def test_config_show_fashion_names_the_data_root_readme_gives(capsys):
    from trainables.data.idx import FASHION_MNIST_DEFAULT

    assert main(["config", "show", "fashion"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["data"]["root"] == FASHION_MNIST_DEFAULT == "/usr/share/datasets/fashion-mnist"
    assert f"`{FASHION_MNIST_DEFAULT}`, the default `data.root`" in Path("README.md").read_text()
