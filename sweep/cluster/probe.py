"""``mjp cluster probe``: before a full study, one short Ray job that touches what the study needs
of the cluster and a small sweep would not: a GPU node (started by the autoscaler for it), its
driver and CUDA, a CPU-only node, and from each the images, the bucket and the MLflow server.

A digits smoke sweep fits on the head's CPUs, so it proves none of these. The probe asks for one
task on a node that offers ``--gpu-resource`` (``GPU``; the local twin's ``mjp_gpu``) and one on a
node that offers ``--cpu-resource`` (``mjp_data``), each running ``probe_here`` (the job and its
printout: ``sweep/commands/cluster.py``).
"""

from __future__ import annotations

import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Check:
    """One thing probed on one node: its name, whether it held, what was seen."""

    name: str
    ok: bool
    detail: str


def _cuda() -> Check:
    import torch

    if not torch.cuda.is_available():
        return Check("cuda", False, f"torch {torch.__version__} sees no CUDA device (driver: {_driver() or 'nvidia-smi not found'})")
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    ok = bool(torch.isfinite((a @ a).float()).all())  # one kernel through the driver, and back
    return Check(
        "cuda",
        ok,
        f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}, driver {_driver()}, torch {torch.__version__} "
        f"(CUDA {torch.version.cuda}), bf16 matmul {'ok' if ok else 'not finite'}",
    )


def _driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def _images(root: str) -> Check:
    from PIL import Image

    train = Path(root) / "train"
    classes = sorted(p for p in train.iterdir() if p.is_dir()) if train.is_dir() else []
    if not classes:
        return Check("images", False, f"{train}: no class folders (the node's image copy is missing or incomplete)")
    first = next((f for f in sorted(classes[0].iterdir()) if f.is_file()), None)
    if first is None:
        return Check("images", False, f"{classes[0]}: no images")
    try:
        with Image.open(first) as image:
            image.convert("RGB").load()
    except OSError as err:
        return Check("images", False, f"{first}: does not decode ({err})")
    return Check("images", True, f"{train}: {len(classes)} classes, {first.relative_to(train)} decodes")


def _bucket(storage: str | None) -> Check:
    if not storage:
        return Check("bucket", False, "$MJP_SWEEP_STORAGE is not set on this node (cluster.yaml's setup_commands export it)")
    from sweep.cluster.store_copy import filesystem_of

    where = f"{storage.rstrip('/')}/_probe/{socket.gethostname()}-{os.getpid()}"
    try:
        filesystem, path = filesystem_of(where)
        filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with filesystem.open_output_stream(path) as out:
            out.write(b"mjp cluster probe")
        with filesystem.open_input_stream(path) as inp:
            back = inp.read()
        filesystem.delete_file(path)
    except Exception as err:  # noqa: BLE001 - pyarrow's errors for S3 (credentials, access) are OSErrors or ArrowInvalid
        return Check("bucket", False, f"{where}: {str(err).splitlines()[0][:200]}")
    return Check("bucket", back == b"mjp cluster probe", f"wrote, read and deleted {where}")


def _tracking(uri: str | None) -> Check:
    from trainables.tracking.store import is_tracking_server, server_silence

    if not uri or not is_tracking_server(uri):
        return Check("mlflow", False, f"$MLFLOW_TRACKING_URI is {uri!r}, not the head's MLflow server")
    silence = server_silence(uri, seconds=10)
    return Check("mlflow", silence is None, f"{uri} answers" if silence is None else f"{uri} does not answer from this node ({silence})")


def probe_here(data_root: str, storage: str | None, tracking: str | None, cuda: bool) -> tuple[str, list[Check]]:
    """This node's address and Ray node id, and the checks made on it (CUDA only where ``cuda``)."""
    import ray

    checks = [_cuda()] if cuda else []
    images = Check("images", True, "not checked (--data none)") if data_root == "none" else _images(data_root)
    checks += [images, _bucket(storage), _tracking(tracking)]
    # the id's last 12 hex digits: Ray's fake nodes (the twin) share the first 51 (fff...f00001)
    node = f" (node …{ray.get_runtime_context().get_node_id()[-12:]})" if ray.is_initialized() else ""  # never starts a Ray
    return f"{ray.util.get_node_ip_address()}{node}", checks
