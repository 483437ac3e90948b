"""Shared test setup: offline timm, deterministic torch, tiny models."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")  # `make test` runs under `uv run`
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
if "MJP_HOME" not in os.environ:  # the sweep signing key of the tests, never the user's own
    import tempfile

    os.environ["MJP_HOME"] = tempfile.mkdtemp(prefix="mjp-home-")

import pytest
import torch

torch.set_num_threads(2)

#: A ViT small enough to train a step in milliseconds: 32x32 images, 8x8 grid of 4x4 patches.
TINY_VIT = dict(img_size=32, patch_size=4, embed_dim=32, depth=2, num_heads=2, num_classes=10)


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


@pytest.fixture(scope="session")
def local_ray():
    """One private local Ray for every test that needs it (4 logical CPUs on any machine)."""
    import ray

    from trainables.launch.ray_runtime import ensure_ray

    ensure_ray(num_cpus=4)
    yield
    ray.shutdown()
