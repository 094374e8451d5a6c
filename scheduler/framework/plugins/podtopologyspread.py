"""PodTopologySpread: spread matching pods evenly across topology domains.

What it owns. A pod's ``topologySpreadConstraints`` split by ``whenUnsatisfiable``:

- DoNotSchedule constraints are a filter. PreFilter counts, per constraint and per domain
  (the value of the constraint's topology key), the existing pods that the constraint
  selects: same namespace as the incoming pod, not terminating, label selector matching.
  Only nodes that carry *every* constraint's topology key count, and for each constraint
  only nodes that pass its inclusion policies (``nodeAffinityPolicy: Honor`` — the
  default — requires the pod's nodeSelector / required node affinity to match the node;
  ``nodeTaintsPolicy: Honor`` requires the node's NoSchedule/NoExecute taints to be
  tolerated). Filter then rejects a node when

      count(node's domain) + (1 if the pod selects itself) - global minimum > maxSkew

  where the global minimum is 0 while there are fewer domains than ``minDomains``.
  A node lacking a topology key is UNSCHEDULABLE_AND_UNRESOLVABLE ("... (missing required
  label)"); a skew violation is UNSCHEDULABLE (preemption may lower the count).
- ScheduleAnyway constraints are a score: fewer matching pods in the node's domains is
  better, each constraint weighted by log(number of domains + 2) so small topologies are
  not drowned by large ones, and ``maxSkew - 1`` added to soften differences (upstream's
  scoring.go); normalised inversely to 0..100.

The filter state keeps, per constraint, the domain counts and their minimum in a
``_DomainCounts``; ``add_pod``/``remove_pod`` (nominated pods, preemption dry runs) update
it in O(1) amortised, and ``clone()`` copies the counts.

Default constraints. A pod without constraints of its own gets the configured defaults —
upstream's system defaults are hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway —
whose selector upstream derives from the Services, ReplicaSets, ReplicationControllers and
StatefulSets selecting the pod. With the cluster's Services and workload controllers
(``selectors``, fed by ``SchedulerCore.on_selector_object_set``; the core uses them unless
built with ``upstream_default_selector=False``; ``run`` watches them, ``simulate`` and
``explain`` load them) the selector is upstream's (``helper.default_selector``). The
earlier APPROXIMATION, kept for benchmarks (``selectors=None``): a defaulted constraint
selects the pods that share the incoming pod's *controller owner*
(same kind and uid in ``ownerReferences``), and only when that owner is a ReplicaSet,
ReplicationController or StatefulSet; other pods get no default constraints. Matching the
owner rather than the pod's labels keeps StatefulSet siblings (whose per-pod labels differ)
together, as the StatefulSet's own selector would. Pods selected only through a Service
are not seen.

Two corner cases where upstream is inconsistent with itself are made consistent here: a
constraint whose label selector is empty (``{}``) counts no existing pods, and the
incremental updates follow the same rule as the full count (upstream's ``AddPod`` would
count such pods); terminating pods are skipped by the updates as by the count.
matchLabelKeys are expected already merged into the selector (the API server does so).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.backend.cache.snapshot import BoolArray, Int64Array, IntpArray, Snapshot
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
from scheduler.framework.plugins.helper import SelectorObjects
from scheduler.framework.plugins.nodeaffinity import pod_matches_node
from scheduler.framework.plugins.tainttoleration import find_untolerated_taint
from scheduler.types import (
    LabelSelector,
    NodeInfo,
    NodeRecord,
    PodInfo,
    TopologySpreadConstraint,
)

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "LABEL_HOSTNAME",
    "LABEL_TOPOLOGY_ZONE",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "PodTopologySpread",
]

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"

SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(
        max_skew=3,
        topology_key=LABEL_HOSTNAME,
        when_unsatisfiable=SCHEDULE_ANYWAY,
        label_selector=None,
        min_domains=1,
        node_affinity_policy=HONOR,
        node_taints_policy=IGNORE,
    ),
    TopologySpreadConstraint(
        max_skew=5,
        topology_key=LABEL_TOPOLOGY_ZONE,
        when_unsatisfiable=SCHEDULE_ANYWAY,
        label_selector=None,
        min_domains=1,
        node_affinity_policy=HONOR,
        node_taints_policy=IGNORE,
    ),
)

# Controllers whose selector upstream's DefaultSelector consults (besides Services).
_DEFAULTING_OWNER_KINDS = frozenset({"ReplicaSet", "ReplicationController", "StatefulSet"})
_SCHEDULE_TAINT_EFFECTS = ("NoSchedule", "NoExecute")

_PRE_FILTER_KEY = "PreFilter" + names.POD_TOPOLOGY_SPREAD
_PRE_SCORE_KEY = "PreScore" + names.POD_TOPOLOGY_SPREAD
_IGNORED_NODE = -1  # raw score of a node that misses a topology key; normalised to 0

_CONSTRAINTS_NOT_MATCH = Status.unschedulable(
    ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=names.POD_TOPOLOGY_SPREAD
)
_NODE_LABEL_NOT_MATCH = Status.unresolvable(
    ERR_REASON_NODE_LABEL_NOT_MATCH, plugin=names.POD_TOPOLOGY_SPREAD
)


@dataclass(frozen=True, slots=True)
class _Constraint:
    """A constraint ready to evaluate. ``owner`` is set on defaulted constraints: the pods
    they select must share that controller owner (see the module docstring)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None  # None selects nothing
    min_domains: int
    honor_node_affinity: bool
    honor_node_taints: bool
    owner: tuple[str, str] | None = None
    # namespace -> the key of this selector in the nodes' match-count caches (``_count_on``)
    cache_ids: dict[str, int] = field(default_factory=dict, compare=False, hash=False)

    def selects(self, pod: PodInfo) -> bool:
        """Does the selector match the pod's labels (and owner)? Namespace not checked."""
        if self.selector is None:
            return False
        if self.owner is not None and pod.owner_kind_uid != self.owner:
            return False
        return self.selector.matches(pod.labels)

    @property
    def counts_pods(self) -> bool:
        """Upstream counts nothing for a nil or an empty selector."""
        return self.selector is not None and (
            self.owner is not None or not self.selector.is_empty()
        )

    def counted(self, pod: PodInfo, namespace: str) -> bool:
        """Is this existing pod counted in its domain?"""
        return (
            pod.namespace == namespace
            and pod.deletion_timestamp is None
            and self.counts_pods
            and self.selects(pod)
        )

    def includes_node(self, pod: PodInfo, node: NodeRecord, affinity_ok: bool) -> bool:
        """The nodeAffinityPolicy / nodeTaintsPolicy inclusion check."""
        if self.honor_node_affinity and not affinity_ok:
            return False
        return not (
            self.honor_node_taints
            and find_untolerated_taint(node.taints, pod.tolerations, _SCHEDULE_TAINT_EFFECTS)
            is not None
        )


def _count_pods(pods: Iterable[PodInfo], c: _Constraint, namespace: str) -> int:
    """``sum(c.counted(p, namespace) for p in pods)``, unrolled: this is the hot loop of
    PreFilter and PreScore (every pod in the cluster, per constraint)."""
    selector = c.selector
    if selector is None or not c.counts_pods:
        return 0
    owner = c.owner
    n = 0
    for p in pods:
        if p.namespace != namespace or p.deletion_timestamp is not None:
            continue
        if owner is not None and p.owner_kind_uid != owner:
            continue
        if selector.matches(p.labels):
            n += 1
    return n


_MATCH_CACHE_LIMIT = 256
# (namespace, selector, owner) -> a small int: the node caches are keyed by it, so that a
# lookup hashes and compares an int instead of a selector. Grows with the distinct
# selectors seen (about one per workload); never reused, so a cache never misreads a key.
_SELECTOR_IDS: dict[tuple[str, LabelSelector | None, tuple[str, str] | None], int] = {}


def _selector_id(c: _Constraint, namespace: str) -> int:
    key = c.cache_ids.get(namespace)
    if key is None:
        key = c.cache_ids[namespace] = _SELECTOR_IDS.setdefault(
            (namespace, c.selector, c.owner), len(_SELECTOR_IDS)
        )
    return key


_EQUALITY: dict[LabelSelector, tuple[str, str] | None] = {}


def _equality_label(selector: LabelSelector) -> tuple[str, str] | None:
    """A (key, value) every pod the selector matches must carry (a matchLabels entry or an
    ``In`` with one value), or None. Remembered per selector (one per workload)."""
    try:
        return _EQUALITY[selector]
    except KeyError:
        pass
    found: tuple[str, str] | None = selector.match_labels[0] if selector.match_labels else None
    if found is None:
        for req in selector.match_expressions:
            if req.operator == "In" and len(req.values) == 1:
                found = (req.key, next(iter(req.values)))
                break
    if len(_EQUALITY) >= 4096:
        _EQUALITY.clear()
    _EQUALITY[selector] = found
    return found


def _only_requirement(selector: LabelSelector, label: tuple[str, str]) -> bool:
    """Does ``selector`` require ``label`` and nothing else (as matchLabels, or ``In`` with
    that one value, the form upstream's DefaultSelector gives a ReplicaSet's labels)?"""
    for pair in selector.match_labels:
        if pair != label:
            return False
    for req in selector.match_expressions:
        if req.operator != "In" or (req.key, *req.values) != label:
            return False
    return True


def _count_on(ni: NodeInfo, c: _Constraint, namespace: str) -> int:
    """``_count_pods`` over a node's pods, remembered on that version of the NodeInfo (its
    pods change only through add_pod/remove_pod, which forget the counts). Unchanged nodes
    keep their counts from cycle to cycle, so a Deployment's pods are counted once per node
    change instead of once per cycle. O(1) when remembered."""
    if c.selector is None or not c.counts_pods:
        return 0
    key = _selector_id(c, namespace)
    cache = ni.match_counts
    if cache is None:
        cache = ni.match_counts = {}
    n = cache.get(key)
    if n is None:
        if len(cache) >= _MATCH_CACHE_LIMIT:
            cache.clear()
        pods: Iterable[PodInfo] = ni.pods.values()
        if c.owner is not None:  # only that owner's pods can count
            groups = ni.owner_pods
            if groups is None:
                groups = ni.owner_pods = {}
                for p in pods:
                    groups.setdefault(p.owner_kind_uid, []).append(p)
            pods = groups.get(c.owner, ())
        else:
            label = _equality_label(c.selector)
            if label is not None:  # only pods with that label can match
                by_label = ni.label_pods
                if by_label is None:
                    by_label = ni.label_pods = {}
                    for p in pods:
                        for kv in p.labels.items():
                            by_label.setdefault(kv, []).append(p)
                pods = by_label.get(label, ())
        n = cache[key] = _count_pods(pods, c, namespace)
    return n


def _count_column(snapshot: Snapshot, c: _Constraint, namespace: str) -> Int64Array:
    """Per snapshot row, the pods the constraint counts (``_count_on``), kept current by the
    snapshot. A selector with an equality requirement builds it from the snapshot's pods by
    label: a new workload's column costs O(its pods), not O(nodes)."""

    def on(ni: NodeInfo) -> int:
        return _count_on(ni, c, namespace)

    selector, owner = c.selector, c.owner
    counts = selector is not None and c.counts_pods

    def per_pod(p: PodInfo) -> int:
        """``_count_pods`` of one pod: a node's count is the sum over its pods."""
        if (
            not counts
            or p.namespace != namespace
            or p.deletion_timestamp is not None
            or (owner is not None and p.owner_kind_uid != owner)
        ):
            return 0
        assert selector is not None
        return 1 if selector.matches(p.labels) else 0

    label = None
    if c.owner is None and c.selector is not None and c.counts_pods:
        label = _equality_label(c.selector)
    if label is None:
        return snapshot.count_column(_selector_id(c, namespace), on, per_pod=per_pod)
    key, value = label

    assert c.selector is not None
    only_label = _only_requirement(c.selector, label)

    def first() -> dict[int, int]:
        out = {}
        rows = snapshot.pods_with_label(key, value)
        if only_label:  # the selector is key=value: every indexed pod matches it
            for row, pods in rows.items():
                n = 0
                for p in pods:
                    if p.namespace == namespace and p.deletion_timestamp is None:
                        n += 1
                if n:
                    out[row] = n
            return out
        for row, pods in rows.items():
            n = _count_pods(pods, c, namespace)
            if n:
                out[row] = n
        return out

    return snapshot.count_column(_selector_id(c, namespace), on, first, per_pod)


def _affinity_mask(pod: PodInfo, snapshot: Snapshot) -> BoolArray:
    """Rows of the snapshot whose node passes the pod's nodeSelector and required node
    affinity (all rows when it has neither)."""
    n = snapshot.num_nodes()
    mask = np.ones(n, dtype=np.bool_)
    for key, value in pod.node_selector.items():
        mask &= snapshot.label_mask(key, value)
    if pod.required_node_affinity is not None:
        mask &= np.fromiter(
            (
                ni.node is not None and pod_matches_node(pod, ni.node)
                for ni in snapshot.node_info_list
            ),
            dtype=np.bool_,
            count=n,
        )
    return mask


def _has_all_keys(labels: Mapping[str, str], constraints: Sequence[_Constraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


def _domains_from_nodes(
    nodes: Sequence[NodeInfo],
    constraints: Sequence[_Constraint],
    spread: Sequence[tuple[dict[str, int], str]],
    require_all: bool,
) -> set[str]:
    """PreScore's bookkeeping over the feasible nodes: with ``require_all``, the names of
    nodes lacking a constraint's key (ignored); every other node's value of each spread
    key becomes a domain (0 pods so far; a missing key is the domain ""). O(nodes)."""
    ignored: set[str] = set()
    for ni in nodes:
        node = ni.node
        if node is None:
            continue
        labels = node.labels
        if require_all and not _has_all_keys(labels, constraints):
            ignored.add(node.name)
            continue
        for domains, key in spread:
            domains.setdefault(labels.get(key, ""), 0)
    return ignored


def _domains_from_columns(
    snapshot: Snapshot,
    constraints: Sequence[_Constraint],
    spread: Sequence[tuple[dict[str, int], str]],
    require_all: bool,
    rows: IntpArray | None = None,
) -> set[str]:
    """``_domains_from_nodes`` over the snapshot's nodes at ``rows`` (None: every node),
    from the snapshot's label columns: numpy over the rows, Python only per ignored node and
    per distinct domain (the same sets; unit-tested against the loop)."""
    n = snapshot.num_nodes()
    if rows is None:
        keep = np.ones(n, dtype=np.bool_)
    else:
        keep = np.zeros(n, dtype=np.bool_)
        keep[rows] = True
    ignored: set[str] = set()
    if require_all:
        listed = keep.copy()
        for c in constraints:
            keep &= snapshot.label_codes(c.topology_key)[0] >= 0
        lacking = np.flatnonzero(listed & ~keep).tolist()
        if lacking:
            infos = snapshot.node_info_list
            ignored = {infos[i].name for i in lacking}
    for domains, key in spread:
        codes, values = snapshot.label_codes(key)
        # The codes present, ascending (-1: no such label), by counting rather than
        # np.unique: numpy 2's unique imports numpy.ma on its first call, 10-30 ms in the
        # first cycle of the first pod with spreading after a start (round 27), and sorts.
        present = np.flatnonzero(np.bincount(codes[keep] + 1, minlength=len(values) + 1)) - 1
        for code in present.tolist():
            domains.setdefault(values[code] if code >= 0 else "", 0)
    return ignored


# --------------------------------------------------------------------------- filter state


class _DomainCounts:
    """Matching-pod counts per domain of one constraint, with their minimum kept current.

    Invariant: ``histogram[n]`` is the number of domains whose count is n, and ``minimum``
    is the smallest key of ``histogram`` (0 when there are no domains). ``update`` is
    O(|delta|); a full recount is never needed, whichever domains the updates touch.
    """

    __slots__ = ("counts", "histogram", "minimum")

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts
        self.histogram: dict[int, int] = {}
        for n in counts.values():
            self.histogram[n] = self.histogram.get(n, 0) + 1
        self.minimum = min(self.histogram, default=0)

    def clone(self) -> _DomainCounts:
        c = _DomainCounts.__new__(_DomainCounts)
        c.counts = dict(self.counts)
        c.histogram = dict(self.histogram)
        c.minimum = self.minimum
        return c

    def update(self, domain: str, delta: int) -> None:
        hist = self.histogram
        old = self.counts.get(domain)
        new = (old or 0) + delta
        self.counts[domain] = new
        hist[new] = hist.get(new, 0) + 1
        if old is None:
            self.minimum = new if len(self.counts) == 1 else min(self.minimum, new)
            return
        left = hist[old] - 1
        if left:
            hist[old] = left
        else:
            del hist[old]
        if new < self.minimum:
            self.minimum = new
        elif old == self.minimum and old not in hist:
            # The last domain at the minimum moved up; the new minimum lies in (old, new].
            self.minimum = next(n for n in range(old + 1, new + 1) if n in hist)

    def check_invariants(self) -> None:
        want: dict[int, int] = {}
        for n in self.counts.values():
            want[n] = want.get(n, 0) + 1
        assert self.histogram == want, f"histogram {self.histogram} != {want}"
        assert self.minimum == min(want, default=0), f"minimum {self.minimum} is stale"


class _PreFilterState:
    """The DoNotSchedule constraints, their domain counts, and whether the incoming pod
    selects itself under each (1) or not (0)."""

    __slots__ = ("constraints", "domains", "self_match")

    def __init__(
        self,
        constraints: tuple[_Constraint, ...],
        domains: list[_DomainCounts],
        self_match: tuple[int, ...],
    ) -> None:
        self.constraints = constraints
        self.domains = domains
        self.self_match = self_match

    def clone(self) -> _PreFilterState:
        """Copies the counts (O(domains)); the constraints are shared."""
        return _PreFilterState(self.constraints, [d.clone() for d in self.domains], self.self_match)


class _PreScoreState:
    """Read-only after PreScore: per-constraint counts for non-hostname keys, the nodes
    that miss a required key, and each constraint's topology weight."""

    __slots__ = ("constraints", "counts", "ignored", "weights")

    def __init__(
        self,
        constraints: tuple[_Constraint, ...],
        counts: list[dict[str, int]],
        ignored: set[str],
        weights: list[float],
    ) -> None:
        self.constraints = constraints
        self.counts = counts
        self.ignored = ignored
        self.weights = weights

    def clone(self) -> _PreScoreState:
        return self


def _topology_normalizing_weight(size: int) -> float:
    return math.log(size + 2)


def _round_half_away(x: float) -> int:
    """Go's math.Round for the non-negative scores produced here."""
    return math.floor(x + 0.5)


# --------------------------------------------------------------------------- plugin


class PodTopologySpread:
    name = names.POD_TOPOLOGY_SPREAD

    @property
    def signs_no_pod(self) -> bool:
        """No pod of this profile can be signed (read once, when the framework is built)."""
        return bool(self.default_constraints)

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Spreading depends on where other pods are: a pod with constraints, its own or
        the profile's defaults, is not signable."""
        if pod.topology_spread_constraints:
            return [], Status.unschedulable("pods with topology constraints are not signable")
        if self.default_constraints:
            return [], Status.unschedulable(
                "pods with default topology constraints are not signable"
            )
        return [], SUCCESS

    def __init__(
        self,
        default_constraints: Sequence[TopologySpreadConstraint] | None = None,
        system_defaulting: bool = True,
        selectors: SelectorObjects | None = None,
    ) -> None:
        """``system_defaulting`` (upstream's defaultingType: System) uses
        SYSTEM_DEFAULT_CONSTRAINTS and then ``default_constraints`` must be empty;
        otherwise (List) ``default_constraints`` are used as given. With ``selectors``
        (the cluster's Services and workload controllers), default constraints select
        pods as upstream (``helper.DefaultSelector``); without, by controller owner (the
        approximation in the module docstring)."""
        self.selectors = selectors
        if system_defaulting and default_constraints:
            raise ValueError(
                "PodTopologySpreadArgs.defaultConstraints: when .defaultingType is System, "
                ".defaultConstraints must be empty"
            )
        defaults = (
            SYSTEM_DEFAULT_CONSTRAINTS if system_defaulting else tuple(default_constraints or ())
        )
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(defaults):
            where = f"PodTopologySpreadArgs.defaultConstraints[{i}]"
            if c.max_skew <= 0:
                raise ValueError(f"{where}.maxSkew: must be greater than zero, got {c.max_skew}")
            if not c.topology_key:
                raise ValueError(f"{where}.topologyKey: must not be empty")
            if c.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                raise ValueError(f"{where}.whenUnsatisfiable: unknown {c.when_unsatisfiable!r}")
            if c.label_selector is not None:
                raise ValueError(f"{where}.labelSelector: must not be set for default constraints")
            if (c.topology_key, c.when_unsatisfiable) in seen:
                raise ValueError(f"{where}: duplicate {c.topology_key}/{c.when_unsatisfiable}")
            seen.add((c.topology_key, c.when_unsatisfiable))
        self.default_constraints = defaults
        self.system_defaulted = system_defaulting

    # ------------------------------------------------------------------ constraints
    def _constraints(self, pod: PodInfo, action: str) -> tuple[_Constraint, ...]:
        """The pod's own constraints with this whenUnsatisfiable, else the defaults."""
        if pod.topology_spread_constraints:
            return tuple(
                _Constraint(
                    max_skew=c.max_skew,
                    topology_key=c.topology_key,
                    selector=c.label_selector,
                    min_domains=c.min_domains,
                    honor_node_affinity=c.node_affinity_policy != IGNORE,
                    honor_node_taints=c.node_taints_policy == HONOR,
                )
                for c in pod.topology_spread_constraints
                if c.when_unsatisfiable == action
            )
        if self.selectors is not None:
            if not self.default_constraints:
                return ()
            selector = self.selectors.default_selector(
                pod.namespace, pod.labels, pod.owner_kind_uid
            )
            if selector is None:
                return ()
            return tuple(
                _Constraint(
                    max_skew=c.max_skew,
                    topology_key=c.topology_key,
                    selector=selector,
                    min_domains=c.min_domains,
                    honor_node_affinity=c.node_affinity_policy != IGNORE,
                    honor_node_taints=c.node_taints_policy == HONOR,
                )
                for c in self.default_constraints
                if c.when_unsatisfiable == action
            )
        owner = pod.owner_kind_uid
        if owner is None or owner[0] not in _DEFAULTING_OWNER_KINDS:
            return ()
        return tuple(
            _Constraint(
                max_skew=c.max_skew,
                topology_key=c.topology_key,
                selector=LabelSelector(),
                min_domains=c.min_domains,
                honor_node_affinity=c.node_affinity_policy != IGNORE,
                honor_node_taints=c.node_taints_policy == HONOR,
                owner=owner,
            )
            for c in self.default_constraints
            if c.when_unsatisfiable == action
        )

    # ------------------------------------------------------------------ prefilter
    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if not constraints:
            return None, SKIP
        counts: list[dict[str, int]] = [{} for _ in constraints]
        needs_affinity = any(c.honor_node_affinity for c in constraints)
        namespace = pod.namespace
        for ni in snapshot.node_info_list:
            node = ni.node
            if node is None:
                continue
            labels = node.labels
            if not _has_all_keys(labels, constraints):
                continue
            affinity_ok = needs_affinity and pod_matches_node(pod, node)
            for i, c in enumerate(constraints):
                if not c.includes_node(pod, node, affinity_ok):
                    continue
                domain = labels[c.topology_key]
                counts[i][domain] = counts[i].get(domain, 0) + _count_on(ni, c, namespace)
        state.write(
            _PRE_FILTER_KEY,
            _PreFilterState(
                constraints,
                [_DomainCounts(d) for d in counts],
                tuple(int(c.selects(pod)) for c in constraints),
            ),
        )
        return None, SUCCESS

    def pre_filter_extensions(self) -> PodTopologySpread:
        return self

    def add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node_info: NodeInfo
    ) -> Status:
        return self._update(state, pod, to_add, node_info, 1)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status:
        return self._update(state, pod, to_remove, node_info, -1)

    def _update(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node_info: NodeInfo, delta: int
    ) -> Status:
        """Upstream's updateWithPod: O(constraints)."""
        s = state.read(_PRE_FILTER_KEY)
        if not isinstance(s, _PreFilterState):
            return Status.error(f"reading {_PRE_FILTER_KEY!r} from cycle state: not found")
        node = node_info.node
        if node is None or other.namespace != pod.namespace:
            return SUCCESS
        labels = node.labels
        if not _has_all_keys(labels, s.constraints):
            return SUCCESS
        affinity_ok: bool | None = None
        for i, c in enumerate(s.constraints):
            if not c.counted(other, pod.namespace):
                continue
            if affinity_ok is None:
                affinity_ok = pod_matches_node(pod, node)
            if not c.includes_node(pod, node, affinity_ok):
                continue
            s.domains[i].update(labels[c.topology_key], delta)
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
        for c, domains, self_match in zip(s.constraints, s.domains, s.self_match, strict=True):
            value = labels.get(c.topology_key)
            if value is None:
                return _NODE_LABEL_NOT_MATCH
            # Too few eligible domains: the global minimum is taken as 0.
            minimum = 0 if len(domains.counts) < c.min_domains else domains.minimum
            if domains.counts.get(value, 0) + self_match - minimum > c.max_skew:
                return _CONSTRAINTS_NOT_MATCH
        return SUCCESS

    # ------------------------------------------------------------------ score
    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        all_nodes = snapshot.node_info_list
        constraints = self._constraints(pod, SCHEDULE_ANYWAY) if all_nodes else ()
        if not constraints:
            state.skip_score_plugins.add(self.name)
            return SKIP
        # Only the system defaults tolerate nodes lacking a key (e.g. zoneless clusters
        # still spread by hostname).
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted

        counts: list[dict[str, int]] = [{} for _ in constraints]
        # (the domains of a constraint, its key), hostname counts being taken in score
        spread = [
            (counts[i], c.topology_key)
            for i, c in enumerate(constraints)
            if c.topology_key != LABEL_HOSTNAME
        ]
        rows = state.feasible_rows
        if len(nodes) == len(all_nodes):  # every node is feasible
            ignored = _domains_from_columns(snapshot, constraints, spread, require_all)
        elif rows is not None and len(rows) == len(nodes):  # the core's bulk filter's rows
            ignored = _domains_from_columns(snapshot, constraints, spread, require_all, rows)
        else:
            ignored = _domains_from_nodes(nodes, constraints, spread, require_all)
        weights = [
            _topology_normalizing_weight(
                len(nodes) - len(ignored) if c.topology_key == LABEL_HOSTNAME else len(counts[i])
            )
            for i, c in enumerate(constraints)
        ]

        self._count_domains(pod, constraints, counts, require_all, snapshot)
        state.write(_PRE_SCORE_KEY, _PreScoreState(constraints, counts, ignored, weights))
        return SUCCESS

    def _count_domains(
        self,
        pod: PodInfo,
        constraints: Sequence[_Constraint],
        counts: list[dict[str, int]],
        require_all: bool,
        snapshot: Snapshot,
    ) -> None:
        """Add to ``counts[i][domain]`` the matching pods of every node of the snapshot in
        that domain that the constraint includes (the nodeAffinity/nodeTaints policies; with
        ``require_all``, only nodes that have every constraint's key). Numpy over the
        snapshot's columns: per-node match counts and label codes, both kept current as
        nodes change, so a cycle costs O(nodes) in C, not in Python."""
        n = snapshot.num_nodes()
        if n == 0 or not any(counts):
            return
        base = np.ones(n, dtype=np.bool_)
        if require_all:
            for c in constraints:
                base &= snapshot.label_codes(c.topology_key)[0] >= 0
        affinity: BoolArray | None = None
        taints: BoolArray | None = None
        nodes = snapshot.node_info_list
        namespace = pod.namespace
        for i, c in enumerate(constraints):
            if not counts[i]:
                continue  # hostname: counted node by node in Score
            mask = base
            if c.honor_node_affinity:
                if affinity is None:
                    affinity = _affinity_mask(pod, snapshot)
                mask = mask & affinity
            if c.honor_node_taints:
                if taints is None:
                    taints = np.fromiter(
                        (
                            ni.node is not None
                            and find_untolerated_taint(
                                ni.node.taints, pod.tolerations, _SCHEDULE_TAINT_EFFECTS
                            )
                            is None
                            for ni in nodes
                        ),
                        dtype=np.bool_,
                        count=n,
                    )
                mask = mask & taints
            codes, values = snapshot.label_codes(c.topology_key)
            col = _count_column(snapshot, c, namespace)
            labelled = mask & (codes >= 0)
            sums = np.bincount(codes[labelled], weights=col[labelled], minlength=len(values))
            by_value = {v: int(sums[k]) for k, v in enumerate(values) if v in counts[i]}
            for domain in counts[i]:
                extra = by_value.get(domain, 0)
                if domain == "":  # labels.get(key, ""): a node without the key counts as ""
                    extra += int(col[mask & (codes < 0)].sum())
                counts[i][domain] += extra

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        s = state.read(_PRE_SCORE_KEY)
        node = node_info.node
        if not isinstance(s, _PreScoreState) or node is None:
            return 0
        if node.name in s.ignored:
            return _IGNORED_NODE
        labels = node.labels
        total = 0.0
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == LABEL_HOSTNAME:
                n = _count_on(node_info, c, pod.namespace)
            else:
                n = s.counts[i].get(value, 0)
            total += n * s.weights[i] + (c.max_skew - 1)
        return _round_half_away(total)

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntpArray
    ) -> Int64Array | None:
        """``score`` of the nodes at ``rows``, in numpy: hostname counts from the snapshot's
        per-node match-count column, other domains looked up by label code (the same float
        operations in the same order, so the same rounding)."""
        st = state.read(_PRE_SCORE_KEY)
        if not isinstance(st, _PreScoreState) or st.ignored:
            return None  # nodes missing a required key: node by node
        total = np.zeros(len(rows), dtype=np.float64)
        for i, c in enumerate(st.constraints):
            codes, values = snapshot.label_codes(c.topology_key)
            at = codes[rows]
            present = at >= 0
            if c.topology_key == LABEL_HOSTNAME:
                col = _count_column(snapshot, c, pod.namespace)
                n = col[rows].astype(np.float64)
            else:
                lut = np.array([st.counts[i].get(v, 0) for v in values] or [0], dtype=np.float64)
                n = lut[np.where(present, at, 0)]
            total = np.where(present, total + (n * st.weights[i] + (c.max_skew - 1)), total)
        out: Int64Array = np.floor(total + 0.5).astype(np.int64)
        return out

    def normalize_scores_batch(
        self, state: CycleState, pod: PodInfo, scores: Int64Array
    ) -> Int64Array:
        if not isinstance(state.read(_PRE_SCORE_KEY), _PreScoreState):
            return scores
        valid = scores != _IGNORED_NODE
        if not valid.any():
            return np.zeros_like(scores)
        lowest = int(scores[valid].min())
        highest = int(scores[valid].max())
        if highest == 0:
            out = np.full_like(scores, MAX_NODE_SCORE)
        else:
            out = MAX_NODE_SCORE * (highest + lowest - scores) // highest
        out[~valid] = 0
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Fewer matching pods is better: MAX * (max + min - score) / max; nodes missing a
        topology key get 0."""
        if not isinstance(state.read(_PRE_SCORE_KEY), _PreScoreState):
            return
        valid = [s for s in scores if s != _IGNORED_NODE]
        lowest = min(valid, default=0)
        highest = max(valid, default=0)
        for i, raw in enumerate(scores):
            if raw == _IGNORED_NODE:
                scores[i] = 0
            elif highest == 0:
                scores[i] = MAX_NODE_SCORE
            else:
                scores[i] = MAX_NODE_SCORE * (highest + lowest - raw) // highest

    # ------------------------------------------------------------------ queueing hints
    def events_to_register(self) -> Iterable[EventRegistration]:
        def assigned_pod_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            before = old if isinstance(old, PodInfo) else None
            after = new if isinstance(new, PodInfo) else None
            for p in (before, after):
                if p is not None and (
                    (not p.node_name and not p.nominated_node_name) or p.namespace != pod.namespace
                ):
                    return QueueingHint.SKIP
            constraints = self._constraints(pod, DO_NOT_SCHEDULE)
            if before is not None and after is not None:
                if any(c.selects(before) != c.selects(after) for c in constraints):
                    return QueueingHint.QUEUE  # labels moved it in or out of a selector
                # A pod that starts terminating stops counting.
                if (
                    after.terminating
                    and not before.terminating
                    and any(c.selects(after) for c in constraints)
                ):
                    return QueueingHint.QUEUE
                return QueueingHint.SKIP
            changed = after if after is not None else before
            if changed is not None and any(c.selects(changed) for c in constraints):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP

        def node_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            before = old if isinstance(old, NodeRecord) else None
            after = new if isinstance(new, NodeRecord) else None
            constraints = self._constraints(pod, DO_NOT_SCHEDULE)
            before_ok = before is not None and _has_all_keys(before.labels, constraints)
            after_ok = after is not None and _has_all_keys(after.labels, constraints)
            if before is not None and after is not None:
                if before_ok != after_ok:
                    return QueueingHint.QUEUE
                if after_ok and (
                    any(
                        before.labels.get(c.topology_key) != after.labels.get(c.topology_key)
                        for c in constraints
                    )
                    or before.taints != after.taints
                ):
                    return QueueingHint.QUEUE
                return QueueingHint.SKIP
            # Added: it may open a new domain. Deleted: its pods leave the counts with it.
            return QueueingHint.QUEUE if (after_ok or before_ok) else QueueingHint.SKIP

        return [
            EventRegistration(ClusterEvent("AssignedPod", "Add"), assigned_pod_changed),
            EventRegistration(ClusterEvent("AssignedPod", "Update"), assigned_pod_changed),
            EventRegistration(ClusterEvent("AssignedPod", "Delete"), assigned_pod_changed),
            EventRegistration(ClusterEvent("Node", "Add"), node_changed),
            EventRegistration(ClusterEvent("Node", "Update"), node_changed),
            EventRegistration(ClusterEvent("Node", "Delete"), node_changed),
        ]
