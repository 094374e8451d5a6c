"""VolumeBinding, for claims that are already bound or bind immediately (upstream's
volumebinding plugin without its binding of WaitForFirstConsumer claims).

PreFilter (a pod without claims skips the plugin): every claim the pod's volumes use must
exist and not be being deleted, and a generic ephemeral volume's claim must be the pod's
own; a claim that is not fully bound (``pv.kubernetes.io/bind-completed``) and whose
StorageClass binds immediately (or that names no class, or one we do not know) makes the
pod unschedulable until the PV controller binds it (upstream's "pod has unbound immediate
PersistentVolumeClaims"). Filter: the node must satisfy the node affinity of every bound
claim's PersistentVolume (a local volume's node, a zone), as upstream's checkBoundClaims.

Not built: a claim whose StorageClass waits for the first consumer is not bound by us (no
PV is chosen, no ``volume.kubernetes.io/selected-node`` is written). Rather than bind the
pod to a node where its claim would stay unbound (and the pod wait for it, unexplained),
the pod stays pending with a message that says so (UnschedulableAndUnresolvable, ours);
once the claim is bound by something else, the claim's update brings the pod back and it
is placed by the bound volume. README's limits say so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from scheduler.backend.cache.snapshot import Snapshot
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
from scheduler.framework.plugins.helper import match_node_selector_terms
from scheduler.types import (
    NodeInfo,
    NodeRecord,
    NodeSelectorTerm,
    PodInfo,
    PVCInfo,
    PVInfo,
    StorageClassInfo,
)

ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_PV_NOT_EXIST = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
ERR_WAITS_FOR_CONSUMER = (
    'persistentvolumeclaim "{claim}" waits for its first consumer (StorageClass "{cls}"): '
    "py-scheduler does not bind such claims"
)
_STATE_KEY = "VolumeBinding"


@dataclass
class VolumeObjects:
    """The claims (by ``namespace/name``), volumes and storage classes (by name) the
    scheduler watches; the core keeps them, the plugin reads them."""

    claims: dict[str, PVCInfo] = field(default_factory=dict)
    volumes: dict[str, PVInfo] = field(default_factory=dict)
    classes: dict[str, StorageClassInfo] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Bound:
    affinities: tuple[tuple[NodeSelectorTerm, ...], ...]  # of the bound claims' volumes
    missing_volume: bool  # a claim bound to a volume we do not know


class VolumeBinding:
    name = names.VOLUME_BINDING
    node_only_filter = True  # Filter reads the pod's state and the node record only

    def __init__(self, objects: VolumeObjects) -> None:
        self.objects = objects

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.claims:
            return None, SKIP
        ns = pod.namespace
        found: list[PVCInfo] = []
        for claim, ephemeral in pod.claims:
            pvc = self.objects.claims.get(f"{ns}/{claim}")
            if pvc is None:
                msg = f'persistentvolumeclaim "{claim}" not found'
                return None, Status.unresolvable(msg, plugin=self.name)
            if ephemeral and pvc.controller_uid != pod.uid:
                msg = f"PVC {ns}/{claim} was not created for pod {ns}/{pod.name} (pod is not owner)"
                return None, Status.unresolvable(msg, plugin=self.name)
            if pvc.deleting:
                msg = f'persistentvolumeclaim "{claim}" is being deleted'
                return None, Status.unresolvable(msg, plugin=self.name)
            found.append(pvc)
        affinities: list[tuple[NodeSelectorTerm, ...]] = []
        missing = False
        immediate = False
        waiting: list[PVCInfo] = []  # claims that wait for their first consumer
        for pvc in found:
            if pvc.bound:
                pv = self.objects.volumes.get(pvc.volume_name)
                if pv is None:
                    missing = True
                elif pv.node_affinity is not None:
                    affinities.append(pv.node_affinity)
                continue
            # As upstream's IsDelayBindingMode: no class, or a class we do not know, binds
            # immediately; and a claim that names its volume but is not fully bound yet
            # counts as an unbound immediate one.
            sc = self.objects.classes.get(pvc.storage_class) if pvc.storage_class else None
            delayed = sc is not None and sc.wait_for_first_consumer
            if delayed and not pvc.volume_name:
                waiting.append(pvc)
            else:
                immediate = True
        if immediate:
            return None, Status.unresolvable(ERR_UNBOUND_IMMEDIATE, plugin=self.name)
        if waiting:
            # Upstream would choose a volume for it on the node (or have one provisioned
            # there). We do not: binding the pod would leave it waiting for a volume that
            # never comes, with nothing to say why. It stays pending, and says why.
            first = waiting[0]
            msg = ERR_WAITS_FOR_CONSUMER.format(claim=first.name, cls=first.storage_class)
            return None, Status.unresolvable(msg, plugin=self.name)
        state.write(_STATE_KEY, _Bound(tuple(affinities), missing))
        return None, SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        bound: _Bound | None = state.read(_STATE_KEY)
        node = node_info.node
        if bound is None or node is None:
            return SUCCESS
        if bound.missing_volume:
            return Status.unresolvable(ERR_REASON_PV_NOT_EXIST, plugin=self.name)
        for terms in bound.affinities:
            if not match_node_selector_terms(terms, node.labels, node.name):
                return Status.unresolvable(ERR_REASON_NODE_CONFLICT, plugin=self.name)
        return SUCCESS

    def events_to_register(self) -> Iterable[EventRegistration]:
        """As upstream's (without CSINode, CSIDriver and CSIStorageCapacity, which nothing
        here reads): one of the pod's claims added or changed; any volume added or changed;
        a class added (upstream also queues on a change of allowedTopologies, which only
        the binding of claims that wait for a consumer reads); a node added or relabelled."""

        def own_claim(pod: PodInfo, old: object, new: object) -> QueueingHint:
            if not isinstance(new, PVCInfo) or new.namespace != pod.namespace:
                return QueueingHint.SKIP
            named = any(claim == new.name for claim, _ in pod.claims)
            return QueueingHint.QUEUE if named else QueueingHint.SKIP

        def relabelled(pod: PodInfo, old: object, new: object) -> QueueingHint:
            if isinstance(old, NodeRecord) and isinstance(new, NodeRecord):
                return QueueingHint.QUEUE if old.labels != new.labels else QueueingHint.SKIP
            return QueueingHint.QUEUE

        return [
            EventRegistration(ClusterEvent("PersistentVolumeClaim", "Add"), own_claim),
            EventRegistration(ClusterEvent("PersistentVolumeClaim", "Update"), own_claim),
            EventRegistration(ClusterEvent("PersistentVolume", "Add"), None),
            EventRegistration(ClusterEvent("PersistentVolume", "Update"), None),
            EventRegistration(ClusterEvent("StorageClass", "Add"), None),
            EventRegistration(ClusterEvent("Node", "Add"), None),
            EventRegistration(ClusterEvent("Node", "Update"), relabelled),
        ]
