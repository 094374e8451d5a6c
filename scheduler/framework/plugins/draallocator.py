"""The structured-parameters allocator of DynamicResources, after upstream's
(k8s.io/dynamic-resource-allocation/structured/internal: the "stable" variant's features,
with the "incubating" variant's search order, the one v1.37 runs with its default feature
gates): for one node, devices for every claim the pod still needs allocated, or None.

Pools: a node's slices (``nodeName`` equal to it, ``allNodes``, a ``nodeSelector`` it
matches, or ``perDeviceNodeSelection`` with a device available on it), grouped by driver
and pool, the newest generation only, completed by the pool's other slices (shared
counters published for another node, say), those with binding conditions last; a pool
whose slices of that generation are not all there is incomplete (skipped; an ``All`` request
over it is an error), one that repeats a device name or a counter set name, or whose
devices consume a counter it does not have, is invalid. Search: claims in order, their
requests in order, each request's devices one at a time, in pool and slice order, with
backtracking, as upstream's allocateOne; ``firstAvailable`` subrequests are tried in
order; ``matchAttribute`` and ``distinctAttribute`` constraints are kept as devices are
added; a device in use by another claim (or by an earlier request of these claims) is
skipped unless the request asks for admin access; a device taint with effect NoSchedule
or NoExecute that the request does not tolerate rules the device out; a device that
consumes counters (partitionable devices) is taken only while its pool's counter sets,
less what the devices in use and those already chosen consume, stay at or above zero. A
device's binding conditions are copied into the allocation (DynamicResources' PreBind
waits for them). Consumable capacity: a request takes of each capacity of a device what
it asks, rounded up to the capacity's request policy (its default, or the whole capacity,
when it asks nothing), within what the device has; a device with
``allowMultipleAllocations`` is shared: each claim gets a share (a share id), and the
shares' capacity, allocated and being allocated, must fit the device (its counters are
taken once, by its first share)."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from scheduler.draapi import (
    ALLOCATION_RESULTS_MAX,
    MODE_ALL,
    CapacityPolicy,
    ClaimRequest,
    Counters,
    Device,
    DeviceClassInfo,
    DeviceID,
    DeviceRequest,
    ResourceClaimInfo,
    ResourceSliceInfo,
)
from scheduler.framework.plugins.dracel import CelError, device_matches
from scheduler.framework.plugins.helper import match_node_selector_terms
from scheduler.quantity import NANO, format_nanos, nanos_value, parse_nanos
from scheduler.types import NodeRecord, Taint, _node_selector_terms


class AllocationError(Exception):
    """The allocation cannot be attempted (an error status, as upstream's)."""


class AllocationTimeout(Exception):
    """The search ran past its deadline (DynamicResourcesArgs.filterTimeout)."""


class FailedOnNode(Exception):
    """Nothing fits on this node and an invalid pool was seen (unschedulable there)."""


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    slices: list[ResourceSliceInfo] = field(default_factory=list)  # those with devices
    incomplete: bool = False
    invalid: str = ""
    # Partitionable devices: the pool's counter sets, and its slices (of the generation
    # used) that do not target the node, whose devices in use still consume counters.
    counter_sets: dict[str, Counters] = field(default_factory=dict)
    elsewhere: list[ResourceSliceInfo] = field(default_factory=list)


def _placed_on(
    node_name: str,
    all_nodes: bool,
    terms: Sequence[Any] | None,
    node: NodeRecord,
) -> bool:
    """Upstream's NodeMatches: a node's name, every node, a selector; else no node."""
    if node_name:
        return node_name == node.name
    if all_nodes:
        return True
    if terms is not None:
        return match_node_selector_terms(terms, node.labels, node.name)
    return False


def device_on_node(d: Device, node: NodeRecord) -> bool:
    """Whether a device of a ``perDeviceNodeSelection`` slice is available on the node."""
    p = d.placement
    return p is not None and _placed_on(p.node_name, p.all_nodes, p.node_selector, node)


def slice_on_node(s: ResourceSliceInfo, node: NodeRecord) -> bool:
    if s.per_device_nodes:
        return any(device_on_node(d, node) for d in s.devices)
    return _placed_on(s.node_name, s.all_nodes, s.node_selector, node)


def gather_pools(
    candidates: Iterable[ResourceSliceInfo],
    node: NodeRecord,
    pool_slices: Callable[[str, str], Iterable[ResourceSliceInfo]],
) -> list[Pool]:
    """The node's pools (upstream's GatherPools, as its incubating allocator's, the one
    v1.37 runs by default). ``candidates``: slices that may target the node;
    ``pool_slices(driver, pool)``: every slice of a pool, whichever node it targets (a
    pool not all of whose slices target the node, e.g. one whose counters are published
    for another, is completed from them). Pools with devices that have binding conditions
    come last, as upstream's: other devices are preferred."""
    found: dict[tuple[str, str], list[ResourceSliceInfo]] = {}
    for s in candidates:
        if not slice_on_node(s, node):
            continue
        key = (s.driver, s.pool)
        have = found.get(key)
        if have is None or s.generation > have[0].generation:
            found[key] = [s]
        elif s.generation == have[0].generation:
            have.append(s)
    pools = []
    for (driver, name), slices in sorted(found.items()):
        generation = slices[0].generation
        elsewhere: list[ResourceSliceInfo] = []
        if len(slices) != slices[0].slice_count:
            everywhere = list(pool_slices(driver, name))
            if any(s.generation > generation for s in everywhere):
                continue  # obsolete: a newer generation is on its way
            same = [s for s in everywhere if s.generation == generation]
            if len(same) != slices[0].slice_count:
                pools.append(Pool(driver, name, incomplete=True))
                continue
            here = {s.name for s in slices}
            elsewhere = sorted((s for s in same if s.name not in here), key=lambda s: s.name)
        slices.sort(key=lambda s: s.name)
        pool = Pool(driver, name, [s for s in slices if not s.counter_sets])
        counter_slices = [s for s in (*slices, *elsewhere) if s.counter_sets]
        devices_elsewhere = [s for s in elsewhere if not s.counter_sets]
        pool.invalid = _invalid(pool, counter_slices, devices_elsewhere)
        if not pool.invalid:
            pool.elsewhere = devices_elsewhere
        pools.append(pool)
    pools.sort(key=_has_binding_conditions)  # (stable: by driver and name within each)
    return pools


def _has_binding_conditions(pool: Pool) -> bool:
    return any(
        d.binding is not None and d.binding.conditions for s in pool.slices for d in s.devices
    )


def _invalid(
    pool: Pool, counter_slices: list[ResourceSliceInfo], elsewhere: list[ResourceSliceInfo]
) -> str:
    """Why the pool cannot be used (upstream's buildPool), or ""; fills its counter sets.
    Device names are checked among the node's slices, what devices consume against the
    counter sets among all of the pool's."""
    seen: set[str] = set()
    for s in pool.slices:
        for d in s.devices:
            if d.name in seen:
                return f"duplicate device name {d.name}"
            seen.add(d.name)
    for s in counter_slices:
        for set_name, counters in s.counter_sets:
            if set_name in pool.counter_sets:
                return f"duplicate counter set name {set_name}"
            pool.counter_sets[set_name] = counters
    for s in (*pool.slices, *elsewhere):
        for d in s.devices:
            for set_name, counters in d.consumes:
                have = pool.counter_sets.get(set_name)
                if have is None:
                    return f"counter set {set_name} not found"
                for counter in counters:
                    if counter not in have:
                        return f"counter {counter} not found in counter set {set_name}"
    return ""


# ---------------------------------------------------------------- consumable capacity
_MILLI = 10**6  # nanos in a thousandth


class CapacityError(ValueError):
    """A capacity request the policy's arithmetic cannot represent."""


def _use_milli(p: CapacityPolicy) -> bool:
    """Upstream's useMilli (DRAFractionalCapacityRange, on in v1.37): a range whose bounds
    and step are whole thousandths is stepped in thousandths, else in whole units."""
    return all(q is None or q % _MILLI == 0 for q in (p.range_min, p.range_max, p.range_step))


def _steps(p: CapacityPolicy) -> tuple[int, int, int]:
    """The unit of the range's arithmetic (nanos), its minimum and step in that unit."""
    assert p.range_min is not None and p.range_step is not None
    if _use_milli(p):
        return _MILLI, p.range_min // _MILLI, p.range_step // _MILLI
    return NANO, nanos_value(p.range_min), nanos_value(p.range_step)


def _in_unit(nanos: int, unit: int) -> int:
    if unit == _MILLI:
        if nanos % _MILLI:
            raise CapacityError(f"request {format_nanos(nanos)} is not a representable milli value")
        return nanos // _MILLI
    return nanos_value(nanos)


def consumed_capacity(requested: int | None, value: int, p: CapacityPolicy | None) -> int:
    """What a request takes of one capacity (upstream's calculateConsumedCapacity): a
    request naming no amount takes the policy's default, else the whole capacity; an amount
    is rounded up to the policy's next valid value or range step."""
    if requested is None:
        return p.default if p is not None and p.default is not None else value
    if p is None:
        return requested
    if p.range_min is not None:
        if requested < p.range_min:
            return p.range_min
        if p.range_step is None:
            return requested
        unit, lo, step = _steps(p)
        n = -(-(_in_unit(requested, unit) - lo) // step)
        return (lo + step * n) * unit
    for v in p.valid_values:
        if requested <= v:
            return v
    return requested


def _violates(consumed: int, p: CapacityPolicy | None) -> bool:
    """Upstream's violatesPolicy."""
    if p is None or (p.default is not None and consumed == p.default):
        return False
    if p.range_min is not None:
        if p.range_max is not None and consumed > p.range_max:
            return True
        if p.range_step is not None:
            unit, lo, step = _steps(p)
            if unit == _MILLI and consumed % _MILLI:
                return True
            return (_in_unit(consumed, unit) - lo) % step != 0
        return False
    return bool(p.valid_values) and consumed not in p.valid_values


def capacity_fits(
    requested: Mapping[str, int] | None,
    d: Device,
    allocated: Mapping[str, int] | None = None,
    allocating: Mapping[str, int] | None = None,
) -> bool:
    """Upstream's CmpRequestOverCapacity: the request names only capacities the device
    has, each amount it takes is one its policy allows, and with what is allocated and
    being allocated it stays within the capacity. Raises CapacityError."""
    caps = d.capacity
    if requested and any(name not in caps for name in requested):
        return False
    policies = d.policies or {}
    taken = {}
    for name, q in caps.items():
        try:
            c = consumed_capacity(
                None if requested is None else requested.get(name),
                parse_nanos(q),
                policies.get(name),
            )
        except CapacityError as e:
            raise CapacityError(f'capacity "{name}": {e}') from None
        if c < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
        taken[name] = c
    for name, q in caps.items():
        c = taken[name]
        if _violates(c, policies.get(name)):
            return False
        total = c + (allocated or {}).get(name, 0) + (allocating or {}).get(name, 0)
        if total > parse_nanos(q):
            return False
    return True


@dataclass(slots=True)
class _Req:
    claim: int
    request: DeviceRequest
    parent: ClaimRequest | None  # set for a subrequest
    cls: DeviceClassInfo
    num: int
    all_devices: list[tuple[DeviceID, Device, ResourceSliceInfo]] | None = None

    @property
    def result_name(self) -> str:
        if self.parent is None:
            return self.request.name
        return f"{self.parent.name}/{self.request.name}"


def _admits(
    selectors: tuple[str, ...],
    d: Device,
    did: DeviceID,
    driver: str,
    of: DeviceClassInfo | ResourceClaimInfo,
) -> bool:
    """Whether every selector admits the device; an error names the class or the claim
    ``of``, the selector and the device. A result cached on the device is read here
    (Filter's hot path: every device tried, on every node)."""
    cached = d.matches
    for i, expr in enumerate(selectors):
        hit = cached.get(expr)
        if hit is True:
            continue
        if hit is False:
            return False
        try:
            if not device_matches(expr, d, driver):
                return False
        except CelError as e:
            who = f"class {of.name}" if isinstance(of, DeviceClassInfo) else f"claim {of.key}"
            raise AllocationError(f"{who}: selector #{i} on device {did}: {e}") from None
    return True


def class_admits(cls: DeviceClassInfo, d: Device, did: DeviceID, driver: str) -> bool:
    """Whether the class's selectors admit the device (raises AllocationError, naming the
    class, on a CEL error)."""
    return _admits(cls.selectors, d, did, driver, cls)


class _AttributeConstraint:
    """A claim constraint on one attribute of the devices of the requests it names (of all
    the claim's when it names none): each such device must have the attribute."""

    __slots__ = ("attribute", "requests")

    def __init__(self, requests: frozenset[str], attribute: str) -> None:
        self.requests = requests
        self.attribute = attribute

    def applies(self, base: str, full: str) -> bool:
        return not self.requests or base in self.requests or full in self.requests

    def add(self, base: str, full: str, device: Device, driver: str) -> bool:
        if not self.applies(base, full):
            return True
        value = _lookup(device, driver, self.attribute)
        return value is not None and self._take(value)

    def remove(self, base: str, full: str) -> None:
        if self.applies(base, full):
            self._drop()

    def _take(self, value: Any) -> bool:
        raise NotImplementedError

    def _drop(self) -> None:
        raise NotImplementedError


class _MatchAttribute(_AttributeConstraint):
    """``matchAttribute``: all with one value (of one type: an int 1 and a bool true
    differ)."""

    __slots__ = ("count", "value")

    def __init__(self, requests: frozenset[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: Any = None
        self.count = 0

    def _take(self, value: Any) -> bool:
        if self.count and (type(value) is not type(self.value) or value != self.value):
            return False
        if not self.count:
            self.value = value
        self.count += 1
        return True

    def _drop(self) -> None:
        self.count -= 1


class _DistinctAttribute(_AttributeConstraint):
    """``distinctAttribute``: no two with the same value (of the same type)."""

    __slots__ = ("values",)

    def __init__(self, requests: frozenset[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.values: list[Any] = []

    def _take(self, value: Any) -> bool:
        if any(type(v) is type(value) and v == value for v in self.values):
            return False
        self.values.append(value)
        return True

    def _drop(self) -> None:
        self.values.pop()


def _lookup(device: Device, driver: str, name: str) -> Any:
    value = device.attributes.get(name)
    if value is None and "/" not in name:
        value = device.attributes.get(f"{driver}/{name}")
    return value


@dataclass(slots=True)
class _Result:
    req: _Req
    id: DeviceID
    slice: ResourceSliceInfo
    device: Device
    share: str = ""  # consumable capacity: the share's id on a device several claims share
    consumed: Mapping[str, int] | None = None  # and the capacity it takes


_AT_0 = (0, 0, 0)


class Search:
    def __init__(
        self,
        claims: Sequence[ResourceClaimInfo],
        pools: list[Pool],
        classes: Mapping[str, DeviceClassInfo],
        in_use: Callable[[DeviceID], bool],
        rule_taints: Callable[[DeviceID], tuple[Taint, ...]],
        node: NodeRecord,
        *,
        deadline: float | None = None,
        shared: Callable[[DeviceID], Mapping[str, int] | None] = lambda did: None,
    ) -> None:
        self.node = node
        # Consumable capacity: the capacity the allocated shares of a device take (None:
        # none is allocated), and what this search's shares take, with their number.
        self.shared = shared
        self.allocating_capacity: dict[DeviceID, Counter[str]] = {}
        self.allocating_shares: dict[DeviceID, int] = {}
        self.rule_taints = rule_taints
        self.deadline = deadline
        self.steps = 0
        self.claims = claims
        self.pools = pools
        self.classes = classes
        self.in_use = in_use
        self.reqs: dict[tuple[int, int, int], _Req] = {}
        self.selected: dict[tuple[int, int], int] = {}
        self.constraints: list[list[_AttributeConstraint]] = [
            [
                _MatchAttribute(c.requests, c.match_attribute)
                if c.match_attribute
                else _DistinctAttribute(c.requests, c.distinct_attribute)
                for c in claim.constraints
            ]
            for claim in claims
        ]
        self.allocating: dict[DeviceID, set[int]] = {}
        self.results: list[list[_Result]] = [[] for _ in claims]
        # Partitionable devices: what is left of each pool's counters, by pool and
        # (counter set, counter); computed when a device of the pool first needs it.
        self.left: dict[tuple[str, str], dict[tuple[str, str], int]] | None = None

    # ---------------------------------------------------------------- preparation
    def prepare(self) -> None:
        for ci, claim in enumerate(self.claims):
            if claim.unsupported:
                raise AllocationError(f"claim {claim.key}: {claim.unsupported}")
            minimum = 0
            for ri, creq in enumerate(claim.requests):
                if creq.exactly is not None:
                    r = self._request_data(ci, ri, 0, creq.exactly, None)
                    least = r.num
                else:
                    least = 1 << 62
                    for si, sub in enumerate(creq.first_available):
                        r = self._request_data(ci, ri, si, sub, creq)
                        least = min(least, r.num)
                if least > ALLOCATION_RESULTS_MAX - minimum:
                    raise AllocationError(
                        f"claim {claim.key}, request {creq.name}: adding {least} devices "
                        f"exceeds the claim limit of {ALLOCATION_RESULTS_MAX}, with "
                        f"{minimum} already accounted for"
                    )
                minimum += least

    def _request_data(
        self, ci: int, ri: int, si: int, req: DeviceRequest, parent: ClaimRequest | None
    ) -> _Req:
        claim = self.claims[ci]
        cls = self.classes.get(req.device_class)
        if cls is None:
            raise AllocationError(
                f"claim {claim.key}, request {req.name}: could not retrieve device class "
                f"{req.device_class}"
            )
        r = _Req(ci, req, parent, cls, req.count)
        self.reqs[ci, ri, si] = r
        if req.mode == MODE_ALL:
            r.all_devices = []
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(
                        f"claim {claim.key}, request {req.name}: asks for all devices, but "
                        f"resource pool {pool.driver}/{pool.name} is currently being updated"
                    )
                if pool.invalid:
                    raise AllocationError(
                        f"claim {claim.key}, request {req.name}: asks for all devices, but "
                        f"resource pool {pool.driver}/{pool.name} is currently invalid"
                    )
                for s in pool.slices:
                    for did, d in zip(s.ids, s.devices, strict=True):
                        # The device's capacity alone (what is in use is checked as the
                        # devices are added: a device short of it then fails "All").
                        if self._selectable(ci, r, did, d, s) and self._capacity_ok(
                            ci, r, did, d, static=True
                        ):
                            r.all_devices.append((did, d, s))
            r.num = len(r.all_devices)
        return r

    def _selectable(self, ci: int, r: _Req, did: DeviceID, d: Device, s: ResourceSliceInfo) -> bool:
        """The class's selectors, then the request's (each result is cached on the device,
        which is immutable: a dict lookup per selector after its first evaluation)."""
        return (
            _admits(r.cls.selectors, d, did, s.driver, r.cls)
            and _admits(r.request.selectors, d, did, s.driver, self.claims[ci])
            and (not s.per_device_nodes or device_on_node(d, self.node))
        )

    def _capacity_ok(self, ci: int, r: _Req, did: DeviceID, d: Device, *, static: bool) -> bool:
        """Whether the request's capacity fits the device (consumable capacity; with
        ``static``, the device's capacity alone). Skipped when nothing can fail it: no
        capacity asked, no request policy, a device that is not shared."""
        if not (r.request.capacity or d.policies or d.multi):
            return True
        try:
            if static:
                return capacity_fits(r.request.capacity, d)
            return capacity_fits(
                r.request.capacity, d, self.shared(did), self.allocating_capacity.get(did)
            )
        except CapacityError as e:
            raise AllocationError(
                f"claim {self.claims[ci].key}, request {r.request.name}: checking capacity "
                f"for device {did}: {e}"
            ) from None

    def _capacity_in_use(self, did: DeviceID) -> bool:
        """A shared device some claim holds a share of (its counters are taken once)."""
        return self.shared(did) is not None or did in self.allocating_capacity

    def _counters_left(self, s: ResourceSliceInfo) -> dict[tuple[str, str], int]:
        """The pool's counters less what its devices in use consume (upstream's available
        counters: devices whose allocation is written or in flight, not this search's)."""
        key = (s.driver, s.pool)
        if self.left is None:
            self.left = {}
        left = self.left.get(key)
        if left is None:
            (pool,) = [p for p in self.pools if (p.driver, p.name) == key]
            left = {
                (set_name, counter): value
                for set_name, counters in pool.counter_sets.items()
                for counter, value in counters.items()
            }
            for other in (*pool.slices, *pool.elsewhere):
                for did, d in zip(other.ids, other.devices, strict=True):
                    if d.consumes and (self.in_use(did) or self.shared(did) is not None):
                        for set_name, counters in d.consumes:
                            for counter, value in counters.items():
                                left[set_name, counter] -= value
            self.left[key] = left
        return left

    def _take_counters(self, s: ResourceSliceInfo, d: Device) -> Callable[[], None] | None:
        """The device's counters taken from its pool, and how to give them back; None when
        a counter would fall below zero. As upstream, a pool any counter of which is
        already overdrawn (a slice changed under allocated devices) gives none."""
        left = self._counters_left(s)
        if any(v < 0 for v in left.values()):
            return None
        taken = [(set_name, c, v) for set_name, cs in d.consumes for c, v in cs.items()]
        for set_name, c, v in taken:
            left[set_name, c] -= v
        if any(left[set_name, c] < 0 for set_name, c, _ in taken):
            for set_name, c, v in taken:
                left[set_name, c] += v
            return None

        def give_back() -> None:
            for set_name, c, v in taken:
                left[set_name, c] += v

        return give_back

    # ---------------------------------------------------------------- search
    def busy(self, did: DeviceID) -> bool:
        return self.in_use(did) or bool(self.allocating.get(did))

    def _tick(self) -> None:
        """One step of the search (a call of ``one`` or a device tried); every 256th
        checks the deadline."""
        self.steps += 1
        if not self.steps & 255:
            self._tick_deadline()

    def _tick_deadline(self) -> None:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise AllocationTimeout()

    def one(
        self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int, int] = _AT_0
    ) -> bool:
        """Upstream's allocateOne: (claim, request, subrequest, device) indices; ``start``:
        the (pool, slice, device) position after the request's previous device, where the
        search for its next one begins (as upstream's incubating allocator, the one v1.37
        runs with its default features: a request's devices are a set, so each set is
        tried once rather than in every order; the first set found is the same)."""
        self._tick()
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        if ri >= len(claim.requests):
            return self.one(ci + 1, 0, 0, 0, False)
        creq = claim.requests[ri]
        if creq.exactly is None and not in_sub:
            for sub in range(len(creq.first_available)):
                if self.one(ci, ri, sub, di, True):
                    self.selected[ci, ri] = sub
                    return True
            return False
        r = self.reqs[ci, ri, si]
        if r.all_devices is not None and not r.all_devices:
            return False  # "All" with no device at all does not succeed
        if di >= r.num:
            return self.one(ci, ri + 1, 0, 0, False)
        if r.num - di > ALLOCATION_RESULTS_MAX - len(self.results[ci]):
            return False
        if r.all_devices is not None:
            did, d, s = r.all_devices[di]
            undo = self._add(ci, r, did, d, s, must=True)
            if undo is None:
                return False
            if self.one(ci, ri, si, di + 1, in_sub):
                return True
            undo()
            return False
        admin = r.request.admin_access
        in_use, allocating = self.in_use, self.allocating
        # Where the next device of this request is looked for (none left: the next
        # request starts from the beginning).
        more = r.num - di > 1
        p0, s0, d0 = start
        for pi, pool in enumerate(self.pools):
            if pi < p0 or pool.incomplete or pool.invalid:
                continue
            for sj, s in enumerate(pool.slices):
                if pi == p0 and sj < s0:
                    continue
                pairs: Iterable[tuple[DeviceID, Device]] = zip(s.ids, s.devices, strict=True)
                if d0 and pi == p0 and sj == s0:
                    pairs = islice(pairs, d0, None)
                for did, d in pairs:
                    self.steps += 1  # self._tick(), inlined: this loop is Filter's hot path
                    if not self.steps & 255:
                        self._tick_deadline()
                    if admin:
                        if ci in allocating.get(did, ()):
                            continue
                    elif in_use(did) or allocating.get(did):
                        continue
                    if not self._selectable(ci, r, did, d, s):
                        continue
                    undo = self._add(ci, r, did, d, s, must=False)
                    if undo is None:
                        continue
                    at = (pi, sj, s.ids.index(did) + 1) if more else _AT_0
                    if self.one(ci, ri, si, di + 1, in_sub, at):
                        return True
                    undo()
        return False

    def _add(
        self, ci: int, r: _Req, did: DeviceID, d: Device, s: ResourceSliceInfo, *, must: bool
    ) -> Callable[[], None] | None:
        """Upstream's allocateDevice: the device joins the claim's result, or None. A device
        several claims may share (consumable capacity) is not taken whole: the claim gets a
        share of it (a new share id) with the capacity its request takes."""
        multi = d.multi
        if r.request.admin_access:
            if not multi and ci in self.allocating.get(did, ()):
                return None
        elif self.busy(did):
            return None
        if _taint_blocks(d.taints, r.request) or _taint_blocks(self.rule_taints(did), r.request):
            return None
        give_back = None
        if d.consumes and not (multi and self._capacity_in_use(did)):
            give_back = self._take_counters(s, d)
            if give_back is None:
                return None
        base = r.parent.name if r.parent is not None else r.request.name
        full = r.result_name
        added: list[_AttributeConstraint] = []
        for c in self.constraints[ci]:
            if not c.add(base, full, d, s.driver):
                for done in reversed(added):
                    done.remove(base, full)
                if give_back is not None:
                    give_back()
                if must:
                    raise AllocationError(
                        f"claim {self.claims[ci].key}, request {r.request.name}: cannot add "
                        f"device {did} because a claim constraint would not be satisfied"
                    )
                return None
            added.append(c)
        if not self._capacity_ok(ci, r, did, d, static=False):
            for c in reversed(added):
                c.remove(base, full)
            if give_back is not None:
                give_back()
            return None
        share, consumed = "", None
        if multi:
            policies = d.policies or {}
            wanted = r.request.capacity or {}
            consumed = {
                name: consumed_capacity(wanted.get(name), parse_nanos(q), policies.get(name))
                for name, q in d.capacity.items()
            }
            share = str(uuid.uuid4())
            self.allocating_capacity.setdefault(did, Counter()).update(consumed)
            self.allocating_shares[did] = self.allocating_shares.get(did, 0) + 1
        else:
            self.allocating.setdefault(did, set()).add(ci)
        results = self.results[ci]
        results.append(_Result(r, did, s, d, share, consumed))
        size = len(results) - 1

        def undo() -> None:
            del results[size:]
            if consumed is None:
                self.allocating[did].discard(ci)
            else:
                self.allocating_shares[did] -= 1
                if self.allocating_shares[did]:
                    self.allocating_capacity[did].subtract(consumed)
                else:
                    del self.allocating_shares[did], self.allocating_capacity[did]
            for c in reversed(added):
                c.remove(base, full)
            if give_back is not None:
                give_back()

        return undo


def _taint_blocks(taints: tuple[Taint, ...], req: DeviceRequest) -> bool:
    for taint in taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(
            t.tolerates(taint) for t in req.tolerations
        ):
            return True
    return False


class Allocated:
    """One claim's allocation on the node: its devices (with admin access), the
    (sub)requests they were chosen for, and its ``status.allocation`` in API form, built
    when first read (Filter finds one for every node it visits; only the chosen node's is
    written)."""

    __slots__ = ("_make", "_raw", "devices", "requests", "shares")

    def __init__(
        self,
        devices: tuple[tuple[DeviceID, bool], ...],
        requests: frozenset[str],
        make: Callable[[], Mapping[str, Any]],
        shares: tuple[tuple[DeviceID, Mapping[str, int]], ...] = (),
    ) -> None:
        self.devices = devices
        self.shares = shares  # shares of devices several claims share, with their capacity
        self.requests = requests
        self._make: Callable[[], Mapping[str, Any]] | None = make
        self._raw: Mapping[str, Any] | None = None

    @property
    def raw(self) -> Mapping[str, Any]:
        if self._raw is None:
            assert self._make is not None
            self._raw, self._make = self._make(), None
        return self._raw


def find(
    claims: Sequence[ResourceClaimInfo],
    node: NodeRecord,
    pools: list[Pool],
    classes: Mapping[str, DeviceClassInfo],
    in_use: Callable[[DeviceID], bool],
    rule_taints: Callable[[DeviceID], tuple[Taint, ...]] = lambda did: (),
    *,
    deadline: float | None = None,
    shared: Callable[[DeviceID], Mapping[str, int] | None] = lambda did: None,
) -> Search | None:
    """The search that found devices for every claim on ``node``, or None when they do not
    fit (``rule_taints``: the taints DeviceTaintRules put on a device; ``shared``: the
    capacity the allocated shares of a device take, None if it has none). Raises
    AllocationError (the claims cannot be allocated anywhere as they stand),
    AllocationTimeout (past ``deadline``) or FailedOnNode (nothing fits and a pool of the
    node is invalid). Filter asks this of every node it visits and keeps nothing of it:
    objects kept per node and cycle would outlive the young generation and make the
    collector's passes cost more than the search (a py-spy profile of a live backlog)."""
    search = Search(
        claims, pools, classes, in_use, rule_taints, node, deadline=deadline, shared=shared
    )
    search.prepare()
    if not search.one(0, 0, 0, 0, False):
        if any(p.invalid for p in pools):
            raise FailedOnNode("invalid resource pools were encountered")
        return None
    for ci in range(len(claims)):
        _check_selectors(search.results[ci], node)
    return search


def chosen_requests(search: Search) -> frozenset[str]:
    """The (sub)request names the found devices are for, over all claims (Score's)."""
    return frozenset(res.req.result_name for found in search.results for res in found)


def allocations(search: Search, claims: Sequence[ResourceClaimInfo]) -> list[Allocated]:
    """Each claim's allocation from a successful ``find`` over ``claims``."""
    out = []
    for ci, claim in enumerate(claims):
        found = search.results[ci]
        out.append(
            Allocated(
                tuple(
                    (res.id, res.req.request.admin_access)
                    for res in found
                    if not res.share or res.req.request.admin_access
                ),
                frozenset(res.req.result_name for res in found),
                _raw_maker(search, ci, claim),
                tuple(
                    (res.id, res.consumed or {})
                    for res in found
                    if res.share and not res.req.request.admin_access
                ),
            )
        )
    return out


def _raw_maker(
    search: Search, ci: int, claim: ResourceClaimInfo
) -> Callable[[], Mapping[str, Any]]:
    return lambda: _raw(search, ci, claim)


def _raw(search: Search, ci: int, claim: ResourceClaimInfo) -> Mapping[str, Any]:
    results = []
    for res in search.results[ci]:
        entry: dict[str, Any] = {
            "request": res.req.result_name,
            "driver": res.id.driver,
            "pool": res.id.pool,
            "device": res.id.device,
        }
        if res.req.request.admin_access:
            entry["adminAccess"] = True
        if res.share:
            entry["shareID"] = res.share
            if res.consumed:
                entry["consumedCapacity"] = {k: format_nanos(v) for k, v in res.consumed.items()}
        if res.req.request.tolerations_raw:
            entry["tolerations"] = list(res.req.request.tolerations_raw)
        binding = res.device.binding
        if binding is not None:
            if binding.conditions:
                entry["bindingConditions"] = list(binding.conditions)
            if binding.failure_conditions:
                entry["bindingFailureConditions"] = list(binding.failure_conditions)
        results.append(entry)
    # The chosen request (or subrequest) of each of the claim's requests.
    chosen: list[_Req] = []
    for ri, creq in enumerate(claim.requests):
        si = search.selected.get((ci, ri), 0) if creq.exactly is None else 0
        chosen.append(search.reqs[ci, ri, si])
    config: list[dict[str, Any]] = []
    by_class: dict[str, list[dict[str, Any]]] = {}
    for r in chosen:
        if r.cls.name in by_class:
            for entry in by_class[r.cls.name]:
                entry["requests"].append(r.result_name)
            continue
        entries = [
            {"source": "FromClass", "requests": [r.result_name], **dict(c)} for c in r.cls.config
        ]
        by_class[r.cls.name] = entries
        config.extend(entries)
    names = {r.request.name if r.parent is None else r.parent.name for r in chosen}
    full_names = {r.result_name for r in chosen}
    for c in claim.config:
        requests = list(c.get("requests") or ())
        if not requests or any(n in names or n in full_names for n in requests):
            entry = {k: v for k, v in c.items() if k != "requests"}
            config.append({"source": "FromClaim", "requests": requests, **entry})
    for entry in config:
        reqs = entry["requests"]
        if reqs and all(
            (r.parent.name if r.parent else r.request.name) in reqs or r.result_name in reqs
            for r in chosen
        ):
            entry["requests"] = []
    for entry in config:
        if not entry["requests"]:
            del entry["requests"]
    raw: dict[str, Any] = {"devices": {"results": results}}
    if config:
        raw["devices"]["config"] = config
    selector = _node_selector(search.results[ci], search.node)
    if selector is not None:
        raw["nodeSelector"] = selector
    return raw


def _placement(res: _Result, node: NodeRecord) -> tuple[str, Mapping[str, Any] | None]:
    """The node name and node selector (API form) of where a found device is available:
    its slice's, or its own when the slice selects nodes per device; the node allocated
    for when the device binds to it (``bindsToNode``)."""
    if res.device.binding is not None and res.device.binding.binds_to_node:
        return node.name, None
    if res.slice.per_device_nodes:
        p = res.device.placement
        return (p.node_name, p.node_selector_raw) if p is not None else ("", None)
    return res.slice.node_name, res.slice.node_selector_raw


def _check_selectors(results: list[_Result], node: NodeRecord) -> None:
    """What ``_node_selector`` would refuse, found at once (the API form is built later)."""
    for res in results:
        node_name, selector = _placement(res, node)
        if node_name:
            return
        if selector is not None:
            terms = selector.get("nodeSelectorTerms") or []
            if len(terms) > 1:
                raise AllocationError(
                    f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms"
                )


def _node_selector(results: list[_Result], node: NodeRecord) -> dict[str, Any] | None:
    """Upstream's createNodeSelector: a node-local device (or one that binds to the node)
    pins the node by name; the selectors of the others are merged into one term; devices
    on all nodes add nothing."""
    fields: list[dict[str, Any]] = []
    exprs: list[dict[str, Any]] = []
    for res in results:
        node_name, selector = _placement(res, node)
        if node_name:
            return {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_name]}
                        ]
                    }
                ]
            }
        if selector is not None:
            terms = selector.get("nodeSelectorTerms") or []
            if len(terms) > 1:
                raise AllocationError(
                    f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms"
                )
            if terms:
                for into, key in ((fields, "matchFields"), (exprs, "matchExpressions")):
                    for req in terms[0].get(key) or ():
                        if req not in into:
                            into.append(req)
    if not fields and not exprs:
        return None
    term: dict[str, Any] = {}
    if exprs:
        term["matchExpressions"] = exprs
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}


def parse_selector(raw: Mapping[str, Any] | None) -> Any:
    """An allocation's node selector, parsed (None: every node)."""
    if raw is None:
        return None
    return _node_selector_terms(raw.get("nodeSelectorTerms"), "nodeSelector", "allocation")


__all__ = [
    "Allocated",
    "AllocationError",
    "AllocationTimeout",
    "CapacityError",
    "FailedOnNode",
    "Pool",
    "Search",
    "allocations",
    "capacity_fits",
    "chosen_requests",
    "consumed_capacity",
    "device_on_node",
    "find",
    "gather_pools",
    "parse_selector",
    "slice_on_node",
]
