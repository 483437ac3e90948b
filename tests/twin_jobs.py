"""Jobs on the local twin (tests/test_cluster_local.py): submitted as `ray job submit` does, with
Ray's job client in a fresh Python that has the twin's environment; then watched, read and
stopped through the head's jobs API over HTTP with the twin's token, as that client does. The
waits poll without starting a Python each time (importing Ray's job client alone takes 0.8 s of
CPU here, and a wait polled every 2 s). The jobs a test submitted are kept in ``SUBMITTED``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ENDED = {"SUCCEEDED", "FAILED", "STOPPED"}
SUBMITTED: list[str] = []  # the jobs the current test submitted (``each_test_ends_its_jobs`` stops them)


def on_cluster(twin, code: str) -> Any:
    """Run ``code`` (its last line of output is one JSON value) in a fresh Python with the twin's
    environment: this process may have loaded Ray's C++ side, which reads ``RAY_AUTH_MODE`` once,
    for another test's local Ray without token authentication."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **twin.environment(), "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def jobs_api(twin, path: str, method: str = "GET") -> Any:
    """One call of the head's jobs API (``/api/jobs/...``) with the twin's token; its JSON answer."""
    token = Path(twin.token_path).read_text().strip()
    request = urllib.request.Request(f"{twin.dashboard}/api/jobs/{path}", method=method, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def submit(twin, *argv: str) -> str:
    """``mjp ARGV`` as a Ray job on the twin's head (as `ray job submit` does); its submission id."""
    command = " ".join([f"cd {REPO} &&", sys.executable, "-m", "sweep.cli", *argv])
    job = on_cluster(
        twin,
        "import json; from ray.job_submission import JobSubmissionClient as C; "
        f"print(json.dumps(C({twin.dashboard!r}).submit_job(entrypoint={command!r})))",
    )
    SUBMITTED.append(job)
    return job


def job_status(twin, job: str) -> str:
    return jobs_api(twin, job)["status"]


def driver_pid(twin, job: str) -> int:
    return int(jobs_api(twin, job)["driver_info"]["pid"])


def stop_job(twin, job: str) -> None:
    jobs_api(twin, f"{job}/stop", method="POST")


def wait_job(twin, job: str, seconds: float = 420) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = job_status(twin, job)
        if status in ENDED:
            return status
        time.sleep(1)
    raise AssertionError(f"job {job} still running after {seconds} s:\n{job_logs(twin, job)}")


def job_logs(twin, job: str) -> str:
    return jobs_api(twin, f"{job}/logs")["logs"][-3000:]
