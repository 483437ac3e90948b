"""The device the gpu tests run on: CUDA, or ``MJP_GPU_TEST_DEVICE=cpu`` to check the tests
themselves on a machine without one (``make test-gpu``)."""

import os

import pytest
import torch


@pytest.fixture(scope="module")
def device() -> torch.device:
    device = torch.device(os.environ.get("MJP_GPU_TEST_DEVICE", "cuda"))
    if device.type == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return device
