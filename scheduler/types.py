"""Typed records for pods, nodes, PDBs, PriorityClasses and the selectors of Services and
workload controllers, parsed from raw API dicts.

This module is the boundary between the untyped world (kopf event bodies, YAML dumps) and
the scheduling core. Everything above it sees frozen records: ``PodInfo``, ``NodeRecord``,
``PDBInfo``, ``PriorityClassInfo``, and the mutable aggregate ``NodeInfo`` (a node plus the
pods that the cache has placed on it). Parsing errors raise ``ParseError`` naming the object
and the field; nothing is silently dropped.

Effective pod requests follow upstream's ``resourcehelper.PodRequests`` as the scheduler
calls it: the sum of the regular containers plus restartable (sidecar) init containers,
maxed with every init container's request (plus the sidecars started before it); for a
resized pod, the per-resource max of the spec and what the kubelet reports (allocated,
actuated); pod-level requests (``spec.resources.requests``) replace the cpu/memory/hugepages
sums; plus pod overhead. Quantities are summed exactly and rounded once, as upstream. The
"non-zero" requests used by scoring default a container that does not name cpu/memory to
100m / 200Mi (an explicit zero stays zero), as upstream's ``getNonMissingContainerRequests``.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.csimigration import TOPOLOGY_KEYS, Translated, migratable, translate
from scheduler.quantity import NANO, QuantityError, nanos_milli, nanos_value, parse_nanos

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "SELECTOR_KINDS",
    "SYSTEM_CLUSTER_CRITICAL",
    "SYSTEM_NODE_CRITICAL",
    "CSIDriverInfo",
    "CSINodeInfo",
    "CSIStorageCapacityInfo",
    "HostPort",
    "LabelSelector",
    "NodeInfo",
    "NodeRecord",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PDBInfo",
    "PVCInfo",
    "PVInfo",
    "ParseError",
    "PodAffinityTerm",
    "PodInfo",
    "PriorityClassInfo",
    "Resource",
    "SelectorObject",
    "ServiceInfo",
    "StorageClassInfo",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "UnknownPriorityClassError",
    "VolumeAttachmentInfo",
    "VolumeObject",
    "WeightedPodAffinityTerm",
    "csi_driver_from_dict",
    "csi_node_from_dict",
    "csi_storage_capacity_from_dict",
    "node_from_dict",
    "pdb_from_dict",
    "pod_from_dict",
    "priority_class_from_dict",
    "pv_from_dict",
    "pvc_from_dict",
    "selector_object_from_dict",
    "service_from_dict",
    "storage_class_from_dict",
    "volume_attachment_from_dict",
]

Obj = Mapping[str, Any]

DEFAULT_MILLI_CPU_REQUEST = 100  # upstream schedutil.DefaultMilliCPURequest
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # upstream schedutil.DefaultMemoryRequest
SYSTEM_CLUSTER_CRITICAL = 2_000_000_000
SYSTEM_NODE_CRITICAL = 2_000_001_000
_SYSTEM_CLASSES = {
    "system-cluster-critical": SYSTEM_CLUSTER_CRITICAL,
    "system-node-critical": SYSTEM_NODE_CRITICAL,
}
CRITICAL_POD_ANNOTATION = "scheduler.alpha.kubernetes.io/critical-pod"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"


class ParseError(ValueError):
    """An API object we cannot use. The message names the object and the field."""

    def __init__(self, obj: str, field_path: str, problem: str) -> None:
        super().__init__(f"{obj}: {field_path}: {problem}")
        self.obj = obj
        self.field_path = field_path
        self.problem = problem


class UnknownPriorityClassError(LookupError):
    """A pod names a PriorityClass that does not exist."""

    def __init__(self, pod: str, class_name: str) -> None:
        super().__init__(f"pod {pod}: no PriorityClass with name {class_name} was found")
        self.pod = pod
        self.class_name = class_name


# --------------------------------------------------------------------------- resources


@dataclass(slots=True)
class Resource:
    """cpu in millicores, memory/ephemeral storage in bytes, pods and extended as counts."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pod_number: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    def add(self, other: Resource) -> None:
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        self.ephemeral_storage += other.ephemeral_storage
        self.allowed_pod_number += other.allowed_pod_number
        for k, v in other.scalar.items():
            self.scalar[k] = self.scalar.get(k, 0) + v

    def sub(self, other: Resource) -> None:
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        self.ephemeral_storage -= other.ephemeral_storage
        self.allowed_pod_number -= other.allowed_pod_number
        for k, v in other.scalar.items():
            left = self.scalar.get(k, 0) - v
            if left:
                self.scalar[k] = left
            else:
                self.scalar.pop(k, None)

    def set_max(self, other: Resource) -> None:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        self.ephemeral_storage = max(self.ephemeral_storage, other.ephemeral_storage)
        self.allowed_pod_number = max(self.allowed_pod_number, other.allowed_pod_number)
        for k, v in other.scalar.items():
            self.scalar[k] = max(self.scalar.get(k, 0), v)

    def copy(self) -> Resource:
        return Resource(
            self.milli_cpu,
            self.memory,
            self.ephemeral_storage,
            self.allowed_pod_number,
            dict(self.scalar),
        )

    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or self.scalar)


# Exact quantities (whole nano base units, see scheduler.quantity) by resource name, as a
# v1.ResourceList.
ResourceList = dict[str, int]


def _parse_resource_list(raw: Any, where: str, obj: str) -> ResourceList:
    """Parse a ResourceList ({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": 1}) exactly."""
    if raw is None:
        return {}
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise ParseError(obj, where, f"expected a map of resource quantities, got {raw!r}")
    out: ResourceList = {}
    for name, q in raw.items():
        try:
            out[str(name)] = parse_nanos(q)
        except QuantityError as e:
            raise ParseError(obj, f"{where}.{name}", str(e)) from e
    return out


def _to_resource(rl: ResourceList) -> Resource:
    """Round a ResourceList into a Resource as upstream's ``Resource.Add`` does: cpu up to
    millicores, everything else up to whole units."""
    res = Resource()
    for name, q in rl.items():
        if name == "cpu":
            res.milli_cpu = nanos_milli(q)
        elif name == "memory":
            res.memory = nanos_value(q)
        elif name == "ephemeral-storage":
            res.ephemeral_storage = nanos_value(q)
        elif name == "pods":
            res.allowed_pod_number = nanos_value(q)
        elif name == "storage":
            continue  # volume-only resource; not a pod request upstream tracks here
        else:
            v = nanos_value(q)
            if v:
                res.scalar[name] = v
    return res


def _resource_list(raw: Any, where: str, obj: str) -> Resource:
    """Parse a ResourceList into a Resource."""
    return _to_resource(_parse_resource_list(raw, where, obj))


# --------------------------------------------------------------------------- selectors


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...]
    match_fields: tuple[NodeSelectorRequirement, ...]


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str]


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector. ``None`` where a selector is optional means "nothing"."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        for req in self.match_expressions:
            op = req.operator
            if op == "In":
                if labels.get(req.key) not in req.values:
                    return False
            elif op == "NotIn":
                if req.key in labels and labels[req.key] in req.values:
                    return False
            elif op == "Exists":
                if req.key not in labels:
                    return False
            elif op == "DoesNotExist" and req.key in labels:
                return False
        return True

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions


_LABEL_OPS = {"In", "NotIn", "Exists", "DoesNotExist"}
_NODE_OPS = _LABEL_OPS | {"Gt", "Lt"}


def _label_selector(raw: Any, where: str, obj: str) -> LabelSelector:
    if not isinstance(raw, Mapping):
        raise ParseError(obj, where, f"expected a label selector, got {raw!r}")
    ml = raw.get("matchLabels") or {}
    if not isinstance(ml, Mapping):
        raise ParseError(obj, f"{where}.matchLabels", "expected a map")
    exprs = []
    for i, e in enumerate(raw.get("matchExpressions") or ()):
        op = e.get("operator")
        if op not in _LABEL_OPS:
            raise ParseError(obj, f"{where}.matchExpressions[{i}].operator", f"unknown {op!r}")
        vals = frozenset(str(v) for v in (e.get("values") or ()))
        exprs.append(LabelSelectorRequirement(str(e.get("key", "")), op, vals))
    return LabelSelector(
        tuple(sorted((str(k), str(v)) for k, v in ml.items())),
        tuple(exprs),
    )


def _node_selector_terms(raw: Any, where: str, obj: str) -> tuple[NodeSelectorTerm, ...]:
    if raw is not None and not isinstance(raw, list):
        raise ParseError(obj, where, "expected a list")
    terms = []
    for i, t in enumerate(raw or ()):
        if t is not None and not isinstance(t, Mapping):
            raise ParseError(obj, f"{where}[{i}]", "expected a map")
        parts: dict[str, list[NodeSelectorRequirement]] = {
            "matchExpressions": [],
            "matchFields": [],
        }
        for kind in parts:
            reqs = (t or {}).get(kind)
            if reqs is not None and not isinstance(reqs, list):
                raise ParseError(obj, f"{where}[{i}].{kind}", "expected a list")
            for j, e in enumerate(reqs or ()):
                if not isinstance(e, Mapping):
                    raise ParseError(obj, f"{where}[{i}].{kind}[{j}]", "expected a map")
                op = e.get("operator")
                if op not in _NODE_OPS:
                    raise ParseError(obj, f"{where}[{i}].{kind}[{j}].operator", f"unknown {op!r}")
                vals = tuple(str(v) for v in (e.get("values") or ()))
                parts[kind].append(NodeSelectorRequirement(str(e.get("key", "")), op, vals))
        terms.append(
            NodeSelectorTerm(tuple(parts["matchExpressions"]), tuple(parts["matchFields"]))
        )
    return tuple(terms)


# --------------------------------------------------------------------------- taints


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # Equal (default) or Exists
    value: str
    effect: str  # "" matches every effect

    def tolerates(self, taint: Taint) -> bool:
        """Upstream ``Toleration.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        # Equal (or empty operator): an empty key with Equal tolerates nothing per validation,
        # but an empty key only validates with Exists, so compare values here.
        return self.value == taint.value


# --------------------------------------------------------------------------- affinity


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    label_selector: LabelSelector | None
    namespaces: frozenset[str]  # already defaulted to the pod's namespace when empty
    namespace_selector: LabelSelector | None  # None: only `namespaces`; empty: all namespaces
    topology_key: str


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    label_selector: LabelSelector | None
    min_domains: int  # 1 when unset
    node_affinity_policy: str  # Honor (default) | Ignore
    node_taints_policy: str  # Ignore (default) | Honor


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int


# --------------------------------------------------------------------------- pod


@dataclass(frozen=True, slots=True)
class InlineDisk:
    """An inline volume two pods on one node may not share (upstream's isVolumeConflict):
    ``kind`` gce (``ident`` the PD name), ebs (the volume ID), iscsi (the IQN) or rbd
    (``pool/image``, with its Ceph ``monitors``)."""

    kind: str
    ident: str
    read_only: bool = False
    monitors: frozenset[str] = frozenset()

    def conflicts(self, other: InlineDisk) -> bool:
        if self.kind != other.kind or self.ident != other.ident:
            return False
        if self.kind == "ebs":
            return True
        both_read_only = self.read_only and other.read_only
        if self.kind == "rbd":
            return bool(self.monitors & other.monitors) and not both_read_only
        return not both_read_only


def _inline_disk(vol: Mapping[str, Any], i: int, who: str) -> InlineDisk | None:
    for key, kind, ident in (
        ("gcePersistentDisk", "gce", "pdName"),
        ("awsElasticBlockStore", "ebs", "volumeID"),
        ("iscsi", "iscsi", "iqn"),
        ("rbd", "rbd", "image"),
    ):
        src = vol.get(key)
        if src is None:
            continue
        if not isinstance(src, Mapping):
            raise ParseError(who, f"spec.volumes[{i}].{key}", "expected a map")
        name = str(src.get(ident) or "")
        if kind == "rbd":
            monitors = src.get("monitors") or ()
            if not isinstance(monitors, list):
                raise ParseError(who, f"spec.volumes[{i}].rbd.monitors", "expected a list")
            pool = str(src.get("pool") or "rbd")
            return InlineDisk(
                kind, f"{pool}/{name}", src.get("readOnly") is True, frozenset(map(str, monitors))
            )
        return InlineDisk(kind, name, src.get("readOnly") is True)
    return None


# The resource name every DeviceClass answers to: this prefix and the class's name.
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
_QUALIFIED_PART = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_extended_resource_name(name: str) -> bool:
    """Upstream's IsExtendedResourceName: a name with a domain, not in kubernetes.io's
    namespace, not a quota's ``requests.`` name, and a qualified name once prefixed with
    ``requests.``."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, part = f"requests.{name}".partition("/")
    return (
        len(prefix) <= 253
        and _SUBDOMAIN.match(prefix) is not None
        and len(part) <= 63
        and _QUALIFIED_PART.match(part) is not None
    )


def is_dra_extended_resource_name(name: str) -> bool:
    """Upstream's IsDRAExtendedResourceName: an extended resource name, or a DeviceClass's
    implicit one."""
    return name.startswith(DEVICE_CLASS_PREFIX) or is_extended_resource_name(name)


@dataclass(frozen=True, slots=True)
class ContainerExtendedRequest:
    """One container's request of an extended resource that devices may back: the
    container's position among the init containers then the regular ones, its name,
    whether it runs to completion before the others start (an init container that is not
    a sidecar), the resource, its position among the container's request names sorted,
    and the amount (a whole number)."""

    index: int
    container: str
    short_lived: bool
    resource: str
    position: int
    count: int


def _extended_requests(spec: Obj) -> tuple[ContainerExtendedRequest, ...]:
    """The pod's ``ContainerExtendedRequest`` entries (quantities already checked by the
    request parser)."""
    out = []
    index = 0
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or ():
            raw = (c.get("resources") or {}).get("requests") or {}
            names = sorted(str(k) for k in raw)
            for position, rname in enumerate(names):
                if not is_dra_extended_resource_name(rname):
                    continue
                nanos = parse_nanos(raw[rname])
                if nanos <= 0 or nanos % NANO:
                    continue  # upstream's AsInt64: only whole amounts make a request
                short = group == "initContainers" and c.get("restartPolicy") != "Always"
                out.append(
                    ContainerExtendedRequest(
                        index, str(c.get("name") or ""), short, rname, position, nanos // NANO
                    )
                )
            index += 1
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A pod as the scheduler sees it. Immutable: an update replaces the record."""

    namespace: str
    name: str
    uid: str
    key: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    nominated_node_name: str = ""
    priority: int = 0
    priority_class_name: str = ""
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    requests: Resource = field(default_factory=Resource)
    non_zero_milli_cpu: int = DEFAULT_MILLI_CPU_REQUEST
    non_zero_memory: int = DEFAULT_MEMORY_REQUEST
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    preferred_node_affinity: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    required_affinity: tuple[PodAffinityTerm, ...] = ()
    required_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    images: tuple[str, ...] = ()  # init and regular containers', then image volumes' references
    owner_kind_uid: tuple[str, str] | None = None
    start_time: float = 0.0  # status.startTime else creationTimestamp, epoch seconds
    creation_time: float = 0.0
    deletion_timestamp: float | None = None
    disruption_target: bool = False  # condition DisruptionTarget=True
    disruption_reason: str = ""  # its reason, e.g. PreemptionByScheduler
    phase: str = "Pending"
    resource_version: str = ""
    scheduling_gates: tuple[str, ...] = ()  # spec.schedulingGates[].name
    # Node features the pod needs (NodeDeclaredFeatures; see _required_features)
    required_features: frozenset[str] = frozenset()
    generation: int = 0  # metadata.generation (conditions we write observe it)
    pod_scheduled: str = ""  # status of its PodScheduled condition, "" when it has none
    # The PersistentVolumeClaims its volumes use, by name in its namespace (a
    # ``persistentVolumeClaim`` volume's claim; a generic ephemeral volume's, named
    # ``<pod>-<volume>``, with True: the pod must own it).
    claims: tuple[tuple[str, bool], ...] = ()
    # Its inline disks that VolumeRestrictions keeps apart on a node (GCE PD, AWS EBS,
    # iSCSI, RBD volumes; rare).
    disks: tuple[InlineDisk, ...] = ()
    # Its inline volumes of in-tree plugins migrated to CSI drivers, by volume name, with
    # their translation (NodeVolumeLimits counts them; rare).
    migrated: tuple[tuple[str, Translated], ...] = ()
    # spec.resourceClaims (DynamicResources), each with its status.resourceClaimStatuses
    # entry: (name, resourceClaimName, resourceClaimTemplateName, the generated claim's
    # name: None while the status names none, "" when none was needed). One field: a pod
    # without claims pays one slot.
    resource_claims: tuple[tuple[str, str, str, str | None], ...] = ()
    # Each container's requests of extended resources devices may back (DynamicResources
    # turns them into a claim where no node allocatable offers them); () for most pods.
    extended_requests: tuple[ContainerExtendedRequest, ...] = ()

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", f"{self.namespace}/{self.name}")

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def terminating(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def terminating_by_preemption(self) -> bool:
        """Being deleted because a scheduler preempted it (upstream's
        ``PodTerminatingByPreemption``)."""
        return (
            self.deletion_timestamp is not None
            and self.disruption_target
            and self.disruption_reason == "PreemptionByScheduler"
        )

    @property
    def has_affinity(self) -> bool:
        return bool(
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )


class _PodInfoDraft:
    """A PodInfo under construction: the same slots, without the frozen guard.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (the
    instance's own ``__setattr__`` refuses): about 0.15 us a field, 6 us for PodInfo's 40,
    a third of decoding a pod. ``pod_from_dict`` instead assigns the fields of a draft
    (plain slot stores, a few ns each) and ``_seal`` retypes it as a PodInfo: the layouts
    are identical (same slots, same base), so Python allows the ``__class__`` assignment,
    and from then on the object is an ordinary, frozen PodInfo. A draft never escapes
    ``pod_from_dict``; ``tests/unit/test_types.py`` checks that a sealed pod has every field
    set and equals the one ``PodInfo(...)`` builds."""

    __slots__ = PodInfo.__slots__


def _seal(draft: Any) -> PodInfo:
    """The finished draft, retyped as the PodInfo it now is (see ``_PodInfoDraft``)."""
    object.__setattr__(draft, "__class__", PodInfo)
    pod: PodInfo = draft
    return pod


_POD_FIELDS: tuple[str, ...] = PodInfo.__slots__
_POD_FIELD_SET = frozenset(_POD_FIELDS)


def _make_pod_copier() -> Callable[[PodInfo, Any], None]:
    """A function that copies every field of a PodInfo onto a draft, one plain attribute
    store a field (generated from the slots, so it cannot miss one; a loop of ``setattr``
    calls costs three times as much)."""
    lines = [f"    draft.{name} = pod.{name}" for name in _POD_FIELDS]
    namespace: dict[str, Any] = {}
    exec("def copy(pod, draft):\n" + "\n".join(lines), namespace)
    copier: Callable[[PodInfo, Any], None] = namespace["copy"]
    return copier


_copy_pod_fields = _make_pod_copier()


def pod_with(pod: PodInfo, **changes: Any) -> PodInfo:
    """``dataclasses.replace(pod, **changes)`` at a fraction of its cost (it goes through the
    frozen ``__init__``, ~12-18 us a pod): the fields are copied onto a draft, the changes
    set, and the draft sealed (see ``_PodInfoDraft``). As with ``replace``, field values are
    shared, not copied, ``key`` is kept as it is, and an unknown field name is a TypeError.
    Runtime complexity: O(fields)."""
    draft: Any = object.__new__(_PodInfoDraft)
    _copy_pod_fields(pod, draft)
    for name, value in changes.items():
        if name not in _POD_FIELD_SET:
            raise TypeError(f"PodInfo has no field {name!r}")
        setattr(draft, name, value)
    return _seal(draft)


# --------------------------------------------------------------------------- priority classes


@dataclass(frozen=True, slots=True)
class PriorityClassInfo:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = PREEMPT_LOWER_PRIORITY


def priority_class_from_dict(obj: Obj) -> PriorityClassInfo:
    name = str((obj.get("metadata") or {}).get("name", ""))
    who = f"PriorityClass {name or '<unnamed>'}"
    if not name:
        raise ParseError(who, "metadata.name", "missing")
    raw_value = obj.get("value")
    if isinstance(raw_value, bool) or not isinstance(raw_value, int):
        raise ParseError(who, "value", f"expected an integer, got {raw_value!r}")
    policy = obj.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY
    if policy not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
        raise ParseError(who, "preemptionPolicy", f"unknown {policy!r}")
    return PriorityClassInfo(name, raw_value, bool(obj.get("globalDefault")), policy)


def global_default_class(classes: Iterable[PriorityClassInfo]) -> PriorityClassInfo | None:
    """The globalDefault class; if several claim it, the lowest value, as upstream admission."""
    defaults = [c for c in classes if c.global_default]
    return min(defaults, key=lambda c: (c.value, c.name)) if defaults else None


# --------------------------------------------------------------------------- pod parsing


# Parsed timestamps by their text: a dump repeats them (creation and start times of a
# rollout's pods). Bounded; cleared when full.
_TIMESTAMPS: dict[str, float] = {}
_TIMESTAMPS_LIMIT = 8192


def _timestamp(raw: Any, where: str, obj: str) -> float | None:
    if raw is None or raw == "":
        return None
    if type(raw) is str:
        hit = _TIMESTAMPS.get(raw)
        if hit is None:
            hit = _parse_timestamp(raw, where, obj)
            if len(_TIMESTAMPS) >= _TIMESTAMPS_LIMIT:
                _TIMESTAMPS.clear()
            _TIMESTAMPS[raw] = hit
        return hit
    return _parse_timestamp(raw, where, obj)


def _parse_timestamp(raw: Any, where: str, obj: str) -> float:
    if isinstance(raw, _dt.datetime):
        dt = raw
    elif isinstance(raw, str):
        try:
            dt = _dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError as e:
            raise ParseError(obj, where, f"invalid timestamp {raw!r}") from e
    else:
        raise ParseError(obj, where, f"invalid timestamp {raw!r}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_dt.UTC)
    return dt.timestamp()


def _rl_add(into: ResourceList, other: ResourceList) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _rl_max(into: ResourceList, other: ResourceList) -> None:
    for k, v in other.items():
        if k not in into or v > into[k]:
            into[k] = v


def _rl_max_of(first: ResourceList, *others: ResourceList) -> ResourceList:
    out = dict(first)
    for o in others:
        _rl_max(out, o)
    return out


def _with_defaults(rl: ResourceList, defaults: ResourceList) -> ResourceList:
    """Upstream's ``applyNonMissing``: defaults only for names the list does not have (an
    explicit zero request stays zero)."""
    if not defaults:
        return rl
    out = dict(rl)
    for k, v in defaults.items():
        if k not in rl:
            out[k] = v
    return out


@dataclass(frozen=True, slots=True)
class _ContainerRequests:
    """One container's request lists: from the spec, and as the kubelet reports them
    (allocated, actuated) for in-place resize. None: the container contributes nothing."""

    sidecar: bool  # a restartable init container (regular containers: False)
    init: bool
    spec: ResourceList
    allocated: ResourceList | None
    actuated: ResourceList | None


def _aggregate(
    containers: Sequence[_ContainerRequests],
    pick: Callable[[_ContainerRequests], ResourceList | None],
    defaults: ResourceList,
) -> ResourceList:
    """Upstream's ``aggregateContainerResourcesByFn``: regular containers and sidecars add
    up; each init container needs its own request plus the sidecars started before it; the
    pod needs the max of the two."""
    result: ResourceList = {}
    for c in containers:
        if not c.init:
            _rl_add(result, _with_defaults(pick(c) or {}, defaults))
    sidecars: ResourceList = {}
    init_max: ResourceList = {}
    for c in containers:
        if not c.init:
            continue
        r = _with_defaults(pick(c) or {}, defaults)
        if c.sidecar:
            _rl_add(result, r)
            _rl_add(sidecars, r)
            candidate = sidecars
        else:
            candidate = dict(r)
            _rl_add(candidate, sidecars)
        _rl_max(init_max, candidate)
    _rl_max(result, init_max)
    return result


_POD_LEVEL_NAMES = ("cpu", "memory")


def _pod_level_supported(name: str) -> bool:
    return name in _POD_LEVEL_NAMES or name.startswith("hugepages-")


class _NoKey(Exception):
    """Inputs that ``_requests_key`` does not describe exactly: parse them uncached."""


def _rl_key(raw: Any) -> tuple[tuple[str, str | int], ...] | None:
    """A ResourceList as a hashable key: None when absent. Only string names and string or
    integer quantities (never a bool, which equals 1 but is no quantity) are described."""
    if raw is None:
        return None
    if type(raw) is not dict:
        raise _NoKey
    items = tuple(raw.items())
    for k, v in items:
        if type(k) is not str or (type(v) is not str and type(v) is not int):
            raise _NoKey
    return items


def _requests_key(spec: Obj, status: Obj) -> tuple[Any, ...]:
    """Everything ``_compute_pod_requests`` reads, as a hashable key: equal keys mean equal
    inputs, so equal results. Raises ``_NoKey`` for any shape or type it does not describe
    (those pods are parsed uncached, and their errors raised there). Runtime complexity:
    O(containers + requests)."""
    if type(spec) is not dict or type(status) is not dict:
        raise _NoKey
    infeasible = False
    for cond in status.get("conditions") or ():
        if type(cond) is not dict:
            raise _NoKey
        if cond.get("type") == "PodResizePending":
            infeasible = cond.get("reason") == "Infeasible"
            break
    statuses: dict[Any, tuple[Any, Any]] = {}
    for group in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(group) or ():
            if type(cs) is not dict:
                raise _NoKey
            res = cs.get("resources")
            if res is not None and type(res) is not dict:
                raise _NoKey
            actual = (res or {}).get("requests")
            statuses[str(cs.get("name", ""))] = (_rl_key(cs.get("allocatedResources")), actual)
    containers: list[Any] = [infeasible]
    for group, init in (("containers", False), ("initContainers", True)):
        for c in spec.get(group) or ():
            if type(c) is not dict:
                raise _NoKey
            res = c.get("resources")
            if res is not None and type(res) is not dict:
                raise _NoKey
            found = statuses.get(str(c.get("name", ""))) if statuses else None
            containers.append(
                (
                    init,
                    init and c.get("restartPolicy") == "Always",
                    _rl_key((res or {}).get("requests")),
                    None if found is None else found[0],
                    None if found is None else _rl_key(found[1]),
                )
            )
    pod_res = status.get("resources")
    if pod_res is not None and type(pod_res) is not dict:
        raise _NoKey
    level = spec.get("resources")
    if level is not None and type(level) is not dict:
        raise _NoKey
    return (
        tuple(containers),
        _rl_key(status.get("allocatedResources")),
        pod_res is not None,
        _rl_key((pod_res or {}).get("requests")),
        _rl_key((level or {}).get("requests")),
        _rl_key(spec.get("overhead")),
    )


# Parsed requests by ``_requests_key``: the pods of one workload share their containers'
# resources, so a cluster holds few distinct keys. Bounded; cleared when full.
_REQUESTS_CACHE: dict[tuple[Any, ...], tuple[Resource, int, int]] = {}
_REQUESTS_CACHE_LIMIT = 4096


def _pod_requests(spec: Obj, status: Obj, obj: str) -> tuple[Resource, int, int]:
    """``_compute_pod_requests``, remembered by ``_requests_key``. Every call returns its own
    copy of the Resource (a caller may change it). Runtime complexity: O(containers)."""
    try:
        key = _requests_key(spec, status)
    except (_NoKey, TypeError, AttributeError):
        return _compute_pod_requests(spec, status, obj)  # raises its own error, if any
    hit = _REQUESTS_CACHE.get(key)
    if hit is None:
        hit = _compute_pod_requests(spec, status, obj)
        if len(_REQUESTS_CACHE) >= _REQUESTS_CACHE_LIMIT:
            _REQUESTS_CACHE.clear()
        _REQUESTS_CACHE[key] = hit
    total, nz_cpu, nz_mem = hit
    return total.copy(), nz_cpu, nz_mem


def _compute_pod_requests(spec: Obj, status: Obj, obj: str) -> tuple[Resource, int, int]:
    """Effective requests plus non-zero cpu/memory, as the scheduler's
    ``PodInfo.CalculateResource`` (``resourcehelper.PodRequests`` with in-place resize and
    pod-level resources, both on by default in 1.37)."""
    infeasible = False
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodResizePending":
            infeasible = cond.get("reason") == "Infeasible"
            break
    statuses: dict[str, tuple[str, Obj]] = {}
    for group in ("initContainerStatuses", "containerStatuses"):
        for i, cs in enumerate(status.get(group) or ()):
            statuses[str(cs.get("name", ""))] = (f"status.{group}[{i}]", cs)

    containers: list[_ContainerRequests] = []
    for group, init in (("containers", False), ("initContainers", True)):
        for i, c in enumerate(spec.get(group) or ()):
            where = f"spec.{group}[{i}].resources.requests"
            reqs = _parse_resource_list((c.get("resources") or {}).get("requests"), where, obj)
            allocated: ResourceList | None = None if infeasible else reqs
            actuated: ResourceList | None = None if infeasible else reqs
            found = statuses.get(str(c.get("name", "")))
            if found is not None:
                sw, cs = found
                if cs.get("allocatedResources") is not None:
                    allocated = _parse_resource_list(
                        cs["allocatedResources"], f"{sw}.allocatedResources", obj
                    )
                    actuated = allocated
                actual = (cs.get("resources") or {}).get("requests")
                if actual is not None:
                    actuated = _parse_resource_list(actual, f"{sw}.resources.requests", obj)
            sidecar = init and c.get("restartPolicy") == "Always"
            containers.append(_ContainerRequests(sidecar, init, reqs, allocated, actuated))

    pod_alloc_raw = status.get("allocatedResources")
    pod_status_res = status.get("resources")
    pod_actual_raw = (pod_status_res or {}).get("requests")
    pod_alloc = _parse_resource_list(pod_alloc_raw, "status.allocatedResources", obj)
    pod_actual = _parse_resource_list(pod_actual_raw, "status.resources.requests", obj)
    pod_level = _parse_resource_list(
        (spec.get("resources") or {}).get("requests"), "spec.resources.requests", obj
    )
    pod_level_set = any(_pod_level_supported(k) for k in pod_level)
    overhead = _parse_resource_list(spec.get("overhead"), "spec.overhead", obj)

    # Most pods (all pending ones) report nothing: the three views are the spec's.
    no_status = not infeasible and all(
        c.allocated is c.spec and c.actuated is c.spec for c in containers
    )

    def requests(defaults: ResourceList) -> ResourceList:
        spec_reqs = _aggregate(containers, lambda c: c.spec, defaults)
        if pod_alloc_raw is not None and pod_actual_raw is not None:
            # The kubelet reports pod-level aggregates: they replace the per-container ones.
            allocated, actuated = pod_alloc, pod_actual
        elif no_status:
            allocated = actuated = spec_reqs
        else:
            allocated = _aggregate(containers, lambda c: c.allocated, defaults)
            actuated = _aggregate(containers, lambda c: c.actuated, defaults)
        if infeasible:
            out = _rl_max_of(actuated, allocated)
        else:
            out = _rl_max_of(spec_reqs, actuated, allocated)
        if pod_level_set:
            effective = pod_level
            if pod_status_res is not None:
                effective = _rl_max_of({} if infeasible else pod_level, pod_actual, pod_alloc)
            for k, v in effective.items():
                if _pod_level_supported(k):
                    out[k] = v
        _rl_add(out, overhead)
        return out

    reqs = requests({})
    # Upstream's getNonMissingContainerRequests: 100m / 200Mi for a container that does not
    # name cpu / memory; with pod-level requests, only for what neither level names.
    defaults: ResourceList = {}
    if not pod_level_set or "cpu" not in reqs:
        defaults["cpu"] = DEFAULT_MILLI_CPU_REQUEST * NANO // 1000
    if not pod_level_set or "memory" not in reqs:
        defaults["memory"] = DEFAULT_MEMORY_REQUEST * NANO
    non_zero = requests(defaults) if defaults else reqs
    total = _to_resource(reqs)
    total.allowed_pod_number = 0
    nz = _to_resource({k: v for k, v in non_zero.items() if k in ("cpu", "memory")})
    return total, nz.milli_cpu, nz.memory


def _affinity_terms(raw: Any, where: str, obj: str, namespace: str) -> tuple[PodAffinityTerm, ...]:
    terms = []
    for i, t in enumerate(raw or ()):
        w = f"{where}[{i}]"
        sel = t.get("labelSelector")
        ns_sel = t.get("namespaceSelector")
        namespaces = frozenset(str(n) for n in (t.get("namespaces") or ()))
        if not namespaces and ns_sel is None:
            namespaces = frozenset({namespace})
        terms.append(
            PodAffinityTerm(
                _label_selector(sel, f"{w}.labelSelector", obj) if sel is not None else None,
                namespaces,
                _label_selector(ns_sel, f"{w}.namespaceSelector", obj)
                if ns_sel is not None
                else None,
                str(t.get("topologyKey", "")),
            )
        )
    return tuple(terms)


def _weighted_terms(
    raw: Any, where: str, obj: str, namespace: str
) -> tuple[WeightedPodAffinityTerm, ...]:
    out = []
    for i, w in enumerate(raw or ()):
        (term,) = _affinity_terms([w.get("podAffinityTerm") or {}], f"{where}[{i}]", obj, namespace)
        out.append(WeightedPodAffinityTerm(int(w.get("weight", 0)), term))
    return tuple(out)


def _tolerations(raw: Any, obj: str) -> tuple[Toleration, ...]:
    out = []
    for i, t in enumerate(raw or ()):
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise ParseError(obj, f"spec.tolerations[{i}].operator", f"unknown {op!r}")
        out.append(
            Toleration(
                str(t.get("key") or ""), op, str(t.get("value") or ""), str(t.get("effect") or "")
            )
        )
    return tuple(out)


def _spread_constraints(
    raw: Any, obj: str, labels: Mapping[str, str]
) -> tuple[TopologySpreadConstraint, ...]:
    out = []
    for i, c in enumerate(raw or ()):
        w = f"spec.topologySpreadConstraints[{i}]"
        sel = c.get("labelSelector")
        selector = _label_selector(sel, f"{w}.labelSelector", obj) if sel is not None else None
        keys = c.get("matchLabelKeys")
        if keys and selector is not None:
            selector = _with_match_label_keys(selector, keys, labels, f"{w}.matchLabelKeys", obj)
        out.append(
            TopologySpreadConstraint(
                max_skew=int(c.get("maxSkew", 1)),
                topology_key=str(c.get("topologyKey", "")),
                when_unsatisfiable=str(c.get("whenUnsatisfiable", "DoNotSchedule")),
                label_selector=selector,
                min_domains=int(c.get("minDomains") or 1),
                node_affinity_policy=str(c.get("nodeAffinityPolicy") or "Honor"),
                node_taints_policy=str(c.get("nodeTaintsPolicy") or "Ignore"),
            )
        )
    return tuple(out)


def _with_match_label_keys(
    selector: LabelSelector, keys: Any, labels: Mapping[str, str], where: str, obj: str
) -> LabelSelector:
    """A constraint's ``matchLabelKeys`` folded into its selector (upstream's
    filterTopologySpreadConstraints: ``key In (the pod's value)`` for each key the pod has).
    Since 1.34 the API server folds them in at creation (MatchLabelKeysInPodTopologySpread
    SelectorMerge), and then the selector already has each requirement: nothing is added
    twice. Pods created before, or by an older API server, get them here."""
    if not isinstance(keys, list):
        raise ParseError(obj, where, "expected a list of label keys")
    have = set(selector.match_labels)
    exprs = set(selector.match_expressions)
    added: list[LabelSelectorRequirement] = []
    for key in keys:
        value = labels.get(str(key))
        if value is None or (str(key), value) in have:
            continue
        req = LabelSelectorRequirement(str(key), "In", frozenset((value,)))
        if req not in exprs and req not in added:
            added.append(req)
    if not added:
        return selector
    return LabelSelector(selector.match_labels, (*selector.match_expressions, *added))


PriorityLookup = Callable[[str], PriorityClassInfo | None]


def pod_from_dict(
    obj: Obj,
    *,
    classes: Mapping[str, PriorityClassInfo] | None = None,
    global_default: PriorityClassInfo | None = None,
) -> PodInfo:
    """Parse a Pod. Priority: spec.priority, else the class of spec.priorityClassName, else the
    globalDefault class, else 0 (a kube-system pod with the legacy critical-pod annotation and no
    class is system-cluster-critical). Raises ParseError / UnknownPriorityClassError."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ns = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    who = f"Pod {ns}/{name or '<unnamed>'}"
    if not name:
        raise ParseError(who, "metadata.name", "missing")
    if type(spec) is not dict and not isinstance(spec, Mapping):
        raise ParseError(who, "spec", "expected a map")

    class_name = str(spec.get("priorityClassName") or "")
    policy = spec.get("preemptionPolicy")
    raw_priority = spec.get("priority")
    if raw_priority is not None:
        if isinstance(raw_priority, bool) or not isinstance(raw_priority, int):
            raise ParseError(who, "spec.priority", f"expected an integer, got {raw_priority!r}")
        priority = raw_priority
    elif class_name:
        pc = (classes or {}).get(class_name)
        if pc is None and class_name in _SYSTEM_CLASSES:
            pc = PriorityClassInfo(class_name, _SYSTEM_CLASSES[class_name])
        if pc is None:
            raise UnknownPriorityClassError(f"{ns}/{name}", class_name)
        priority = pc.value
        policy = policy or pc.preemption_policy
    elif ns == "kube-system" and CRITICAL_POD_ANNOTATION in (meta.get("annotations") or {}):
        priority = SYSTEM_CLUSTER_CRITICAL
    elif global_default is not None:
        priority = global_default.value
        policy = policy or global_default.preemption_policy
    else:
        priority = 0
    policy = policy or PREEMPT_LOWER_PRIORITY
    if policy not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
        raise ParseError(who, "spec.preemptionPolicy", f"unknown {policy!r}")

    requests, nz_cpu, nz_mem = _pod_requests(spec, status, who)

    affinity = spec.get("affinity") or {}
    node_aff = affinity.get("nodeAffinity") or {}
    req_na = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    required_node_affinity = (
        _node_selector_terms(
            req_na.get("nodeSelectorTerms"),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms",
            who,
        )
        if req_na is not None
        else None
    )
    preferred_node_affinity = []
    for i, p in enumerate(node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
        (term,) = _node_selector_terms(
            [p.get("preference") or {}],
            f"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]",
            who,
        )
        preferred_node_affinity.append((int(p.get("weight", 0)), term))
    pa = affinity.get("podAffinity") or {}
    paa = affinity.get("podAntiAffinity") or {}
    req_key = "requiredDuringSchedulingIgnoredDuringExecution"
    pref_key = "preferredDuringSchedulingIgnoredDuringExecution"

    host_ports = []
    images = []
    restart_all = bind_options = False
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or ()):
            if c.get("image"):
                images.append(str(c["image"]))
            if not restart_all and c.get("restartPolicyRules"):
                restart_all = _restarts_all_containers(c["restartPolicyRules"], group, i, who)
            if not bind_options and c.get("volumeMounts"):
                bind_options = _has_bind_mount_options(c["volumeMounts"], group, i, who)
            if group == "initContainers" and c.get("restartPolicy") != "Always":
                continue  # upstream GetHostPorts: only sidecars run for the pod's lifetime
            for port in c.get("ports") or ():
                hp = int(port.get("hostPort") or 0)
                if hp > 0:
                    host_ports.append(
                        HostPort(
                            str(port.get("hostIP") or "0.0.0.0"),
                            str(port.get("protocol") or "TCP"),
                            hp,
                        )
                    )
    claims: list[tuple[str, bool]] = []
    disks: list[InlineDisk] = []
    migrated: list[tuple[str, Translated]] = []
    for i, vol in enumerate(spec.get("volumes") or ()):
        if not isinstance(vol, Mapping):
            raise ParseError(who, f"spec.volumes[{i}]", "expected a map")
        ref = (vol.get("image") or {}).get("reference")
        if ref:
            images.append(str(ref))  # an image volume (GA in 1.36) is pulled as an image too
        pvc = vol.get("persistentVolumeClaim")
        if pvc is not None:
            claim = pvc.get("claimName") if isinstance(pvc, Mapping) else None
            if not isinstance(claim, str) or not claim:
                raise ParseError(
                    who, f"spec.volumes[{i}].persistentVolumeClaim.claimName", "expected a name"
                )
            claims.append((claim, False))
        elif vol.get("ephemeral") is not None:
            claims.append((f"{name}-{vol.get('name') or ''}", True))
        elif len(vol) > 1:  # not only a name: perhaps an inline disk
            disk = _inline_disk(vol, i, who)
            if disk is not None:
                disks.append(disk)
            found = migratable(vol)
            if found is not None:
                key, plugin = found
                src = _mapping(vol[key], who, f"spec.volumes[{i}].{key}")
                migrated.append((str(vol.get("name") or ""), translate(plugin, src, None)))
    if not bind_options and spec.get("ephemeralContainers"):
        for i, c in enumerate(spec["ephemeralContainers"]):
            if c.get("volumeMounts") and _has_bind_mount_options(
                c["volumeMounts"], "ephemeralContainers", i, who
            ):
                bind_options = True
                break
    host_network = spec.get("hostNetwork") is True
    if restart_all or bind_options or host_network:
        features = _required_features(
            restart_all, bind_options, host_network, spec.get("hostUsers")
        )
    else:
        features = _NO_FEATURES

    owner = None
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            owner = (str(ref.get("kind", "")), str(ref.get("uid", "")))

    created = _timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp", who) or 0.0
    started = _timestamp(status.get("startTime"), "status.startTime", who)
    disruption_reason = ""
    disruption = False
    pod_scheduled = ""
    for c in status.get("conditions") or ():
        kind = c.get("type")
        if kind == "DisruptionTarget" and c.get("status") == "True":
            disruption = True
            disruption_reason = str(c.get("reason") or "")
        elif kind == "PodScheduled":
            pod_scheduled = str(c.get("status") or "")
    generation = meta.get("generation") or 0
    if type(generation) is not int:
        raise ParseError(who, "metadata.generation", f"expected an integer, got {generation!r}")
    node_selector = spec.get("nodeSelector") or {}
    if type(node_selector) is not dict and not isinstance(node_selector, Mapping):
        raise ParseError(who, "spec.nodeSelector", "expected a map of strings")
    labels = meta.get("labels") or {}
    if type(labels) is not dict and not isinstance(labels, Mapping):
        raise ParseError(who, "metadata.labels", "expected a map of strings")
    gates = _scheduling_gates(spec.get("schedulingGates"), who)

    # The fields in the order PodInfo(...) took them as arguments (the order in which the
    # parsers below raise), on a draft: see _PodInfoDraft.
    pod: Any = object.__new__(_PodInfoDraft)
    pod.namespace = ns
    pod.name = name
    pod.uid = str(meta.get("uid") or "")
    pod.key = f"{ns}/{name}"
    pod.labels = {str(k): str(v) for k, v in labels.items()}
    pod.scheduler_name = str(spec.get("schedulerName") or "default-scheduler")
    pod.node_name = str(spec.get("nodeName") or "")
    pod.nominated_node_name = str(status.get("nominatedNodeName") or "")
    pod.priority = priority
    pod.priority_class_name = class_name
    pod.preemption_policy = policy
    pod.requests = requests
    pod.non_zero_milli_cpu = nz_cpu
    pod.non_zero_memory = nz_mem
    pod.node_selector = {str(k): str(v) for k, v in node_selector.items()}
    pod.required_node_affinity = required_node_affinity
    pod.preferred_node_affinity = tuple(preferred_node_affinity)
    if pa:
        pod.required_affinity = _affinity_terms(
            pa.get(req_key), f"spec.affinity.podAffinity.{req_key}", who, ns
        )
    else:
        pod.required_affinity = ()
    if paa:
        pod.required_anti_affinity = _affinity_terms(
            paa.get(req_key), f"spec.affinity.podAntiAffinity.{req_key}", who, ns
        )
    else:
        pod.required_anti_affinity = ()
    if pa:
        pod.preferred_affinity = _weighted_terms(
            pa.get(pref_key), f"spec.affinity.podAffinity.{pref_key}", who, ns
        )
    else:
        pod.preferred_affinity = ()
    if paa:
        pod.preferred_anti_affinity = _weighted_terms(
            paa.get(pref_key), f"spec.affinity.podAntiAffinity.{pref_key}", who, ns
        )
    else:
        pod.preferred_anti_affinity = ()
    pod.tolerations = _tolerations(spec.get("tolerations"), who)
    pod.host_ports = tuple(host_ports)
    pod.topology_spread_constraints = _spread_constraints(
        spec.get("topologySpreadConstraints"), who, pod.labels
    )
    pod.images = tuple(images)
    pod.owner_kind_uid = owner
    pod.start_time = started if started is not None else created
    pod.creation_time = created
    pod.deletion_timestamp = _timestamp(
        meta.get("deletionTimestamp"), "metadata.deletionTimestamp", who
    )
    pod.disruption_target = disruption
    pod.disruption_reason = disruption_reason
    pod.phase = str(status.get("phase") or "Pending")
    pod.resource_version = str(meta.get("resourceVersion") or "")
    pod.scheduling_gates = gates
    pod.required_features = features
    pod.generation = generation
    pod.pod_scheduled = pod_scheduled
    pod.claims = tuple(claims)
    pod.disks = tuple(disks) if disks else ()
    pod.migrated = tuple(migrated) if migrated else ()
    raw_claims = spec.get("resourceClaims")
    pod.resource_claims = (
        _resource_claims(raw_claims, status.get("resourceClaimStatuses"), who) if raw_claims else ()
    )
    pod.extended_requests = (
        _extended_requests(spec)
        if requests.scalar and any(is_dra_extended_resource_name(k) for k in requests.scalar)
        else ()
    )
    return _seal(pod)


def _resource_claims(
    raw: Any, statuses: Any, who: str
) -> tuple[tuple[str, str, str, str | None], ...]:
    """spec.resourceClaims with status.resourceClaimStatuses (see PodInfo)."""
    if not isinstance(raw, list):
        raise ParseError(who, "spec.resourceClaims", "expected a list")
    generated: dict[str, str] = {}
    for i, s in enumerate(statuses or ()):
        if not isinstance(s, Mapping) or not isinstance(s.get("name"), str):
            raise ParseError(who, f"status.resourceClaimStatuses[{i}].name", "expected a name")
        generated[s["name"]] = str(s.get("resourceClaimName") or "")
    claims = []
    for i, c in enumerate(raw):
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str) or not c["name"]:
            raise ParseError(who, f"spec.resourceClaims[{i}].name", "expected a name")
        claims.append(
            (
                c["name"],
                str(c.get("resourceClaimName") or ""),
                str(c.get("resourceClaimTemplateName") or ""),
                generated.get(c["name"]),
            )
        )
    return tuple(claims)


# Node features a pod can require (k8s.io/component-helpers/nodedeclaredfeatures v0.37: of
# the nine features registered there, these three are the ones whose InferForScheduling can
# be true; a node lists what it has in status.declaredFeatures).
FEATURE_RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
FEATURE_USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
FEATURE_VOLUME_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"
_NO_FEATURES: frozenset[str] = frozenset()


def _required_features(
    restart_all: bool, bind_options: bool, host_network: bool, host_users: Any
) -> frozenset[str]:
    """What the pod needs from its node: a restart rule of action RestartAllContainers on a
    container or init container; bindMountOptions on any container's volume mount; or
    hostNetwork with hostUsers explicitly false (a user namespace on the host network)."""
    found = []
    if restart_all:
        found.append(FEATURE_RESTART_ALL_CONTAINERS)
    if host_network and host_users is False:
        found.append(FEATURE_USER_NAMESPACES_HOST_NETWORK)
    if bind_options:
        found.append(FEATURE_VOLUME_BIND_MOUNT_OPTIONS)
    return frozenset(found) if found else _NO_FEATURES


def _restarts_all_containers(rules: Any, group: str, i: int, who: str) -> bool:
    """Whether a container's restartPolicyRules hold an action RestartAllContainers."""
    where = f"spec.{group}[{i}].restartPolicyRules"
    if not isinstance(rules, list):
        raise ParseError(who, where, "expected a list")
    for j, rule in enumerate(rules):
        if not isinstance(rule, Mapping):
            raise ParseError(who, f"{where}[{j}]", "expected a map")
        if rule.get("action") == "RestartAllContainers":
            return True
    return False


def _has_bind_mount_options(mounts: Any, group: str, i: int, who: str) -> bool:
    """Whether any of a container's volumeMounts sets bindMountOptions."""
    if not isinstance(mounts, list):
        raise ParseError(who, f"spec.{group}[{i}].volumeMounts", "expected a list")
    for j, m in enumerate(mounts):
        if not isinstance(m, Mapping):
            raise ParseError(who, f"spec.{group}[{i}].volumeMounts[{j}]", "expected a map")
        if m.get("bindMountOptions"):
            return True
    return False


def _scheduling_gates(raw: Any, who: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ParseError(who, "spec.schedulingGates", "expected a list")
    names = []
    for i, g in enumerate(raw):
        name = g.get("name") if isinstance(g, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ParseError(who, f"spec.schedulingGates[{i}].name", "expected a non-empty string")
        names.append(name)
    return tuple(names)


# --------------------------------------------------------------------------- node


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Resource
    unschedulable: bool = False
    images: Mapping[str, int] = field(default_factory=dict)  # image name -> size bytes
    declared_features: frozenset[str] = frozenset()  # status.declaredFeatures


def node_from_dict(obj: Obj) -> NodeRecord:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = str(meta.get("name") or "")
    who = f"Node {name or '<unnamed>'}"
    if not name:
        raise ParseError(who, "metadata.name", "missing")
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise ParseError(who, "metadata.labels", "expected a map of strings")
    taints = []
    for i, t in enumerate(spec.get("taints") or ()):
        if not isinstance(t, Mapping) or not t.get("key"):
            raise ParseError(who, f"spec.taints[{i}].key", "missing")
        effect = t.get("effect")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ParseError(who, f"spec.taints[{i}].effect", f"unknown {effect!r}")
        taints.append(Taint(str(t["key"]), str(t.get("value") or ""), effect))
    field_name = "status.allocatable" if status.get("allocatable") else "status.capacity"
    alloc = _resource_list(
        status.get("allocatable") or status.get("capacity") or {}, field_name, who
    )
    images: dict[str, int] = {}
    for img in status.get("images") or ():
        size = int(img.get("sizeBytes") or 0)
        for n in img.get("names") or ():
            images[str(n)] = size
    declared = status.get("declaredFeatures") or ()
    if not isinstance(declared, list | tuple) or not all(isinstance(f, str) for f in declared):
        raise ParseError(who, "status.declaredFeatures", "expected a list of strings")
    return NodeRecord(
        name=name,
        labels={str(k): str(v) for k, v in labels.items()},
        taints=tuple(taints),
        allocatable=alloc,
        unschedulable=bool(spec.get("unschedulable")),
        images=images,
        declared_features=frozenset(declared) if declared else _NO_FEATURES,
    )


# --------------------------------------------------------------------------- volumes


ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"


@dataclass(frozen=True, slots=True)
class PVCInfo:
    """A PersistentVolumeClaim as VolumeBinding reads it."""

    namespace: str
    name: str
    volume_name: str = ""  # spec.volumeName: the PV it is (being) bound to ("": none)
    # The storage class (the beta annotation, else spec.storageClassName; "": none).
    storage_class: str = ""
    deleting: bool = False
    controller_uid: str = ""  # the uid of its controlling owner
    bind_completed: bool = False  # the PV controller's pv.kubernetes.io/bind-completed
    uid: str = ""
    resource_version: int = 0  # metadata.resourceVersion as a number (0: none or not one)
    storage_nanos: int = 0  # spec.resources.requests.storage, in nano bytes (0: none)
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    selector: LabelSelector | None = None  # spec.selector (None: any volume)
    attributes_class: str = ""  # spec.volumeAttributesClassName
    selected_node: str | None = None  # volume.kubernetes.io/selected-node (None: not set)
    lost: bool = False  # status.phase Lost: its volume is gone

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        """Fully bound, as upstream's isPVCFullyBound: a volume named and the binding
        completed (a claim that only names its volume is still unbound)."""
        return bool(self.volume_name) and self.bind_completed


@dataclass(frozen=True, slots=True)
class PVInfo:
    """A PersistentVolume as VolumeBinding reads it (``node_affinity`` None: any node)."""

    name: str
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    resource_version: int = 0
    capacity_nanos: int = 0  # spec.capacity.storage, in nano bytes
    storage_class: str = ""  # the beta annotation, else spec.storageClassName
    # spec.claimRef as (namespace, name, uid) (None: not bound to a claim).
    claim_ref: tuple[str, str, str] | None = None
    phase: str = ""  # status.phase: Available, Bound, Released, Failed, Pending
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    labels: Mapping[str, str] = field(default_factory=dict)
    attributes_class: str = ""  # spec.volumeAttributesClassName
    deleting: bool = False
    bound_by_controller: bool = False  # pv.kubernetes.io/bound-by-controller
    csi: tuple[str, str] | None = None  # spec.csi: (driver, volumeHandle)
    migrated: Translated | None = None  # an in-tree source migrated to a CSI driver
    # Its node affinity as translated with ``migrated`` (the zone terms under the CSI
    # driver's topology key), for nodes that migrated the plugin (VolumeBinding).
    csi_affinity: tuple[NodeSelectorTerm, ...] | None = None

    def bound_to(self, claim: PVCInfo) -> bool:
        """Upstream's IsVolumeBoundToClaim: its claimRef names the claim (and its uid,
        when the reference has one)."""
        ref = self.claim_ref
        if ref is None or ref[0] != claim.namespace or ref[1] != claim.name:
            return False
        return not ref[2] or ref[2] == claim.uid


@dataclass(frozen=True, slots=True)
class TopologyRequirement:
    key: str
    values: frozenset[str]


@dataclass(frozen=True, slots=True)
class StorageClassInfo:
    name: str
    wait_for_first_consumer: bool = False  # volumeBindingMode WaitForFirstConsumer
    provisioner: str = ""
    # allowedTopologies: terms ORed, requirements of a term ANDed (empty: any node).
    allowed_topologies: tuple[tuple[TopologyRequirement, ...], ...] = ()

    def allows(self, labels: Mapping[str, str]) -> bool:
        """Upstream's MatchTopologySelectorTerms: no terms match every node; else some
        term (an empty one matches nothing) whose every requirement names a label the node
        has, with one of its values."""
        if not self.allowed_topologies:
            return True
        return any(
            term and all(labels.get(r.key) in r.values for r in term)
            for term in self.allowed_topologies
        )


def _resource_version(raw: object) -> int:
    text = str(raw or "")
    return int(text) if text.isdigit() else 0


def _storage_nanos(raw: object, who: str, where: str) -> int:
    if raw is None:
        return 0
    try:
        return parse_nanos(raw)  # type: ignore[arg-type]
    except QuantityError as e:
        raise ParseError(who, where, str(e)) from e


def _string_list(raw: object, who: str, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ParseError(who, where, "expected a list")
    return tuple(str(x) for x in raw)


def _mapping(raw: object, who: str, where: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ParseError(who, where, "expected a map")
    return raw


def pvc_from_dict(obj: Obj) -> PVCInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    ns = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    who = f"PersistentVolumeClaim {ns}/{name or '<unnamed>'}"
    if not name:
        raise ParseError(who, "metadata.name", "missing")
    if not isinstance(spec, Mapping):
        raise ParseError(who, "spec", "expected a map")
    controller = ""
    for i, ref in enumerate(meta.get("ownerReferences") or ()):
        if not isinstance(ref, Mapping):
            raise ParseError(who, f"metadata.ownerReferences[{i}]", "expected a map")
        if ref.get("controller"):
            controller = str(ref.get("uid") or "")
    annotations = _mapping(meta.get("annotations"), who, "metadata.annotations")
    beta_class = annotations.get(ANN_BETA_STORAGE_CLASS)
    resources = _mapping(spec.get("resources"), who, "spec.resources")
    requests = _mapping(resources.get("requests"), who, "spec.resources.requests")
    selector = spec.get("selector")
    status = _mapping(obj.get("status"), who, "status")
    selected = annotations.get(ANN_SELECTED_NODE)
    return PVCInfo(
        ns,
        name,
        str(spec.get("volumeName") or ""),
        str(beta_class if beta_class is not None else spec.get("storageClassName") or ""),
        meta.get("deletionTimestamp") is not None,
        controller,
        ANN_BIND_COMPLETED in annotations,
        uid=str(meta.get("uid") or ""),
        resource_version=_resource_version(meta.get("resourceVersion")),
        storage_nanos=_storage_nanos(
            requests.get("storage"), who, "spec.resources.requests.storage"
        ),
        access_modes=_string_list(spec.get("accessModes"), who, "spec.accessModes"),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
        selector=None if selector is None else _label_selector(selector, "spec.selector", who),
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        selected_node=None if selected is None else str(selected),
        lost=status.get("phase") == "Lost",
    )


def pv_from_dict(obj: Obj) -> PVInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    name = str(meta.get("name") or "")
    who = f"PersistentVolume {name or '<unnamed>'}"
    if not name:
        raise ParseError(who, "metadata.name", "missing")
    if not isinstance(spec, Mapping):
        raise ParseError(who, "spec", "expected a map")
    affinity = _mapping(spec.get("nodeAffinity"), who, "spec.nodeAffinity")
    required = affinity.get("required")
    terms: tuple[NodeSelectorTerm, ...] | None = None
    if required is not None:
        if not isinstance(required, Mapping):
            raise ParseError(who, "spec.nodeAffinity.required", "expected a map")
        path = "spec.nodeAffinity.required.nodeSelectorTerms"
        terms = _node_selector_terms(required.get("nodeSelectorTerms"), path, who)
    annotations = _mapping(meta.get("annotations"), who, "metadata.annotations")
    labels = _mapping(meta.get("labels"), who, "metadata.labels")
    capacity = _mapping(spec.get("capacity"), who, "spec.capacity")
    beta_class = annotations.get(ANN_BETA_STORAGE_CLASS)
    ref = spec.get("claimRef")
    claim_ref: tuple[str, str, str] | None = None
    if ref is not None:
        if not isinstance(ref, Mapping):
            raise ParseError(who, "spec.claimRef", "expected a map")
        claim_ref = (
            str(ref.get("namespace") or ""),
            str(ref.get("name") or ""),
            str(ref.get("uid") or ""),
        )
    status = _mapping(obj.get("status"), who, "status")
    csi_source = spec.get("csi")
    csi: tuple[str, str] | None = None
    migrated_source: Translated | None = None
    csi_affinity = terms
    if csi_source is not None:
        csi_source = _mapping(csi_source, who, "spec.csi")
        csi = (str(csi_source.get("driver") or ""), str(csi_source.get("volumeHandle") or ""))
    else:
        found = migratable(spec)
        if found is not None:
            src = _mapping(spec[found[0]], who, f"spec.{found[0]}")
            str_labels = {str(k): str(v) for k, v in labels.items()}
            migrated_source = translate(found[1], src, str_labels)
            csi_affinity = _csi_affinity(terms, str_labels, TOPOLOGY_KEYS.get(found[1]))
    return PVInfo(
        name,
        terms,
        resource_version=_resource_version(meta.get("resourceVersion")),
        capacity_nanos=_storage_nanos(capacity.get("storage"), who, "spec.capacity.storage"),
        storage_class=str(
            beta_class if beta_class is not None else spec.get("storageClassName") or ""
        ),
        claim_ref=claim_ref,
        phase=str(status.get("phase") or ""),
        access_modes=_string_list(spec.get("accessModes"), who, "spec.accessModes"),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
        labels={str(k): str(v) for k, v in labels.items()},
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        deleting=meta.get("deletionTimestamp") is not None,
        bound_by_controller=ANN_BOUND_BY_CONTROLLER in annotations,
        csi=csi,
        migrated=migrated_source,
        csi_affinity=csi_affinity,
    )


_GA_ZONE = "topology.kubernetes.io/zone"
_GA_REGION = "topology.kubernetes.io/region"
_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
_BETA_REGION = "failure-domain.beta.kubernetes.io/region"


def _rekeyed(
    terms: tuple[NodeSelectorTerm, ...], old: str, new: str
) -> tuple[NodeSelectorTerm, ...]:
    return tuple(
        NodeSelectorTerm(
            tuple(
                NodeSelectorRequirement(new, r.operator, r.values) if r.key == old else r
                for r in t.match_expressions
            ),
            t.match_fields,
        )
        for t in terms
    )


def _csi_affinity(
    terms: tuple[NodeSelectorTerm, ...] | None, labels: Mapping[str, str], key: str | None
) -> tuple[NodeSelectorTerm, ...] | None:
    """A migrated PersistentVolume's node affinity as csi-translation-lib's
    translateTopologyFromInTreeToCSI makes it: the zone terms (GA key, else beta, found
    in the terms, else in the labels) under the driver's topology ``key``, or, without
    zone terms, the zone label's values added to every term under that key; a beta region
    term under the GA region key. ``key`` None: the plugin's terms are kept as they are."""
    if key is None:
        return terms

    def in_terms(k: str) -> bool:
        return terms is not None and any(r.key == k for t in terms for r in t.match_expressions)

    if in_terms(_GA_ZONE):
        zone, region = _GA_ZONE, _GA_REGION
    elif in_terms(_BETA_ZONE):
        zone, region = _BETA_ZONE, _BETA_REGION
    elif _GA_ZONE in labels:
        zone, region = _GA_ZONE, _GA_REGION
    elif _BETA_ZONE in labels:
        zone, region = _BETA_ZONE, _BETA_REGION
    else:
        zone, region = _GA_ZONE, _GA_REGION
    if terms and any(r.values for t in terms for r in t.match_expressions if r.key == zone):
        terms = _rekeyed(terms, zone, key)
    elif zone in labels:
        zones = tuple(sorted({z.strip() for z in labels[zone].split("__") if z.strip()}))
        if zones:
            added = NodeSelectorRequirement(key, "In", zones)
            terms = tuple(
                NodeSelectorTerm((*t.match_expressions, added), t.match_fields)
                for t in (terms or (NodeSelectorTerm((), ()),))
            )
    if (
        region == _BETA_REGION
        and terms
        and any(r.values for t in terms for r in t.match_expressions if r.key == _BETA_REGION)
    ):
        terms = _rekeyed(terms, _BETA_REGION, _GA_REGION)
    return terms


def storage_class_from_dict(obj: Obj) -> StorageClassInfo:
    name = str((obj.get("metadata") or {}).get("name") or "")
    who = f"StorageClass {name or '<unnamed>'}"
    if not name:
        raise ParseError(who, "metadata.name", "missing")
    mode = obj.get("volumeBindingMode") or "Immediate"
    if mode not in ("Immediate", "WaitForFirstConsumer"):
        raise ParseError(who, "volumeBindingMode", f"unknown {mode!r}")
    topologies = obj.get("allowedTopologies")
    if topologies is not None and not isinstance(topologies, list):
        raise ParseError(who, "allowedTopologies", "expected a list")
    terms = []
    for i, term in enumerate(topologies or ()):
        where = f"allowedTopologies[{i}]"
        exprs = _mapping(term, who, where).get("matchLabelExpressions")
        if exprs is not None and not isinstance(exprs, list):
            raise ParseError(who, f"{where}.matchLabelExpressions", "expected a list")
        reqs = []
        for j, e in enumerate(exprs or ()):
            e = _mapping(e, who, f"{where}.matchLabelExpressions[{j}]")
            values = _string_list(
                e.get("values"), who, f"{where}.matchLabelExpressions[{j}].values"
            )
            reqs.append(TopologyRequirement(str(e.get("key") or ""), frozenset(values)))
        terms.append(tuple(reqs))
    return StorageClassInfo(
        name,
        mode == "WaitForFirstConsumer",
        provisioner=str(obj.get("provisioner") or ""),
        allowed_topologies=tuple(terms),
    )


@dataclass(frozen=True, slots=True)
class CSINodeInfo:
    """A CSINode (storage.k8s.io/v1): the CSI drivers registered on the node of that name,
    each with its attach limit (``spec.drivers[].allocatable.count``; None: no limit)."""

    name: str
    drivers: Mapping[str, int | None] = field(default_factory=dict)
    # Its storage.alpha.kubernetes.io/migrated-plugins annotation (VolumeBinding's hint).
    migrated_plugins: str = ""

    def limits(self) -> dict[str, int]:
        return {d: n for d, n in self.drivers.items() if n is not None}


@dataclass(frozen=True, slots=True)
class CSIDriverInfo:
    """A CSIDriver: whether a pod with its volumes must wait for a node where it is
    registered (``spec.preventPodSchedulingIfMissing``, VolumeLimitScaling), and whether
    it publishes CSIStorageCapacity objects that VolumeBinding must check
    (``spec.storageCapacity``)."""

    name: str
    prevent_pod_scheduling_if_missing: bool = False
    storage_capacity: bool = False


@dataclass(frozen=True, slots=True)
class CSIStorageCapacityInfo:
    """A CSIStorageCapacity: how much a driver can provision for a storage class on the
    nodes its ``node_topology`` selects (None: none), as ``capacity`` and
    ``maximumVolumeSize`` (in nano bytes; None when not given)."""

    namespace: str
    name: str
    storage_class: str = ""
    node_topology: LabelSelector | None = None
    capacity_nanos: int | None = None
    maximum_volume_size_nanos: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def volume_limit(self) -> int | None:
        """The largest volume it can provision: ``maximumVolumeSize``, the more precise,
        else ``capacity``."""
        if self.maximum_volume_size_nanos is not None:
            return self.maximum_volume_size_nanos
        return self.capacity_nanos


@dataclass(frozen=True, slots=True)
class VolumeAttachmentInfo:
    """A VolumeAttachment: a volume (``spec.source.persistentVolumeName``; "" for an
    inline one) attached, or being attached, to ``node_name`` by ``attacher``."""

    name: str
    node_name: str = ""
    attacher: str = ""
    pv_name: str = ""


# The storage objects the volume plugins read (scheduler.framework.plugins.volumebinding's
# VolumeObjects keeps them).
VolumeObject = (
    PVCInfo
    | PVInfo
    | StorageClassInfo
    | CSINodeInfo
    | CSIDriverInfo
    | VolumeAttachmentInfo
    | CSIStorageCapacityInfo
)


def _name_of(obj: Obj, kind: str) -> tuple[str, str]:
    name = str((obj.get("metadata") or {}).get("name") or "")
    who = f"{kind} {name or '<unnamed>'}"
    if not name:
        raise ParseError(who, "metadata.name", "missing")
    return name, who


def csi_node_from_dict(obj: Obj) -> CSINodeInfo:
    name, who = _name_of(obj, "CSINode")
    spec = _mapping(obj.get("spec"), who, "spec")
    drivers = spec.get("drivers")
    if drivers is not None and not isinstance(drivers, list):
        raise ParseError(who, "spec.drivers", "expected a list")
    out: dict[str, int | None] = {}
    for i, d in enumerate(drivers or ()):
        d = _mapping(d, who, f"spec.drivers[{i}]")
        alloc = _mapping(d.get("allocatable"), who, f"spec.drivers[{i}].allocatable")
        count = alloc.get("count")
        if count is not None and (type(count) is not int or count < 0):
            raise ParseError(
                who, f"spec.drivers[{i}].allocatable.count", f"expected a count, got {count!r}"
            )
        out[str(d.get("name") or "")] = count
    meta = obj.get("metadata") or {}
    annotations = _mapping(meta.get("annotations"), who, "metadata.annotations")
    return CSINodeInfo(name, out, str(annotations.get(ANN_MIGRATED_PLUGINS) or ""))


def csi_driver_from_dict(obj: Obj) -> CSIDriverInfo:
    name, who = _name_of(obj, "CSIDriver")
    spec = _mapping(obj.get("spec"), who, "spec")
    return CSIDriverInfo(
        name,
        spec.get("preventPodSchedulingIfMissing") is True,
        spec.get("storageCapacity") is True,
    )


def csi_storage_capacity_from_dict(obj: Obj) -> CSIStorageCapacityInfo:
    meta = obj.get("metadata") or {}
    ns = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    who = f"CSIStorageCapacity {ns}/{name or '<unnamed>'}"
    if not name:
        raise ParseError(who, "metadata.name", "missing")
    topology = obj.get("nodeTopology")
    capacity = obj.get("capacity")
    largest = obj.get("maximumVolumeSize")
    return CSIStorageCapacityInfo(
        ns,
        name,
        str(obj.get("storageClassName") or ""),
        None if topology is None else _label_selector(topology, "nodeTopology", who),
        None if capacity is None else _storage_nanos(capacity, who, "capacity"),
        None if largest is None else _storage_nanos(largest, who, "maximumVolumeSize"),
    )


def volume_attachment_from_dict(obj: Obj) -> VolumeAttachmentInfo:
    name, who = _name_of(obj, "VolumeAttachment")
    spec = _mapping(obj.get("spec"), who, "spec")
    source = _mapping(spec.get("source"), who, "spec.source")
    return VolumeAttachmentInfo(
        name,
        str(spec.get("nodeName") or ""),
        str(spec.get("attacher") or ""),
        str(source.get("persistentVolumeName") or ""),
    )


# --------------------------------------------------------------------------- PDB


@dataclass(frozen=True, slots=True)
class PDBInfo:
    namespace: str
    name: str
    selector: LabelSelector | None  # None selects nothing
    disruptions_allowed: int
    disrupted_pods: frozenset[str]  # pod names (same namespace) already being disrupted
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    has_status: bool = True

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _int_or_percent(raw: Any, where: str, who: str) -> int | str | None:
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise ParseError(who, where, f"expected an integer or a percentage, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.endswith("%") and raw[:-1].isdigit():
        return raw
    if isinstance(raw, str) and raw.isdigit():
        return int(raw)
    raise ParseError(who, where, f"expected an integer or a percentage, got {raw!r}")


def pdb_from_dict(obj: Obj) -> PDBInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status")
    ns = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    who = f"PodDisruptionBudget {ns}/{name or '<unnamed>'}"
    if not name:
        raise ParseError(who, "metadata.name", "missing")
    sel = spec.get("selector")
    selector = _label_selector(sel, "spec.selector", who) if sel is not None else None
    has_status = isinstance(status, Mapping) and "disruptionsAllowed" in status
    allowed = 0
    disrupted: frozenset[str] = frozenset()
    if has_status:
        assert isinstance(status, Mapping)
        raw_allowed = status.get("disruptionsAllowed")
        if isinstance(raw_allowed, bool) or not isinstance(raw_allowed, int):
            raise ParseError(
                who, "status.disruptionsAllowed", f"expected an integer, got {raw_allowed!r}"
            )
        allowed = raw_allowed
        disrupted = frozenset(str(k) for k in (status.get("disruptedPods") or {}))
    return PDBInfo(
        namespace=ns,
        name=name,
        selector=selector,
        disruptions_allowed=allowed,
        disrupted_pods=disrupted,
        min_available=_int_or_percent(spec.get("minAvailable"), "spec.minAvailable", who),
        max_unavailable=_int_or_percent(spec.get("maxUnavailable"), "spec.maxUnavailable", who),
        has_status=has_status,
    )


# --------------------------------------------------------------------------- selector objects
# The kinds whose selectors make up the system default topology spreading selector
# (upstream helper.DefaultSelector): Services, ReplicationControllers, ReplicaSets and
# StatefulSets. Only their identity and selector are kept; nothing else is read.


@dataclass(frozen=True, slots=True)
class ServiceInfo:
    """A Service's ``spec.selector``. ``None`` (absent or empty: protobuf, which
    kube-scheduler reads, cannot tell them apart) selects no pod, as upstream's
    ``GetPodServices``."""

    namespace: str
    name: str
    selector: tuple[tuple[str, str], ...] | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.selector is None:
            return False
        return all(labels.get(k) == v for k, v in self.selector)


SELECTOR_KINDS = ("ReplicationController", "ReplicaSet", "StatefulSet")


@dataclass(frozen=True, slots=True)
class SelectorObject:
    """A workload controller's ``spec.selector``: a ReplicationController's plain map
    (``set_selector``) or a ReplicaSet's/StatefulSet's LabelSelector (``selector``;
    ``None`` when absent)."""

    kind: str  # one of SELECTOR_KINDS
    namespace: str
    name: str
    selector: LabelSelector | None = None
    set_selector: tuple[tuple[str, str], ...] = ()
    uid: str = ""  # metadata.uid: pods name their controller by kind and uid

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _meta_identity(obj: Obj, kind: str) -> tuple[str, str, str]:
    if not isinstance(obj, Mapping):
        raise ParseError(kind, "<object>", f"expected a map, got {type(obj).__name__}")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise ParseError(kind, "metadata", "expected a map")
    ns = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    who = f"{kind} {ns}/{name or '<unnamed>'}"
    if not name:
        raise ParseError(who, "metadata.name", "missing")
    return ns, name, who


def _string_map(raw: Any, where: str, who: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ParseError(who, where, f"expected a map of strings, got {raw!r}")
    for k, v in raw.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ParseError(who, f"{where}.{k}", f"expected a string, got {v!r}")
    return tuple(sorted(raw.items()))


def service_from_dict(obj: Obj) -> ServiceInfo:
    """Parse a Service (only ``spec.selector`` is kept). Runtime complexity: O(selector)."""
    ns, name, who = _meta_identity(obj, "Service")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ParseError(who, "spec", "expected a map")
    sel = _string_map(spec.get("selector"), "spec.selector", who)
    return ServiceInfo(ns, name, sel or None)


def selector_object_from_dict(obj: Obj) -> SelectorObject:
    """Parse a ReplicationController, ReplicaSet or StatefulSet (by ``kind``; only
    ``spec.selector`` is kept). Runtime complexity: O(selector)."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    if kind not in SELECTOR_KINDS:
        raise ParseError(
            str(kind or "<object>"), "kind", f"expected one of {', '.join(SELECTOR_KINDS)}"
        )
    ns, name, who = _meta_identity(obj, kind)
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ParseError(who, "spec", "expected a map")
    raw = spec.get("selector")
    uid = str((obj.get("metadata") or {}).get("uid") or "")
    if kind == "ReplicationController":
        sel = _string_map(raw, "spec.selector", who)
        return SelectorObject(kind, ns, name, set_selector=sel, uid=uid)
    selector = _label_selector(raw, "spec.selector", who) if raw is not None else None
    return SelectorObject(kind, ns, name, selector=selector, uid=uid)


# --------------------------------------------------------------------------- NodeInfo


class NodeInfo:
    """A node and the pods placed on it, with running sums kept in step.

    Invariant (``check_invariants``): ``requested`` equals the sum of the pods' effective
    requests, ``non_zero_*`` the sum of their non-zero requests, ``used_ports`` the multiset
    of their host ports. add_pod/remove_pod are O(1) amortised (dict insert/delete plus
    constant work per resource name). ``generation`` grows on every change so that
    snapshots can copy only what moved.
    """

    __slots__ = (
        "generation",
        "label_pods",
        "match_counts",
        "node",
        "non_zero_cpu",
        "non_zero_mem",
        "owner_pods",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "requested",
        "used_ports",
    )

    def __init__(self, node: NodeRecord | None = None) -> None:
        self.node = node
        self.pods: dict[str, PodInfo] = {}
        self.requested = Resource()
        self.non_zero_cpu = 0
        self.non_zero_mem = 0
        self.used_ports: dict[tuple[str, str, int], int] = {}
        self.pods_with_affinity = 0
        self.pods_with_required_anti_affinity = 0
        self.generation = 0
        # How many of the pods a selector (with namespace and owner) matches, remembered by
        # PodTopologySpread for this version of the node; any pod change clears it.
        self.match_counts: dict[Any, int] | None = None
        # The pods by controller owner (kind, uid), grouped by PodTopologySpread on first
        # use for this version of the node, so that counting a workload's pods reads only
        # that workload's; any pod change clears it.
        self.owner_pods: dict[tuple[str, str] | None, list[PodInfo]] | None = None
        # The pods by label (key, value), likewise: counting the pods a selector with an
        # equality requirement matches reads only the pods carrying that label.
        self.label_pods: dict[tuple[str, str], list[PodInfo]] | None = None

    @property
    def name(self) -> str:
        return self.node.name if self.node is not None else ""

    @property
    def allocatable(self) -> Resource:
        return self.node.allocatable if self.node is not None else Resource()

    def set_node(self, node: NodeRecord, generation: int) -> None:
        self.node = node
        self.generation = generation

    def add_pod(self, pod: PodInfo, generation: int = 0) -> None:
        if pod.key in self.pods:
            self.remove_pod(pod.key, generation)
        self.pods[pod.key] = pod
        self.requested.add(pod.requests)
        self.non_zero_cpu += pod.non_zero_milli_cpu
        self.non_zero_mem += pod.non_zero_memory
        for hp in pod.host_ports:
            k = (hp.ip, hp.protocol, hp.port)
            self.used_ports[k] = self.used_ports.get(k, 0) + 1
        if pod.has_affinity:
            self.pods_with_affinity += 1
        if pod.required_anti_affinity:
            self.pods_with_required_anti_affinity += 1
        self.generation = generation
        self.match_counts = None
        self.owner_pods = None
        self.label_pods = None

    def remove_pod(self, key: str, generation: int = 0) -> PodInfo | None:
        pod = self.pods.pop(key, None)
        if pod is None:
            return None
        self.requested.sub(pod.requests)
        self.non_zero_cpu -= pod.non_zero_milli_cpu
        self.non_zero_mem -= pod.non_zero_memory
        for hp in pod.host_ports:
            k = (hp.ip, hp.protocol, hp.port)
            left = self.used_ports.get(k, 0) - 1
            if left > 0:
                self.used_ports[k] = left
            else:
                self.used_ports.pop(k, None)
        if pod.has_affinity:
            self.pods_with_affinity -= 1
        if pod.required_anti_affinity:
            self.pods_with_required_anti_affinity -= 1
        self.generation = generation
        self.match_counts = None
        self.owner_pods = None
        self.label_pods = None
        return pod

    def clone(self) -> NodeInfo:
        """A copy whose pods can be added/removed without touching this one. O(pods)."""
        c = NodeInfo(self.node)
        c.pods = dict(self.pods)
        c.requested = self.requested.copy()
        c.non_zero_cpu = self.non_zero_cpu
        c.non_zero_mem = self.non_zero_mem
        c.used_ports = dict(self.used_ports)
        c.pods_with_affinity = self.pods_with_affinity
        c.pods_with_required_anti_affinity = self.pods_with_required_anti_affinity
        c.generation = self.generation
        return c

    def check_invariants(self) -> None:
        want = Resource()
        nz_cpu = nz_mem = 0
        ports: dict[tuple[str, str, int], int] = {}
        for key, p in self.pods.items():
            assert key == p.key, f"pod stored under {key} has key {p.key}"
            want.add(p.requests)
            nz_cpu += p.non_zero_milli_cpu
            nz_mem += p.non_zero_memory
            for hp in p.host_ports:
                k = (hp.ip, hp.protocol, hp.port)
                ports[k] = ports.get(k, 0) + 1
        want.scalar = {k: v for k, v in want.scalar.items() if v}
        got = self.requested.copy()
        got.scalar = {k: v for k, v in got.scalar.items() if v}
        assert got == want, f"node {self.name}: requested {got} != sum of pods {want}"
        assert (self.non_zero_cpu, self.non_zero_mem) == (nz_cpu, nz_mem), "non-zero sums drift"
        assert self.used_ports == ports, f"node {self.name}: used ports drift"
        assert self.pods_with_affinity == sum(p.has_affinity for p in self.pods.values())
        assert self.pods_with_required_anti_affinity == sum(
            bool(p.required_anti_affinity) for p in self.pods.values()
        )
        if self.owner_pods is not None:
            grouped: dict[tuple[str, str] | None, list[PodInfo]] = {}
            for p in self.pods.values():
                grouped.setdefault(p.owner_kind_uid, []).append(p)
            assert self.owner_pods == grouped, f"node {self.name}: pods by owner drift"
        if self.label_pods is not None:
            by_label: dict[tuple[str, str], list[PodInfo]] = {}
            for p in self.pods.values():
                for kv in p.labels.items():
                    by_label.setdefault(kv, []).append(p)
            assert self.label_pods == by_label, f"node {self.name}: pods by label drift"
