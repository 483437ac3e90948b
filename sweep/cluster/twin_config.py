"""The local twin's launcher config: ``cluster.yaml``'s node types for Ray's ``fake_multinode``
autoscaling provider on one machine (``sweep.cluster.twin`` starts it, ``sweep.cluster.twin_provider``
is its provider), and the custom resources that mark the twin's "GPU" and CPU-only nodes."""

from __future__ import annotations

from typing import Any

#: the custom resource that stands in for a GPU on the twin's ``gpu_worker`` nodes
GPU_STANDIN = "mjp_gpu"
#: The custom resource of the CPU-only nodes, where Ray Data's tasks go (as in cluster.yaml).
DATA_NODE = "mjp_data"


def node_memory_bytes() -> int:
    """The ``memory`` resource of each worker type of the twin: this machine's memory (a
    container's limit where there is one) less Ray's default object store share, as Ray's AWS
    launcher fills it in for a worker type from its instance type; every fake node sees the
    whole machine."""
    from ray._common.utils import get_system_memory
    from ray._private.ray_constants import DEFAULT_OBJECT_STORE_MEMORY_PROPORTION

    return int(get_system_memory() * (1 - DEFAULT_OBJECT_STORE_MEMORY_PROPORTION))


def twin_config(gcs_port: int, *, gpu_workers: int = 2, cpu_workers: int = 1, idle_minutes: float = 1.0) -> dict[str, Any]:
    """The ``fake_multinode`` launcher config: ``cluster.yaml``'s node types, scaled to one machine.

    Every top-level key is present even when empty: Ray's monitor reads them unguarded (a missing
    ``file_mounts`` ends it with ``KeyError`` and no node ever starts).

    Each worker type declares ``memory``, as Ray's AWS launcher does for ``cluster.yaml``'s worker
    types: Ray Data asks for ``memory`` in its map tasks once it has seen their output sizes, and
    the autoscaler starts a node for such a task only when a node type declares ``memory``.
    Without it a lost CPU-only node was replaced or not depending on whether the waiting decode
    tasks already carried a ``memory`` request ("No available node types can fulfill resource
    request {'CPU': 1.0, 'memory': 24704.0, 'mjp_data': 1.0}"): the trial then waited forever.
    """
    from sweep.cluster.twin_provider import TwinNodeProvider

    memory = node_memory_bytes()
    provider = f"{TwinNodeProvider.__module__}.{TwinNodeProvider.__qualname__}"
    return {
        "cluster_name": "mjp-local",
        "max_workers": gpu_workers + cpu_workers,
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": idle_minutes,
        # Ray's fake_multinode provider, as a cloud sees a lost machine
        "provider": {
            "type": "external",
            "module": provider,
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
            "gcs_address": f"127.0.0.1:{gcs_port}",
        },
        "available_node_types": {
            "ray.head.default": {"resources": {"CPU": 0}, "node_config": {}, "max_workers": 0},
            "gpu_worker": {
                "resources": {"CPU": 2, GPU_STANDIN: 1, "memory": memory},
                "node_config": {},
                "min_workers": 0,
                "max_workers": gpu_workers,
            },
            "cpu_worker": {
                "resources": {"CPU": 1, DATA_NODE: 1, "memory": memory},
                "node_config": {},
                "min_workers": 0,
                "max_workers": cpu_workers,
            },
        },
        "head_node_type": "ray.head.default",
        "auth": {"ssh_user": "ubuntu"},
        "docker": {},
        **{key: {} for key in ("file_mounts",)},
        **{
            key: []
            for key in (
                "cluster_synced_files",
                "rsync_exclude",
                "rsync_filter",
                "initialization_commands",
                "setup_commands",
                "head_setup_commands",
                "worker_setup_commands",
                "head_start_ray_commands",
                "worker_start_ray_commands",
            )
        },
        "file_mounts_sync_continuously": False,
    }
