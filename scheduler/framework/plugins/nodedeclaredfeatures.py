"""NodeDeclaredFeatures: a pod that needs a node feature fits only nodes that declare it.

Upstream's plugin (GA and locked on in v1.37, in the default profile after every other
plugin): the features a pod needs are inferred from its spec (``PodInfo.required_features``:
a RestartAllContainers restart rule, bindMountOptions on a volume mount, hostNetwork with
hostUsers false), a node lists the ones it has in ``status.declaredFeatures`` (the kubelet
fills it in), and a node that lacks one is rejected as unresolvable. A pod that needs
nothing skips the plugin, which is every pod that uses none of those fields."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from scheduler.backend.cache.snapshot import BoolArray, Snapshot
from scheduler.framework import signers
from scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    CycleState,
    EventRegistration,
    PreFilterResult,
    QueueingHint,
    SignFragment,
    Status,
)
from scheduler.framework.plugins import names
from scheduler.types import NodeInfo, NodeRecord, PodInfo

ERR_REASON = "node(s) didn't match Pod's required features"


def _declares(node_info: NodeInfo, needed: frozenset[str]) -> bool:
    node = node_info.node
    return node is not None and needed <= node.declared_features


class NodeDeclaredFeatures:
    name = names.NODE_DECLARED_FEATURES

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filtering reads the node features the pod needs."""
        return [SignFragment(signers.FEATURES, tuple(sorted(pod.required_features)))], SUCCESS

    node_only_filter = True  # Filter reads the pod and the node record only

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.required_features:
            return None, SKIP
        return None, SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        if not pod.required_features or _declares(node_info, pod.required_features):
            return SUCCESS
        return Status.unresolvable(ERR_REASON, plugin=self.name)

    def filter_batch(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> BoolArray:
        needed = pod.required_features
        nodes = snapshot.node_info_list
        if not needed:
            return np.ones(len(nodes), dtype=np.bool_)
        fits = (_declares(ni, needed) for ni in nodes)
        return np.fromiter(fits, dtype=np.bool_, count=len(nodes))

    def events_to_register(self) -> Iterable[EventRegistration]:
        def node_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            # Upstream: Node Add, or an update whose declared features changed.
            if not isinstance(new, NodeRecord):
                return QueueingHint.SKIP
            if isinstance(old, NodeRecord) and old.declared_features == new.declared_features:
                return QueueingHint.SKIP
            return QueueingHint.QUEUE

        return [
            EventRegistration(ClusterEvent("Node", "Add"), node_changed),
            EventRegistration(ClusterEvent("Node", "Update"), node_changed),
        ]
