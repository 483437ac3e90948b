"""A sweep whose MLflow server ends with it. ``scancel`` signals every process of a Slurm job at
once, the job's MLflow server included, so the driver's SIGTERM finds no server to close its runs
on. The driver then ends in one line naming the server and the resume (which closes the runs), as
SIGTERM's 143. It does not retry the gone server for minutes while Slurm waits ``KillWait``
seconds and then SIGKILLs the whole job, before it could remove its token."""

from __future__ import annotations

import os
import signal

import pytest

from tests.test_faults import experiment_dir, mjp, study, trials_reported, wait_for


@pytest.mark.slow
def test_a_sweep_signalled_after_its_mlflow_server_ended_stops_at_once_in_one_line(tmp_path):
    from sweep.cluster.twin_mlflow import start_mlflow_server

    (tmp_path / "server").mkdir()
    server, port = start_mlflow_server(
        tmp_path / "server" / "mlflow.db", tmp_path / "server" / "artifacts", tmp_path / "server.log", dict(os.environ), tmp_path
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        # epochs enough that the trial still trains when the signal comes (it is stopped then)
        proc = mjp(tmp_path, "sweep", "run", study(tmp_path, epochs=60, variants=("A",)), MLFLOW_TRACKING_URI=uri)
        wait_for("the trial's first epoch", lambda: trials_reported(uri) >= 1)
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server goes first, as scancel's SIGTERM ends it at once
        server.wait()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=180)  # a bound on failure: MLflow's own retries would take minutes
    assert proc.returncode == 143, out + err
    assert "Traceback" not in out + err and "] finished " not in out, out + err
    (line,) = [x for x in err.splitlines() if x.startswith("error: ")]
    assert line.startswith(f"error: the MLflow server {uri} did not answer as the sweep ended (") and "the runs it left RUNNING" in line
    assert f"`mjp sweep resume {experiment_dir(tmp_path)}` continues the sweep" in line
