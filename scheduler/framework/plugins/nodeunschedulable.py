"""NodeUnschedulable: reject nodes with spec.unschedulable unless the pod tolerates the
``node.kubernetes.io/unschedulable:NoSchedule`` taint."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from scheduler.backend.cache.snapshot import BoolArray, Snapshot
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
from scheduler.framework.plugins.helper import PassingPreFilter
from scheduler.types import NodeInfo, NodeRecord, PodInfo, Taint

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def _tolerated(pod: PodInfo) -> bool:
    return any(t.tolerates(_TAINT) for t in pod.tolerations)


class NodeUnschedulable(PassingPreFilter):
    name = names.NODE_UNSCHEDULABLE

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filtering reads the pod's tolerations."""
        return [SignFragment(signers.TOLERATIONS, signers.tolerations(pod))], SUCCESS

    node_only_filter = True  # Filter reads the pod and the node record only

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        node = node_info.node
        if node is None or not node.unschedulable or _tolerated(pod):
            return SUCCESS
        return Status.unresolvable(ERR_REASON_UNSCHEDULABLE, plugin=self.name)

    def filter_batch(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> BoolArray:
        arrays = snapshot.arrays()
        if _tolerated(pod):
            return np.ones(len(arrays.unschedulable), dtype=np.bool_)
        mask: BoolArray = ~arrays.unschedulable
        return mask

    def events_to_register(self) -> Iterable[EventRegistration]:
        def hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            # Upstream: a schedulable node was added, or a node became schedulable.
            if not isinstance(new, NodeRecord) or new.unschedulable:
                return QueueingHint.SKIP
            if isinstance(old, NodeRecord) and not old.unschedulable:
                return QueueingHint.SKIP  # it was schedulable before: not this plugin's change
            return QueueingHint.QUEUE

        return [
            EventRegistration(ClusterEvent("Node", "Add"), hint),
            EventRegistration(ClusterEvent("Node", "Update"), hint),
        ]
