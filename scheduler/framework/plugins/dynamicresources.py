"""DynamicResources, as upstream's dynamicresources plugin (structured parameters): a pod's
ResourceClaims (``spec.resourceClaims``) are allocated devices from ResourceSlices on the
node it is scheduled to.

PreEnqueue: every claim the pod names must exist (a template's claim: once the
resourceclaim controller has created it and named it in the pod's status; owned by the
pod) and not be being deleted; until then the pod waits in the gated set. PreFilter: a
claim already allocated may only be used on the nodes its allocation selects; the others
need allocating (their device classes must exist; a claim another pod is being scheduled
with is "in the process of being allocated"). Filter: the allocator
(scheduler/framework/plugins/draallocator.py) finds devices for them on the node, not in
use by any other claim. Score (upstream's prioritized-list score, weight 2): a node where
a ``firstAvailable`` request gets an earlier choice scores higher. Reserve holds the
devices in memory (no other pod gets them); PreBind writes the claim: the
``resource.kubernetes.io/delete-protection`` finalizer, then ``status.allocation`` and the
pod in ``status.reservedFor``; Unreserve gives the devices back and takes the pod out of
``reservedFor`` again. PostFilter: when the pod fits nowhere because a claim allocated
earlier is available on no node, and no other pod uses it, the allocation is removed so
that the claim can be allocated again (before DefaultPreemption, as upstream).

Partitionable devices (shared counters, per-device node selection) are allocated as
upstream's; with binding conditions, PreBind waits until the claim's status says they are
met (``bindingTimeout``), and a claim whose binding failed or timed out is available on no
node (PostFilter deallocates it); consumable capacity: requests for part of a device's
capacity, devices shared by several claims. Extended resources backed by devices: a pod
asking for an extended resource that a DeviceClass backs gets, on a node whose allocatable
does not offer it, a claim of its own (one request per container), created in PreBind and
named in the pod's ``status.extendedResourceClaimStatus``. Not built (upstream's alpha and
off-by-default features): pod-group claims, node allocatable resources."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Protocol

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.draapi import (
    EXTENDED_CLAIM_ANNOTATION,
    EXTENDED_CLAIM_IN_MEMORY,
    FINALIZER,
    FIRST_AVAILABLE_MAX,
    MODE_EXACT_COUNT,
    Allocation,
    ClaimRequest,
    Consumer,
    DeviceClassInfo,
    DeviceID,
    DeviceRequest,
    DeviceTaintRuleInfo,
    DraObject,
    ResourceClaimInfo,
    ResourceSliceInfo,
    resource_claim_from_dict,
)
from scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    CycleState,
    EventRegistration,
    PostFilterResult,
    PreFilterResult,
    QueueingHint,
    SignFragment,
    Status,
)
from scheduler.framework.plugins.draallocator import (
    Allocated,
    AllocationError,
    AllocationTimeout,
    FailedOnNode,
    Pool,
    Search,
    allocations,
    chosen_requests,
    class_admits,
    device_on_node,
    find,
    gather_pools,
    parse_selector,
    slice_on_node,
)
from scheduler.framework.plugins.helper import match_node_selector_terms
from scheduler.framework.plugins.volumebinding import node_relabelled
from scheduler.framework.waiting_pods import ApiClient, EventRecorder
from scheduler.types import (
    ContainerExtendedRequest,
    NodeInfo,
    NodeRecord,
    PodInfo,
    Taint,
    is_dra_extended_resource_name,
)

NAME = "DynamicResources"
_STATE_KEY = "DynamicResources"
_API = "/apis/resource.k8s.io/v1"


@dataclass
class DraObjects:
    """The ResourceClaims (by ``namespace/name``), ResourceSlices and DeviceClasses (by
    name) as the API server last said, with DynamicResources' assumptions over them
    (upstream's assume cache and in-flight allocations): an allocation held by Reserve
    until PreBind writes it, and the claim PreBind wrote, until the informer brings that
    version or a newer one. Also which devices are in use, kept up to date."""

    claims: dict[str, ResourceClaimInfo] = field(default_factory=dict)
    slices: dict[str, ResourceSliceInfo] = field(default_factory=dict)
    classes: dict[str, DeviceClassInfo] = field(default_factory=dict)
    taint_rules: dict[str, DeviceTaintRuleInfo] = field(default_factory=dict)
    assumed: dict[str, ResourceClaimInfo] = field(default_factory=dict)
    in_flight: dict[str, Allocated] = field(default_factory=dict)
    # Slices by the node they name; those for several nodes; every slice of a pool.
    node_slices: dict[str, dict[str, ResourceSliceInfo]] = field(default_factory=dict)
    shared_slices: dict[str, ResourceSliceInfo] = field(default_factory=dict)
    pools: dict[tuple[str, str], dict[str, ResourceSliceInfo]] = field(default_factory=dict)
    # Told of a claim whose in-flight allocation was given up (the core requeues pods).
    on_given_up: Callable[[ResourceClaimInfo], None] | None = None
    _in_use: Counter[DeviceID] = field(default_factory=Counter)
    _using: dict[str, tuple[DeviceID, ...]] = field(default_factory=dict)
    # Consumable capacity: shares held of devices several claims share (by device: how
    # many, and the capacity they take together), and each claim's.
    _shares: Counter[DeviceID] = field(default_factory=Counter)
    _share_capacity: dict[DeviceID, Counter[str]] = field(default_factory=dict)
    _sharing: dict[str, tuple[tuple[DeviceID, Mapping[str, int]], ...]] = field(
        default_factory=dict
    )
    # A node's pools as last gathered, with the node record they were gathered for: valid
    # while the record is the same object; emptied whenever a slice changes.
    _pools_of: dict[str, tuple[NodeRecord, list[Pool]]] = field(default_factory=dict)
    # Extended resources backed by devices: the class each resource name resolves to, and
    # the claims made for pods' extended resources, by the pod's uid.
    _by_resource: dict[str, DeviceClassInfo] = field(default_factory=dict)
    _extended_claims: dict[str, str] = field(default_factory=dict)

    def extended_class(self, resource: str) -> DeviceClassInfo | None:
        """The DeviceClass that backs extended resource ``resource`` (upstream's
        DeviceClassResolver): the class named deviceclass.resource.kubernetes.io/<class>,
        or the one whose ``extendedResourceName`` it is, the newest if several (by
        creation, then the least name)."""
        return self._by_resource.get(resource)

    @property
    def backs_extended_resources(self) -> bool:
        return bool(self._by_resource)

    def extended_devices(self, node: NodeRecord, resource: str) -> tuple[int, int]:
        """For scoring an extended resource devices back on a node whose allocatable does
        not offer it (upstream's calculateDRAResourceTotals): how many devices of the
        backing class the node's slices have, and how many of them are in use (allocated,
        being allocated, or shared). (0, 0) when no class backs it, or a selector fails."""
        cls = self._by_resource.get(resource)
        if cls is None:
            return 0, 0
        total = used = 0
        try:
            for s in self.candidates(node.name):
                per_device = s.per_device_nodes
                if not per_device and not slice_on_node(s, node):
                    continue
                for did, d in zip(s.ids, s.devices, strict=True):
                    if per_device and not device_on_node(d, node):
                        continue
                    if not class_admits(cls, d, did, s.driver):
                        continue
                    total += 1
                    if did in self._in_use or did in self._shares:
                        used += 1
        except AllocationError:
            return 0, 0
        return total, used

    def extended_claim(self, pod: PodInfo) -> ResourceClaimInfo | None:
        """The claim made for the pod's extended resources (annotated, its controller the
        pod), if the scheduler created one."""
        key = self._extended_claims.get(pod.uid)
        claim = None if key is None else self.claim(key)
        if claim is None or claim.controller is None or claim.controller[1] != pod.name:
            return None
        return claim

    def _resolve(self) -> None:
        by: dict[str, DeviceClassInfo] = {}
        named: dict[str, DeviceClassInfo] = {}
        for c in self.classes.values():
            by[c.implicit_resource_name] = c
            ext = c.extended_resource_name
            if ext is not None:
                best = named.get(ext)
                if best is None or (c.created, best.name) > (best.created, c.name):
                    named[ext] = c
        by.update(named)
        self._by_resource = by

    def node_pools(self, node: NodeRecord) -> list[Pool]:
        """The node's pools (``gather_pools``), cached: Filter asks for every node it
        visits in every cycle, and slices change rarely."""
        hit = self._pools_of.get(node.name)
        if hit is not None and hit[0] is node:
            return hit[1]
        pools = gather_pools(self.candidates(node.name), node, self.pool_slices)
        self._pools_of[node.name] = (node, pools)
        return pools

    def claim(self, key: str) -> ResourceClaimInfo | None:
        """The claim as the scheduler sees it: assumed, else the API server's."""
        return self.assumed.get(key) or self.claims.get(key)

    def in_use(self, did: DeviceID) -> bool:
        return did in self._in_use  # (entries that fall to 0 are deleted)

    def shared(self, did: DeviceID) -> Mapping[str, int] | None:
        """The capacity the claims' shares of a shared device take (None: no share)."""
        if did not in self._shares:
            return None
        return self._share_capacity.get(did) or _NONE_TAKEN

    def rule_taints(self, did: DeviceID) -> tuple[Taint, ...]:
        """The taints DeviceTaintRules put on the device (upstream patches its slice)."""
        if not self.taint_rules:
            return ()
        return tuple(r.taint for r in self.taint_rules.values() if r.taint and r.applies(did))

    def _refresh(self, key: str) -> None:
        """Recount the devices the claim ``key`` holds (admin access takes none)."""
        for did in self._using.pop(key, ()):
            self._in_use[did] -= 1
            if not self._in_use[did]:
                del self._in_use[did]
        for did, taken in self._sharing.pop(key, ()):
            self._shares[did] -= 1
            if self._shares[did]:
                self._share_capacity[did].subtract(taken)
            else:
                del self._shares[did]
                self._share_capacity.pop(did, None)
        pending = self.in_flight.get(key)
        shares: tuple[tuple[DeviceID, Mapping[str, int]], ...]
        if pending is not None:
            devices, shares = pending.devices, pending.shares
        else:
            c = self.claim(key)
            if c is None or c.allocation is None:
                devices, shares = (), ()
            else:
                devices, shares = c.allocation.devices, c.allocation.shares
        held = tuple(did for did, admin in devices if not admin)
        if held:
            self._using[key] = held
            for did in held:
                self._in_use[did] += 1
        if shares:
            self._sharing[key] = shares
            for did, taken in shares:
                self._shares[did] += 1
                self._share_capacity.setdefault(did, Counter()).update(taken)

    def assume(self, claim: ResourceClaimInfo) -> None:
        """The claim as PreBind wrote it (the API server's answer)."""
        current = self.claims.get(claim.key)
        if current is None or current.resource_version < claim.resource_version:
            self.assumed[claim.key] = claim
        if claim.extended and claim.controller is not None:
            self._extended_claims[claim.controller[2]] = claim.key
        self._refresh(claim.key)

    def move(self, old: str, new: str) -> None:
        """The in-flight allocation of claim ``old`` is now that of claim ``new`` (a claim
        for extended resources, created under its own name)."""
        pending = self.in_flight.pop(old, None)
        self._refresh(old)
        if pending is not None:
            self.hold(new, pending)

    def hold(self, key: str, allocated: Allocated) -> None:
        self.in_flight[key] = allocated
        self._refresh(key)

    def release(self, key: str, *, restore: bool = False) -> None:
        """The in-flight allocation of claim ``key`` ends: written (PreBind), or given up
        (``restore``: Unreserve; the claim is again as the API server said, and
        ``on_given_up`` is told, so that pods waiting for that claim or its devices are
        tried again, as upstream's assume cache reports its restore as an update)."""
        pending = self.in_flight.pop(key, None)
        if restore and pending is not None:  # (once written, the API's answer stays assumed)
            self.assumed.pop(key, None)
        self._refresh(key)
        claim = self.claim(key)
        if restore and pending is not None and claim is not None and self.on_given_up:
            self.on_given_up(claim)

    def set(self, obj: DraObject) -> DraObject | None:
        """The informer's add or update; returns the object it replaces."""
        if isinstance(obj, ResourceClaimInfo):
            old_claim = self.claims.get(obj.key)
            self.claims[obj.key] = obj
            if obj.extended and obj.controller is not None:
                self._extended_claims[obj.controller[2]] = obj.key
            mine = self.assumed.get(obj.key)
            if mine is not None and (
                obj.resource_version >= mine.resource_version or obj.uid != mine.uid
            ):
                del self.assumed[obj.key]
            self._refresh(obj.key)
            return old_claim
        if isinstance(obj, ResourceSliceInfo):
            self._pools_of.clear()
            old_slice = self.slices.get(obj.name)
            if old_slice is not None:
                self._unindex(old_slice)
            self.slices[obj.name] = obj
            if obj.node_name:
                self.node_slices.setdefault(obj.node_name, {})[obj.name] = obj
            else:
                self.shared_slices[obj.name] = obj
            self.pools.setdefault((obj.driver, obj.pool), {})[obj.name] = obj
            return old_slice
        if isinstance(obj, DeviceTaintRuleInfo):
            old_rule = self.taint_rules.get(obj.name)
            self.taint_rules[obj.name] = obj
            return old_rule
        old_class = self.classes.get(obj.name)
        self.classes[obj.name] = obj
        self._resolve()
        return old_class

    def _unindex(self, s: ResourceSliceInfo) -> None:
        if s.node_name:
            on_node = self.node_slices.get(s.node_name, {})
            on_node.pop(s.name, None)
            if not on_node:
                self.node_slices.pop(s.node_name, None)
        else:
            self.shared_slices.pop(s.name, None)
        pool = self.pools.get((s.driver, s.pool), {})
        pool.pop(s.name, None)
        if not pool:
            self.pools.pop((s.driver, s.pool), None)

    def delete(self, obj: DraObject) -> None:
        if isinstance(obj, ResourceClaimInfo):
            self.claims.pop(obj.key, None)
            self.assumed.pop(obj.key, None)
            self._refresh(obj.key)
            if (
                obj.controller is not None
                and self._extended_claims.get(obj.controller[2]) == obj.key
            ):
                del self._extended_claims[obj.controller[2]]
        elif isinstance(obj, ResourceSliceInfo):
            self._pools_of.clear()
            old = self.slices.pop(obj.name, None)
            if old is not None:
                self._unindex(old)
        elif isinstance(obj, DeviceTaintRuleInfo):
            self.taint_rules.pop(obj.name, None)
        else:
            self.classes.pop(obj.name, None)
            self._resolve()

    def candidates(self, node: str) -> Iterable[ResourceSliceInfo]:
        """The slices that may target ``node``: those naming it, and the shared ones."""
        yield from self.node_slices.get(node, {}).values()
        yield from self.shared_slices.values()

    def pool_slices(self, driver: str, pool: str) -> Iterable[ResourceSliceInfo]:
        return self.pools.get((driver, pool), {}).values()


_NONE_TAKEN: Mapping[str, int] = MappingProxyType({})


@dataclass(slots=True)
class _State:
    claims: tuple[ResourceClaimInfo, ...]  # the pod's, in spec order
    to_allocate: tuple[int, ...]  # positions of those without an allocation
    # The nodes where Filter found devices for them: the node record (Reserve searches
    # that node again, rather than Filter keeping every node's search), and, when some
    # request has firstAvailable subrequests, the (sub)requests chosen there (Score's).
    fits: dict[str, NodeRecord] = field(default_factory=dict)
    chosen_requests: dict[str, frozenset[str]] = field(default_factory=dict)
    unavailable: set[int] = field(default_factory=set)
    chosen: list[Allocated] | None = None  # Reserve's node's
    scored: bool = False  # some request has firstAvailable subrequests
    # Allocated claims whose devices' binding failed or timed out (available nowhere).
    not_ready: tuple[int, ...] = ()
    # Extended resources backed by devices: the pod's claim for them (in memory until
    # PreBind creates it, or one an earlier attempt created), the pod's requests of such
    # resources, the claim as it is for the resources devices provide on a node (by those
    # resources: its requests, and the pod status' request mappings), the nodes where
    # Filter allocated it (with the resources), Reserve's node's claim and allocation,
    # and the claim PreBind created.
    ext: ResourceClaimInfo | None = None
    ext_requests: tuple[tuple[str, int], ...] = ()
    ext_variants: dict[frozenset[str], _ExtendedClaim] = field(default_factory=dict)
    ext_nodes: dict[str, frozenset[str]] = field(default_factory=dict)
    ext_chosen: tuple[_ExtendedClaim, Allocated] | None = None
    ext_created: ResourceClaimInfo | None = None

    def clone(self) -> _State:
        return _State(
            self.claims,
            self.to_allocate,
            dict(self.fits),
            dict(self.chosen_requests),
            set(self.unavailable),
            self.chosen,
            self.scored,
            self.not_ready,
            self.ext,
            self.ext_requests,
            dict(self.ext_variants),
            dict(self.ext_nodes),
            self.ext_chosen,
            self.ext_created,
        )

    def ext_claim(self, node: str) -> _ExtendedClaim | None:
        """The claim for extended resources as Filter allocated it on ``node`` (None: the
        node's allocatable offers every one of them, or Filter did not allocate it)."""
        names = self.ext_nodes.get(node)
        return None if names is None else self.ext_variants[names]


@dataclass(frozen=True, slots=True)
class _ExtendedClaim:
    """The pod's claim for extended resources as one set of nodes needs it: its device
    requests, and which request serves which container (``status.extendedResourceClaimStatus``
    ``.requestMappings``, API form)."""

    claim: ResourceClaimInfo
    mappings: tuple[Mapping[str, str], ...]


def _extended_claim_for(
    pod: PodInfo,
    ext: ResourceClaimInfo,
    resources: Iterable[str],
    classes: Callable[[str], DeviceClassInfo | None],
) -> _ExtendedClaim:
    """Upstream's createRequestsAndMappings: for each resource (in name order), a request
    for each regular or sidecar container that asks for it, and at most one for the init
    containers that run to completion first (they run one at a time: the largest of what
    each still needs once it uses the requests of the containers after it); each
    container mapped to the requests it uses. Requests are named
    ``container-<i>-request-<j>`` (``i``: the container's position among init then
    regular containers; ``j``: the resource's among the container's request names sorted)
    and listed in name order."""
    requests: list[tuple[str, str, int]] = []
    mappings: list[tuple[str, str, str]] = []
    for resource in sorted(resources):
        cls = classes(resource)
        if cls is None:
            continue
        asks = sorted(
            (e for e in pod.extended_requests if e.resource == resource), key=lambda e: e.index
        )
        lasting: dict[int, tuple[str, int]] = {}  # by container position: (request, count)
        lasting_maps: list[tuple[str, str, str]] = []
        for e in asks:
            if not e.short_lived:
                name = _request_name(e)
                lasting[e.index] = (name, e.count)
                lasting_maps.append((e.container, resource, name))
        first_maps: list[tuple[str, str, str]] = []
        own: set[str] = set()
        largest: tuple[str, int] | None = None
        for e in asks:
            if not e.short_lived:
                continue
            covered = 0
            for position in sorted(lasting):
                if position < e.index:
                    continue
                name, count = lasting[position]
                covered += count
                first_maps.append((e.container, resource, name))
                if covered >= e.count:
                    break
            if covered >= e.count:
                continue
            name = _request_name(e)
            first_maps.append((e.container, resource, name))
            own.add(name)
            if largest is None or largest[1] < e.count - covered:
                largest = (name, e.count - covered)
        if largest is not None:
            if len(own) > 1:
                first_maps = [(c, r, largest[0] if n in own else n) for c, r, n in first_maps]
            requests.append((largest[0], cls.name, largest[1]))
        requests += [(name, cls.name, count) for name, count in lasting.values()]
        mappings += lasting_maps + first_maps
    requests.sort(key=lambda r: r[0])
    claim = replace(
        ext,
        requests=tuple(
            ClaimRequest(name, DeviceRequest(name, cls, (), MODE_EXACT_COUNT, count, False, ()), ())
            for name, cls, count in requests
        ),
    )
    return _ExtendedClaim(
        claim,
        tuple(
            MappingProxyType({"containerName": c, "resourceName": r, "requestName": n})
            for c, r, n in mappings
        ),
    )


def _request_name(e: ContainerExtendedRequest) -> str:
    return f"container-{e.index}-request-{e.position}"


_NAME_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String alphabet


def _generated_name(base: str) -> str:
    """The API server's generateName: the base (at most 58 characters) and 5 random
    characters (simulate, where no API server names the claim)."""
    return base[:58] + "".join(secrets.choice(_NAME_SUFFIX) for _ in range(5))


def _binding_outcome(error: str) -> str:
    """The metrics' status label of a failed wait for binding conditions."""
    if error.startswith("device binding failed"):
        return "failure"
    if error.startswith("device binding timeout"):
        return "timeout"
    return "error"


def _bound_claims(st: _State) -> tuple[ResourceClaimInfo, ...]:
    """The pod's claims PreBind reserved: its own, and the one created for its extended
    resources."""
    return st.claims if st.ext_created is None else (*st.claims, st.ext_created)


def _consumer(pod: PodInfo) -> Consumer:
    return Consumer("pods", pod.name, pod.uid)


def _reserved_for(claim: ResourceClaimInfo, pod: PodInfo) -> bool:
    return any(c.uid == pod.uid for c in claim.reserved_for)


class DraMetrics(Protocol):
    """Where DynamicResources' metrics go (the live scheduler's Prometheus metrics):
    upstream's resourceclaim_creates_total and the binding conditions' two."""

    def resource_claim_created(self, ok: bool) -> None: ...

    def binding_conditions(
        self,
        profile: str,
        status: str,
        seconds: float,
        drivers: Sequence[str],
        conditioned: Sequence[str],
    ) -> None: ...


class DynamicResources:
    name = NAME

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """A pod with ResourceClaims is not signable (as upstream: whether its devices
        fit one pod per node is not simple to tell)."""
        if pod.resource_claims:
            return [], Status.unschedulable("pods with dra resource claims are not signable")
        return [], SUCCESS

    node_only_filter = True  # Filter reads the pod's state and the node record only

    def __init__(
        self,
        objects: DraObjects,
        *,
        client: ApiClient | None = None,
        filter_timeout: float = 10.0,
        binding_timeout: float = 600.0,
        events: EventRecorder | None = None,
        poll_interval: float = 5.0,
        sleep: Callable[[float], Any] = asyncio.sleep,
        now: Callable[[], float] = time.time,
        metrics: DraMetrics | None = None,
        profile: str = "",
    ) -> None:
        self.objects = objects
        self.metrics = metrics
        self.profile = profile
        self.client = client
        self.filter_timeout = filter_timeout
        self.binding_timeout = binding_timeout
        self.events = events
        self.poll_interval = poll_interval  # upstream's: binding conditions polled each 5s
        self.sleep = sleep
        self.now = now
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ the pod's claims
    def pod_claims(self, pod: PodInfo) -> tuple[list[ResourceClaimInfo], str]:
        """The pod's claims, or why they cannot be used yet (upstream's
        foreachPodResourceClaim)."""
        out: list[ResourceClaimInfo] = []
        for name, claim_name, template, generated in pod.resource_claims:
            owned = False
            if claim_name:
                resolved = claim_name
            elif template:
                if generated is None:
                    return out, f'pod "{pod.key}": ResourceClaim not created yet'
                resolved = generated
                owned = True
                if not resolved:
                    continue  # none was needed (upstream skips it)
            else:
                return out, (
                    f'pod "{pod.key}", spec.resourceClaim "{name}": none of the supported '
                    "fields are set"
                )
            claim = self.objects.claim(f"{pod.namespace}/{resolved}")
            if claim is None:
                return out, f'resourceclaim.resource.k8s.io "{resolved}" not found'
            if claim.deleting:
                return out, f'resourceclaim "{resolved}" is being deleted'
            if owned and (claim.controller is None or claim.controller[2] != pod.uid):
                return out, (
                    f"ResourceClaim {claim.key} was not created for Pod {pod.key} "
                    "(Pod is not owner)"
                )
            out.append(claim)
        return out, ""

    # ------------------------------------------------------------------ PreEnqueue
    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.resource_claims:
            return SUCCESS
        _, problem = self.pod_claims(pod)
        return Status.unschedulable(problem, plugin=self.name) if problem else SUCCESS

    # ------------------------------------------------------------------ PreFilter
    def extended_requests(self, pod: PodInfo) -> tuple[tuple[str, int], ...]:
        """The pod's requests of extended resources, in name order, when devices back at
        least one of them (upstream's hasDeviceClassMappedExtendedResource); else ()."""
        o = self.objects
        scalar = pod.requests.scalar
        if not scalar or not o.backs_extended_resources:
            return ()
        wanted = [(n, q) for n, q in scalar.items() if q and is_dra_extended_resource_name(n)]
        if not any(o.extended_class(n) is not None for n, _ in wanted):
            return ()
        return tuple(sorted(wanted))

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        ext_requests = self.extended_requests(pod)
        if not pod.resource_claims and not ext_requests:
            return None, SKIP
        claims: list[ResourceClaimInfo] = []
        if pod.resource_claims:
            claims, problem = self.pod_claims(pod)
            if problem:
                return None, Status.unschedulable(problem, plugin=self.name)
        ext = None
        if ext_requests:
            # One claim for all of them: the one an earlier attempt created, if any, else
            # one in memory that PreBind creates (upstream's special claim).
            ext = self.objects.extended_claim(pod) or ResourceClaimInfo(
                namespace=pod.namespace,
                name=EXTENDED_CLAIM_IN_MEMORY,
                uid=pod.uid,
                resource_version=0,
                requests=(),
                constraints=(),
                config=(),
                allocation=None,
                reserved_for=(),
                controller=("Pod", pod.name, pod.uid),
                extended=True,
            )
        if not claims and ext is None:
            return None, SKIP
        to_allocate = []
        not_ready = []
        for i, claim in enumerate(claims):
            if claim.allocation is not None:
                if claim.allocation.waits:
                    ready, failed = self.binding_state(claim)
                    if failed or (not ready and self.binding_timed_out(claim)):
                        not_ready.append(i)
                continue
            if claim.key in self.objects.in_flight:
                msg = f"resource claim {claim.key} is in the process of being allocated"
                return None, Status.unschedulable(msg, plugin=self.name)
            for req in claim.requests:
                subs = (
                    [(req.name, req.exactly)]
                    if req.exactly is not None
                    else [(f"{req.name}/{s.name}", s) for s in req.first_available]
                )
                if not subs:
                    msg = f"resource claim {claim.key}, request {req.name}: unknown request type"
                    return None, Status.unschedulable(msg, plugin=self.name)
                for qualified, r in subs:
                    if r is not None and r.device_class not in self.objects.classes:
                        msg = f"request {qualified}: device class {r.device_class} does not exist"
                        return None, Status.unschedulable(msg, plugin=self.name)
            to_allocate.append(i)
        scored = any(r.first_available for c in claims for r in c.requests)
        state.write(
            _STATE_KEY,
            _State(
                tuple(claims),
                tuple(to_allocate),
                scored=scored,
                not_ready=tuple(not_ready),
                ext=ext,
                ext_requests=ext_requests,
            ),
        )
        return None, SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    # ------------------------------------------------------------------ Filter
    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        st: _State | None = state.read(_STATE_KEY)
        node = node_info.node
        if st is None or node is None:
            return SUCCESS
        ext: _ExtendedClaim | None = None
        if st.ext is not None:
            ext, problem = self._filter_extended(st, pod, node)
            if problem is not None:
                return problem
            if ext is None and not st.claims:
                return SUCCESS  # the node's allocatable offers them (a device plugin)
        unavailable = list(st.not_ready)
        for i, claim in enumerate(st.claims):
            alloc = claim.allocation
            if (
                alloc is not None
                and alloc.node_selector is not None
                and not match_node_selector_terms(alloc.node_selector, node.labels, node.name)
            ):
                unavailable.append(i)
        requests: frozenset[str] | None = None
        if st.to_allocate or ext is not None:
            try:
                search = self._find(st, node, ext)
            except AllocationError as e:
                return Status.error(str(e), plugin=self.name)
            except AllocationTimeout:
                msg = f"node {node.name}: timed out trying to allocate devices"
                return Status.error(msg, plugin=self.name)
            except FailedOnNode as e:
                return Status.unschedulable(str(e), plugin=self.name)
            if search is None:
                return Status.unschedulable("cannot allocate all claims", plugin=self.name)
            if st.scored:
                requests = chosen_requests(search)
        if unavailable:
            st.unavailable.update(unavailable)
            return Status.unschedulable("resourceclaim not available on the node", plugin=self.name)
        if st.to_allocate or ext is not None:
            st.fits[node.name] = node
            if requests is not None:
                st.chosen_requests[node.name] = requests
        return SUCCESS

    def _filter_extended(
        self, st: _State, pod: PodInfo, node: NodeRecord
    ) -> tuple[_ExtendedClaim | None, Status | None]:
        """Upstream's filterExtendedResources: which of the pod's extended resources
        devices must provide on the node (those backed by a class that the node's
        allocatable does not offer), as the claim's requests. A claim an earlier attempt
        created fits no node (PostFilter deletes it, and the pod is tried afresh)."""
        assert st.ext is not None
        if st.ext.requests:
            return None, Status.unschedulable(
                "cannot schedule extended resource claim", plugin=self.name
            )
        needed = []
        for name, _ in st.ext_requests:
            offered = node.allocatable.scalar.get(name)
            if not offered and self.objects.extended_class(name) is not None:
                needed.append(name)
            elif offered is None:
                return None, Status.unschedulable("cannot fit resource", plugin=self.name)
        if not needed:
            return None, None
        names = frozenset(needed)
        variant = st.ext_variants.get(names)
        if variant is None:
            variant = _extended_claim_for(pod, st.ext, names, self.objects.extended_class)
            st.ext_variants[names] = variant
        st.ext_nodes[node.name] = names
        return variant, None

    def _deadline(self) -> float | None:
        return time.perf_counter() + self.filter_timeout if self.filter_timeout > 0 else None

    def _find(
        self, st: _State, node: NodeRecord, ext: _ExtendedClaim | None = None
    ) -> Search | None:
        o = self.objects
        claims = [st.claims[i] for i in st.to_allocate]
        if ext is not None:
            claims.append(ext.claim)
        return find(
            claims,
            node,
            o.node_pools(node),
            o.classes,
            o.in_use,
            o.rule_taints,
            deadline=self._deadline(),
            shared=o.shared,
        )

    # ------------------------------------------------------------------ PostFilter
    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """Upstream's deallocation of a claim that is available on no node and that no
        other pod uses. The status update is sent in the background (our PostFilter point
        does not wait): its event brings the pod back."""
        st: _State | None = state.read(_STATE_KEY)
        if st is None:
            return None, Status.unschedulable(plugin=self.name)
        for i in sorted(st.unavailable):
            claim = self.objects.claim(st.claims[i].key) or st.claims[i]
            users = claim.reserved_for
            if claim.allocation is not None and (
                not users or (len(users) == 1 and users[0].uid == pod.uid)
            ):
                if self.client is None:
                    self.objects.assume(
                        replace(
                            claim,
                            allocation=None,
                            reserved_for=(),
                            resource_version=claim.resource_version + 1,
                        )
                    )
                else:
                    self._background(self._deallocate(claim))
                return None, Status.unschedulable(
                    "deallocation of ResourceClaim completed", plugin=self.name
                )
        if st.ext is not None and st.ext.name != EXTENDED_CLAIM_IN_MEMORY:
            # The claim for extended resources an earlier attempt created: deleted, so
            # that the next attempt makes it afresh (upstream's).
            self._delete_claim(st.ext)
            return None, Status.unschedulable(
                "deletion of ResourceClaim completed", plugin=self.name
            )
        return None, Status.unschedulable(plugin=self.name)

    def _delete_claim(self, claim: ResourceClaimInfo) -> None:
        if self.client is None:
            self.objects.delete(claim)
        else:
            self._background(self._delete_claim_api(claim))

    async def _delete_claim_api(self, claim: ResourceClaimInfo) -> None:
        """Upstream's deleteClaim: the finalizer removed, then the claim deleted (a
        failure is not retried: the next attempt finds the claim and deletes it again)."""
        assert self.client is not None
        path = f"{_API}/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
        with contextlib.suppress(Exception):
            await self.client.request(
                "PATCH",
                path,
                body={
                    "metadata": {
                        "uid": claim.uid,
                        "$deleteFromPrimitiveList/finalizers": [FINALIZER],
                    }
                },
                content_type="application/strategic-merge-patch+json",
            )
            options = {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"uid": claim.uid},
            }
            await self.client.request("DELETE", path, body=options)

    async def _deallocate(self, claim: ResourceClaimInfo) -> None:
        body = {
            "metadata": {"resourceVersion": str(claim.resource_version)},
            "status": {"allocation": None, "reservedFor": None, "devices": None},
        }
        # A failure: the claim changed, and its event requeues the pod.
        await self._patch_status(claim, body, "application/merge-patch+json")

    async def _patch_status(
        self, claim: ResourceClaimInfo, body: dict[str, Any], content_type: str
    ) -> None:
        """A background write of the claim's status; a failure is not retried (upstream
        logs it)."""
        assert self.client is not None
        with contextlib.suppress(Exception):
            await self.client.request(
                "PATCH",
                f"{_API}/namespaces/{claim.namespace}/resourceclaims/{claim.name}/status",
                body=body,
                content_type=content_type,
            )

    def _background(self, coro: Any) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except RuntimeError:  # no loop (a test calling the plugin directly)
            coro.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ Score
    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        st: _State | None = state.read(_STATE_KEY)
        if st is None or not any(r.first_available for c in st.claims for r in c.requests):
            return SKIP  # every node would score 0
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        """Upstream's computeScore: for each subrequest chosen, 8 less its position."""
        st: _State | None = state.read(_STATE_KEY)
        if st is None:
            return 0
        found = st.chosen_requests.get(node_info.name)
        if found is None and st.to_allocate:
            return 0
        total = 0
        for claim in st.claims:
            alloc = claim.allocation
            if alloc is not None:
                results = alloc.raw.get("devices", {}).get("results", ())
                used = frozenset(r.get("request") for r in results)
            else:
                used = found or frozenset()
            for req in claim.requests:
                for i, sub in enumerate(req.first_available):
                    if f"{req.name}/{sub.name}" in used:
                        total += FIRST_AVAILABLE_MAX - i
        return total

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Upstream's DefaultNormalizeScore: the highest becomes 100."""
        top = max(scores, default=0)
        if top == 0:
            return
        for i, s in enumerate(scores):
            scores[i] = s * 100 // top

    # ------------------------------------------------------------------ Reserve
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        st: _State | None = state.read(_STATE_KEY)
        if st is None:
            return SUCCESS
        ext = st.ext_claim(node_name)
        if not st.to_allocate and ext is None:
            return SUCCESS  # (extended resources: the node's allocatable offers them)
        node = st.fits.get(node_name)
        if node is None:
            return Status.error("claim allocation not found for node", plugin=self.name)
        # The node's search again (Filter kept nothing of it); within the cycle nothing it
        # reads has changed, unless an extender's call was awaited meanwhile.
        try:
            search = self._find(st, node, ext)
        except (AllocationError, AllocationTimeout, FailedOnNode) as e:
            return Status.error(f"node {node_name}: {e or type(e).__name__}", plugin=self.name)
        if search is None:
            msg = f"node {node_name}: the devices found in Filter are taken"
            return Status.error(msg, plugin=self.name)
        claims = [st.claims[i] for i in st.to_allocate]
        if ext is not None:
            claims.append(ext.claim)
        found = allocations(search, claims)
        if ext is not None:
            st.ext_chosen = (ext, found.pop())
            self.objects.hold(ext.claim.key, st.ext_chosen[1])
        st.chosen = found
        # The state lives on with the pod's binding (a backlog keeps hundreds of pods there).
        st.fits = {node_name: node}
        st.chosen_requests = {}
        st.ext_variants = {}
        st.ext_nodes = {}
        for i, allocated in zip(st.to_allocate, found, strict=True):
            self.objects.hold(st.claims[i].key, allocated)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        st: _State | None = state.read(_STATE_KEY)
        if st is None:
            return
        if st.ext_chosen is not None:
            made = st.ext_created
            self.objects.release((made or st.ext_chosen[0].claim).key, restore=True)
            if made is not None:  # created in PreBind: deleted again (upstream's)
                st.ext_created = None
                self._delete_claim(self.objects.claim(made.key) or made)
            st.ext_chosen = None
        for i, claim in enumerate(st.claims):
            if i in st.to_allocate and st.chosen is not None:
                self.objects.release(claim.key, restore=True)
            current = self.objects.claim(claim.key)
            if (
                current is not None
                and current.allocation is not None
                and _reserved_for(current, pod)
            ):
                if self.client is None:
                    users = tuple(c for c in current.reserved_for if c.uid != pod.uid)
                    self.objects.assume(
                        replace(
                            current,
                            reserved_for=users,
                            resource_version=current.resource_version + 1,
                        )
                    )
                else:
                    self._background(self._unreserve_api(current, pod))

    async def _unreserve_api(self, claim: ResourceClaimInfo, pod: PodInfo) -> None:
        # A strategic merge patch deleting the pod's entry, as upstream's (the list is
        # merged by uid).
        body = {
            "metadata": {"uid": claim.uid},
            "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]},
        }
        await self._patch_status(claim, body, "application/strategic-merge-patch+json")

    # ------------------------------------------------------------------ PreBind
    def pre_bind_needed(self, state: CycleState) -> bool:
        st: _State | None = state.read(_STATE_KEY)
        return st is not None

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SKIP if state.read(_STATE_KEY) is None else SUCCESS

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        st: _State | None = state.read(_STATE_KEY)
        if st is None:
            return SUCCESS
        chosen = dict(zip(st.to_allocate, st.chosen or (), strict=False))
        for i, claim in enumerate(st.claims):
            current = self.objects.claim(claim.key) or claim
            if _reserved_for(current, pod):
                continue
            error = await self._bind_claim(current, chosen.get(i), pod)
            if error:
                return Status.error(error, plugin=self.name)
        if st.ext_chosen is not None and st.ext_created is None:
            error = await self._bind_extended(st, pod)
            if error:
                return Status.error(error, plugin=self.name)
        if self.client is None:
            return SUCCESS  # simulate: no driver reports binding conditions
        return await self._await_binding_conditions(st, pod, node_name)

    async def _bind_extended(self, st: _State, pod: PodInfo) -> str:
        """Upstream's PreBind of the claim for extended resources: created (named
        ``<pod>-extended-resources-<random>``, owned by the pod, annotated; with the
        delete-protection finalizer at once), its allocation and the pod's reservation
        written as any claim's, then the pod's ``status.extendedResourceClaimStatus``:
        the claim's name and which request serves which container. Returns an error,
        or ""."""
        assert st.ext_chosen is not None
        ext, allocated = st.ext_chosen
        memory = ext.claim
        if self.client is None:  # simulate: the claim exists once assumed
            created = replace(
                memory,
                name=_generated_name(f"{pod.name}-extended-resources-"),
                uid=str(uuid.uuid4()),
                resource_version=1,
                finalizers=(FINALIZER,),
            )
            self.objects.set(created)
        else:
            body = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "generateName": f"{pod.name}-extended-resources-",
                    "namespace": pod.namespace,
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": pod.name,
                            "uid": pod.uid,
                            "controller": True,
                        }
                    ],
                    "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                    "finalizers": [FINALIZER],
                },
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": r.name,
                                "exactly": {
                                    "deviceClassName": r.exactly.device_class,
                                    "allocationMode": MODE_EXACT_COUNT,
                                    "count": r.exactly.count,
                                },
                            }
                            for r in memory.requests
                            if r.exactly is not None
                        ]
                    }
                },
            }
            try:
                answer = await self.client.request(
                    "POST", f"{_API}/namespaces/{pod.namespace}/resourceclaims", body=body
                )
                created = resource_claim_from_dict(answer)
            except Exception as e:
                if self.metrics is not None:
                    self.metrics.resource_claim_created(False)
                why = e or type(e).__name__
                return f"create claim for extended resources of pod {pod.key}: {why}"
            if self.metrics is not None:
                self.metrics.resource_claim_created(True)
        st.ext_created = created
        self.objects.move(memory.key, created.key)
        error = await self._bind_claim(created, allocated, pod)
        if error:
            return error
        if self.client is None:
            return ""
        status = {
            "extendedResourceClaimStatus": {
                "requestMappings": [dict(m) for m in ext.mappings],
                "resourceClaimName": created.name,
            }
        }
        try:
            await self.client.request(
                "PATCH",
                f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
                body={"metadata": {"uid": pod.uid}, "status": status},
                content_type="application/strategic-merge-patch+json",
            )
        except Exception as e:
            return f"update pod {pod.key} ExtendedResourceClaimStatus: {e or type(e).__name__}"
        return ""

    # ------------------------------------------------------------------ binding conditions
    def binding_state(self, claim: ResourceClaimInfo) -> tuple[bool, str]:
        """Upstream's isClaimReadyForBinding: (every binding condition of the allocated
        devices is True in the claim's status, why the binding failed: a failure condition
        that is True)."""
        alloc = claim.allocation
        if alloc is None:
            return False, ""
        for wait in alloc.waits:
            conditions = (claim.conditions or {}).get(wait.device)
            if conditions is None:
                return False, ""
            for kind in wait.failure_conditions:
                c = conditions.get(kind)
                if c is not None and c.status == "True":
                    return False, (
                        f"device binding failed: claim={claim.name}, reason={c.reason}, "
                        f"message={json.dumps(c.message)}"
                    )
            for kind in wait.conditions:
                c = conditions.get(kind)
                if c is None or c.status != "True":
                    return False, ""
        return True, ""

    def binding_timed_out(self, claim: ResourceClaimInfo) -> bool:
        """Upstream's isClaimTimeout: an allocation that waits on binding conditions and
        was made longer than ``binding_timeout`` ago."""
        alloc = claim.allocation
        return (
            alloc is not None
            and bool(alloc.waits)
            and alloc.timestamp is not None
            and alloc.timestamp + self.binding_timeout < self.now()
        )

    def _pod_ready(self, st: _State) -> tuple[bool, str]:
        """Upstream's isPodReadyForBinding, over the claims as the informer last said."""
        for claim in _bound_claims(st):
            current = self.objects.claim(claim.key)
            if current is None:
                return False, f'resourceclaim.resource.k8s.io "{claim.name}" not found'
            ready, failed = self.binding_state(current)
            if failed:
                return False, failed
            if not ready:
                if self.binding_timed_out(current):
                    return False, f"device binding timeout: claim={current.name}"
                return False, ""
        return True, ""

    async def _await_binding_conditions(self, st: _State, pod: PodInfo, node_name: str) -> Status:
        """Upstream's wait in PreBind: when a device of the pod's claims has binding
        conditions, the pod is bound only once they are all True (checked at once, then
        every ``poll_interval``), and not after a failure condition or ``binding_timeout``
        (an error: the next attempt finds the claim unavailable and PostFilter deallocates
        it)."""
        waits = False
        for claim in _bound_claims(st):
            current = self.objects.claim(claim.key)
            if current is not None and current.allocation is not None and current.allocation.waits:
                waits = True
        if not waits:
            return SUCCESS
        if self.events is not None:
            self.events.eventf(
                pod,
                None,
                "Normal",
                "BindingConditionsPending",
                "Scheduling",
                f"waiting for binding conditions for device on node {node_name}",
            )
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self.binding_timeout
        outcome = "error"
        try:
            while True:
                ready, error = self._pod_ready(st)
                if error:
                    outcome = _binding_outcome(error)
                    return Status.error(error, plugin=self.name)
                if ready:
                    outcome = "success"
                    return SUCCESS
                remaining = deadline - loop.time()
                if remaining <= 0:
                    outcome = "timeout"
                    msg = "device binding timeout: context deadline exceeded"
                    return Status.error(msg, plugin=self.name)
                await self.sleep(min(self.poll_interval, remaining))
        finally:
            if self.metrics is not None:
                self._binding_metrics(st, outcome, loop.time() - started)

    def _binding_metrics(self, st: _State, outcome: str, seconds: float) -> None:
        """Upstream's: the wait's duration for every allocated device's driver, and one
        allocation with binding conditions per such device's driver, by the outcome."""
        assert self.metrics is not None
        drivers: list[str] = []
        conditioned: list[str] = []
        for claim in _bound_claims(st):
            current = self.objects.claim(claim.key) or claim
            if current.allocation is None:
                continue
            for r in current.allocation.raw.get("devices", {}).get("results", ()):
                drivers.append(str(r.get("driver") or ""))
                if r.get("bindingConditions"):
                    conditioned.append(str(r.get("driver") or ""))
        self.metrics.binding_conditions(self.profile, outcome, seconds, drivers, conditioned)

    async def _bind_claim(
        self, claim: ResourceClaimInfo, allocated: Allocated | None, pod: PodInfo
    ) -> str:
        """Upstream's bindClaim: the finalizer, then the allocation and the reservation.
        Returns an error, or ""."""
        users = [*claim.reserved_for, _consumer(pod)]
        if self.client is None:  # simulate: the assumption is the cluster's state
            alloc = claim.allocation
            if allocated is not None:
                alloc = Allocation(
                    allocated.devices,
                    parse_selector(allocated.raw.get("nodeSelector")),
                    allocated.raw,
                    timestamp=self.now(),
                    shares=allocated.shares,
                )
            self.objects.assume(
                replace(
                    claim,
                    allocation=alloc,
                    reserved_for=tuple(users),
                    finalizers=tuple(dict.fromkeys((*claim.finalizers, FINALIZER))),
                    resource_version=claim.resource_version + 1,
                )
            )
            self.objects.release(claim.key)
            return ""
        if claim.deleting:
            return f"claim {claim.key} got deleted in the meantime"
        path = f"{_API}/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
        version = str(claim.resource_version)
        status: dict[str, Any] = {"reservedFor": [u.api() for u in users]}
        try:
            if allocated is not None:
                if claim.allocation is not None:
                    return f"claim {claim.key} got allocated elsewhere in the meantime"
                if FINALIZER not in claim.finalizers:
                    answer = await self.client.request(
                        "PATCH",
                        path,
                        body={
                            "metadata": {
                                "resourceVersion": version,
                                "finalizers": [*claim.finalizers, FINALIZER],
                            }
                        },
                        content_type="application/merge-patch+json",
                    )
                    version = str((answer.get("metadata") or {}).get("resourceVersion") or "")
                # As upstream's with binding conditions on (v1.37's default): when the
                # allocation was made, which its binding timeout counts from.
                stamp = datetime.fromtimestamp(self.now(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                status["allocation"] = {**allocated.raw, "allocationTimestamp": stamp}
            answer = await self.client.request(
                "PATCH",
                f"{path}/status",
                body={"metadata": {"resourceVersion": version}, "status": status},
                content_type="application/merge-patch+json",
            )
        except Exception as e:  # the API's answer, or none: the binding fails
            what = "add allocation and reservation to" if allocated else "add reservation to"
            return f"{what} claim {claim.key}: {e or type(e).__name__}"
        try:
            written = resource_claim_from_dict(answer)
        except ValueError:
            written = None
        if written is not None:
            self.objects.assume(written)
        self.objects.release(claim.key)
        return ""

    # ------------------------------------------------------------------ events
    def events_to_register(self) -> Iterable[EventRegistration]:
        """As upstream's: a node added or relabelled; one of the pod's claims added,
        changed in its status or deleted with an allocation, or any claim deallocated;
        a DeviceClass or ResourceSlice added or changed. (The pod's own update that names
        a generated claim re-runs PreEnqueue.)"""

        def claim_changed(pod: PodInfo, old: object, new: object) -> QueueingHint:
            if new is None:
                gone = isinstance(old, ResourceClaimInfo) and (
                    old.allocation is not None
                    # (the claim for its extended resources, which PostFilter deleted)
                    or (
                        old.extended and old.controller is not None and old.controller[2] == pod.uid
                    )
                )
                return QueueingHint.QUEUE if gone else QueueingHint.SKIP
            if not isinstance(new, ResourceClaimInfo):
                return QueueingHint.QUEUE
            claims, problem = self.pod_claims(pod)
            if problem:
                return QueueingHint.SKIP
            if (
                isinstance(old, ResourceClaimInfo)
                and old.allocation is not None
                and new.allocation is None
            ):
                return QueueingHint.QUEUE  # devices were freed
            if not any(c.uid == new.uid for c in claims):
                return QueueingHint.SKIP
            if not isinstance(old, ResourceClaimInfo):
                return QueueingHint.QUEUE
            same = (old.allocation.raw if old.allocation else None) == (
                new.allocation.raw if new.allocation else None
            ) and old.reserved_for == new.reserved_for
            return QueueingHint.SKIP if same else QueueingHint.QUEUE

        return [
            EventRegistration(ClusterEvent("Node", "Add"), None),
            EventRegistration(ClusterEvent("Node", "Update"), node_relabelled),
            EventRegistration(ClusterEvent("ResourceClaim", "Add"), claim_changed),
            EventRegistration(ClusterEvent("ResourceClaim", "Update"), claim_changed),
            EventRegistration(ClusterEvent("ResourceClaim", "Delete"), claim_changed),
            EventRegistration(ClusterEvent("DeviceClass", "Add"), None),
            EventRegistration(ClusterEvent("DeviceClass", "Update"), None),
            EventRegistration(ClusterEvent("ResourceSlice", "Add"), None),
            EventRegistration(ClusterEvent("ResourceSlice", "Update"), None),
        ]


__all__ = ["NAME", "DraMetrics", "DraObjects", "DynamicResources"]
