"""``mjp ARGV`` run in the test's own process, for the commands that start nothing (a status, a
refusal, a dry run): what a fresh Python would print and return, without its seconds of imports."""

from __future__ import annotations

import subprocess

import pytest


def mjp_here(capsys: pytest.CaptureFixture, *argv: str) -> subprocess.CompletedProcess:
    """The exit status and what ``mjp`` printed to stdout and stderr, as ``subprocess.run`` gives them."""
    from sweep.cli import main

    capsys.readouterr()  # what the test printed before
    code = main(list(argv))
    said = capsys.readouterr()
    return subprocess.CompletedProcess(list(argv), code, said.out, said.err)
