"""What tests share, and what keeps them apart (a plugin of ``tests/conftest.py``).

The suite shares what is expensive to start: one private local Ray for the tests that name
``local_ray`` (they run in one process, in a row: ``tests/spread.py``), one twin for the
cluster tests (``tests/twin_session.py``), one sweep per module where its checks only read it.
``make test`` runs the tests in three processes (pytest-xdist), each test going wherever a
process is free, so no test may rely on what an earlier one left behind, nor leave anything for
a later one. After every test, ``process_state_restored`` puts back what a command run in this
process changes: the environment (``prepare_environment`` sets Ray's variables, a credentials
URI moves into MLflow's own), the working directory, MLflow's process-wide tracking URI and
active runs, torch's thread count, the handlers of the stop signals (Tune leaves its own for
SIGINT and SIGUSR1 after a ``Tuner.fit`` that no signal ended, ``ray.init`` one for SIGTERM);
``shared_ray_left_empty`` removes the actors and placement groups a test left in this
process' Ray. tests/test_isolation.py shows both hold.
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

#: the signals whose handlers a command or Tune sets in this process
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)


@pytest.fixture(scope="session")
def local_ray():
    """One private local Ray (4 logical CPUs) for the tests of this process that name this fixture,
    directly or through one of theirs: started before the first of a run of them (ahead of their
    fixtures), ended after the last (the two hooks below). Left up, an idle Ray (its
    raylet, GCS, log monitor, dashboard agent and idle workers) kept 3.4 to 4.2 CPU-s a minute busy
    for the rest of the suite in each of the three test processes."""
    _ray_up()
    yield
    _ray_down()


def uses_local_ray(item: pytest.Item | None) -> bool:
    return item is not None and "local_ray" in getattr(item, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the fixtures of a test that needs ``local_ray``: the Ray up (again, where the last run
    of such tests ended it: the session-scoped fixture itself runs once)."""
    if uses_local_ray(item):
        _ray_up()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After a test and its fixtures: this process' Ray ended unless the next test needs
    ``local_ray``; a Ray that a command of the test started in this process ends here too."""
    yield
    if not uses_local_ray(nextitem):
        _ray_down()


def _ray_up() -> None:
    from trainables.launch.ray_runtime import ensure_ray

    ensure_ray(num_cpus=4)  # nothing where a Ray is up


def _ray_down() -> None:
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        sys.modules["ray"].shutdown()


@pytest.fixture(autouse=True)
def shared_ray_left_empty():
    """After each test, the Ray of this process (``local_ray``'s, or one a command in the test
    started) as empty as before it: no actor, no placement group."""
    yield
    if "ray" in sys.modules:
        leftovers_removed()


def leftovers_removed() -> None:
    """Kill every live actor and remove every live placement group of the connected Ray.

    Read from the GCS's tables (``ray.util.state`` needs the dashboard, which the shared Ray has
    not); an unnamed actor is killed by its id, as ``ray.kill`` does with a handle's."""
    import ray
    from ray._private.state import state
    from ray.exceptions import ActorHandleNotFoundError
    from ray.util.placement_group import PlacementGroup

    if not ray.is_initialized():
        return
    for actor_id, actor in state.actor_table(None).items():
        if actor["State"] == "DEAD":
            continue
        try:
            if actor.get("Name"):
                ray.kill(ray.get_actor(actor["Name"], namespace=actor.get("RayNamespace")), no_restart=True)
            else:
                ray._private.worker.global_worker.core_worker.kill_actor(ray.ActorID.from_hex(actor_id), True)
        except (ValueError, ActorHandleNotFoundError):
            pass  # gone meanwhile, or another job's
    for group_id, group in ray.util.placement_group_table().items():
        if group["state"] != "REMOVED":
            ray.util.remove_placement_group(PlacementGroup(ray.PlacementGroupID.from_hex(group_id)))


@pytest.fixture(autouse=True)
def process_state_restored():
    """Whatever a test changes of this process' shared state is put back after it."""
    cwd, environment, threads = os.getcwd(), dict(os.environ), _torch_threads()
    tracking_uri = _mlflow_tracking_uri()
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    yield
    for signum, handler in handlers.items():
        if handler is not None:  # None: set outside Python, which Python cannot put back
            signal.signal(signum, handler)
    os.chdir(cwd)
    if "mlflow" in sys.modules:  # before the environment: MLflow mirrors its URI into $MLFLOW_TRACKING_URI
        import mlflow

        while mlflow.active_run() is not None:
            mlflow.end_run()
        mlflow.set_tracking_uri(tracking_uri)
    for key in set(os.environ) - set(environment):
        del os.environ[key]
    for key, value in environment.items():
        if os.environ.get(key) != value:
            os.environ[key] = value
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def _torch_threads() -> int | None:
    return sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None


def _mlflow_tracking_uri() -> str | None:
    """MLflow's process-wide URI as ``mlflow.set_tracking_uri`` left it (None: never set, the
    environment decides), read without importing MLflow where nothing has."""
    if "mlflow" not in sys.modules:
        return None
    from mlflow.tracking._tracking_service import utils

    return utils._tracking_uri
