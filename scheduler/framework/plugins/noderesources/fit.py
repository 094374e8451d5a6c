"""NodeResourcesFit: the node must have room for the pod's requests (cpu, memory,
ephemeral-storage, pod count, extended resources); scoring by LeastAllocated (default),
MostAllocated or RequestedToCapacityRatio over the configured resources.

A request larger than the node's whole allocatable can never be met by preemption, so that
rejection is UNSCHEDULABLE_AND_UNRESOLVABLE (upstream marks such insufficiencies
``Unresolvable``); anything else is UNSCHEDULABLE and preemption may help.

``filter_batch`` and ``score_batch`` compute the same answers for every node of the snapshot
at once from its ``NodeArrays`` (integer numpy arithmetic, exact below ``EXACT_LIMIT``); a pod
asking for an extended resource, or a node with huge numbers, goes the per-node way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from scheduler.backend.cache.snapshot import (
    EXACT_LIMIT,
    BoolArray,
    Int64Array,
    IntpArray,
    NodeArrays,
    Snapshot,
)
from scheduler.framework import signers
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    EventRegistration,
    QueueingHint,
    SignFragment,
    Status,
)
from scheduler.framework.plugins import names
from scheduler.framework.plugins.helper import PassingPreFilter, broken_linear
from scheduler.types import (
    DEVICE_CLASS_PREFIX,
    NodeInfo,
    NodeRecord,
    PodInfo,
    Resource,
    is_extended_resource_name,
)

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"


@dataclass(frozen=True, slots=True)
class InsufficientResource:
    resource: str
    reason: str
    requested: int
    used: int
    capacity: int
    unresolvable: bool


class ExtendedResourceClasses(Protocol):
    """Which extended resources DeviceClasses back (DynamicResources' objects)."""

    @property
    def backs_extended_resources(self) -> bool: ...

    def extended_class(self, resource: str) -> object | None: ...

    def extended_devices(self, node: NodeRecord, resource: str) -> tuple[int, int]: ...


_NONE: frozenset[str] = frozenset()


def delegated_resources(req: Resource, dra: ExtendedResourceClasses | None) -> frozenset[str]:
    """The extended resources the pod asks for that a DeviceClass backs: on a node whose
    allocatable does not offer one, DynamicResources allocates devices for it instead
    (upstream's shouldDelegateResourceToDRA)."""
    if dra is None or not req.scalar or not dra.backs_extended_resources:
        return _NONE
    return frozenset(n for n, q in req.scalar.items() if q and dra.extended_class(n) is not None)


def sign_requests(
    pod: PodInfo, dra: ExtendedResourceClasses | None
) -> tuple[list[SignFragment], Status]:
    """NodeResourcesFit's and BalancedAllocation's signature: the pod's requests, unless
    devices back one of its extended resources (a claim is then made for it)."""
    if delegated_resources(pod.requests, dra):
        return [], Status.unschedulable(
            "signature disabled when dra extended resources are used in the cluster"
        )
    return [SignFragment(signers.RESOURCES, signers.resources(pod))], SUCCESS


_NOTHING = Resource()  # an empty node's requests (never changed)


def insufficient_resources(
    req: Resource,
    ni: NodeInfo,
    ignored: frozenset[str] = frozenset(),
    delegated: frozenset[str] = _NONE,
) -> list[InsufficientResource]:
    """Every way in which the pod does not fit (upstream's ``fitsRequest``)."""
    return insufficient_amounts(req, ni.allocatable, ni.requested, len(ni.pods), ignored, delegated)


def insufficient_amounts(
    req: Resource,
    alloc: Resource,
    used: Resource,
    npods: int,
    ignored: frozenset[str] = frozenset(),
    delegated: frozenset[str] = _NONE,
) -> list[InsufficientResource]:
    """``insufficient_resources`` of a node given by its allocatable, the sum of its pods'
    requests and their number. A ``delegated`` resource the node's allocatable does not
    offer is DynamicResources' to find."""
    out: list[InsufficientResource] = []
    if npods + 1 > alloc.allowed_pod_number:
        out.append(
            InsufficientResource("pods", "Too many pods", 1, npods, alloc.allowed_pod_number, False)
        )
    if not (req.milli_cpu or req.memory or req.ephemeral_storage or req.scalar):
        return out
    if req.milli_cpu and req.milli_cpu > alloc.milli_cpu - used.milli_cpu:
        out.append(
            InsufficientResource(
                "cpu",
                "Insufficient cpu",
                req.milli_cpu,
                used.milli_cpu,
                alloc.milli_cpu,
                req.milli_cpu > alloc.milli_cpu,
            )
        )
    if req.memory and req.memory > alloc.memory - used.memory:
        out.append(
            InsufficientResource(
                "memory",
                "Insufficient memory",
                req.memory,
                used.memory,
                alloc.memory,
                req.memory > alloc.memory,
            )
        )
    if (
        req.ephemeral_storage
        and req.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage
    ):
        out.append(
            InsufficientResource(
                "ephemeral-storage",
                "Insufficient ephemeral-storage",
                req.ephemeral_storage,
                used.ephemeral_storage,
                alloc.ephemeral_storage,
                req.ephemeral_storage > alloc.ephemeral_storage,
            )
        )
    for name, q in req.scalar.items():
        if not q or name in ignored:
            continue
        cap = alloc.scalar.get(name, 0)
        if cap <= 0 and name in delegated:
            continue
        have = used.scalar.get(name, 0)
        if q > cap - have:
            out.append(InsufficientResource(name, f"Insufficient {name}", q, have, cap, q > cap))
    return out


def fits_amounts(
    req: Resource,
    alloc: Resource,
    used: Resource,
    npods: int,
    ignored: frozenset[str] = frozenset(),
    delegated: frozenset[str] = _NONE,
) -> bool:
    """``not insufficient_amounts(...)``, without building the list (the same checks in
    the same order; preemption's dry run asks this many times per node)."""
    if npods + 1 > alloc.allowed_pod_number:
        return False
    if not (req.milli_cpu or req.memory or req.ephemeral_storage or req.scalar):
        return True
    if req.milli_cpu and req.milli_cpu > alloc.milli_cpu - used.milli_cpu:
        return False
    if req.memory and req.memory > alloc.memory - used.memory:
        return False
    if (
        req.ephemeral_storage
        and req.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage
    ):
        return False
    for name, q in req.scalar.items():
        if not q or name in ignored:
            continue
        cap = alloc.scalar.get(name, 0)
        if cap <= 0 and name in delegated:
            continue
        if q > cap - used.scalar.get(name, 0):
            return False
    return True


def _requested_grew(
    req: Resource, old: NodeRecord, new: NodeRecord, delegated: frozenset[str] = _NONE
) -> bool:
    """Upstream's ``haveAnyRequestedResourcesIncreased`` (a resource devices may provide
    on the node counts as grown, when the allocatable changed: upstream's hint runs for
    that update only)."""
    a, b = old.allocatable, new.allocatable
    if delegated and a == b:
        delegated = _NONE
    if b.allowed_pod_number > a.allowed_pod_number:
        return True
    return (
        (req.milli_cpu > 0 and b.milli_cpu > a.milli_cpu)
        or (req.memory > 0 and b.memory > a.memory)
        or (req.ephemeral_storage > 0 and b.ephemeral_storage > a.ephemeral_storage)
        or any(
            q
            and (
                b.scalar.get(k, 0) > a.scalar.get(k, 0)
                or (k in delegated and b.scalar.get(k, 0) <= 0)
            )
            for k, q in req.scalar.items()
        )
    )


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int = 1


DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


def _node_amounts(ni: NodeInfo, resource: str, *, non_zero: bool) -> tuple[int, int]:
    """(allocatable, already requested) of one resource on a node, for scoring."""
    alloc = ni.allocatable
    if resource == "cpu":
        return alloc.milli_cpu, ni.non_zero_cpu if non_zero else ni.requested.milli_cpu
    if resource == "memory":
        return alloc.memory, ni.non_zero_mem if non_zero else ni.requested.memory
    if resource == "ephemeral-storage":
        return alloc.ephemeral_storage, ni.requested.ephemeral_storage
    return alloc.scalar.get(resource, 0), ni.requested.scalar.get(resource, 0)


def pod_amount(pod: PodInfo, resource: str, *, non_zero: bool) -> int:
    if resource == "cpu":
        return pod.non_zero_milli_cpu if non_zero else pod.requests.milli_cpu
    if resource == "memory":
        return pod.non_zero_memory if non_zero else pod.requests.memory
    if resource == "ephemeral-storage":
        return pod.requests.ephemeral_storage
    return pod.requests.scalar.get(resource, 0)


def resource_vectors(
    pod: PodInfo,
    ni: NodeInfo,
    resources: Sequence[ResourceSpec],
    *,
    non_zero: bool = True,
    dra: ExtendedResourceClasses | None = None,
) -> tuple[list[int], list[int], list[int]]:
    """(requested-with-pod, allocated, allocatable) per resource; an extended resource the
    pod does not request, or one the node lacks, is left at zero (skipped by scorers). With
    ``dra``, an extended resource a DeviceClass backs counts, on a node whose allocatable
    does not offer it, the node's devices of the class and those in use (upstream's)."""
    requested = [0] * len(resources)
    allocated = [0] * len(resources)
    allocatable = [0] * len(resources)
    for i, spec in enumerate(resources):
        want = pod_amount(pod, spec.name, non_zero=non_zero)
        if want == 0 and spec.name not in ("cpu", "memory", "ephemeral-storage"):
            continue
        cap, used = _node_amounts(ni, spec.name, non_zero=non_zero)
        if (
            cap == 0
            and dra is not None
            and ni.node is not None
            and spec.name not in _STANDARD
            and dra.backs_extended_resources
        ):
            cap, used = dra.extended_devices(ni.node, spec.name)
        if cap == 0:
            continue
        allocatable[i] = cap
        allocated[i] = used
        requested[i] = used + want
    return requested, allocated, allocatable


_STANDARD = ("cpu", "memory", "ephemeral-storage")


def batch_columns(
    pod: PodInfo,
    arrays: NodeArrays,
    rows: IntpArray,
    resources: Sequence[ResourceSpec],
    *,
    non_zero: bool,
) -> list[tuple[ResourceSpec, Int64Array, Int64Array, int]] | None:
    """``resource_vectors`` for the nodes at ``rows``, column-wise: per scored resource
    (spec, allocatable, already requested, the pod's amount). An extended resource the pod
    does not request is left out (every scorer skips it); None if the pod requests one, or
    asks for more than the arrays hold exactly (score those nodes one by one)."""
    cols: list[tuple[ResourceSpec, Int64Array, Int64Array, int]] = []
    for spec in resources:
        want = pod_amount(pod, spec.name, non_zero=non_zero)
        if spec.name not in _STANDARD:
            if want == 0:
                continue
            return None
        if not 0 <= want < EXACT_LIMIT:
            return None
        if spec.name == "cpu":
            cap = arrays.alloc_cpu[rows]
            used = (arrays.nz_cpu if non_zero else arrays.req_cpu)[rows]
        elif spec.name == "memory":
            cap = arrays.alloc_mem[rows]
            used = (arrays.nz_mem if non_zero else arrays.req_mem)[rows]
        else:
            cap = arrays.alloc_eph[rows]
            used = arrays.req_eph[rows]
        cols.append((spec, cap, used, want))
    return cols


def _round_half_away(a: int, b: int) -> int:
    """``math.Round(a / b)`` for non-negative ``a`` and positive ``b``: halves round up."""
    return (2 * a + b) // (2 * b)


def _least(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def _most(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


class NodeResourcesFit(PassingPreFilter):
    name = names.NODE_RESOURCES_FIT

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filtering and scoring read the pod's requests; a pod whose extended resources
        devices back is not signable."""
        return sign_requests(pod, self.dra)

    def __init__(
        self,
        *,
        strategy: str = LEAST_ALLOCATED,
        resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES,
        shape: Sequence[tuple[int, int]] = ((0, 10), (100, 0)),
        ignored_resources: Iterable[str] = (),
        ignored_resource_groups: Iterable[str] = (),
        dra: ExtendedResourceClasses | None = None,
    ) -> None:
        """``ignored_resources`` / ``ignored_resource_groups``: extended resources (by name,
        or by the domain before their "/") that Filter does not check (upstream's
        ignoredResources and ignoredResourceGroups; other names are always checked)."""
        if strategy not in (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO):
            raise ValueError(f"NodeResourcesFitArgs.scoringStrategy.type: unknown {strategy!r}")
        if not resources:
            raise ValueError("NodeResourcesFitArgs.scoringStrategy.resources: must not be empty")
        self.strategy = strategy
        self.resources = tuple(resources)
        self.shape = tuple(sorted(shape))
        self.ignored_resources = frozenset(ignored_resources)
        self.ignored_resource_groups = frozenset(ignored_resource_groups)
        self.dra = dra
        # RequestedToCapacityRatio by utilisation percent (0..100), for score_batch.
        self._ratio_table = (
            np.array([self._ratio_of_utilization(u) for u in range(101)], dtype=np.int64)
            if self.shape
            else None
        )

    # ------------------------------------------------------------------ filter
    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        return self.filter_amounts(
            state, pod, node_info.allocatable, node_info.requested, len(node_info.pods)
        )

    def filter_amounts(
        self, state: CycleState, pod: PodInfo, alloc: Resource, used: Resource, num_pods: int
    ) -> Status:
        """``filter`` of a node given by its allocatable, the sum of its pods' requests and
        their number (all this plugin reads of a node: preemption's dry run uses it)."""
        # Fast path: the common all-fits case without building a list.
        req = pod.requests
        if (
            num_pods < alloc.allowed_pod_number
            and req.milli_cpu <= alloc.milli_cpu - used.milli_cpu
            and req.memory <= alloc.memory - used.memory
            and req.ephemeral_storage <= alloc.ephemeral_storage - used.ephemeral_storage
            and not req.scalar
        ):
            return SUCCESS
        delegated = delegated_resources(req, self.dra)
        bad = insufficient_amounts(req, alloc, used, num_pods, self._ignored(req), delegated)
        if not bad:
            return SUCCESS
        code = (
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            if any(b.unresolvable for b in bad)
            else Code.UNSCHEDULABLE
        )
        return Status(code, tuple(b.reason for b in bad), self.name)

    def filter_batch(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> BoolArray | None:
        """True where ``filter``'s fast path admits the pod: a pod slot free and the cpu,
        memory and ephemeral-storage requests within what is left (no extended request, or
        only extended resources devices back, on a node whose allocatable offers none)."""
        req = pod.requests
        delegated = _NONE
        if req.scalar:
            delegated = delegated_resources(req, self.dra)
            if not delegated or any(q and n not in delegated for n, q in req.scalar.items()):
                return None
        if not all(
            0 <= v < EXACT_LIMIT for v in (req.milli_cpu, req.memory, req.ephemeral_storage)
        ):
            return None
        a = snapshot.arrays()
        mask: BoolArray = (
            a.exact
            & (a.num_pods < a.alloc_pods)
            & (a.alloc_cpu - a.req_cpu >= req.milli_cpu)
            & (a.alloc_mem - a.req_mem >= req.memory)
            & (a.alloc_eph - a.req_eph >= req.ephemeral_storage)
        )
        if delegated:
            mask &= ~a.extended_alloc
        return mask

    def fits_amounts(
        self, state: CycleState, pod: PodInfo, alloc: Resource, used: Resource, num_pods: int
    ) -> bool:
        """``filter_amounts(...).is_success()``, cheaper."""
        req = pod.requests
        if not req.scalar:
            return fits_amounts(req, alloc, used, num_pods)
        delegated = delegated_resources(req, self.dra)
        return fits_amounts(req, alloc, used, num_pods, self._ignored(req), delegated)

    def _ignored(self, req: Resource) -> frozenset[str]:
        """The extended resources of ``req`` that Filter does not check."""
        if not (self.ignored_resources or self.ignored_resource_groups) or not req.scalar:
            return _NONE
        return frozenset(
            name
            for name in req.scalar
            if is_extended_resource_name(name)
            and (
                name in self.ignored_resources
                or name.partition("/")[0] in self.ignored_resource_groups
            )
        )

    # ------------------------------------------------------------------ score
    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        requested, _, allocatable = resource_vectors(pod, node_info, self.resources, dra=self.dra)
        ratio = self.strategy == REQUESTED_TO_CAPACITY_RATIO
        total = weights = 0
        for i, spec in enumerate(self.resources):
            cap = allocatable[i]
            if cap == 0:
                continue
            if self.strategy == LEAST_ALLOCATED:
                s = _least(requested[i], cap)
            elif self.strategy == MOST_ALLOCATED:
                s = _most(requested[i], cap)
            else:
                s = self._ratio(requested[i], cap)
                if s <= 0:
                    continue  # upstream averages RequestedToCapacityRatio over scores > 0
            total += s * spec.weight
            weights += spec.weight
        if not weights:
            return 0
        if ratio:
            return _round_half_away(total, weights)  # upstream math.Round
        return total // weights

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntpArray
    ) -> Int64Array | None:
        """``score`` of many nodes with the same integer arithmetic, column by column."""
        arrays = snapshot.arrays()
        cols = batch_columns(pod, arrays, rows, self.resources, non_zero=True)
        if cols is None:
            return None
        n = len(rows)
        out: Int64Array | None
        if self.strategy != REQUESTED_TO_CAPACITY_RATIO and all(
            n and int(cap.min()) > 0 for _, cap, _, _ in cols
        ):
            out = self._score_columns_with_capacity(cols, n)
        else:
            out = self._score_columns(cols, n)
        if out is None:
            return None
        for k in np.flatnonzero(~arrays.exact[rows]).tolist():
            out[k] = self.score(state, pod, snapshot.node_info_list[int(rows[k])])
        return out

    def _score_columns_with_capacity(
        self, cols: list[tuple[ResourceSpec, Int64Array, Int64Array, int]], n: int
    ) -> Int64Array:
        """``_score_columns`` under LeastAllocated or MostAllocated when every node has
        some of every scored resource: no node drops a resource, so the weights' sum is
        one number, and a request above the capacity needs no mask (LeastAllocated's
        free share is clipped at zero)."""
        total: Int64Array = np.zeros(n, dtype=np.int64)
        weights = 0
        least = self.strategy == LEAST_ALLOCATED
        for spec, cap, used, want in cols:
            requested = used + want
            if least:
                s = np.maximum(cap - requested, 0) * MAX_NODE_SCORE // cap
            else:
                s = np.minimum(requested, cap) * MAX_NODE_SCORE // cap
            total += s if spec.weight == 1 else s * spec.weight
            weights += spec.weight
        if not weights:
            return np.zeros(n, dtype=np.int64)
        out: Int64Array = total // weights
        return out

    def _score_columns(
        self, cols: list[tuple[ResourceSpec, Int64Array, Int64Array, int]], n: int
    ) -> Int64Array | None:
        """Each node's score from the columns (exact rows; the others are rescored one by
        one by the caller); None where RequestedToCapacityRatio cannot go by columns."""
        total = np.zeros(n, dtype=np.int64)
        weights = np.zeros(n, dtype=np.int64)
        for spec, cap, used, want in cols:
            requested = used + want
            valid = cap != 0
            safe_cap = np.where(valid, cap, 1)
            if self.strategy == LEAST_ALLOCATED:
                s = np.where(requested > cap, 0, (cap - requested) * MAX_NODE_SCORE // safe_cap)
            elif self.strategy == MOST_ALLOCATED:
                s = np.minimum(requested, cap) * MAX_NODE_SCORE // safe_cap
            else:
                util = np.minimum(100, requested * 100 // safe_cap)
                if self._ratio_table is None or (n and int(util.min()) < 0):
                    return None
                s = self._ratio_table[util]
                valid &= s > 0
            total += np.where(valid, s * spec.weight, 0)
            weights += np.where(valid, spec.weight, 0)
        nonzero = weights != 0
        safe_weights = np.where(nonzero, weights, 1)
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            out = (2 * total + weights) // (2 * safe_weights)  # _round_half_away
        else:
            out = total // safe_weights
        result: Int64Array = np.where(nonzero, out, 0).astype(np.int64)
        return result

    def normalize_scores_batch(
        self, state: CycleState, pod: PodInfo, scores: Int64Array
    ) -> Int64Array:
        return scores

    def _ratio(self, requested: int, capacity: int) -> int:
        """Broken-linear function of utilisation over the configured shape (scores 0..10,
        scaled to 0..100), upstream's ``BuildBrokenLinearFunction``."""
        util = min(100, requested * 100 // capacity) if capacity else 100
        return self._ratio_of_utilization(util)

    def _ratio_of_utilization(self, util: int) -> int:
        return broken_linear(self.shape, util)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        return None

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        return SUCCESS

    # ------------------------------------------------------------------ queueing hints
    def events_to_register(self) -> Iterable[EventRegistration]:
        def pod_deleted(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            # Any assigned pod that leaves frees a pod slot and its requests.
            return QueueingHint.QUEUE if isinstance(old, PodInfo) else QueueingHint.SKIP

        def node_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            # Upstream's isSchedulableAfterNodeChange: the pod must fit the node were it
            # empty; an added node queues it, an updated one only if an allocatable the pod
            # needs grew.
            if not isinstance(new, NodeRecord):
                return QueueingHint.SKIP
            delegated = delegated_resources(pod.requests, self.dra)
            # The node were it empty: its allocatable, nothing requested, no pod on it.
            if insufficient_amounts(
                pod.requests, new.allocatable, _NOTHING, 0, delegated=delegated
            ):
                return QueueingHint.SKIP
            if not isinstance(old, NodeRecord):
                return QueueingHint.QUEUE
            return (
                QueueingHint.QUEUE
                if _requested_grew(pod.requests, old, new, delegated)
                else (QueueingHint.SKIP)
            )

        def device_class_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            # Upstream's isSchedulableAfterDeviceClassEvent: a class that now backs an
            # extended resource the pod asks for (by its name, when added, or by its
            # extendedResourceName, when that is new).
            name = getattr(new, "name", None)
            ext = getattr(new, "extended_resource_name", None)
            wanted = pod.requests.scalar
            if old is not None:
                if getattr(old, "extended_resource_name", None) == ext:
                    return QueueingHint.SKIP
            elif name is not None and f"{DEVICE_CLASS_PREFIX}{name}" in wanted:
                return QueueingHint.QUEUE
            return QueueingHint.QUEUE if ext is not None and ext in wanted else QueueingHint.SKIP

        return [
            EventRegistration(ClusterEvent("AssignedPod", "Delete"), pod_deleted),
            EventRegistration(ClusterEvent("Node", "Add"), node_changed),
            EventRegistration(ClusterEvent("Node", "Update"), node_changed),
            EventRegistration(ClusterEvent("DeviceClass", "Add"), device_class_changed),
            EventRegistration(ClusterEvent("DeviceClass", "Update"), device_class_changed),
        ]
