"""The ``mjp`` parser, assembled from one module per command group."""

from __future__ import annotations

import argparse

from sweep.cli.groups.analyze import add as add_analyze
from sweep.cli.groups.attack import add as add_attack
from sweep.cli.groups.cluster import add as add_cluster
from sweep.cli.groups.config import add as add_config
from sweep.cli.groups.data import add as add_data
from sweep.cli.groups.demo import add as add_demo
from sweep.cli.groups.evaluate import add as add_evaluate
from sweep.cli.groups.sweeps import add as add_sweeps
from sweep.cli.groups.train import add as add_train
from sweep.cli.options import Parser

EXIT_STATUS = """exit status (every command):
  0    done
  1    failed: a training, a trial or a check failed, or a disk filled
       (or an unexpected error, with its traceback)
  2    bad input: a config, study, path, key or argument was refused
       before anything started
  130  interrupted (Ctrl-C): the MLflow run is marked KILLED;
       `mjp sweep resume DIR` continues a sweep
  143  stopped by SIGTERM (`ray job stop`, systemd, a batch scheduler): as 130"""

#: ``mjp --help``'s first lines (laid out by hand, as the exit status: 80 columns at most)
DESCRIPTION = """Masked Jigsaw Puzzle (CVPR 2023): training, sweeps, evaluation and analysis
on Ray + Optuna + MLflow"""

#: the command groups in the order `mjp --help` lists them
GROUPS = (add_train, add_sweeps, add_config, add_analyze, add_attack, add_evaluate, add_data, add_cluster, add_demo)


def package_version() -> str:
    """This package's version (its installed metadata, else pyproject.toml beside the sources)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mjp-sweep")
    except PackageNotFoundError:
        import tomllib

        from sweep.study.names import PROJECT_DIR

        with open(PROJECT_DIR / "pyproject.toml", "rb") as fh:
            return tomllib.load(fh)["project"]["version"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="mjp",
        description=DESCRIPTION,
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}", help="print the package version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for add_group in GROUPS:
        add_group(sub)
    return parser
