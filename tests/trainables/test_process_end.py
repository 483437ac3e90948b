"""How an ``mjp`` process ends (``trainables/process_end.py``): what the command returned is the exit
status, and everything a normal exit does for the command's output still happens (output flushed
into a pipe, exit handlers, logging's files, threads joined), but Python's finalization does not:
an object's ``__del__`` at the end is not run. A command that raises ends the usual way."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

COMMAND = """
import atexit, logging, sys, threading
from pathlib import Path

out = Path(sys.argv[1])

class Finalized:
    def __del__(self):
        (out / "finalized").write_text("yes")

KEEP = Finalized()  # freed only by Python's finalization

def command():
    atexit.register(lambda: (out / "exit-handler").write_text("ran"))  # as Ray's shutdown is
    handler = logging.FileHandler(out / "log.txt")
    logging.getLogger("c").addHandler(handler)
    logging.getLogger("c").warning("logged")
    writer = threading.Thread(target=lambda: (out / "thread").write_text("x" * 100_000))  # not a daemon
    writer.start()
    sys.stdout.write("line\\n" * 50_000)  # more than a pipe holds: still in the buffer at the end
    if sys.argv[2] == "raise":
        raise RuntimeError("a bug")
    return {"none": None}.get(sys.argv[2], int(sys.argv[2]) if sys.argv[2].isdigit() else None)
"""


def run(tmp_path: Path, how: str, ending: str) -> subprocess.CompletedProcess:
    script = tmp_path / "command.py"
    script.write_text(textwrap.dedent(COMMAND) + ending)
    env = {"PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(script), str(tmp_path), how], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


QUICK = "from trainables.process_end import run_and_exit\nrun_and_exit(command)\n"
USUAL = "sys.exit(command())\n"


def test_the_status_output_exit_handlers_logs_and_threads_are_kept_and_finalization_is_skipped(tmp_path):
    for status in ("0", "2", "130", "none"):
        for name in ("finalized", "exit-handler", "log.txt", "thread"):
            (tmp_path / name).unlink(missing_ok=True)
        done = run(tmp_path, status, QUICK)
        assert done.returncode == (0 if status == "none" else int(status)), done.stderr
        assert done.stdout == "line\n" * 50_000 and done.stderr == ""
        assert (tmp_path / "exit-handler").read_text() == "ran"
        assert (tmp_path / "log.txt").read_text() == "logged\n"
        assert (tmp_path / "thread").read_text() == "x" * 100_000
        assert not (tmp_path / "finalized").exists(), "Python's finalization ran"


def test_the_usual_exit_would_have_finalized_and_a_command_that_raises_still_does(tmp_path):
    """The control: the same command ended by ``sys.exit`` runs ``__del__`` (so the test above sees
    the skip); and a command that raises gets Python's own exit, its traceback and status 1."""
    done = run(tmp_path, "0", USUAL)
    assert done.returncode == 0 and (tmp_path / "finalized").read_text() == "yes"
    (tmp_path / "finalized").unlink()
    done = run(tmp_path, "raise", QUICK)
    assert done.returncode == 1 and "RuntimeError: a bug" in done.stderr
    assert done.stdout == "line\n" * 50_000 and (tmp_path / "exit-handler").is_file()
    assert (tmp_path / "finalized").read_text() == "yes"


def test_the_mjp_command_and_python_m_sweep_cli_end_through_it(tmp_path):
    """Both ways in: a ``__del__`` planted at start-up (sitecustomize) is not run at their end."""
    (tmp_path / "sitecustomize.py").write_text(
        "import builtins, pathlib\n"
        "class Finalized:\n"
        f"    def __del__(self): pathlib.Path({str(tmp_path)!r}, 'finalized').write_text('yes')\n"
        "builtins._mjp_test_kept = Finalized()\n"
    )
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "MJP_HOME": str(tmp_path)}
    mjp = ROOT / ".venv" / "bin" / "mjp"
    ways = [[sys.executable, "-m", "sweep.cli"], *([[str(mjp)]] if mjp.is_file() else [])]
    for way in ways:
        done = subprocess.run([*way, "config", "show", "quickstart"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "optim:" in done.stdout, done.stderr
        assert not (tmp_path / "finalized").exists(), f"{way}: Python's finalization ran"
    done = subprocess.run([sys.executable, "-c", "import sitecustomize"], env=env, capture_output=True, text=True, timeout=60)
    assert (tmp_path / "finalized").read_text() == "yes"  # the plant works
