"""The local twin's node provider: Ray's ``fake_multinode`` provider, with a lost node gone from
its list of machines as a lost cloud instance is gone from the cloud's.

Ray's fake provider keeps listing a worker node whose raylet died, and the autoscaler (v1) never
ends it: the node's status tag stays ``uninitialized`` (the launcher's tag overrides the
provider's), so it is never ended as unhealthy, and a standing ``request_resources`` (Ray Data
makes one) counts its resources, so it is never ended as idle. Its slot under ``max_workers``
stays taken, and a lost node is never replaced: on this machine, after the only CPU-only node was
killed, Ray Data's decode tasks waited more than 4 minutes for a node that never came. On a cloud
a lost machine is gone from ``non_terminated_nodes``; here too, and the autoscaler starts a new
node for the work that waits (``tests/twin_faults.py`` loses a node).

The autoscaler's monitor imports this module (``provider: {type: external, module: ...}``);
it runs only there.
"""

from __future__ import annotations

from typing import Any

from ray._private import ray_constants
from ray.autoscaler._private.fake_multi_node.node_provider import FakeMultiNodeProvider


def raylet_exited(node: Any) -> bool:
    """Whether the raylet of a node this provider started (a ``ray._private.node.Node``) has exited."""
    raylets = node.all_processes.get(ray_constants.PROCESS_TYPE_RAYLET, [])
    return bool(raylets) and raylets[0].process.poll() is not None


class TwinNodeProvider(FakeMultiNodeProvider):
    """``FakeMultiNodeProvider`` whose list of machines drops a worker node once its raylet has
    exited, and whose node types may declare ``memory`` (``sweep.cluster.twin_config.twin_config``)."""

    def create_node_with_resources_and_labels(self, node_config: dict, tags: dict, count: int, resources: dict, labels: dict) -> Any:
        """Start a node of a type that declares ``memory``: the declaration is for the autoscaler's
        planning; Ray's fake provider would hand it to the raylet as a custom resource, which Ray
        refuses (``memory`` is one of its own), so the raylet detects its memory itself, as a real
        node's does."""
        planned = {name: amount for name, amount in resources.items() if name != "memory"}
        return super().create_node_with_resources_and_labels(node_config, tags, count, planned, labels)

    def non_terminated_nodes(self, tag_filters: dict[str, str]) -> list[str]:
        with self.lock:
            lost = [node_id for node_id, entry in self._nodes.items() if "node" in entry and raylet_exited(entry["node"])]
            for node_id in lost:
                self.terminate_node(node_id)  # forgets it, and ends whatever of it still runs
            return super().non_terminated_nodes(tag_filters)
