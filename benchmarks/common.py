"""Shared by the benchmarks: the process environment, and the line every result table starts with
(a table's way to BENCHMARKS.md is ``published.py``'s)."""

from __future__ import annotations

import os
import platform

from trainables.launch.ray_runtime import prepare_environment

prepare_environment()  # before ray is imported (benchmarks run under `uv run`)

import timm  # noqa: E402
import torch  # noqa: E402


def ray_version() -> str:
    """Ray's version, or "not installed": a benchmark that needs no Ray runs where it is absent
    (a bare GPU machine's image; docs/gpu-check.md)."""
    try:
        import ray
    except ImportError:
        return "not installed"
    return ray.__version__


def environment(device: str = "cpu") -> str:
    where = torch.cuda.get_device_name(0) if device == "cuda" else f"{platform.machine()} CPU, {os.cpu_count()} cores"
    return f"{where}; torch {torch.__version__}, timm {timm.__version__}, ray {ray_version()}"
