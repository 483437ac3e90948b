"""A sweep on a real Slurm (tests/slurm_daemons.py: slurmctld and two slurmd on this host, nothing
mocked): ``mjp cluster slurm`` refuses bad shapes in one line before anything is submitted, and a
two-node smoke sweep survives a ``scancel`` (the same script submitted again resumes it) and its
time limit (SIGTERM before the end, the runs closed, the job requeued and resumed), ending with
every trial once, none RUNNING, and trials on both nodes.

Every wait is for an event Slurm or MLflow reports (a job's state, a run's first metric, a line
the job prints), with a deadline only as a bound on failure; each race is asserted to have happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mjp_here import mjp_here
from tests.slurm_daemons import SlurmDaemons, slurm_missing

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
REPO = Path(__file__).resolve().parent.parent
VARIANTS = {"A", "E", "G", "J"}  # quickstart's grid: four trials


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    reason = slurm_missing()
    if reason:
        pytest.skip(reason)
    daemons = SlurmDaemons(Path(tmp_path_factory.mktemp("slurm")))
    daemons.start()
    try:
        yield daemons
    finally:
        daemons.stop()


def mjp(slurm: SlurmDaemons, *argv: str, **env: str) -> subprocess.CompletedProcess:
    """``mjp ARGV`` with the test Slurm's clients and ``env`` added to this process' environment."""
    return subprocess.run(
        [sys.executable, "-m", "sweep.cli", *argv], env={**slurm.env, **env}, cwd=REPO, capture_output=True, text=True, timeout=300
    )


def mjp_in_slurm(slurm: SlurmDaemons, monkeypatch, capsys, *argv: str) -> subprocess.CompletedProcess:
    """``mjp ARGV`` in this process with the test Slurm's clients, for what ends before submitting."""
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    monkeypatch.chdir(REPO)
    return mjp_here(capsys, *argv)


def slurm_args(shared: Path, *extra: str, partition: str = "debug", time_limit: str = "10") -> list[str]:
    shape = ["--nodes", "2", "--gpus-per-node", "0", "--cpus-per-node", "2", "--partition", partition, "--time", time_limit]
    return ["cluster", "slurm", "quickstart", "--smoke", *shape, "--shared", str(shared), *extra]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"--partition": "gpu"}, "--partition 'gpu': Slurm has no such partition (it has: debug, short)"),
        ({"--nodes": "3"}, "partition debug has 2 such nodes"),
        ({"--cpus-per-node": "4"}, "partition debug has 0 such nodes"),
        ({"--gpus-per-node": "1"}, "trains on CPUs (scaling.use_gpu is false): --gpus-per-node 1"),
        ({"--time": "1:00"}, "--time 1:00 (60 s) leaves no time to train"),
        ({"--time": "soon"}, "--time 'soon': allowed are Slurm's forms"),
        (
            {"--partition": "short", "--time": "10"},
            "sbatch refused the job: allocation failure: Requested time limit is invalid",
        ),
        ({"--shared": "/nonexistent/shared"}, "--shared /nonexistent/shared: no such directory"),
    ],
)
def test_a_bad_shape_is_one_line_before_anything_is_submitted(slurm, tmp_path, change, says, monkeypatch, capsys):
    argv = slurm_args(tmp_path)
    for flag, value in change.items():
        argv[argv.index(flag) + 1] = value
    out = mjp_in_slurm(slurm, monkeypatch, capsys, *argv)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], out.stderr
    assert slurm.jobs() == [], "nothing is submitted"
    assert list(tmp_path.iterdir()) == [], "no job folder is left behind"


def test_dry_run_prints_a_script_an_administrator_accepts(slurm, tmp_path, monkeypatch, capsys):
    out = mjp_in_slurm(slurm, monkeypatch, capsys, *slurm_args(tmp_path, "--dry-run", "--account", "lab", "--mem", "4G"))
    assert out.returncode == 0, out.stderr
    script = out.stdout
    directives = [line.split(None, 1)[1] for line in script.splitlines() if line.startswith("#SBATCH")]
    assert {"--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=2", "--partition=debug", "--time=10", "--requeue"} <= set(directives)
    assert {"--account=lab", "--mem=4G", "--signal=B:TERM@180"} <= set(directives)
    assert not any(d.startswith("--gpus") for d in directives), "a CPU study asks for no GPU"
    body = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert "srun" not in "\n".join(body), "the batch script starts no step itself: the job's process does, one per node"
    assert body[-1].startswith("exec ") and "cluster slurm-job" in body[-1]
    assert list(tmp_path.iterdir()) == [] and slurm.jobs() == []
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def wait_for(what: str, condition, seconds: float = 600, unless=None):
    """Until ``condition()`` holds; fails at once, with what ``unless()`` says, when that says something."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if unless is not None and (why := unless()):
            raise AssertionError(f"{what}: never happened, {why}")
        time.sleep(1)
    raise AssertionError(f"waited {seconds:.0f} s for {what}")


def job_gone(slurm: SlurmDaemons, job: str, out: Path):
    """For ``wait_for``'s ``unless``: the job ended, and the last lines it printed."""

    def check() -> str | None:
        if job in slurm.jobs():
            return None
        tail = out.read_text(errors="replace").splitlines()[-25:] if out.is_file() else ["(no output)"]
        return f"job {job} ended first; its output ends:\n" + "\n".join(tail)

    return check


def store_rows(store: Path, query: str) -> list[tuple]:
    if not store.exists():
        return []
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30) as db:
        try:
            return db.execute(query).fetchall()
        except sqlite3.OperationalError:  # the server has not made its tables yet
            return []


def metrics(store: Path) -> int:
    return store_rows(store, "SELECT count(*) FROM metrics")[0][0] if store_rows(store, "SELECT 1 FROM metrics LIMIT 1") else 0


def ended(slurm: SlurmDaemons, job: str) -> bool:
    return job not in slurm.jobs()


def trial_processes(job: str) -> list[int]:
    """The Tune trial processes (Ray's ``ImplicitFunc`` actors) of Slurm job ``job``: those whose
    environment holds its id (the suite's other Rays run trials of their own)."""
    mine = f"SLURM_JOB_ID={job}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            trial = proc.name.isdigit() and (proc / "cmdline").read_bytes().startswith(b"ray::ImplicitFunc")
            if trial and mine in (proc / "environ").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
    return pids


@pytest.mark.timeout(2400)  # three starts of a two-node job on 2 cores and Slurm's requeue hold: about 3 minutes idle
def test_a_sweep_survives_scancel_and_its_time_limit_with_every_trial_once(slurm, tmp_path):
    # one CPU a node: quickstart's two concurrent 1-CPU trials fit one on each node, so both nodes train by construction
    # 4 epochs a trial (quickstart's smoke trains 10): no phase races an epoch's length (the scancel comes at
    # the first report, two trials at a time and at least seven epochs' time before the last could end; the limit's signal
    # finds the trials held), and the last start trains every trial left to its end
    argv = slurm_args(tmp_path, "--set", "optim.epochs=4")
    argv[argv.index("--cpus-per-node") + 1] = "1"
    # submitted from a shell that holds the local twin's variables (`mjp cluster up --local` prints them):
    # the job inherits them, and Ray's single-node switch among them must not keep n2 out of the job's Ray
    out = mjp(slurm, *argv, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    assert out.returncode == 0, out.stderr
    first = out.stdout.split("submitted Slurm job ", 1)[1].split(":", 1)[0]
    job_dir = next(p for p in tmp_path.iterdir() if p.name.startswith("mjp-quickstart-smoke-"))
    store = tmp_path / "mlflow" / "mlflow.db"

    # 1. scancel as soon as a trial has reported: the sweep is mid-way, then the same script again
    wait_for(
        "the first job's first trial report", lambda: metrics(store) > 0, unless=job_gone(slurm, first, job_dir / f"slurm-{first}.out")
    )
    slurm.run("scancel", first)
    wait_for(f"job {first} to end after scancel", lambda: ended(slurm, first))
    # scancel ended the job's servers with its driver: the job stopped the driver and cleaned up, before KillWait's SIGKILL
    said = (job_dir / f"slurm-{first}.out").read_text()
    assert f"job {first} ends: " in said and not (job_dir / "auth_token").exists(), said[-2000:]
    finished = store_rows(store, "SELECT name FROM runs WHERE status = 'FINISHED' AND name NOT LIKE 'quickstart%'")
    assert len(finished) < len(VARIANTS), f"the sweep had finished before the scancel ({finished}): no race"
    resubmitted = slurm.run("sbatch", "--parsable", str(job_dir / "job.sbatch")).stdout.strip()
    second_out = job_dir / f"slurm-{resubmitted}.out"

    # 2. the resumed job reaches its time limit: Slurm signals it before the end (the limit cut
    #    to now + 2 min, inside --signal-lead's 180 s), it closes its runs and requeues itself.
    #    Slurm looks at time limits every 30 s: the job's trials are held (SIGSTOP) from the cut until
    #    its signal, so the signal finds the sweep training however fast its epochs are here
    gone = job_gone(slurm, resubmitted, second_out)
    wait_for("the second job's driver to resume", lambda: second_out.is_file() and "resuming sweep" in second_out.read_text(), unless=gone)
    reports = metrics(store)
    wait_for("a trial report in the second job", lambda: metrics(store) > reports, unless=gone)
    held = wait_for("the second job's trial processes", lambda: trial_processes(resubmitted), unless=gone)
    for pid in held:
        os.kill(pid, signal.SIGSTOP)
    try:
        minutes = int(slurm.job_field(resubmitted, "RunTime").split(":")[-2]) + 2
        slurm.run("scontrol", "update", f"JobId={resubmitted}", f"TimeLimit={minutes}")
        wait_for("the time limit's signal", lambda: "signal SIGTERM: the sweep closes its runs" in second_out.read_text(), unless=gone)
        finished = store_rows(store, "SELECT name FROM runs WHERE status = 'FINISHED' AND name NOT LIKE 'quickstart%'")
        assert len(finished) < len(VARIANTS), f"the sweep had finished before its time limit ({finished}): no race"
    finally:
        for pid in held:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    wait_for("the job to requeue itself at its time limit", lambda: "requeued" in second_out.read_text(), unless=gone)
    wait_for("Slurm to count the requeue", lambda: slurm.job_field(resubmitted, "Restarts") == "1")
    text = second_out.read_text()
    assert "signal SIGTERM: the sweep closes its runs" in text and "time limit: job" in text, text[-2000:]
    assert not store_rows(store, "SELECT name FROM runs WHERE status = 'RUNNING'"), "the signalled job closed every run"
    # its limit back (the cut was the test's); Slurm holds a requeued job until the old start's credential has
    # expired (cred_expire: 10 s in the test Slurm, 120 s by default; a start forced sooner is killed: "Job
    # credential revoked"), then starts it
    slurm.run("scontrol", "update", f"JobId={resubmitted}", "TimeLimit=10")
    wait_for(f"job {resubmitted} to finish the sweep", lambda: ended(slurm, resubmitted), seconds=900)

    # 3. every trial once, finished, on both nodes; nothing RUNNING; every process of the jobs ended
    text = second_out.read_text()
    assert "4 of 4 trials finished, 0 failed" in text, text[-3000:]
    runs = store_rows(store, "SELECT name, status FROM runs")
    trials = [name for name, _ in runs if not name.startswith("quickstart")]
    assert sorted(t.split("-")[0] for t in trials) == sorted(VARIANTS), f"every trial once: {runs}"
    assert {status for _, status in runs} == {"FINISHED"}, runs
    ray_nodes = {}  # each start's Ray node ids (new at every start) -> Slurm's node names, as the job wrote them
    for start in (job_dir / "logs").iterdir():
        ray_nodes.update(json.loads((start / "ray-nodes.json").read_text()))
    seen = store_rows(store, "SELECT value FROM tags WHERE key = 'mjp.nodes'")  # every node a trial trained on, across its starts
    trained_on = {ray_nodes[node] for (nodes,) in seen for node in nodes.split(",")}
    assert trained_on == {"n1", "n2"}, f"the trials trained on {trained_on}"
    assert (job_dir / "logs" / f"{resubmitted}-1").is_dir(), "the requeued job started a second time"
    assert not (job_dir / "auth_token").exists(), "the job's token ends with the job"
    left = subprocess.run(["pgrep", "-f", f"mjp-ray-({first}|{resubmitted})-"], capture_output=True, text=True).stdout.split()
    assert left == [], f"processes of the jobs outlived them: {left}"
    # each node's Ray folder, on the node's own disk (its TMPDIR here), removed by that node: the first can reach only its own
    folders = [str(p) for tmp in slurm.node_tmp.values() for job in (first, resubmitted) for p in tmp.glob(f"mjp-ray-{job}-*")]
    assert folders == [], f"Ray's folders outlived their jobs: {folders}"


def test_dry_run_away_from_a_working_slurm_prints_the_script_and_says_what_it_did_not_check(tmp_path, monkeypatch, capsys):
    """A laptop with Slurm's clients but no controller (or a login node whose controller is down):
    the script is printed, with one note per check left out, and nothing is written."""
    if shutil.which("sinfo") is None:
        pytest.skip("no Slurm clients here")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-such-slurm.conf"))
    monkeypatch.chdir(REPO)
    out = mjp_here(capsys, *slurm_args(tmp_path / "not-here", "--dry-run"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("#!/bin/bash\n") and "#SBATCH --nodes=2" in out.stdout
    notes = out.stderr.strip().splitlines()
    assert len(notes) == 2 and notes[0].startswith("note: not checked against the partition (`sinfo -p debug` failed: "), notes
    assert notes[1].startswith(f"note: --shared {tmp_path / 'not-here'} is not here: not checked")
    assert list(tmp_path.iterdir()) == []
