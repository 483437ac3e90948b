"""One local twin of cluster.yaml for every cluster test of a test session (``twin_session``).

Bringing a twin up and down costs about 13 s of the suite each time; the cluster tests share one.
Each of them names its own experiments and sweeps, and ``each_test_ends_its_jobs`` (in
tests/test_cluster_local.py) stops whatever jobs a test left running. The store test takes the
twin down itself (what it checks is the store that ``down`` keeps); a test that asks for the twin
after that gets a new one. The twin goes down after the last test that uses it
(``pytest_runtest_teardown``), not at the session's end: the cluster tests run first, and an idle
twin (its head's Ray, dashboard and MLflow server) kept 6 % of a core busy, 3.7 CPU-s a minute,
for the ten minutes of the suite after them. Whenever a twin goes down, nothing of it may be left
running and its bucket must hold every experiment its MLflow server had.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from sweep.cluster.processes import command_line, session_processes
from sweep.cluster.twin import LocalCluster, down, up


class SharedTwin:
    """The session's twin, brought up on first use."""

    def __init__(self) -> None:
        self.twin: LocalCluster | None = None
        self.sessions: list[Path] = []

    def get(self) -> LocalCluster:
        if self.twin is None:
            session = Path(tempfile.mkdtemp(prefix="mjp-cl-", dir="/tmp"))  # short: Ray's socket paths live under it
            self.sessions.append(session)
            self.twin = up(session, gpu_workers=2, cpu_workers=1)
        return self.twin

    def take_down(self) -> LocalCluster:
        """``down`` the twin and check it is gone and its store kept; the twin, for its bucket."""
        import mlflow

        twin, self.twin = self.twin, None
        assert twin is not None, "no twin is up"
        before = os.environ.get("MLFLOW_TRACKING_TOKEN")
        os.environ["MLFLOW_TRACKING_TOKEN"] = twin.environment()["MLFLOW_TRACKING_TOKEN"]  # through the twin's gate
        try:
            experiments = {e.name for e in mlflow.MlflowClient(tracking_uri=twin.tracking_uri).search_experiments()}
        finally:
            os.environ.pop("MLFLOW_TRACKING_TOKEN")
            if before is not None:
                os.environ["MLFLOW_TRACKING_TOKEN"] = before
        down(twin.session_dir)
        left = session_processes(twin.session_dir)
        assert left == [], f"`down` left processes of the twin running: {[b' '.join(command_line(p))[:200] for p in left]}"
        gcs = twin.address.encode()  # Ray's client proxy names only the GCS address, no path of the session
        assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and any(gcs in arg for arg in command_line(int(p.name)))], (
            "a process of the twin outlived `down`"
        )
        kept = mlflow.MlflowClient(tracking_uri=f"sqlite:///{twin.kept_store}")  # `down` saved the store to the twin's bucket
        assert {e.name for e in kept.search_experiments()} == experiments
        return twin

    def release(self) -> None:
        """``take_down`` the twin if one is up."""
        if self.twin is not None:
            self.take_down()

    def close(self) -> None:
        self.release()
        for session in self.sessions:
            shutil.rmtree(session, ignore_errors=True)


#: this test process' twin; ``twin_session`` hands it to the tests
SHARED = SharedTwin()


@pytest.fixture(scope="session")
def twin_session():
    try:
        yield SHARED
    finally:
        SHARED.close()


def _uses_twin(item: pytest.Item | None) -> bool:
    return item is not None and "twin_session" in getattr(item, "fixturenames", ())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After the fixtures of a twin test are torn down (its jobs stopped): the twin goes down
    when the next test of this process does not use it. pytest-xdist runs a test only once it
    knows the next one, and the cluster tests reach a process as one group, in a row."""
    yield
    if _uses_twin(item) and not _uses_twin(nextitem):
        SHARED.release()
