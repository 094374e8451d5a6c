"""InterPodAffinity: required pod (anti-)affinity as a filter, preferred as a score.

What it owns. Three required checks, each precomputed once per cycle in ``pre_filter`` as
counts keyed by a topology pair ``(topology key, node label value)``, so that ``filter``
costs a few dict lookups per node:

- ``existing_anti``: existing pods whose *required anti-affinity* terms match the incoming
  pod, counted in the domain of the node they run on. A node in such a domain is rejected
  ("node(s) didn't satisfy existing pods anti-affinity rules", UNSCHEDULABLE).
- ``affinity``: existing pods matching *all* of the incoming pod's required affinity terms,
  counted once per term in that term's domain. A node must have every term's topology key
  and a positive count for each ("node(s) didn't match pod affinity rules",
  UNSCHEDULABLE_AND_UNRESOLVABLE: preemption removes pods and so cannot create a match).
  The one exception, as upstream: when no pod anywhere matches and the pod matches its own
  terms, it may be the first of its group.
- ``anti``: existing pods matching any of the incoming pod's required anti-affinity terms
  ("node(s) didn't match pod anti-affinity rules", UNSCHEDULABLE).

The counts live in a ``_PreFilterState`` stored in the CycleState. The nominated-pods pass
and preemption dry runs change them through ``add_pod``/``remove_pod`` (one pod at a time,
in O(terms)); ``clone()`` copies the three dicts so each dry run owns its copy.

The score (``pre_score`` -> ``score`` -> ``normalize_scores``) sums, per topology pair,
the weights of the incoming pod's preferred terms matched by existing pods (anti-affinity
subtracts), plus the existing pods' preferred terms matched by the incoming pod, plus
``hard_pod_affinity_weight`` for each existing pod's *required* affinity term the incoming
pod matches; each node then gets the sum for the pairs it carries, min-max scaled to 0..100.

Namespaces. A term selects pods whose namespace is in ``term.namespaces`` (the parser has
already defaulted it to the owner's namespace) or whose namespace's labels match
``term.namespace_selector`` (an empty selector matches every namespace). Namespace labels
are not in the cluster model yet: they come from the ``namespace_labels`` callable (None:
every namespace has no labels), looked up at most once per namespace per cycle.

Upstream's alpha ``InterPodAffinityHostnameFastPath`` (off by default in v1.37) is not
mirrored; this is the default-gate algorithm.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.framework import signers
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
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
from scheduler.types import (
    NodeInfo,
    NodeRecord,
    PodAffinityTerm,
    PodInfo,
    WeightedPodAffinityTerm,
)

__all__ = [
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "InterPodAffinity",
    "NamespaceLabels",
    "term_matches",
]

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

_PRE_FILTER_KEY = "PreFilter" + names.INTER_POD_AFFINITY
_PRE_SCORE_KEY = "PreScore" + names.INTER_POD_AFFINITY

_AFFINITY_NOT_MATCH = Status.unresolvable(
    ERR_REASON_AFFINITY_RULES_NOT_MATCH, plugin=names.INTER_POD_AFFINITY
)
_ANTI_AFFINITY_NOT_MATCH = Status.unschedulable(
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=names.INTER_POD_AFFINITY
)
_EXISTING_ANTI_AFFINITY_NOT_MATCH = Status.unschedulable(
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=names.INTER_POD_AFFINITY
)

NamespaceLabels = Callable[[str], Mapping[str, str]]
TopologyPair = tuple[str, str]
_Counts = dict[TopologyPair, int]

_NO_LABELS: Mapping[str, str] = {}


class _CycleNamespaceLabels:
    """Memoises the namespace-label lookup for one cycle (a namespace's labels are read at
    most once, and every check in the cycle sees the same labels)."""

    __slots__ = ("_lookup", "_seen")

    def __init__(self, lookup: NamespaceLabels | None) -> None:
        self._lookup = lookup
        self._seen: dict[str, Mapping[str, str]] = {}

    def __call__(self, namespace: str) -> Mapping[str, str]:
        if self._lookup is None:
            return _NO_LABELS
        got = self._seen.get(namespace)
        if got is None:
            got = self._seen[namespace] = self._lookup(namespace)
        return got


def term_matches(term: PodAffinityTerm, pod: PodInfo, ns_labels: NamespaceLabels) -> bool:
    """Upstream ``AffinityTerm.Matches``: the pod's namespace is selected (by name or by the
    namespace selector) and its labels match the term's label selector (None: nothing)."""
    if pod.namespace not in term.namespaces:
        ns_selector = term.namespace_selector
        if ns_selector is None:
            return False
        if not ns_selector.is_empty() and not ns_selector.matches(ns_labels(pod.namespace)):
            return False
    selector = term.label_selector
    return selector is not None and selector.matches(pod.labels)


def _matches_all(
    terms: Sequence[PodAffinityTerm], pod: PodInfo, ns_labels: NamespaceLabels
) -> bool:
    """True if there is at least one term and the pod matches every one (affinity: a single
    pod must satisfy all terms at once)."""
    return bool(terms) and all(term_matches(t, pod, ns_labels) for t in terms)


def _matches_any(
    terms: Sequence[PodAffinityTerm], pod: PodInfo, ns_labels: NamespaceLabels
) -> bool:
    return any(term_matches(t, pod, ns_labels) for t in terms)


def _bump(counts: _Counts, labels: Mapping[str, str], key: str, delta: int) -> None:
    """Add ``delta`` to the pair (key, node's value for key); a node without the key is in
    no domain of that key. Entries that reach zero are dropped."""
    value = labels.get(key)
    if value is None:
        return
    pair = (key, value)
    left = counts.get(pair, 0) + delta
    if left:
        counts[pair] = left
    else:
        counts.pop(pair, None)


# --------------------------------------------------------------------------- filter state


class _PreFilterState:
    """Counts computed in PreFilter, updated by add_pod/remove_pod, read by Filter."""

    __slots__ = ("affinity", "anti", "existing_anti", "ns_labels", "pod", "self_match")

    def __init__(
        self,
        pod: PodInfo,
        ns_labels: NamespaceLabels,
        *,
        existing_anti: _Counts,
        affinity: _Counts,
        anti: _Counts,
    ) -> None:
        self.pod = pod
        self.ns_labels = ns_labels
        self.existing_anti = existing_anti
        self.affinity = affinity
        self.anti = anti
        # May the pod be the first of a group with affinity to itself? (see filter)
        self.self_match = _matches_all(pod.required_affinity, pod, ns_labels)

    def clone(self) -> _PreFilterState:
        """Copy the counts (O(pairs)); the pod and the label lookup are shared."""
        c = _PreFilterState.__new__(_PreFilterState)
        c.pod = self.pod
        c.ns_labels = self.ns_labels
        c.self_match = self.self_match
        c.existing_anti = dict(self.existing_anti)
        c.affinity = dict(self.affinity)
        c.anti = dict(self.anti)
        return c

    def update_with_pod(self, other: PodInfo, node: NodeRecord, delta: int) -> None:
        """Account for ``other`` appearing on (+1) or leaving (-1) ``node``. O(terms)."""
        labels = node.labels
        pod = self.pod
        ns_labels = self.ns_labels
        for t in other.required_anti_affinity:
            if term_matches(t, pod, ns_labels):
                _bump(self.existing_anti, labels, t.topology_key, delta)
        if _matches_all(pod.required_affinity, other, ns_labels):
            for t in pod.required_affinity:
                _bump(self.affinity, labels, t.topology_key, delta)
        for t in pod.required_anti_affinity:
            if term_matches(t, other, ns_labels):
                _bump(self.anti, labels, t.topology_key, delta)


def _existing_anti_affinity_counts(
    pod: PodInfo, snapshot: Snapshot, ns_labels: NamespaceLabels
) -> _Counts:
    """Existing pods' required anti-affinity terms that the incoming pod matches. Only the
    nodes hosting such pods are visited: O(pods with required anti-affinity · terms)."""
    counts: _Counts = {}
    for ni in snapshot.have_pods_with_required_anti_affinity:
        node = ni.node
        if node is None:
            continue
        labels = node.labels
        for existing in ni.pods.values():
            for t in existing.required_anti_affinity:
                if term_matches(t, pod, ns_labels):
                    _bump(counts, labels, t.topology_key, 1)
    return counts


def _incoming_counts(
    pod: PodInfo, snapshot: Snapshot, ns_labels: NamespaceLabels
) -> tuple[_Counts, _Counts]:
    """Existing pods matching the incoming pod's required affinity (all terms) and
    anti-affinity (any term). O(all pods · terms); skipped when the pod has no terms."""
    affinity: _Counts = {}
    anti: _Counts = {}
    aff_terms = pod.required_affinity
    anti_terms = pod.required_anti_affinity
    if not aff_terms and not anti_terms:
        return affinity, anti
    for ni in snapshot.node_info_list:
        node = ni.node
        if node is None:
            continue
        labels = node.labels
        for existing in ni.pods.values():
            if aff_terms and _matches_all(aff_terms, existing, ns_labels):
                for t in aff_terms:
                    _bump(affinity, labels, t.topology_key, 1)
            for t in anti_terms:
                if term_matches(t, existing, ns_labels):
                    _bump(anti, labels, t.topology_key, 1)
    return affinity, anti


# --------------------------------------------------------------------------- score state


class _PreScoreState:
    """Per topology key, per value: the summed weight. Read-only after PreScore."""

    __slots__ = ("topology_score",)

    def __init__(self, topology_score: dict[str, dict[str, int]]) -> None:
        self.topology_score = topology_score

    def clone(self) -> _PreScoreState:
        return self  # never mutated after PreScore


def _add_weight(
    scores: dict[str, dict[str, int]], labels: Mapping[str, str], key: str, weight: int
) -> None:
    value = labels.get(key)
    if value is None:
        return
    per_value = scores.get(key)
    if per_value is None:
        per_value = scores[key] = {}
    per_value[value] = per_value.get(value, 0) + weight


def _add_weighted_terms(
    scores: dict[str, dict[str, int]],
    terms: Sequence[WeightedPodAffinityTerm],
    target: PodInfo,
    labels: Mapping[str, str],
    ns_labels: NamespaceLabels,
    sign: int,
) -> None:
    for wt in terms:
        if term_matches(wt.term, target, ns_labels):
            _add_weight(scores, labels, wt.term.topology_key, wt.weight * sign)


# --------------------------------------------------------------------------- plugin


class InterPodAffinity:
    name = names.INTER_POD_AFFINITY

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """A pod with affinity terms of its own depends on where other pods are: not
        signable. Else its labels, which other pods' terms may select (unless only the
        terms of pods with affinity count, ``ignorePreferredTermsOfExistingPods``)."""
        if pod.has_affinity:
            return [], Status.unschedulable("pods with InterPodAffinity are not signable")
        if self.ignore_preferred_terms_of_existing_pods:
            return [], SUCCESS
        return [SignFragment(signers.LABELS, pod.labels)], SUCCESS

    def __init__(
        self,
        *,
        hard_pod_affinity_weight: int = 1,
        ignore_preferred_terms_of_existing_pods: bool = False,
        namespace_labels: NamespaceLabels | None = None,
    ) -> None:
        if not 0 <= hard_pod_affinity_weight <= 100:
            raise ValueError(
                "InterPodAffinityArgs.hardPodAffinityWeight: must be in the range [0, 100], "
                f"got {hard_pod_affinity_weight}"
            )
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = ignore_preferred_terms_of_existing_pods
        self.namespace_labels = namespace_labels

    # ------------------------------------------------------------------ prefilter
    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        ns_labels = _CycleNamespaceLabels(self.namespace_labels)
        existing_anti = _existing_anti_affinity_counts(pod, snapshot, ns_labels)
        has_terms = bool(pod.required_affinity or pod.required_anti_affinity)
        if not existing_anti and not has_terms:
            return None, SKIP
        affinity, anti = _incoming_counts(pod, snapshot, ns_labels)
        state.write(
            _PRE_FILTER_KEY,
            _PreFilterState(
                pod, ns_labels, existing_anti=existing_anti, affinity=affinity, anti=anti
            ),
        )
        return None, SUCCESS

    def pre_filter_extensions(self) -> InterPodAffinity:
        return self

    def add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node_info: NodeInfo
    ) -> Status:
        return self._update(state, to_add, node_info, 1)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status:
        return self._update(state, to_remove, node_info, -1)

    def _update(self, state: CycleState, other: PodInfo, node_info: NodeInfo, delta: int) -> Status:
        s = state.read(_PRE_FILTER_KEY)
        if not isinstance(s, _PreFilterState):
            return Status.error(f"reading {_PRE_FILTER_KEY!r} from cycle state: not found")
        if node_info.node is not None:
            s.update_with_pod(other, node_info.node, delta)
        return SUCCESS

    # ------------------------------------------------------------------ filter
    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        s = state.read(_PRE_FILTER_KEY)
        if not isinstance(s, _PreFilterState):
            return Status.error(f"reading {_PRE_FILTER_KEY!r} from cycle state: not found")
        node = node_info.node
        if node is None:
            return Status.unresolvable("node not found", plugin=self.name)
        labels = node.labels

        aff_terms = pod.required_affinity
        if aff_terms:
            counts = s.affinity
            pods_exist = True
            for t in aff_terms:
                value = labels.get(t.topology_key)
                if value is None:
                    # Every term's topology key is required, even for a first pod.
                    return _AFFINITY_NOT_MATCH
                if counts.get((t.topology_key, value), 0) <= 0:
                    pods_exist = False
            # No matching pod in this node's domains: acceptable only if no pod matches
            # anywhere and the pod matches its own terms (first of a self-affine group).
            if not pods_exist and (counts or not s.self_match):
                return _AFFINITY_NOT_MATCH

        anti = s.anti
        if anti:
            for t in pod.required_anti_affinity:
                value = labels.get(t.topology_key)
                if value is not None and anti.get((t.topology_key, value), 0) > 0:
                    return _ANTI_AFFINITY_NOT_MATCH

        existing = s.existing_anti
        if existing:
            if len(existing) < len(labels):
                for (key, value), n in existing.items():
                    if n > 0 and labels.get(key) == value:
                        return _EXISTING_ANTI_AFFINITY_NOT_MATCH
            else:
                for pair in labels.items():
                    if existing.get(pair, 0) > 0:
                        return _EXISTING_ANTI_AFFINITY_NOT_MATCH
        return SUCCESS

    # ------------------------------------------------------------------ score
    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        has_preferred = bool(pod.preferred_affinity or pod.preferred_anti_affinity)
        if self.ignore_preferred_terms_of_existing_pods and not has_preferred:
            state.skip_score_plugins.add(self.name)
            return SKIP
        ns_labels = _CycleNamespaceLabels(self.namespace_labels)
        hard_weight = self.hard_pod_affinity_weight
        ignore_existing_preferred = self.ignore_preferred_terms_of_existing_pods
        scores: dict[str, dict[str, int]] = {}
        # Without preferred terms of its own, only pods with affinity can contribute.
        to_visit = snapshot.node_info_list if has_preferred else snapshot.have_pods_with_affinity
        for ni in to_visit:
            node = ni.node
            if node is None or not node.labels:
                continue
            labels = node.labels
            for existing in ni.pods.values():
                if not has_preferred and not existing.has_affinity:
                    continue
                if has_preferred:
                    _add_weighted_terms(
                        scores, pod.preferred_affinity, existing, labels, ns_labels, 1
                    )
                    _add_weighted_terms(
                        scores, pod.preferred_anti_affinity, existing, labels, ns_labels, -1
                    )
                if hard_weight > 0:
                    for t in existing.required_affinity:
                        if term_matches(t, pod, ns_labels):
                            _add_weight(scores, labels, t.topology_key, hard_weight)
                if not ignore_existing_preferred:
                    _add_weighted_terms(
                        scores, existing.preferred_affinity, pod, labels, ns_labels, 1
                    )
                    _add_weighted_terms(
                        scores, existing.preferred_anti_affinity, pod, labels, ns_labels, -1
                    )
        if not scores:
            state.skip_score_plugins.add(self.name)
            return SKIP
        state.write(_PRE_SCORE_KEY, _PreScoreState(scores))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        s = state.read(_PRE_SCORE_KEY)
        node = node_info.node
        if not isinstance(s, _PreScoreState) or node is None:
            return 0
        labels = node.labels
        total = 0
        for key, per_value in s.topology_score.items():
            value = labels.get(key)
            if value is not None:
                total += per_value.get(value, 0)
        return total

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Min-max scale to 0..MAX_NODE_SCORE (scores can be negative: anti-affinity)."""
        s = state.read(_PRE_SCORE_KEY)
        if not isinstance(s, _PreScoreState) or not s.topology_score or not scores:
            return
        lowest = min(scores)
        spread = max(scores) - lowest
        for i, raw in enumerate(scores):
            scores[i] = int(MAX_NODE_SCORE * ((raw - lowest) / spread)) if spread > 0 else 0

    # ------------------------------------------------------------------ queueing hints
    def events_to_register(self) -> Iterable[EventRegistration]:
        ns_cache = self.namespace_labels

        def labels_of(namespace: str) -> Mapping[str, str]:
            return ns_cache(namespace) if ns_cache is not None else _NO_LABELS

        def assigned_pod_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            before = old if isinstance(old, PodInfo) else None
            after = new if isinstance(new, PodInfo) else None
            for p in (before, after):
                if p is not None and not p.node_name and not p.nominated_node_name:
                    return QueueingHint.SKIP  # not placed: counts for nobody
            aff = pod.required_affinity
            anti = pod.required_anti_affinity
            if before is not None and after is not None:
                # A label update that makes the pod match our affinity, or stop matching
                # our anti-affinity.
                if not _matches_all(aff, before, labels_of) and _matches_all(aff, after, labels_of):
                    return QueueingHint.QUEUE
                if _matches_any(anti, before, labels_of) and not _matches_any(
                    anti, after, labels_of
                ):
                    return QueueingHint.QUEUE
                return QueueingHint.SKIP
            if after is not None:
                # An added pod can only help affinity.
                return (
                    QueueingHint.QUEUE if _matches_all(aff, after, labels_of) else QueueingHint.SKIP
                )
            # A deleted pod can only help anti-affinity, ours or its own.
            if before is not None and (
                _matches_any(anti, before, labels_of)
                or _matches_any(before.required_anti_affinity, pod, labels_of)
            ):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP

        def node_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            if not isinstance(new, NodeRecord):
                return QueueingHint.SKIP
            before = old if isinstance(old, NodeRecord) else None
            aff = pod.required_affinity
            anti = pod.required_anti_affinity
            if not aff and not anti:
                # Rejected by existing pods' anti-affinity: a new node or a relabelled one
                # may sit outside their domains. (Upstream skips here and relies on the
                # periodic flush of unschedulable pods.)
                if before is None or dict(before.labels) != dict(new.labels):
                    return QueueingHint.QUEUE
                return QueueingHint.SKIP
            for t in aff:
                key = t.topology_key
                if before is None:
                    if key in new.labels:
                        return QueueingHint.QUEUE
                    continue
                if key in new.labels and before.labels.get(key) != new.labels[key]:
                    return QueueingHint.QUEUE  # gained the key, or moved domain
            for t in anti:
                if before is None:
                    return QueueingHint.QUEUE  # a node without the key always accepts
                key = t.topology_key
                if key in before.labels and before.labels[key] != new.labels.get(key):
                    return QueueingHint.QUEUE  # lost the key, or moved domain
            return QueueingHint.SKIP

        def namespace_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            """A namespace's labels changed (``old``/``new``: label maps). Beyond upstream,
            which registers no Namespace event and leaves such pods to the 5-minute flush:
            queue the pod if a term's namespaceSelector now selects the namespace (affinity
            may be satisfied by its pods) or no longer does (anti-affinity may be lifted)."""
            if not isinstance(old, Mapping) or not isinstance(new, Mapping):
                return QueueingHint.SKIP
            for t in pod.required_affinity:
                sel = t.namespace_selector
                if sel is not None and sel.matches(new) and not sel.matches(old):
                    return QueueingHint.QUEUE
            for t in pod.required_anti_affinity:
                sel = t.namespace_selector
                if sel is not None and sel.matches(old) and not sel.matches(new):
                    return QueueingHint.QUEUE
            return QueueingHint.SKIP

        return [
            EventRegistration(ClusterEvent("AssignedPod", "Add"), assigned_pod_changed),
            EventRegistration(ClusterEvent("AssignedPod", "Update"), assigned_pod_changed),
            EventRegistration(ClusterEvent("AssignedPod", "Delete"), assigned_pod_changed),
            EventRegistration(ClusterEvent("Node", "Add"), node_changed),
            EventRegistration(ClusterEvent("Node", "Update"), node_changed),
            EventRegistration(ClusterEvent("Namespace", "Update"), namespace_changed),
        ]
