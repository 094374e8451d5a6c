"""TaintToleration: filter on NoSchedule/NoExecute taints; score by PreferNoSchedule taints
the pod does not tolerate (fewer is better).

In bulk (``filter_batch``/``score_batch``): a node without NoSchedule/NoExecute taints
passes, and one without PreferNoSchedule taints scores 0; only tainted nodes are looked at
one by one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from scheduler.backend.cache.snapshot import BoolArray, Int64Array, IntpArray, Snapshot
from scheduler.framework import signers
from scheduler.framework.interface import (
    SUCCESS,
    ClusterEvent,
    CycleState,
    EventRegistration,
    QueueingHint,
    SignFragment,
    Status,
)
from scheduler.framework.plugins import names
from scheduler.framework.plugins.helper import (
    PassingPreFilter,
    default_normalize_score,
    default_normalize_score_batch,
)
from scheduler.types import NodeInfo, NodeRecord, PodInfo, Taint, Toleration

ERR_REASON_NOT_MATCH = "node(s) had untolerated taint(s)"
_STATE = "PreScore" + names.TAINT_TOLERATION


def find_untolerated_taint(
    taints: Sequence[Taint], tolerations: Sequence[Toleration], effects: tuple[str, ...]
) -> Taint | None:
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


class TaintToleration(PassingPreFilter):
    name = names.TAINT_TOLERATION

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filtering and scoring read the pod's tolerations."""
        return [SignFragment(signers.TOLERATIONS, signers.tolerations(pod))], SUCCESS

    node_only_filter = True  # Filter reads the pod and the node record only

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        node = node_info.node
        if node is None or not node.taints:
            return SUCCESS
        if find_untolerated_taint(node.taints, pod.tolerations, ("NoSchedule", "NoExecute")):
            return Status.unresolvable(ERR_REASON_NOT_MATCH, plugin=self.name)
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> BoolArray:
        mask: BoolArray = ~snapshot.arrays().hard_taints
        return mask

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        prefer = tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))
        state.write(_STATE, prefer)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        node = node_info.node
        if node is None or not node.taints:
            return 0
        prefer: tuple[Toleration, ...] = state.read(_STATE) or ()
        return sum(
            1
            for taint in node.taints
            if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in prefer)
        )

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntpArray
    ) -> Int64Array:
        out = np.zeros(len(rows), dtype=np.int64)
        for k in np.flatnonzero(snapshot.arrays().prefer_taints[rows]).tolist():
            out[k] = self.score(state, pod, snapshot.node_info_list[int(rows[k])])
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        default_normalize_score(scores, reverse=True)

    def normalize_scores_batch(
        self, state: CycleState, pod: PodInfo, scores: Int64Array
    ) -> Int64Array:
        return default_normalize_score_batch(scores, reverse=True)

    def events_to_register(self) -> Iterable[EventRegistration]:
        effects = ("NoSchedule", "NoExecute")

        def hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            # Upstream: only a node whose taints went from rejecting the pod to tolerated.
            if not isinstance(new, NodeRecord):
                return QueueingHint.SKIP
            if find_untolerated_taint(new.taints, pod.tolerations, effects) is not None:
                return QueueingHint.SKIP
            if isinstance(old, NodeRecord) and (
                find_untolerated_taint(old.taints, pod.tolerations, effects) is None
            ):
                return QueueingHint.SKIP  # it was tolerated before: not this plugin's change
            return QueueingHint.QUEUE

        return [
            EventRegistration(ClusterEvent("Node", "Add"), hint),
            EventRegistration(ClusterEvent("Node", "Update"), hint),
        ]
