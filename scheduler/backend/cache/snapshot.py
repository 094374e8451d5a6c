"""Snapshot: the consistent, read-only view of the cluster one scheduling cycle works on.

The cache fills it incrementally (``Cache.update_snapshot``): only NodeInfos whose generation
moved since the last update are re-cloned, so a cycle costs O(changed nodes), not O(cluster).
Plugins read it; nothing writes to it during a cycle except the assume of the cycle's own pod
(applied through the cache, then seen by the next update).
"""

from __future__ import annotations

from scheduler.types import NodeInfo

__all__ = ["Snapshot"]


class Snapshot:
    __slots__ = (
        "generation",
        "have_pods_with_affinity",
        "have_pods_with_required_anti_affinity",
        "node_info_list",
        "node_info_map",
        "used_pvc",
    )

    def __init__(self) -> None:
        self.node_info_map: dict[str, NodeInfo] = {}
        self.node_info_list: list[NodeInfo] = []
        self.have_pods_with_affinity: list[NodeInfo] = []
        self.have_pods_with_required_anti_affinity: list[NodeInfo] = []
        self.generation = 0
        self.used_pvc: set[str] = set()

    @classmethod
    def from_node_infos(cls, infos: list[NodeInfo]) -> Snapshot:
        """A snapshot over the given NodeInfos (used by tests and dry runs); NodeInfos
        without a node are left out, as in a snapshot the cache fills."""
        s = cls()
        for ni in infos:
            if ni.node is not None:
                s.node_info_map[ni.name] = ni
        s.rebuild_lists()
        return s

    def rebuild_lists(self) -> None:
        self.node_info_list = [ni for ni in self.node_info_map.values() if ni.node is not None]
        self.have_pods_with_affinity = [ni for ni in self.node_info_list if ni.pods_with_affinity]
        self.have_pods_with_required_anti_affinity = [
            ni for ni in self.node_info_list if ni.pods_with_required_anti_affinity
        ]

    def get(self, name: str) -> NodeInfo | None:
        return self.node_info_map.get(name)

    def num_nodes(self) -> int:
        return len(self.node_info_list)
