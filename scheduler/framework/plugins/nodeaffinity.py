"""NodeAffinity: spec.nodeSelector and required node affinity as a filter (both must hold);
preferred node affinity as a score (sum of the weights of matching terms, normalised).
PreFilter skips the filter of a pod with neither (upstream); a pod with a nodeSelector and
no required affinity is filtered in bulk from the snapshot's label masks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from scheduler.backend.cache.snapshot import BoolArray, Snapshot
from scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    CycleState,
    EventRegistration,
    PreFilterResult,
    QueueingHint,
    Status,
)
from scheduler.framework.plugins import names
from scheduler.framework.plugins.helper import default_normalize_score, match_node_selector_terms
from scheduler.types import NodeInfo, NodeRecord, NodeSelectorTerm, PodInfo

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"


def pod_matches_node(pod: PodInfo, node: NodeRecord) -> bool:
    """nodeSelector AND required node affinity (upstream's RequiredNodeAffinity.Match)."""
    labels = node.labels
    for k, v in pod.node_selector.items():
        if labels.get(k) != v:
            return False
    terms = pod.required_node_affinity
    if terms is None:
        return True
    return match_node_selector_terms(terms, labels, node.name)


ERR_REASON_CONFLICT = "pod affinity terms conflict"


def node_names_from_match_fields(terms: Sequence[NodeSelectorTerm]) -> frozenset[str] | None:
    """As upstream's NodeAffinity PreFilter: when every required term names nodes with a
    ``metadata.name In [...]`` match field, only those nodes can fit (the fields of one term
    intersect, the terms unite); None when some term does not restrict names (or there are
    no terms), an empty set when each term's names conflict."""
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for r in term.match_fields:
            if r.key == "metadata.name" and r.operator == "In":
                values = set(r.values)
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None  # terms are ORed: this one allows any node name
        names |= term_names
    return frozenset(names)


class NodeAffinity:
    name = names.NODE_AFFINITY
    node_only_filter = True  # Filter reads the pod and the node record only

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.node_selector and pod.required_node_affinity is None:
            return None, SKIP  # the filter has nothing to check for this pod
        allowed = node_names_from_match_fields(pod.required_node_affinity or ())
        if allowed is None:
            return None, SUCCESS
        if not allowed:
            return None, Status.unresolvable(ERR_REASON_CONFLICT, plugin=self.name)
        return PreFilterResult(allowed), SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        node = node_info.node
        if node is None:
            return Status.unresolvable("node not found", plugin=self.name)
        if not pod.node_selector and pod.required_node_affinity is None:
            return SUCCESS
        if pod_matches_node(pod, node):
            return SUCCESS
        return Status.unresolvable(ERR_REASON_POD, plugin=self.name)

    def filter_batch(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> BoolArray | None:
        if pod.required_node_affinity is not None:
            return None  # terms: node by node
        mask = np.ones(snapshot.num_nodes(), dtype=np.bool_)
        for key, value in pod.node_selector.items():
            mask &= snapshot.label_mask(key, value)
        return mask

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        if not pod.preferred_node_affinity:
            state.skip_score_plugins.add(self.name)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        node = node_info.node
        if node is None:
            return 0
        total = 0
        for weight, term in pod.preferred_node_affinity:
            if weight and match_node_selector_terms([term], node.labels, node.name):
                total += weight
        return total

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        default_normalize_score(scores, reverse=False)

    def events_to_register(self) -> Iterable[EventRegistration]:
        def hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            if isinstance(new, NodeRecord) and pod_matches_node(pod, new):
                if isinstance(old, NodeRecord) and pod_matches_node(pod, old):
                    return QueueingHint.SKIP  # it matched before: not this plugin's change
                return QueueingHint.QUEUE
            return QueueingHint.SKIP

        return [
            EventRegistration(ClusterEvent("Node", "Add"), hint),
            EventRegistration(ClusterEvent("Node", "Update"), hint),
        ]
