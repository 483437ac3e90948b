"""Step: the machine the numbers come from (GPU, driver, torch, CUDA, timm, Python, cores, commit)
and what the image lacks: which of the project's libraries import, and from where (the kit's
temporary folder or the image)."""

from __future__ import annotations

import importlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.gpu_check.context import sizes, step_args, write_result

#: the libraries the check needs beyond torch/timm, and those it must do without
NEEDED = ("torchvision", "numpy", "PIL", "yaml", "pytest", "pydantic", "pytorch_msssim", "matplotlib", "imagecorruptions")
ABSENT_ON_THE_IMAGE = ("ray", "mlflow", "optuna")


def where(name: str) -> str:
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - what stops the import is the answer
        return f"not importable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    version = getattr(module, "__version__", "")
    kit = os.environ.get("GPU_CHECK_KIT_TARGET")
    origin = "kit" if kit and str(getattr(module, "__file__", "")).startswith(kit) else "image"
    return f"{version} ({origin})".strip()


def tree_commit() -> str:
    """The tree's commit from git, or, where the tree was copied without ``.git``, the one ``make
    gpu-kit`` recorded in the kit (``.gpu-kit/COMMIT``)."""
    if shutil.which("git"):
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True).stdout.strip()
        if out:
            return out
    recorded = Path(os.environ.get("GPU_KIT", ".gpu-kit")) / "COMMIT"
    return (
        f"{recorded.read_text().strip()} (recorded when the kit was made; no git here)"
        if recorded.is_file()
        else "unknown (no git, no .gpu-kit/COMMIT)"
    )


def main() -> None:
    args = step_args(__doc__)
    import timm
    import torch

    cuda = torch.cuda.is_available()
    commit = tree_commit()
    smi = (
        subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            check=False,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if cuda and shutil.which("nvidia-smi")
        else ""
    )
    write_result(
        args.out,
        {
            "gpu": torch.cuda.get_device_name(0) if cuda else None,
            "gpu_count": torch.cuda.device_count() if cuda else 0,
            "nvidia_smi": smi or None,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "timm": timm.__version__,
            "python": platform.python_version(),
            "executable": sys.executable,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "commit": commit,
            "libraries": {name: where(name) for name in NEEDED + ABSENT_ON_THE_IMAGE},
        },
        sizes(args.mode),
    )


if __name__ == "__main__":
    from trainables.process_end import run_and_exit

    run_and_exit(main)  # no finalization (1.5 s of CPU after torch and timm): the next step starts sooner
