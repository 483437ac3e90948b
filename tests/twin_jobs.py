"""Jobs on the local twin, as `ray job submit` makes them (tests/test_cluster_local.py): each call
in a fresh Python with the twin's environment, the jobs a test submitted kept in ``SUBMITTED``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ENDED = {"SUCCEEDED", "FAILED", "STOPPED"}
SUBMITTED: list[str] = []  # the jobs the current test submitted (``each_test_ends_its_jobs`` stops them)


def on_cluster(twin, code: str) -> Any:
    """Run ``code`` (its last line of output is one JSON value) in a fresh Python with the twin's
    environment: this process may have loaded Ray's C++ side, which reads ``RAY_AUTH_MODE`` once,
    for another test's local Ray without token authentication."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, **twin.environment(), "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def job_call(twin, call: str) -> Any:
    return on_cluster(twin, "import json; from ray.job_submission import JobSubmissionClient as C; "
                            f"c = C({twin.dashboard!r}); print(json.dumps({call}))")


def submit(twin, *argv: str) -> str:
    """``mjp ARGV`` as a Ray job on the twin's head (as `ray job submit` does); its submission id."""
    command = " ".join([f"cd {REPO} &&", sys.executable, "-m", "sweep.cli", *argv])
    SUBMITTED.append(job := job_call(twin, f"c.submit_job(entrypoint={command!r})"))
    return job


def wait_job(twin, job: str, seconds: float = 420) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = job_call(twin, f"str(c.get_job_status({job!r}))")
        if status in ENDED:
            return status
        time.sleep(2)
    raise AssertionError(f"job {job} still running after {seconds} s:\n{job_logs(twin, job)}")


def job_logs(twin, job: str) -> str:
    return job_call(twin, f"c.get_job_logs({job!r})[-3000:]")
