"""One driver owns a sweep directory: a second ``mjp sweep resume`` (or a resume while ``run``
holds it) is refused in one line naming the holder, before anything is written; the kernel's
lock goes with its process, however it ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.tuner import owner

ROOT = Path(__file__).resolve().parents[3]


def _holder(sweep_dir: Path) -> subprocess.Popen:
    """Another process that claims ``sweep_dir`` and holds it until its stdin closes."""
    code = "import sys; from sweep.tuner.owner import claim; claim(sys.argv[1]); print('held', flush=True); sys.stdin.read()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(sweep_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def sweep_dir(tmp_path):
    from sweep.tuner.state import SweepState, write_state

    path = tmp_path / "ray_results" / "quickstart-20260101-000000"
    write_state(
        str(path),
        SweepState(
            name=path.name, study="quickstart", uri=f"sqlite:///{tmp_path}/mlflow.db", experiment="mjp-quickstart", parent_run_id="p"
        ),
    )
    return path


def _snapshot(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


def test_a_second_resume_is_refused_naming_the_driver_that_holds_the_sweep(sweep_dir, tmp_path, capsys):
    holder = _holder(sweep_dir)
    try:
        before = _snapshot(tmp_path)
        assert main(["sweep", "resume", str(sweep_dir)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: sweep {sweep_dir} is already run by pid {holder.pid} on ")
        assert " since " in err
        assert _snapshot(tmp_path) == before  # nothing written: not the state, not the signatures, no MLflow store
    finally:
        holder.stdin.close()
        holder.wait()


def test_the_lock_goes_with_its_process_even_a_killed_one(sweep_dir):
    holder = _holder(sweep_dir)
    holder.kill()  # SIGKILL: no clean-up of its own
    holder.wait()
    owner.claim(str(sweep_dir))  # the kernel dropped the lock: nothing stale to remove
    try:
        assert f"pid {os.getpid()} on " in (sweep_dir / owner.LOCK_FILE).read_text()
    finally:
        owner.release(str(sweep_dir))


def test_a_sweep_in_a_bucket_is_locked_on_this_machine_by_its_uri(tmp_path, monkeypatch):
    monkeypatch.setenv("MJP_HOME", str(tmp_path / "home"))
    path = owner.lock_path("s3://bucket/mjp-sweeps/q-1/")
    assert path.parent == tmp_path / "home" / "locks" and path == owner.lock_path("s3://bucket/mjp-sweeps/q-1")
    assert path != owner.lock_path("s3://bucket/mjp-sweeps/q-2")
    owner.claim("s3://bucket/mjp-sweeps/q-1")
    try:
        code = "import sys; from sweep.tuner.owner import claim; claim(sys.argv[1])"
        out = subprocess.run(
            [sys.executable, "-c", code, "s3://bucket/mjp-sweeps/q-1"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert out.returncode != 0 and f"is already run by pid {os.getpid()}" in out.stderr
    finally:
        owner.release("s3://bucket/mjp-sweeps/q-1")


def test_a_lock_file_planted_as_a_link_is_refused_and_its_target_untouched(sweep_dir, tmp_path, capsys):
    """The directory may be shared: a ``mjp_sweep.lock`` that links to the user's own file (a
    symlink or a hard link) would have the holder's line written into that file."""
    target = tmp_path / "bashrc"
    target.write_text("export PATH=$PATH\n")
    (sweep_dir / owner.LOCK_FILE).symlink_to(target)
    assert main(["sweep", "resume", str(sweep_dir)]) == 2
    assert "cannot lock the sweep directory" in capsys.readouterr().err
    (sweep_dir / owner.LOCK_FILE).unlink()
    os.link(target, sweep_dir / owner.LOCK_FILE)
    assert main(["sweep", "resume", str(sweep_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a lock file this user made (a link, or another user's file)" in err
    assert target.read_text() == "export PATH=$PATH\n"


def test_deleting_the_lock_file_while_a_sweep_runs_frees_nothing(sweep_dir, capsys):
    """The lock is the directory's: a second resume after ``rm mjp_sweep.lock`` is still refused
    (a lock on the file let it lock a new file and run beside the first)."""
    holder = _holder(sweep_dir)
    try:
        (sweep_dir / owner.LOCK_FILE).unlink()
        assert main(["sweep", "resume", str(sweep_dir)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is already run by" in err, err
    finally:
        holder.stdin.close()
        holder.wait()
    owner.claim(str(sweep_dir))  # free once its driver ended
    owner.release(str(sweep_dir))


def test_a_filesystem_that_refuses_flock_is_one_line_naming_the_directory(tmp_path, monkeypatch):
    """NFS mounted with nolock and Lustre without -o flock answer flock with ENOLCK / ENOSYS; no such
    filesystem mounts here, so the kernel's answer is given to fcntl.flock."""
    import errno
    import fcntl

    def refuse(fd, op):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", refuse)
    with pytest.raises(owner.UserError, match=rf"cannot lock the sweep directory {tmp_path}: its filesystem refuses flock \(No locks"):
        owner.claim(str(tmp_path))
    assert str(tmp_path) not in owner._HELD
