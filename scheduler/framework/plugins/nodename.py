"""NodeName: a pod with spec.nodeName fits only that node (a pod of ours rarely has it, but
upstream keeps the plugin and so do we)."""

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
from scheduler.types import NodeInfo, NodeRecord, PodInfo

ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(PassingPreFilter):
    name = names.NODE_NAME

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filtering reads spec.nodeName."""
        return [SignFragment(signers.NODE_NAME, pod.node_name)], SUCCESS

    node_only_filter = True  # Filter reads the pod and the node record only

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        if not pod.node_name or pod.node_name == node_info.name:
            return SUCCESS
        return Status.unresolvable(ERR_REASON, plugin=self.name)

    def filter_batch(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> BoolArray:
        n = snapshot.num_nodes()
        if not pod.node_name:
            return np.ones(n, dtype=np.bool_)
        mask = np.zeros(n, dtype=np.bool_)
        i = snapshot.position(pod.node_name)
        if i is not None:
            mask[i] = True
        return mask

    def events_to_register(self) -> Iterable[EventRegistration]:
        def hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            ok = isinstance(new, NodeRecord) and new.name == pod.node_name
            return QueueingHint.QUEUE if ok else QueueingHint.SKIP

        return [EventRegistration(ClusterEvent("Node", "Add"), hint)]
