"""At an 80-column terminal a table may scroll, but a sentence wraps between words: `mjp --help`,
`sweep plan`'s lines and an error line once ran to 100-190 columns. To a pipe or a file each
sentence stays one line (what tools, logs and the rest of this suite read)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from sweep.console.commands_shown import for_terminal


def at_terminal(argv: list[str], columns: int = 80) -> tuple[int, list[str]]:
    """``mjp ARGV`` with its stdout and stderr on a terminal (a pty) ``columns`` wide: its exit
    status and the lines it showed."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}  # the terminal's own size, as a shell has it
    process = subprocess.Popen([sys.executable, "-m", "sweep.cli", *argv], stdin=child, stdout=child, stderr=child, env=env)
    os.close(child)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 1 << 16)
        except OSError:  # the child's end closed (Linux: EIO)
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    return process.wait(timeout=120), shown.decode().replace("\r\n", "\n").splitlines()


@pytest.mark.parametrize(
    "argv, status",
    [
        (["--help"], 0),
        (["sweep", "plan", "quickstart", "--img-per-s", "400"], 0),
        (["sweep", "plan", "quickstrat"], 2),  # the error names every shipped study: 188 columns on one line
    ],
    ids=["help", "plan", "error"],
)
def test_at_80_columns_every_sentence_wraps_between_words(argv, status):
    code, lines = at_terminal(argv)
    assert code == status, "\n".join(lines)
    assert lines and max(len(line) for line in lines) <= 80, "\n".join(line for line in lines if len(line) > 80)
    if status == 2:
        assert lines[0].startswith("error: ") and all(line.startswith("  ") for line in lines[1:])


def test_to_a_pipe_a_sentence_stays_one_line():
    out = subprocess.run([sys.executable, "-m", "sweep.cli", "sweep", "plan", "quickstrat"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and len(out.stderr) > 150


def test_a_tables_caption_wraps_and_its_rows_stay_whole(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    caption = "Table 4 (digits, smoke size): top-1 of each row, " + "with the paper's value beside it " * 4
    row = "| " + " | ".join(f"column {i}" for i in range(12)) + " |"
    text = f"{caption}\n\n{row}\n  note: {caption}"
    main, child = pty.openpty()
    with open(child, "w") as terminal:  # a terminal, as the console's stdout is
        shown = for_terminal(text, terminal)
    os.close(main)
    lines = shown.splitlines()
    assert row in lines and all(len(line) <= 80 for line in lines if line != row)
    assert " ".join(shown.split()) == " ".join(text.split())  # every word kept, in order
    with open(os.devnull, "w") as not_a_terminal:
        assert for_terminal(text, not_a_terminal) == text  # a file or a pipe: unchanged
