"""Dynamic resource allocation's objects (resource.k8s.io/v1) as the scheduler reads them:
ResourceClaims, ResourceSlices, DeviceClasses and DeviceTaintRules, parsed from their API
dicts into frozen records. Only what DynamicResources
(scheduler/framework/plugins/dynamicresources.py) reads is kept, plus the pieces of the API
form it writes back (class and claim configuration, a slice's or a device's node
selector). A field we cannot use raises ``ParseError`` naming the object and the field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scheduler.quantity import QuantityError, parse_nanos
from scheduler.types import (
    DEVICE_CLASS_PREFIX,
    NodeSelectorTerm,
    ParseError,
    Taint,
    Toleration,
    _node_selector_terms,
    _timestamp,
)

FINALIZER = "resource.kubernetes.io/delete-protection"
# Extended resources backed by devices (DRAExtendedResource, GA in v1.37): the annotation
# of the claim the scheduler creates for a pod, and the name that claim has until it is
# created (DEVICE_CLASS_PREFIX: scheduler.types').
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
EXTENDED_CLAIM_IN_MEMORY = "<extended-resources>"
MODE_EXACT_COUNT = "ExactCount"
MODE_ALL = "All"
FIRST_AVAILABLE_MAX = 8  # upstream's FirstAvailableDeviceRequestMaxSize
ALLOCATION_RESULTS_MAX = 32  # upstream's AllocationResultsMaxSize
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")

Obj = Mapping[str, Any]
# An attribute's value: int, bool, str, or a Version (semantic version string).
AttrValue = int | bool | str


@dataclass(frozen=True, slots=True)
class Version:
    """A ``version`` attribute (semantic versioning 2.0.0)."""

    text: str


class DeviceID(NamedTuple):
    """A device's identity. A tuple: hashed and compared in C (the allocator looks devices
    up in sets and maps for every node of every cycle)."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


# ---------------------------------------------------------------------------- slices
# Counters (partitionable devices) by name: whole nano units of their quantity.
Counters = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class NodePlacement:
    """Where a device of a slice with ``perDeviceNodeSelection`` is available: one of a
    node's name, every node, or a node selector (its API form is written into
    allocations); none of them set: no node."""

    node_name: str = ""
    all_nodes: bool = False
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    node_selector_raw: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A capacity's ``requestPolicy`` (consumable capacity): what a request that names no
    amount takes (``default``), and the amounts a request may take: one of
    ``valid_values`` (ascending), or ``range_min`` up to ``range_max`` in ``range_step``s.
    Whole nanos of the quantity."""

    default: int | None = None
    valid_values: tuple[int, ...] = ()
    range_min: int | None = None
    range_max: int | None = None
    range_step: int | None = None


@dataclass(frozen=True, slots=True)
class DeviceBinding:
    """Binding conditions (upstream's DRADeviceBindingConditions, beta and on in v1.37):
    the device's conditions that must all be True in the claim's status before the pod
    is bound, those any of which True means the binding failed, and whether the
    allocation is limited to the node it was made for."""

    conditions: tuple[str, ...] = ()
    failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class Device:
    """One device of a ResourceSlice. ``attributes`` are keyed by their fully qualified
    name (``domain/id``; an unqualified name gets the driver's domain), ``capacity`` as
    the slice names them (a request's capacity names match them as written)."""

    name: str
    attributes: Mapping[str, AttrValue | Version]
    capacity: Mapping[str, str]  # quantity strings
    taints: tuple[Taint, ...] = ()
    # Consumable capacity: whether several claims may share the device (each taking part
    # of its capacity), and the capacities' request policies (None: none has one).
    multi: bool = False
    policies: Mapping[str, CapacityPolicy] | None = None
    # Partitionable devices: the counters it takes from its pool's counter sets, by set
    # name; where it is available when its slice selects nodes per device.
    consumes: tuple[tuple[str, Counters], ...] = ()
    placement: NodePlacement | None = None
    binding: DeviceBinding | None = None
    # Selector results by CEL expression (the allocator's cache; a device is immutable).
    matches: dict[str, bool | str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class ResourceSliceInfo:
    """A ResourceSlice: a driver's devices of one pool (or the pool's shared counters),
    the node(s) they serve (``node_name``, ``all_nodes``, ``node_selector``, or each
    device's own placement when ``per_device_nodes``), the pool's generation and slice
    count."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str
    all_nodes: bool
    node_selector: tuple[NodeSelectorTerm, ...] | None
    node_selector_raw: Mapping[str, Any] | None  # the API form (written into allocations)
    devices: tuple[Device, ...]
    resource_version: int = 0
    ids: tuple[DeviceID, ...] = ()  # the devices' identities, in the same order
    # Partitionable devices: the slice's counter sets (a slice has them or devices), and
    # whether each device names the nodes it is available on.
    counter_sets: tuple[tuple[str, Counters], ...] = ()
    per_device_nodes: bool = False


# ---------------------------------------------------------------------------- classes
@dataclass(frozen=True, slots=True)
class DeviceClassInfo:
    """A DeviceClass: its CEL selectors and its configuration (API form)."""

    name: str
    selectors: tuple[str, ...]  # CEL expressions
    config: tuple[Mapping[str, Any], ...]  # spec.config, API form
    resource_version: int = 0
    # spec.extendedResourceName: the extended resource a pod may ask for to get a device
    # of this class (besides deviceclass.resource.kubernetes.io/<name>, which every class
    # answers to); metadata.creationTimestamp, which decides between classes naming the
    # same one.
    extended_resource_name: str | None = None
    created: float = 0.0

    @property
    def implicit_resource_name(self) -> str:
        return DEVICE_CLASS_PREFIX + self.name


# ---------------------------------------------------------------------------- claims
@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """An ``exactly`` request, or one subrequest of ``firstAvailable`` (``name`` is then
    the subrequest's own)."""

    name: str
    device_class: str
    selectors: tuple[str, ...]
    mode: str
    count: int
    admin_access: bool
    tolerations: tuple[Toleration, ...]
    tolerations_raw: tuple[Mapping[str, Any], ...] = ()
    # Consumable capacity: the amounts asked of a device's capacities, by name (nanos).
    capacity: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    name: str
    exactly: DeviceRequest | None
    first_available: tuple[DeviceRequest, ...]


@dataclass(frozen=True, slots=True)
class Constraint:
    """``matchAttribute`` (every device has the attribute, all with one value) or
    ``distinctAttribute`` (every device has it, no two with the same value)."""

    requests: frozenset[str]  # empty: every request
    match_attribute: str
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class Consumer:
    resource: str
    name: str
    uid: str
    api_group: str = ""

    def api(self) -> dict[str, str]:
        out = {"resource": self.resource, "name": self.name, "uid": self.uid}
        if self.api_group:
            out["apiGroup"] = self.api_group
        return out


@dataclass(frozen=True, slots=True)
class BindingWait:
    """An allocated device with binding conditions (copied from its slice at allocation)."""

    device: DeviceID
    conditions: tuple[str, ...]
    failure_conditions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Allocation:
    """``status.allocation``: the devices (for the in-use set), the node selector (where
    a pod using the claim may run), and the API form; with binding conditions, the
    devices that have them and when the allocation was made (``allocationTimestamp``)."""

    devices: tuple[tuple[DeviceID, bool], ...]  # with admin access
    node_selector: tuple[NodeSelectorTerm, ...] | None
    raw: Mapping[str, Any]
    waits: tuple[BindingWait, ...] = ()
    timestamp: float | None = None
    # Consumable capacity: the shares of devices allocated to several claims (results with
    # a shareID, not in ``devices``), with the capacity each consumes (nanos).
    shares: tuple[tuple[DeviceID, Mapping[str, int]], ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceCondition:
    """A condition of an allocated device in the claim's ``status.devices``."""

    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaimInfo:
    """A ResourceClaim: its device requests and constraints, and its status (the
    allocation, the consumers in ``reservedFor``, the binding conditions' state)."""

    namespace: str
    name: str
    uid: str
    resource_version: int
    requests: tuple[ClaimRequest, ...]
    constraints: tuple[Constraint, ...]
    config: tuple[Mapping[str, Any], ...]  # spec.devices.config, API form
    allocation: Allocation | None
    reserved_for: tuple[Consumer, ...]
    finalizers: tuple[str, ...] = ()
    deleting: bool = False
    controller: tuple[str, str, str] | None = None  # (kind, name, uid) of its controller
    unsupported: str = ""  # a request we cannot allocate (the pod is told)
    # status.devices' conditions, by device and condition type (kept only for devices
    # the allocation waits on: binding conditions).
    conditions: Mapping[DeviceID, Mapping[str, DeviceCondition]] | None = None
    # Annotated resource.kubernetes.io/extended-resource-claim: "true": the claim the
    # scheduler made for a pod's extended resources backed by devices.
    extended: bool = False

    @property
    def key(self) -> str:
        if self.name == EXTENDED_CLAIM_IN_MEMORY:
            # Not yet created: one per pod (the uid is the pod's), never a real claim's.
            return f"{self.namespace}/{self.name}/{self.uid}"
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class DeviceTaintRuleInfo:
    """A DeviceTaintRule: ``taint`` on the devices its selector names (an unset field
    matches any); without a selector it applies to none, as upstream's."""

    name: str
    driver: str | None
    pool: str | None
    device: str | None
    taint: Taint | None
    resource_version: int = 0

    def applies(self, did: DeviceID) -> bool:
        return (
            self.taint is not None
            and (self.driver is None or self.driver == did.driver)
            and (self.pool is None or self.pool == did.pool)
            and (self.device is None or self.device == did.device)
        )


DraObject = ResourceClaimInfo | ResourceSliceInfo | DeviceClassInfo | DeviceTaintRuleInfo


# ---------------------------------------------------------------------------- parsing
def _map(raw: Any, who: str, where: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ParseError(who, where, "expected a map")
    return raw


def _list(raw: Any, who: str, where: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ParseError(who, where, "expected a list")
    return raw


def _named(obj: Obj, kind: str, *, namespaced: bool = False) -> tuple[Mapping[str, Any], str, str]:
    """The object's metadata, its name, and how messages name it ("Kind ns/name");
    a missing name is an error."""
    meta = _map(obj.get("metadata"), kind, "metadata")
    name = str(meta.get("name") or "")
    ns = f"{meta.get('namespace') or 'default'}/" if namespaced else ""
    who = f"{kind} {ns}{name or '<unnamed>'}"
    if not name:
        raise ParseError(who, "metadata.name", "missing")
    return meta, name, who


def _version(meta: Mapping[str, Any]) -> int:
    text = str(meta.get("resourceVersion") or "")
    return int(text) if text.isdigit() else 0


def _selectors(raw: Any, who: str, where: str) -> tuple[str, ...]:
    out = []
    for i, s in enumerate(_list(raw, who, where)):
        cel = _map(_map(s, who, f"{where}[{i}]").get("cel"), who, f"{where}[{i}].cel")
        expr = cel.get("expression")
        if not isinstance(expr, str) or not expr:
            raise ParseError(who, f"{where}[{i}].cel.expression", "expected a CEL expression")
        out.append(expr)
    return tuple(out)


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _device(raw: Any, driver: str, who: str, where: str, per_device_nodes: bool) -> Device:
    d = _map(raw, who, where)
    name = d.get("name")
    if not isinstance(name, str) or not name:
        raise ParseError(who, f"{where}.name", "missing")
    attrs: dict[str, AttrValue | Version] = {}
    for key, value in _map(d.get("attributes"), who, f"{where}.attributes").items():
        v = _map(value, who, f"{where}.attributes[{key}]")
        if "int" in v and isinstance(v["int"], int) and not isinstance(v["int"], bool):
            attrs[_qualified(key, driver)] = v["int"]
        elif "bool" in v and isinstance(v["bool"], bool):
            attrs[_qualified(key, driver)] = v["bool"]
        elif "string" in v and isinstance(v["string"], str):
            attrs[_qualified(key, driver)] = v["string"]
        elif "version" in v and isinstance(v["version"], str):
            attrs[_qualified(key, driver)] = Version(v["version"])
        else:
            raise ParseError(
                who, f"{where}.attributes[{key}]", "expected one of int, bool, string, version"
            )
    capacity: dict[str, str] = {}
    policies: dict[str, CapacityPolicy] = {}
    for key, value in _map(d.get("capacity"), who, f"{where}.capacity").items():
        at = f"{where}.capacity[{key}]"
        cm = _map(value, who, at)
        capacity[str(key)] = str(_quantity(cm.get("value"), who, f"{at}.value")[0])
        if cm.get("requestPolicy") is not None:
            policies[str(key)] = _policy(cm["requestPolicy"], who, f"{at}.requestPolicy")
    taints = [
        _taint(t, who, f"{where}.taints[{i}]")
        for i, t in enumerate(_list(d.get("taints"), who, f"{where}.taints"))
    ]
    binding = None
    conditions = _strings(d.get("bindingConditions"), who, f"{where}.bindingConditions")
    failures = _strings(d.get("bindingFailureConditions"), who, f"{where}.bindingFailureConditions")
    if conditions or failures or d.get("bindsToNode") is True:
        binding = DeviceBinding(conditions, failures, d.get("bindsToNode") is True)
    consumes = []
    for i, c in enumerate(_list(d.get("consumesCounters"), who, f"{where}.consumesCounters")):
        at = f"{where}.consumesCounters[{i}]"
        cm = _map(c, who, at)
        set_name = cm.get("counterSet")
        if not isinstance(set_name, str) or not set_name:
            raise ParseError(who, f"{at}.counterSet", "missing")
        consumes.append((set_name, _counters(cm.get("counters"), who, f"{at}.counters")))
    placement = None
    if per_device_nodes:
        placement = NodePlacement(
            str(d.get("nodeName") or ""),
            d.get("allNodes") is True,
            *_selector(d.get("nodeSelector"), who, f"{where}.nodeSelector"),
        )
    return Device(
        name,
        attrs,
        capacity,
        tuple(taints),
        d.get("allowMultipleAllocations") is True,
        policies or None,
        tuple(consumes),
        placement,
        binding,
    )


def _quantity(raw: Any, who: str, where: str) -> tuple[str | int, int]:
    """A quantity as written and in whole nanos; a ParseError naming ``where`` if it is
    none."""
    try:
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise QuantityError(f"expected a quantity, got {raw!r}")
        return raw, parse_nanos(raw)
    except QuantityError as e:
        raise ParseError(who, where, str(e)) from None


def _policy(raw: Any, who: str, where: str) -> CapacityPolicy:
    pm = _map(raw, who, where)
    default = None
    if pm.get("default") is not None:
        default = _quantity(pm["default"], who, f"{where}.default")[1]
    values = tuple(
        _quantity(v, who, f"{where}.validValues[{i}]")[1]
        for i, v in enumerate(_list(pm.get("validValues"), who, f"{where}.validValues"))
    )
    if pm.get("validRange") is None:
        return CapacityPolicy(default, values)
    rm = _map(pm["validRange"], who, f"{where}.validRange")
    bounds = [
        None if rm.get(k) is None else _quantity(rm[k], who, f"{where}.validRange.{k}")[1]
        for k in ("min", "max", "step")
    ]
    if bounds[0] is None:
        raise ParseError(who, f"{where}.validRange.min", "missing")
    if bounds[2] is not None and bounds[2] <= 0:
        raise ParseError(who, f"{where}.validRange.step", "must be positive")
    return CapacityPolicy(default, values, bounds[0], bounds[1], bounds[2])


def _strings(raw: Any, who: str, where: str) -> tuple[str, ...]:
    out = []
    for i, x in enumerate(_list(raw, who, where)):
        if not isinstance(x, str) or not x:
            raise ParseError(who, f"{where}[{i}]", "expected a non-empty string")
        out.append(x)
    return tuple(out)


def _counters(raw: Any, who: str, where: str) -> Counters:
    """A counter set's or a device's ``counters``: name -> {value: quantity}."""
    out = {}
    for key, value in _map(raw, who, where).items():
        q = _map(value, who, f"{where}[{key}]").get("value")
        out[str(key)] = _quantity(q, who, f"{where}[{key}].value")[1]
    return out


def _selector(
    raw: Any, who: str, where: str
) -> tuple[tuple[NodeSelectorTerm, ...] | None, Mapping[str, Any] | None]:
    """A node selector (parsed, and its API form), or (None, None) when unset."""
    if raw is None:
        return None, None
    sel = _map(raw, who, where)
    return _node_selector_terms(
        sel.get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms", who
    ), sel


def resource_slice_from_dict(obj: Obj) -> ResourceSliceInfo:
    meta, name, who = _named(obj, "ResourceSlice")
    spec = _map(obj.get("spec"), who, "spec")
    driver = spec.get("driver")
    if not isinstance(driver, str) or not driver:
        raise ParseError(who, "spec.driver", "missing")
    pool = _map(spec.get("pool"), who, "spec.pool")
    pool_name = pool.get("name")
    if not isinstance(pool_name, str) or not pool_name:
        raise ParseError(who, "spec.pool.name", "missing")
    generation = pool.get("generation", 0)
    count = pool.get("resourceSliceCount", 1)
    for key, value in (("generation", generation), ("resourceSliceCount", count)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParseError(who, f"spec.pool.{key}", f"expected an integer, got {value!r}")
    terms, selector_raw = _selector(spec.get("nodeSelector"), who, "spec.nodeSelector")
    per_device_nodes = spec.get("perDeviceNodeSelection") is True
    devices = tuple(
        _device(d, driver, who, f"spec.devices[{i}]", per_device_nodes)
        for i, d in enumerate(_list(spec.get("devices"), who, "spec.devices"))
    )
    counter_sets = []
    for i, c in enumerate(_list(spec.get("sharedCounters"), who, "spec.sharedCounters")):
        cm = _map(c, who, f"spec.sharedCounters[{i}]")
        set_name = cm.get("name")
        if not isinstance(set_name, str) or not set_name:
            raise ParseError(who, f"spec.sharedCounters[{i}].name", "missing")
        counter_sets.append(
            (set_name, _counters(cm.get("counters"), who, f"spec.sharedCounters[{i}].counters"))
        )
    return ResourceSliceInfo(
        name=name,
        driver=driver,
        pool=pool_name,
        generation=generation,
        slice_count=count,
        node_name=str(spec.get("nodeName") or ""),
        all_nodes=bool(spec.get("allNodes")),
        node_selector=terms,
        node_selector_raw=selector_raw,
        devices=devices,
        resource_version=_version(meta),
        ids=tuple(DeviceID(driver, pool_name, d.name) for d in devices),
        counter_sets=tuple(counter_sets),
        per_device_nodes=per_device_nodes,
    )


def device_class_from_dict(obj: Obj) -> DeviceClassInfo:
    meta, name, who = _named(obj, "DeviceClass")
    spec = _map(obj.get("spec"), who, "spec")
    config = tuple(
        _map(c, who, f"spec.config[{i}]")
        for i, c in enumerate(_list(spec.get("config"), who, "spec.config"))
    )
    ext = spec.get("extendedResourceName")
    if ext is not None and (not isinstance(ext, str) or not ext):
        raise ParseError(who, "spec.extendedResourceName", f"expected a resource name, got {ext!r}")
    created = _timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp", who)
    return DeviceClassInfo(
        name,
        _selectors(spec.get("selectors"), who, "spec.selectors"),
        config,
        _version(meta),
        extended_resource_name=ext,
        created=created or 0.0,
    )


def _taint(raw: Any, who: str, where: str) -> Taint:
    tm = _map(raw, who, where)
    effect = str(tm.get("effect") or "")
    if effect not in TAINT_EFFECTS:
        raise ParseError(who, f"{where}.effect", f"unknown {effect!r}")
    return Taint(str(tm.get("key") or ""), str(tm.get("value") or ""), effect)


def device_taint_rule_from_dict(obj: Obj) -> DeviceTaintRuleInfo:
    meta, name, who = _named(obj, "DeviceTaintRule")
    spec = _map(obj.get("spec"), who, "spec")
    sel = spec.get("deviceSelector")
    taint = _taint(spec.get("taint"), who, "spec.taint")
    if sel is None:
        return DeviceTaintRuleInfo(name, None, None, None, None, _version(meta))
    sm = _map(sel, who, "spec.deviceSelector")

    def field_(key: str) -> str | None:
        v = sm.get(key)
        return None if v is None else str(v)

    return DeviceTaintRuleInfo(
        name, field_("driver"), field_("pool"), field_("device"), taint, _version(meta)
    )


def _tolerations(raw: Any, who: str, where: str) -> tuple[Toleration, ...]:
    out = []
    for i, t in enumerate(_list(raw, who, where)):
        tm = _map(t, who, f"{where}[{i}]")
        op = str(tm.get("operator") or "Equal")
        if op not in ("Equal", "Exists"):
            raise ParseError(who, f"{where}[{i}].operator", f"unknown {op!r}")
        out.append(
            Toleration(
                str(tm.get("key") or ""),
                op,
                str(tm.get("value") or ""),
                str(tm.get("effect") or ""),
            )
        )
    return tuple(out)


def _request(raw: Mapping[str, Any], name: str, who: str, where: str) -> DeviceRequest:
    cls = raw.get("deviceClassName")
    if not isinstance(cls, str) or not cls:
        raise ParseError(who, f"{where}.deviceClassName", "missing")
    mode = str(raw.get("allocationMode") or MODE_EXACT_COUNT)
    if mode not in (MODE_EXACT_COUNT, MODE_ALL):
        raise ParseError(who, f"{where}.allocationMode", f"unknown {mode!r}")
    count = raw.get("count", 1) if mode == MODE_EXACT_COUNT else 0
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ParseError(who, f"{where}.count", f"expected a positive integer, got {count!r}")
    tolerations_raw = _list(raw.get("tolerations"), who, f"{where}.tolerations")
    capacity = None
    if raw.get("capacity") is not None:
        wanted = _map(raw["capacity"], who, f"{where}.capacity").get("requests")
        capacity = {
            str(k): _quantity(v, who, f"{where}.capacity.requests[{k}]")[1]
            for k, v in _map(wanted, who, f"{where}.capacity.requests").items()
        }
    return DeviceRequest(
        name=name,
        device_class=cls,
        selectors=_selectors(raw.get("selectors"), who, f"{where}.selectors"),
        mode=mode,
        count=count,
        admin_access=raw.get("adminAccess") is True,
        tolerations=_tolerations(tolerations_raw, who, f"{where}.tolerations"),
        tolerations_raw=tuple(tolerations_raw),
        capacity=capacity or None,
    )


def _allocation(raw: Any, who: str) -> Allocation | None:
    if raw is None:
        return None
    alloc = _map(raw, who, "status.allocation")
    devices = []
    shares: list[tuple[DeviceID, Mapping[str, int]]] = []
    waits = []
    results = _map(alloc.get("devices"), who, "status.allocation.devices").get("results")
    for i, r in enumerate(_list(results, who, "status.allocation.devices.results")):
        at = f"status.allocation.devices.results[{i}]"
        rm = _map(r, who, at)
        did = DeviceID(
            str(rm.get("driver") or ""), str(rm.get("pool") or ""), str(rm.get("device") or "")
        )
        admin = rm.get("adminAccess") is True
        if rm.get("shareID") and not admin:
            consumed = _map(rm.get("consumedCapacity"), who, f"{at}.consumedCapacity")
            shares.append(
                (
                    did,
                    {
                        str(k): _quantity(v, who, f"{at}.consumedCapacity[{k}]")[1]
                        for k, v in consumed.items()
                    },
                )
            )
        else:
            devices.append((did, admin))
        conditions = _strings(rm.get("bindingConditions"), who, f"{at}.bindingConditions")
        if conditions:
            failures = _strings(
                rm.get("bindingFailureConditions"), who, f"{at}.bindingFailureConditions"
            )
            waits.append(BindingWait(did, conditions, failures))
    terms = None
    sel = alloc.get("nodeSelector")
    if sel is not None:
        terms = _node_selector_terms(
            _map(sel, who, "status.allocation.nodeSelector").get("nodeSelectorTerms"),
            "status.allocation.nodeSelector.nodeSelectorTerms",
            who,
        )
    stamp = _timestamp(
        alloc.get("allocationTimestamp"), "status.allocation.allocationTimestamp", who
    )
    return Allocation(tuple(devices), terms, alloc, tuple(waits), stamp, tuple(shares))


def _device_conditions(
    raw: Any, who: str, waits: tuple[BindingWait, ...]
) -> Mapping[DeviceID, Mapping[str, DeviceCondition]] | None:
    """``status.devices``' conditions of the devices in ``waits`` (None if none)."""
    if not waits:
        return None
    wanted = {w.device for w in waits}
    out: dict[DeviceID, dict[str, DeviceCondition]] = {}
    for i, d in enumerate(_list(raw, who, "status.devices")):
        dm = _map(d, who, f"status.devices[{i}]")
        did = DeviceID(
            str(dm.get("driver") or ""), str(dm.get("pool") or ""), str(dm.get("device") or "")
        )
        if did not in wanted:
            continue
        mine = out.setdefault(did, {})
        for j, c in enumerate(_list(dm.get("conditions"), who, f"status.devices[{i}].conditions")):
            cm = _map(c, who, f"status.devices[{i}].conditions[{j}]")
            kind = cm.get("type")
            if isinstance(kind, str) and kind:
                mine[kind] = DeviceCondition(
                    str(cm.get("status") or ""),
                    str(cm.get("reason") or ""),
                    str(cm.get("message") or ""),
                )
    return out


def resource_claim_from_dict(obj: Obj) -> ResourceClaimInfo:
    meta, name, who = _named(obj, "ResourceClaim", namespaced=True)
    ns = str(meta.get("namespace") or "default")
    spec = _map(obj.get("spec"), who, "spec")
    devices = _map(spec.get("devices"), who, "spec.devices")
    requests = []
    unsupported = ""
    for i, r in enumerate(_list(devices.get("requests"), who, "spec.devices.requests")):
        where = f"spec.devices.requests[{i}]"
        rm = _map(r, who, where)
        rname = rm.get("name")
        if not isinstance(rname, str) or not rname:
            raise ParseError(who, f"{where}.name", "missing")
        exactly = None
        subs: list[DeviceRequest] = []
        if rm.get("exactly") is not None:
            ex = _map(rm["exactly"], who, f"{where}.exactly")
            exactly = _request(ex, rname, who, f"{where}.exactly")
        elif rm.get("firstAvailable"):
            for j, s in enumerate(_list(rm["firstAvailable"], who, f"{where}.firstAvailable")):
                sm = _map(s, who, f"{where}.firstAvailable[{j}]")
                sname = sm.get("name")
                if not isinstance(sname, str) or not sname:
                    raise ParseError(who, f"{where}.firstAvailable[{j}].name", "missing")
                subs.append(_request(sm, sname, who, f"{where}.firstAvailable[{j}]"))
        else:
            unsupported = unsupported or f"request {rname}: unknown request type"
        requests.append(ClaimRequest(rname, exactly, tuple(subs)))
    constraints = []
    for i, c in enumerate(_list(devices.get("constraints"), who, "spec.devices.constraints")):
        cm = _map(c, who, f"spec.devices.constraints[{i}]")
        attr = cm.get("matchAttribute")
        distinct = cm.get("distinctAttribute")
        reqs = frozenset(str(x) for x in _list(cm.get("requests"), who, "requests"))
        if isinstance(attr, str) and attr:
            constraints.append(Constraint(reqs, attr))
        elif isinstance(distinct, str) and distinct:
            constraints.append(Constraint(reqs, "", distinct))
        else:
            unsupported = unsupported or f"constraint #{i}: unsupported constraint type"
    config = tuple(
        _map(c, who, f"spec.devices.config[{i}]")
        for i, c in enumerate(_list(devices.get("config"), who, "spec.devices.config"))
    )
    status = _map(obj.get("status"), who, "status")
    reserved = []
    for i, r in enumerate(_list(status.get("reservedFor"), who, "status.reservedFor")):
        rm = _map(r, who, f"status.reservedFor[{i}]")
        reserved.append(
            Consumer(
                str(rm.get("resource") or ""),
                str(rm.get("name") or ""),
                str(rm.get("uid") or ""),
                str(rm.get("apiGroup") or ""),
            )
        )
    controller = None
    for ref in _list(meta.get("ownerReferences"), who, "metadata.ownerReferences"):
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            controller = (
                str(ref.get("kind") or ""),
                str(ref.get("name") or ""),
                str(ref.get("uid") or ""),
            )
    deleting = _timestamp(meta.get("deletionTimestamp"), "metadata.deletionTimestamp", who)
    allocation = _allocation(status.get("allocation"), who)
    return ResourceClaimInfo(
        namespace=ns,
        name=name,
        uid=str(meta.get("uid") or ""),
        resource_version=_version(meta),
        requests=tuple(requests),
        constraints=tuple(constraints),
        config=config,
        allocation=allocation,
        reserved_for=tuple(reserved),
        finalizers=tuple(str(f) for f in _list(meta.get("finalizers"), who, "metadata.finalizers")),
        deleting=deleting is not None,
        controller=controller,
        unsupported=unsupported,
        conditions=_device_conditions(
            status.get("devices"), who, () if allocation is None else allocation.waits
        ),
        extended=_map(meta.get("annotations"), who, "metadata.annotations").get(
            EXTENDED_CLAIM_ANNOTATION
        )
        == "true",
    )


__all__ = [
    "ALLOCATION_RESULTS_MAX",
    "DEVICE_CLASS_PREFIX",
    "EXTENDED_CLAIM_ANNOTATION",
    "EXTENDED_CLAIM_IN_MEMORY",
    "FINALIZER",
    "FIRST_AVAILABLE_MAX",
    "MODE_ALL",
    "MODE_EXACT_COUNT",
    "Allocation",
    "BindingWait",
    "CapacityPolicy",
    "ClaimRequest",
    "Constraint",
    "Consumer",
    "Counters",
    "Device",
    "DeviceBinding",
    "DeviceClassInfo",
    "DeviceCondition",
    "DeviceID",
    "DeviceRequest",
    "DeviceTaintRuleInfo",
    "DraObject",
    "NodePlacement",
    "ResourceClaimInfo",
    "ResourceSliceInfo",
    "Version",
    "device_class_from_dict",
    "device_taint_rule_from_dict",
    "resource_claim_from_dict",
    "resource_slice_from_dict",
]
