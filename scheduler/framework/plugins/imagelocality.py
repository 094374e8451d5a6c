"""ImageLocality: prefer nodes that already have the pod's images, weighted by image size
and by how widely the image is spread (to avoid piling pods onto one node)."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.framework.interface import MAX_NODE_SCORE, SUCCESS, CycleState, Status
from scheduler.framework.plugins import names
from scheduler.types import NodeInfo, PodInfo

_MB = 1024 * 1024
MIN_THRESHOLD = 23 * _MB
MAX_CONTAINER_THRESHOLD = 1000 * _MB
_STATE = "PreScore" + names.IMAGE_LOCALITY


def normalized_image_name(name: str) -> str:
    """Add ``:latest`` to an image without a tag or digest, as upstream does."""
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in name:
        return name + ":latest"
    return name


class ImageLocality:
    name = names.IMAGE_LOCALITY

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        wanted = {normalized_image_name(i) for i in pod.images}
        spread: dict[str, int] = dict.fromkeys(wanted, 0)
        if wanted:
            for ni in snapshot.node_info_list:
                if ni.node is None or not ni.node.images:
                    continue
                for img in wanted:
                    if img in ni.node.images:
                        spread[img] += 1
        state.write(_STATE, (spread, snapshot.num_nodes()))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        node = node_info.node
        data = state.read(_STATE)
        if node is None or not node.images or data is None:
            return 0
        spread, total_nodes = data
        total = 0
        for img in pod.images:
            n = normalized_image_name(img)
            size = node.images.get(n)
            if size is not None and total_nodes:
                total += int(size * (spread.get(n, 0) / total_nodes))
        count = len(pod.images)
        if count == 0:
            return 0
        hi = MAX_CONTAINER_THRESHOLD * count
        total = min(max(total, MIN_THRESHOLD), hi)
        return MAX_NODE_SCORE * (total - MIN_THRESHOLD) // (hi - MIN_THRESHOLD)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        return None
