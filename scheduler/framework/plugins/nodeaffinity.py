"""NodeAffinity: spec.nodeSelector and required node affinity as a filter (both must hold);
preferred node affinity as a score (sum of the weights of matching terms, normalised).
PreFilter skips the filter of a pod with neither (upstream); a pod with a nodeSelector and
no required affinity is filtered in bulk from the snapshot's label masks.

The profile's ``addedAffinity`` (NodeAffinityArgs) applies to every pod on top of its own:
its required terms are checked first (upstream's "scheduler-enforced node affinity"), its
preferred terms add to every pod's score. Which nodes match the added terms does not depend
on the pod, so the bulk filter keeps that mask per snapshot generation."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
from scheduler.framework.plugins.helper import default_normalize_score, match_node_selector_terms
from scheduler.types import NodeInfo, NodeRecord, NodeSelectorTerm, PodInfo

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"


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

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filtering and scoring read the pod's node affinity and node selector (the
        profile's added affinity is the same for every pod)."""
        return [
            SignFragment(signers.NODE_AFFINITY, signers.node_affinity(pod)),
            SignFragment(signers.NODE_SELECTOR, pod.node_selector),
        ], SUCCESS

    node_only_filter = True  # Filter reads the pod and the node record only

    def __init__(
        self,
        *,
        added_required: Sequence[NodeSelectorTerm] | None = None,
        added_preferred: Sequence[tuple[int, NodeSelectorTerm]] = (),
    ) -> None:
        """``added_required``: the profile's addedAffinity required terms (None: not set,
        every node matches); ``added_preferred``: its preferred (weight, term) pairs."""
        self.added_required = None if added_required is None else tuple(added_required)
        self.added_preferred = tuple((w, t) for w, t in added_preferred if w)

    def _added_matches(self, node: NodeRecord) -> bool:
        terms = self.added_required
        return terms is None or match_node_selector_terms(terms, node.labels, node.name)

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if (
            not pod.node_selector
            and pod.required_node_affinity is None
            and self.added_required is None
        ):
            return None, SKIP  # the filter has nothing to check for this pod
        # Only the pod's own terms name nodes (upstream).
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
        if self.added_required is not None and not self._added_matches(node):
            return Status.unresolvable(ERR_REASON_ENFORCED, plugin=self.name)
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
        if self.added_required is not None:
            mask &= self._added_mask_of(snapshot)
        return mask

    def _added_mask_of(self, snapshot: Snapshot) -> BoolArray:
        """Where the added required terms match, by the snapshot's node order (the same
        for every pod: the snapshot keeps it current as node records change)."""
        return snapshot.node_mask(self, self._added_matches)

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        if not pod.preferred_node_affinity and not self.added_preferred:
            state.skip_score_plugins.add(self.name)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        node = node_info.node
        if node is None:
            return 0
        total = 0
        for preferred in (self.added_preferred, pod.preferred_node_affinity):
            for weight, term in preferred:
                if weight and match_node_selector_terms([term], node.labels, node.name):
                    total += weight
        return total

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        default_normalize_score(scores, reverse=False)

    def events_to_register(self) -> Iterable[EventRegistration]:
        def hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            if not isinstance(new, NodeRecord) or not self._added_matches(new):
                return QueueingHint.SKIP  # a node outside the profile's added affinity
            if not pod_matches_node(pod, new):
                return QueueingHint.SKIP
            if (
                isinstance(old, NodeRecord)
                and pod_matches_node(pod, old)
                and self._added_matches(old)
            ):
                return QueueingHint.SKIP  # it matched before: not this plugin's change
            # Unlike upstream, a node that newly matches the added affinity counts too
            # (upstream's "matched before" reads the pod's own terms only, and leaves such
            # a pod to the unschedulable pods' periodic flush).
            return QueueingHint.QUEUE

        return [
            EventRegistration(ClusterEvent("Node", "Add"), hint),
            EventRegistration(ClusterEvent("Node", "Update"), hint),
        ]
