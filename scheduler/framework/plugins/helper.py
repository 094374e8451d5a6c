"""Small helpers shared by plugins: score normalisation, node-selector matching and the
system default spreading selector (upstream ``helper.DefaultSelector``)."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from scheduler.backend.cache.snapshot import Int64Array, Snapshot
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    SUCCESS,
    CycleState,
    PreFilterResult,
    Status,
)
from scheduler.types import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    SelectorObject,
    ServiceInfo,
)

__all__ = [
    "PassingPreFilter",
    "SelectorObjects",
    "default_normalize_score",
    "default_normalize_score_batch",
    "default_selector",
    "match_node_selector_terms",
    "match_requirement",
]


class PassingPreFilter:
    """A PreFilter that lets every pod through: upstream's NodeUnschedulable, NodeName,
    TaintToleration and NodeResourcesFit have one (it prepares state that ours compute
    where they need it, or it only acts behind gates off by default), so they run, are
    timed and counted at PreFilter as upstream's."""

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS

    def pre_filter_extensions(self) -> None:
        return None


def default_normalize_score(
    scores: list[int], *, reverse: bool, max_score: int = MAX_NODE_SCORE
) -> None:
    """Scale scores to 0..max by the highest score; ``reverse`` flips them (upstream's
    ``helper.DefaultNormalizeScore``). In place."""
    highest = max(scores, default=0)
    if highest == 0:
        if reverse:
            scores[:] = [max_score] * len(scores)
        return
    for i, s in enumerate(scores):
        s = max_score * s // highest
        scores[i] = max_score - s if reverse else s


def default_normalize_score_batch(
    scores: Int64Array, *, reverse: bool, max_score: int = MAX_NODE_SCORE
) -> Int64Array:
    """``default_normalize_score`` on a numpy column (same floor division), not in place."""
    highest = int(scores.max()) if len(scores) else 0
    if highest == 0:
        return np.full(len(scores), max_score, dtype=np.int64) if reverse else scores
    scaled = max_score * scores // highest
    out: Int64Array = (max_score - scaled) if reverse else scaled
    return out


_INT = re.compile(r"[+-]?[0-9]+")


def _parse_int64(s: str) -> int | None:
    """Go's ``strconv.ParseInt(s, 10, 64)``: ASCII digits with an optional sign, in range
    (Python's ``int`` would also take spaces, underscores and non-ASCII digits)."""
    if not _INT.fullmatch(s):
        return None
    v = int(s)
    return v if -(2**63) <= v < 2**63 else None


def match_requirement(req: NodeSelectorRequirement, value: str | None) -> bool:
    """One node selector requirement against a label (or field) value; None: absent."""
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(req.values) != 1:
            return False
        have = _parse_int64(value)
        want = _parse_int64(req.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = re.compile(_NAME)
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")


def _valid_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if "/" in key and not (0 < len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and _LABEL_VALUE.fullmatch(name) is not None


def _valid_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None)


@functools.lru_cache(maxsize=4096)
def _valid_expression(req: NodeSelectorRequirement) -> bool:
    """What upstream's ``labels.NewRequirement`` accepts; a term holding an invalid
    requirement matches no node (upstream's lazy parse errors)."""
    op, values = req.operator, req.values
    if not _valid_label_key(req.key) or not all(_valid_label_value(v) for v in values):
        return False
    if op in ("In", "NotIn"):
        return bool(values)
    if op in ("Exists", "DoesNotExist"):
        return not values
    if op in ("Gt", "Lt"):
        return len(values) == 1 and _parse_int64(values[0]) is not None
    return False


def _match_term(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False  # an empty term matches nothing (upstream)
    for req in term.match_expressions:
        if not _valid_expression(req) or not match_requirement(req, labels.get(req.key)):
            return False
    for req in term.match_fields:
        # Upstream: only metadata.name, with In or NotIn and exactly one value.
        if req.key != "metadata.name" or req.operator not in ("In", "NotIn"):
            return False
        if len(req.values) != 1 or not match_requirement(req, node_name):
            return False
    return True


def match_node_selector_terms(
    terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str], node_name: str
) -> bool:
    """Terms are ORed; requirements inside a term are ANDed."""
    return any(_match_term(t, labels, node_name) for t in terms)


def default_selector(
    namespace: str,
    labels: Mapping[str, str],
    controller: tuple[str, str] | None,
    services: Iterable[ServiceInfo],
    get_controller: Callable[[str, str, str], SelectorObject | None],
) -> LabelSelector | None:
    """The selector of system default topology spreading for a pod (upstream
    ``helper.DefaultSelector``), or ``None`` when it is empty (no default constraint).

    The selectors of the pod's namespace's Services that match its labels are merged as a
    label set (a later Service wins a key; Services are taken in name order); then the
    pod's controller (``controller`` = (kind, name) of the ownerReference with
    ``controller: true``), looked up by ``get_controller(kind, namespace, name)``: a
    ReplicationController's map is merged into the set, a ReplicaSet's or StatefulSet's
    LabelSelector is added as requirements (ANDed, not merged). A controller that is not
    (or no longer) known adds nothing, as upstream's lister miss. Runtime complexity:
    O(services in the namespace + selector sizes)."""
    merged: dict[str, str] = {}
    for svc in sorted(services, key=lambda s: s.name):
        if svc.namespace == namespace and svc.matches(labels):
            merged.update(svc.selector or ())
    extra: list[LabelSelectorRequirement] = []
    if controller is not None:
        kind, name = controller
        obj = get_controller(kind, namespace, name)
        if obj is not None and obj.kind == kind:
            if kind == "ReplicationController":
                merged.update(obj.set_selector)
            elif obj.selector is not None:
                extra.extend(
                    LabelSelectorRequirement(k, "In", frozenset((v,)))
                    for k, v in obj.selector.match_labels
                )
                extra.extend(obj.selector.match_expressions)
    if not merged and not extra:
        return None
    return LabelSelector(tuple(sorted(merged.items())), tuple(extra))


class SelectorObjects:
    """The Services and workload controllers that system default spreading reads (the
    listers of upstream's PodTopologySpread), fed by ``SchedulerCore.on_selector_object_*``.

    Pods name their controller by kind and uid (``PodInfo.owner_kind_uid``), so controllers
    are found by uid; upstream looks them up by the ownerReference's name, which differs
    only for a stale reference to a deleted controller whose name was reused.
    ``default_selector`` answers from a memo keyed by the pod's namespace, labels and
    controller, emptied on every change: the pods of one workload share one answer (and
    one selector object, so the spreading counts cached per node are shared too)."""

    def __init__(self) -> None:
        self.services: dict[str, dict[str, ServiceInfo]] = {}  # namespace -> name -> Service
        self.controllers: dict[tuple[str, str, str], SelectorObject] = {}  # kind, ns, name
        self._by_uid: dict[tuple[str, str], SelectorObject] = {}  # kind, uid
        self._memo: dict[
            tuple[str, tuple[tuple[str, str], ...], tuple[str, str] | None],
            LabelSelector | None,
        ] = {}

    def set_service(self, svc: ServiceInfo) -> bool:
        """Add or replace a Service; True when the stored record changed."""
        by_name = self.services.setdefault(svc.namespace, {})
        if by_name.get(svc.name) == svc:
            return False
        by_name[svc.name] = svc
        self._memo.clear()
        return True

    def delete_service(self, key: str) -> bool:
        namespace, _, name = key.partition("/")
        by_name = self.services.get(namespace)
        if by_name is None or by_name.pop(name, None) is None:
            return False
        if not by_name:
            del self.services[namespace]
        self._memo.clear()
        return True

    def set_controller(self, obj: SelectorObject) -> bool:
        """Add or replace a ReplicationController/ReplicaSet/StatefulSet; True when the
        stored record changed."""
        k = (obj.kind, obj.namespace, obj.name)
        old = self.controllers.get(k)
        if old == obj:
            return False
        if old is not None:
            self._by_uid.pop((old.kind, old.uid), None)
        self.controllers[k] = obj
        self._by_uid[(obj.kind, obj.uid)] = obj
        self._memo.clear()
        return True

    def delete_controller(self, kind: str, key: str) -> bool:
        namespace, _, name = key.partition("/")
        old = self.controllers.pop((kind, namespace, name), None)
        if old is None:
            return False
        self._by_uid.pop((old.kind, old.uid), None)
        self._memo.clear()
        return True

    def default_selector(
        self, namespace: str, labels: Mapping[str, str], owner_kind_uid: tuple[str, str] | None
    ) -> LabelSelector | None:
        """``default_selector`` for a pod; memoised. Runtime complexity: O(labels) when
        remembered, else O(services in the namespace)."""
        key = (namespace, tuple(labels.items()), owner_kind_uid)
        try:
            return self._memo[key]
        except KeyError:
            pass
        controller = None
        if owner_kind_uid is not None:
            obj = self._by_uid.get(owner_kind_uid)
            if obj is not None and obj.namespace == namespace:
                controller = (obj.kind, obj.name)
        got = default_selector(
            namespace,
            labels,
            controller,
            self.services.get(namespace, {}).values(),
            lambda kind, ns, name: self.controllers.get((kind, ns, name)),
        )
        if len(self._memo) >= 4096:
            self._memo.clear()
        self._memo[key] = got
        return got


def broken_linear(shape: Sequence[tuple[int, int]], util: int) -> int:
    """Upstream's ``BuildBrokenLinearFunction`` over ``shape`` ((utilisation 0..100, score
    0..10) points, utilisation increasing), its scores scaled to 0..100: the score of
    ``util`` on the line between the points around it (Go's truncating division), the
    first point's below it and the last one's above."""
    if util <= shape[0][0]:
        return shape[0][1] * 10
    for (x0, y0), (x1, y1) in itertools.pairwise(shape):
        if util <= x1:
            step = (y1 - y0) * 10 * (util - x0)
            q = abs(step) // (x1 - x0)
            return y0 * 10 + (q if step >= 0 else -q)
    return shape[-1][1] * 10
