"""Shared test setup: offline timm, deterministic torch, tiny models; what tests share and what
keeps them apart (``tests/isolation.py``); how ``make test`` spreads them over its processes."""

import gc
import os
import signal

from trainables.launch.ray_runtime import NO_PHONE_HOME

# Nothing phones home from the test processes either, as from every process of the platform, and
# set before a test module is collected: one that imports MLflow at its top started MLflow's
# telemetry in this process (it turns it off by itself only inside a test, PYTEST_CURRENT_TEST), and
# its thread, failing to reach the internet, removed _MLFLOW_TELEMETRY_SESSION_ID from the
# environment while a test's request read it (a KeyError in `requests`, beside two CPU hogs).
# Set whatever the developer's environment says (DO_NOT_TRACK=false included), as the platform does.
os.environ.update(NO_PHONE_HOME)
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")  # `make test` runs under `uv run`
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
if "MJP_HOME" not in os.environ:  # the sweep signing key of the tests, never the user's own
    from trainables.scratch import folder_for_this_process

    os.environ["MJP_HOME"] = str(folder_for_this_process("mjp-test-home-"))  # gone once a later run begins

from trainables.process_start import fewer_full_collections, frozen_until_exit

fewer_full_collections()  # as in every process of the platform: no full collection while the tests import torch, timm, MLflow, Ray

import pytest
import torch

from tests.spread import longest_first, mark_group

#: what tests share and what keeps them apart (the local Ray, the twin), with the hooks that end each after its last test
pytest_plugins = ("tests.isolation", "tests.twin_session")

# torch's threads in this process: one share of the cores per test process (pytest-xdist sets the
# count before this file loads). With torch's default of every core in each of two test
# processes, four threads ran on two cores and waited on each other: `pytest -n 2 -m "not slow"`
# took 287 and 298 CPU-s, against 235 and 217 with one thread each. Commands the tests start keep theirs.
THREADS = max(1, len(os.sched_getaffinity(0)) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
torch.set_num_threads(THREADS)

# A suite started in the background of a non-interactive shell (`make test &` in a script, nohup,
# some CI runners) inherits SIGINT ignored, as does every command it starts; Python then leaves
# it ignored, and the tests that press Ctrl-C on `mjp` found it ignoring SIGINT (rightly, in such
# a job) after Tune's own handler was gone. The commands start as from a terminal instead.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: A ViT small enough to train a step in milliseconds: 32x32 images, 8x8 grid of 4x4 patches.
TINY_VIT = dict(img_size=32, patch_size=4, embed_dim=32, depth=2, num_heads=2, num_classes=10)


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


def pytest_itemcollected(item):
    mark_group(item)


def pytest_collection_modifyitems(config, items):
    longest_first(config, items)


def pytest_unconfigure(config):
    """One full collection as the session ends, then the heap frozen (``gc.freeze``), before pytest's
    own end: its unraisable-exception plugin collects five times to find a finalizer's exception,
    and in a test process holding torch, timm, MLflow, Ray and what its tests made, each walked
    every object again: 2 to 3 s each, 10 to 16 s at each process's end. pytest-xdist sends a
    process still busy 5 s after the end a SIGINT, which Tune's handler, left by a test, printed as
    "Stop signal received ... ending Ray Tune run". This collection finds the same exceptions
    (pytest's hook is still installed); pytest's then walk only what was made after it. The heap is
    unfrozen as the process exits (``frozen_until_exit``), after pytest-xdist's wait."""
    gc.collect()
    frozen_until_exit()
