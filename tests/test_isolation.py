"""Tests that share a process, its Ray or a twin cannot leak state into each other
(tests/isolation.py): an inner pytest session whose first test leaves behind what tests of this
suite could (a detached named actor, an unnamed actor, a placement group in the shared Ray, a
variable in the environment, MLflow's process-wide URI and an active run, another working
directory, torch's threads, a SIGINT and a SIGUSR1 handler as Tune leaves them), and whose
second test, in the same process, finds none of it; a third, which needs no Ray, finds the
shared one ended, and a fourth gets one again. The same tests without the suite's fixtures and
hooks show the leaks are real."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LEAKS = textwrap.dedent("""
    import os
    import signal

    import mlflow
    import ray
    import torch
    from ray.util.placement_group import placement_group


    @ray.remote(num_cpus=0)
    class Holder:
        def ping(self):
            return 1


    HANDLES = []  # keeps the unnamed actor alive past the first test
    RAY_PIDS = []  # the processes of the Ray the first two tests share


    def test_one_leaves_everything_behind(local_ray, tmp_path):
        RAY_PIDS.extend(process.pid for _, process in ray._private.worker._global_node.live_processes())
        named = Holder.options(name="left-behind", lifetime="detached").remote()
        HANDLES.append(Holder.remote())
        ray.get([named.ping.remote(), HANDLES[0].ping.remote()])
        ray.get(placement_group([{"CPU": 1}]).ready(), timeout=60)
        os.environ["MJP_LEFT_BEHIND"] = "1"
        mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/leak.db")
        mlflow.start_run()
        os.chdir(tmp_path)
        torch.set_num_threads(1)
        signal.signal(signal.SIGINT, lambda signum, frame: None)  # Tune's, left after a run no signal ended
        signal.signal(signal.SIGUSR1, lambda signum, frame: None)


    def test_two_finds_nothing(local_ray):
        from ray._private.state import state

        alive = [a for a in state.actor_table(None).values() if a["State"] != "DEAD"]
        groups = [g for g in ray.util.placement_group_table().values() if g["state"] != "REMOVED"]
        left = sorted(a["Name"] or "unnamed" for a in alive)
        assert alive == [] and groups == [], f"left in Ray: {left} actors, {len(groups)} placement groups"
        assert "MJP_LEFT_BEHIND" not in os.environ
        assert mlflow.active_run() is None and "leak.db" not in mlflow.get_tracking_uri()
        assert os.getcwd() == os.environ["INNER_START_DIR"]
        assert torch.get_num_threads() == 2
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL


    def test_three_after_the_last_that_needs_the_ray_finds_it_ended():
        assert RAY_PIDS, "test one saw the Ray's processes"
        assert not ray.is_initialized(), "the Ray outlived the last test that needs it"
        left = [pid for pid in RAY_PIDS if os.path.exists(f"/proc/{pid}")]
        assert left == [], f"processes of the ended Ray still run: {left}"


    def test_four_gets_a_ray_again(local_ray):
        assert ray.is_initialized() and ray.cluster_resources()["CPU"] == 4
        assert not {process.pid for _, process in ray._private.worker._global_node.live_processes()} & set(RAY_PIDS)
""")


def inner_session(tmp_path: Path, *plugin: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_leaks.py").write_text(LEAKS)
    env = {
        "PYTHONPATH": str(ROOT),
        "INNER_START_DIR": str(tmp_path),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
        "MJP_HOME": str(tmp_path / "mjp-home"),
    }
    code = "import sys, torch, pytest; torch.set_num_threads(2); sys.exit(pytest.main(sys.argv[1:]))"
    return subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "-q",
            "--tb=short",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-o",
            "addopts=",
            *plugin,
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_leaks.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_what_one_test_leaves_in_the_shared_ray_and_the_process_is_gone_for_the_next(tmp_path):
    isolated = inner_session(tmp_path, "-p", "tests.isolation")
    assert isolated.returncode == 0 and "4 passed" in isolated.stdout, isolated.stdout[-3000:] + isolated.stderr[-3000:]


@pytest.mark.slow
def test_without_the_suite_s_fixtures_the_same_tests_do_leak(tmp_path):
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent("""
        import pytest

        @pytest.fixture(scope="session")
        def local_ray():
            import ray
            ray.init(num_cpus=4, include_dashboard=False)
            yield
            ray.shutdown()
    """)
    )
    leaky = inner_session(tmp_path)
    assert leaky.returncode == 1 and "3 failed, 1 passed" in leaky.stdout, leaky.stdout[-3000:] + leaky.stderr[-3000:]
    assert (
        "FAILED test_leaks.py::test_two_finds_nothing" in leaky.stdout
        and "left in Ray: ['left-behind', 'unnamed'] actors, 1 placement groups" in leaky.stdout
    ), leaky.stdout[-3000:]
    assert "FAILED test_leaks.py::test_three_after_the_last_that_needs_the_ray_finds_it_ended" in leaky.stdout, leaky.stdout[-3000:]
    assert "the Ray outlived the last test that needs it" in leaky.stdout, leaky.stdout[-3000:]
