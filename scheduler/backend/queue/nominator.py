"""Nominator: which pods are nominated to which node (``status.nominatedNodeName``).

A nominated pod is not on the node yet, but the two-pass filter (framework/runtime.py)
treats nominated pods of equal or higher priority as if they were, so that nobody else
takes the space a preemption freed. Runtime complexity: add/delete O(pods on that node)
(a node holds few nominations), lookups O(1).
"""

from __future__ import annotations

from scheduler.types import PodInfo

__all__ = ["Nominator"]


class Nominator:
    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def add_nominated_pod(self, pod: PodInfo, node_name: str) -> None:
        self.delete_nominated_pod_if_exists(pod.key)
        if not node_name:
            return
        self._by_node.setdefault(node_name, {})[pod.key] = pod
        self._node_of[pod.key] = node_name

    def delete_nominated_pod_if_exists(self, key: str) -> str | None:
        node = self._node_of.pop(key, None)
        if node is None:
            return None
        pods = self._by_node[node]
        pods.pop(key, None)
        if not pods:
            del self._by_node[node]
        return node

    def update_nominated_pod(self, old: PodInfo, new: PodInfo) -> None:
        """A nominated (or nominable) pod changed, as upstream's ``UpdateNominatedPod``: if
        neither version names a node, an in-memory nomination (say, made by preemption just
        now, before the API shows it) is kept with the fresh record; otherwise the new
        ``status.nominatedNodeName`` wins, and "" removes the nomination. A bound pod is
        never nominated."""
        node: str | None = new.nominated_node_name
        if not old.nominated_node_name and not new.nominated_node_name:
            node = self._node_of.get(old.key)
        self.delete_nominated_pod_if_exists(old.key)
        if node and not new.node_name:
            self.add_nominated_pod(new, node)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        pods = self._by_node.get(node_name)
        return list(pods.values()) if pods else []

    def nodes_with_nominated_pods(self) -> list[str]:
        """The names of the nodes that have at least one nominated pod. O(such nodes)."""
        return list(self._by_node)

    def nominated_node(self, key: str) -> str | None:
        return self._node_of.get(key)

    def __len__(self) -> int:
        return len(self._node_of)

    def check_invariants(self) -> None:
        count = 0
        for node, pods in self._by_node.items():
            assert pods, f"empty nomination bucket for {node}"
            for key in pods:
                assert self._node_of.get(key) == node, f"{key} nominated to two nodes"
                count += 1
        assert count == len(self._node_of)
