"""VolumeZone, as upstream's: a pod whose ``persistentVolumeClaim`` volumes are bound to
PersistentVolumes labelled with a zone or region (``topology.kubernetes.io/zone`` and
``/region``, and their ``failure-domain.beta.kubernetes.io`` forms; a value may list
several zones joined by ``__``) fits only the nodes in one of them. A node with none of
these labels is not constrained. A claim that is not bound yet is the PV controller's (it
binds immediately) or VolumeBinding's (it waits for its first consumer) business: the
first keeps the pod out here too, the second is skipped.

It reads the API server's objects (not VolumeBinding's assumptions), as upstream's reads
its listers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.backend.cache.snapshot import Snapshot
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
from scheduler.framework.plugins.volumebinding import (
    VolumeObjects,
    node_relabelled,
    pods_claim_volume,
)
from scheduler.types import NodeInfo, PodInfo, PVInfo, StorageClassInfo

ERR_REASON_CONFLICT = "node(s) had no available volume zone"
_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
_ZONE = "topology.kubernetes.io/zone"
_REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (_BETA_ZONE, _BETA_REGION, _ZONE, _REGION)
_GA = {_BETA_ZONE: _ZONE, _BETA_REGION: _REGION}
_STATE_KEY = "PreFilterVolumeZone"


@dataclass(frozen=True, slots=True)
class _Topology:
    volume: str
    key: str
    values: frozenset[str]


def volume_topologies(pv: PVInfo) -> tuple[_Topology, ...]:
    """A volume's zone and region labels, each a set of values (upstream's getPVTopologies;
    a value with an empty element in its ``__`` list is ignored, as upstream logs and skips
    it)."""
    out = []
    for key in TOPOLOGY_LABELS:
        value = pv.labels.get(key)
        if value is None:
            continue
        parts = [p.strip() for p in value.split("__")]
        if any(not p for p in parts):
            continue
        out.append(_Topology(pv.name, key, frozenset(parts)))
    return tuple(out)


class VolumeZone:
    name = names.VOLUME_ZONE

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filtering reads the pod's volumes."""
        return [SignFragment(signers.VOLUMES, signers.volumes(pod))], SUCCESS

    node_only_filter = True  # Filter reads the pod's state and the node record only

    def __init__(self, objects: VolumeObjects) -> None:
        self.objects = objects

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.claims:
            return None, SKIP
        topologies: list[_Topology] = []
        for claim, ephemeral in pod.claims:
            if ephemeral:
                continue  # upstream's reads persistentVolumeClaim volumes only
            pvc = self.objects.claims.get(f"{pod.namespace}/{claim}")
            if pvc is None:
                msg = f'persistentvolumeclaim "{claim}" not found'
                return None, Status.unresolvable(msg, plugin=self.name)
            if not pvc.volume_name:
                if not pvc.storage_class:
                    msg = "PersistentVolumeClaim had no pv name and storageClass name"
                    return None, Status.unresolvable(msg, plugin=self.name)
                sc = self.objects.classes.get(pvc.storage_class)
                if sc is None:
                    msg = f'storageclass.storage.k8s.io "{pvc.storage_class}" not found'
                    return None, Status.unresolvable(msg, plugin=self.name)
                if sc.wait_for_first_consumer:
                    continue
                msg = "PersistentVolume had no name"
                return None, Status.unresolvable(msg, plugin=self.name)
            pv = self.objects.volumes.get(pvc.volume_name)
            if pv is None:
                msg = f'persistentvolume "{pvc.volume_name}" not found'
                return None, Status.unresolvable(msg, plugin=self.name)
            topologies.extend(volume_topologies(pv))
        if not topologies:
            return None, SKIP
        state.write(_STATE_KEY, tuple(topologies))
        return None, SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        topologies: tuple[_Topology, ...] | None = state.read(_STATE_KEY)
        node = node_info.node
        if not topologies or node is None:
            return SUCCESS
        labels = node.labels
        if not any(key in labels for key in TOPOLOGY_LABELS):
            return SUCCESS
        for t in topologies:
            value = labels.get(t.key)
            if value is None:
                value = labels.get(_GA.get(t.key, t.key))
            if value is None or value not in t.values:
                return Status.unresolvable(ERR_REASON_CONFLICT, plugin=self.name)
        return SUCCESS

    def events_to_register(self) -> Iterable[EventRegistration]:
        """As upstream's: a class that waits for its first consumer added; a node added or
        relabelled; one of the pod's claims added or changed; a volume added, or its zone or
        region labels changed."""

        def waiting_class(pod: PodInfo, old: object, new: object) -> QueueingHint:
            wffc = isinstance(new, StorageClassInfo) and new.wait_for_first_consumer
            return QueueingHint.QUEUE if wffc else QueueingHint.SKIP

        def topology_changed(pod: PodInfo, old: object, new: object) -> QueueingHint:
            if isinstance(old, PVInfo) and isinstance(new, PVInfo):
                same = volume_topologies(old) == volume_topologies(new)
                return QueueingHint.SKIP if same else QueueingHint.QUEUE
            return QueueingHint.QUEUE

        return [
            EventRegistration(ClusterEvent("StorageClass", "Add"), waiting_class),
            EventRegistration(ClusterEvent("Node", "Add"), None),
            EventRegistration(ClusterEvent("Node", "Update"), node_relabelled),
            EventRegistration(ClusterEvent("PersistentVolumeClaim", "Add"), pods_claim_volume),
            EventRegistration(ClusterEvent("PersistentVolumeClaim", "Update"), pods_claim_volume),
            EventRegistration(ClusterEvent("PersistentVolume", "Add"), topology_changed),
            EventRegistration(ClusterEvent("PersistentVolume", "Update"), topology_changed),
        ]
