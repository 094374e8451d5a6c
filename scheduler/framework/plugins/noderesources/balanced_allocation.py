"""NodeResourcesBalancedAllocation: prefer nodes whose resource fractions stay balanced
after placing the pod; scored by the change in balance (upstream 1.37: 50..100, ~75 when
the pod changes nothing)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.framework.interface import MAX_NODE_SCORE, SUCCESS, CycleState, Status
from scheduler.framework.plugins import names
from scheduler.framework.plugins.noderesources.fit import (
    DEFAULT_RESOURCES,
    ResourceSpec,
    pod_amount,
    resource_vectors,
)
from scheduler.types import NodeInfo, PodInfo


def balanced_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    fractions = [min(1.0, r / a) for r, a in zip(requested, allocatable, strict=True) if a != 0]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


class BalancedAllocation:
    name = names.NODE_RESOURCES_BALANCED_ALLOCATION

    def __init__(self, resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES) -> None:
        self.resources = tuple(resources)

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        # A best-effort pod (no request for any scored resource) is skipped, as upstream
        # (kubernetes#129138): it would otherwise pile onto one node.
        if not any(pod_amount(pod, r.name, non_zero=False) for r in self.resources):
            state.skip_score_plugins.add(self.name)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        # Upstream scores balance on the real requests (useRequested), not the non-zero ones.
        requested, allocated, allocatable = resource_vectors(
            pod, node_info, self.resources, non_zero=False
        )
        with_pod = balanced_score(requested, allocatable)
        without = balanced_score(allocated, allocatable)
        half = MAX_NODE_SCORE // 2
        return half + (half + with_pod - without) // 2

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        return None
