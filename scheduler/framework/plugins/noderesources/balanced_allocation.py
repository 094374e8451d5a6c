"""NodeResourcesBalancedAllocation: prefer nodes whose resource fractions stay balanced
after placing the pod; scored by the change in balance (upstream 1.37: 50..100, ~75 when
the pod changes nothing).

``score_batch`` does the same float64 arithmetic, operation for operation, on numpy columns
(quotients of integers below 2**53 are exact in both), so its scores equal ``score``'s."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scheduler.backend.cache.snapshot import Int64Array, IntpArray, Snapshot
from scheduler.framework.interface import MAX_NODE_SCORE, SUCCESS, CycleState, SignFragment, Status
from scheduler.framework.plugins import names
from scheduler.framework.plugins.noderesources.fit import (
    DEFAULT_RESOURCES,
    ExtendedResourceClasses,
    ResourceSpec,
    batch_columns,
    pod_amount,
    resource_vectors,
    sign_requests,
)
from scheduler.types import NodeInfo, PodInfo

FloatArray = npt.NDArray[np.float64]


def balanced_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """Upstream's ``balancedResourceScore``: 100 x (1 - the population standard deviation of
    the requested/allocatable fractions, each capped at 1), truncated; resources the node
    has none of are left out. Summed and squared in order as Go does (not ``sum``/``**``,
    whose rounding may differ by an ulp)."""
    fractions = [min(1.0, r / a) for r, a in zip(requested, allocatable, strict=True) if a != 0]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        total = 0.0
        for f in fractions:
            total = total + f
        mean = total / len(fractions)
        squares = 0.0
        for f in fractions:
            d = f - mean
            squares = squares + d * d
        std = math.sqrt(squares / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def _balanced_score_columns(fractions: list[FloatArray], n: int) -> Int64Array:
    """``balanced_score`` for n nodes whose every resource has a non-zero allocatable."""
    std: FloatArray = np.zeros(n, dtype=np.float64)
    if len(fractions) == 2:
        std = np.abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        total: FloatArray = np.zeros(n, dtype=np.float64)
        for f in fractions:
            total = total + f
        mean = total / len(fractions)
        squares: FloatArray = np.zeros(n, dtype=np.float64)
        for f in fractions:
            d = f - mean
            squares = squares + d * d
        std = np.sqrt(squares / len(fractions))
    out: Int64Array = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)  # truncates, as int()
    return out


class BalancedAllocation:
    name = names.NODE_RESOURCES_BALANCED_ALLOCATION

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Scoring reads the pod's requests; a pod whose extended resources devices back
        is not signable."""
        return sign_requests(pod, self.dra)

    def __init__(
        self,
        resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES,
        dra: ExtendedResourceClasses | None = None,
    ) -> None:
        self.resources = tuple(resources)
        self.dra = dra  # extended resources backed by devices

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
            pod, node_info, self.resources, non_zero=False, dra=self.dra
        )
        with_pod = balanced_score(requested, allocatable)
        without = balanced_score(allocated, allocatable)
        half = MAX_NODE_SCORE // 2
        return half + (half + with_pod - without) // 2

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntpArray
    ) -> Int64Array | None:
        arrays = snapshot.arrays()
        cols = batch_columns(pod, arrays, rows, self.resources, non_zero=False)
        if cols is None:
            return None
        n = len(rows)
        # Nodes lacking a resource drop its fraction (fewer terms): scored one by one. When
        # every node has some of every resource (the rule), no mask is needed.
        some_of_each = all(n and int(cap.min()) > 0 for _, cap, _, _ in cols)
        whole = arrays.exact[rows]
        if not some_of_each:
            whole = whole.copy()  # never write through to the snapshot's column
            for _, cap, _, _ in cols:
                whole &= cap != 0
        with_pod: list[FloatArray] = []
        without: list[FloatArray] = []
        for _, cap, used, want in cols:
            safe_cap = cap if some_of_each else np.where(cap != 0, cap, 1)
            with_pod.append(np.minimum(1.0, (used + want) / safe_cap))
            without.append(np.minimum(1.0, used / safe_cap))
        half = MAX_NODE_SCORE // 2
        delta = _balanced_score_columns(with_pod, n) - _balanced_score_columns(without, n)
        out: Int64Array = (half + (half + delta) // 2).astype(np.int64)
        for k in np.flatnonzero(~whole).tolist():
            out[k] = self.score(state, pod, snapshot.node_info_list[int(rows[k])])
        return out

    def normalize_scores_batch(
        self, state: CycleState, pod: PodInfo, scores: Int64Array
    ) -> Int64Array:
        return scores

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        return None
