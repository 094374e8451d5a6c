"""ImageLocality: prefer nodes that already have the pod's images, weighted by image size
and by how widely the image is spread (to avoid piling pods onto one node).

The spread comes from the snapshot's per-image node counts (upstream's
``ImageStateSummary.NumNodes``), so PreScore costs O(images of the pod), not O(nodes); in
bulk, a node that reports no images scores 0."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler.backend.cache.snapshot import Int64Array, IntpArray, Snapshot
from scheduler.framework import signers
from scheduler.framework.interface import MAX_NODE_SCORE, SUCCESS, CycleState, SignFragment, Status
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

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Scoring reads the pod's images, as their canonical names."""
        return [
            SignFragment(
                signers.IMAGE_NAMES, tuple(sorted({normalized_image_name(i) for i in pod.images}))
            )
        ], SUCCESS

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        on_nodes = snapshot.image_num_nodes
        spread = {
            img: on_nodes.get(img, 0) for img in {normalized_image_name(i) for i in pod.images}
        }
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

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntpArray
    ) -> Int64Array:
        out = np.zeros(len(rows), dtype=np.int64)
        for k in np.flatnonzero(snapshot.arrays().has_images[rows]).tolist():
            out[k] = self.score(state, pod, snapshot.node_info_list[int(rows[k])])
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        return None

    def normalize_scores_batch(
        self, state: CycleState, pod: PodInfo, scores: Int64Array
    ) -> Int64Array:
        return scores
