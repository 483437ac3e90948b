"""docs/cluster-local.md's shell block, pasted into bash as written, on the twin the cluster tests
share (tests/twin_session.py): its exports give the environment `mjp cluster up` prints (they once
left out ``MLFLOW_TRACKING_TOKEN``, and every command through the gate got 401), the probe job
passes, the sweep job it submits trains every trial to the end on worker nodes the autoscaler
started (never on the head), logging each epoch to the twin's MLflow server through its gate, and
`sweep status` follows it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

from mjp import keys
from sweep.cluster.twin import DEFAULT_SESSION
from sweep.study.load import load_study
from tests.twin_jobs import ENDED, job_logs, job_status, stop_job, wait_job
from tests.twin_nodes import HEAD_NODE
from tests.twin_sweeps import child_runs
from trainables.tracking import schema

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "cluster-local.md"


def doc_block() -> str:
    """The page's first bash block, the one a user pastes."""
    return re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.S)[0]


def as_pasted_on(twin, block: str) -> str:
    """``block`` as a user's shell runs it on ``twin``. What differs from the page: the twin is
    the suite's, already up (brought up by the same ``up``), so the ``up`` line is left out, and
    the session's end takes it down with the same ``down``, so the ``down`` line is too; the
    values ``up`` printed for it stand for the page's ``PORT`` and default session; ``uv run X``
    is this environment's ``X``, which is what ``uv run`` runs."""
    env = twin.environment()
    kept = [line for line in block.replace("\\\n", " ").splitlines() if not re.match(r"\s*uv run mjp cluster (up|down)\b", line)]
    script = "\n".join(kept)
    for name, value in env.items():
        script = re.sub(rf"\b{name}=(http://)?127\.0\.0\.1:PORT\b", f"{name}={value}", script)
    assert not re.search(r"\bPORT\b", script), script
    return script.replace(DEFAULT_SESSION, twin.session_dir).replace("uv run ", "")


def test_the_pages_block_works_pasted_into_a_shell(twin_session, monkeypatch):
    twin = twin_session.get()
    expected = twin.environment()
    token = Path(twin.token_path)  # the twin's own token: no ~/.ray/auth_token needed
    assert expected["RAY_AUTH_TOKEN_PATH"] == str(token) and token.stat().st_mode & 0o777 == 0o600
    script = as_pasted_on(twin, doc_block())
    shown = " ".join(f'"{name}=${name}"' for name in expected)
    shell = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_", "MJP_SWEEP", "MJP_REPORTS"))}  # a fresh shell
    shell["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), shell.get("PATH", "")])
    out = subprocess.run(
        ["bash", "-e", "-c", f"{script}\nprintf 'ENV %s\\n' {shown}"], cwd=REPO, env=shell, capture_output=True, text=True, timeout=900
    )
    jobs = re.findall(r"Job '(raysubmit_\w+)' submitted successfully", out.stdout + out.stderr)
    try:
        assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
        assert {line[4:] for line in out.stdout.splitlines() if line.startswith("ENV ")} == {f"{k}={v}" for k, v in expected.items()}
        assert "probe: every check held" in out.stdout + out.stderr
        assert len(jobs) == 2, out.stdout
        sweep = jobs[-1]
        assert wait_job(twin, sweep, seconds=600) == "SUCCEEDED", job_logs(twin, sweep)[-4000:]
        smoke = load_study("quickstart", smoke=True, check=False)
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", expected["MLFLOW_TRACKING_TOKEN"])  # through the gate, as the jobs
        client = mlflow.MlflowClient(tracking_uri=twin.tracking_uri)
        runs = child_runs(smoke.base.tracking.experiment, client)
        assert len(runs) == smoke.num_trials and {r.info.status for r in runs} == {"FINISHED"}
        epochs = list(range(1, smoke.base.optim.epochs + 1))
        for run in runs:
            node = run.data.tags[f"{schema.TAG_NODE_PREFIX}0"]
            assert node != HEAD_NODE and node.startswith("fffff"), (
                f"{run.info.run_name} trained on {node}, not on an autoscaled worker node"
            )
            assert sorted(m.step for m in client.get_metric_history(run.info.run_id, keys.VAL_TOP1)) == epochs
        follow = next(line for line in script.splitlines() if "sweep status quickstart-smoke" in line)
        exports = "\n".join(line for line in script.splitlines() if line.startswith("export "))
        again = subprocess.run(
            ["bash", "-e", "-c", f"{exports}\n{follow}"], cwd=REPO, env=shell, capture_output=True, text=True, timeout=120
        )
        finished = f"{smoke.num_trials} finished of {smoke.num_trials} trials"
        assert again.returncode == 0 and finished in again.stdout and "[finished]" in again.stdout, again.stdout + again.stderr
    finally:
        for job in jobs:
            if job_status(twin, job) not in ENDED:
                stop_job(twin, job)
                wait_job(twin, job, seconds=120)
