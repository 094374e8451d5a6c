"""VolumeRestrictions, as upstream's: a PersistentVolumeClaim whose access modes include
ReadWriteOncePod may be used by one pod at a time, anywhere in the cluster (a second pod
is Unschedulable while a bound or assumed pod uses it; preemption may remove that pod,
through the PreFilter extensions); and two pods on one node may not share an inline disk
that cannot be shared: a GCE persistent disk or an iSCSI target unless both mount it
read-only, an AWS EBS volume at all, an RBD image (same pool and image, a common monitor)
unless both are read-only.

Claims are read as the API server last said (upstream reads its lister); a claim the pod
names that does not exist keeps the pod out here first, as upstream's PreFilter order has
it (VolumeRestrictions before VolumeBinding)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.framework import signers
from scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    EventRegistration,
    PreFilterResult,
    QueueingHint,
    SignFragment,
    Status,
)
from scheduler.framework.plugins import names
from scheduler.framework.plugins.volumebinding import VolumeObjects, pods_claim_volume
from scheduler.types import NodeInfo, PodInfo

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)
_STATE_KEY = "PreFilterVolumeRestrictions"
_RWOP = "ReadWriteOncePod"


@dataclass(slots=True)
class _State:
    rwop_claims: frozenset[str]  # the pod's ReadWriteOncePod claims, by name
    conflicts: int  # how many of them pods use (and, in a dry run, the pods added)

    def clone(self) -> _State:
        return _State(self.rwop_claims, self.conflicts)

    def count(self, other: PodInfo) -> int:
        """How many of ``other``'s claim volumes name one of the pod's ReadWriteOncePod
        claims (by name only, as upstream's conflictingPVCRefCountForPod)."""
        return sum(1 for name, eph in other.claims if not eph and name in self.rwop_claims)


def _disks_conflict(pod: PodInfo, other: PodInfo) -> bool:
    return any(d.conflicts(o) for d in pod.disks for o in other.disks)


class VolumeRestrictions:
    name = names.VOLUME_RESTRICTIONS

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filtering reads the pod's volumes."""
        return [SignFragment(signers.VOLUMES, signers.volumes(pod))], SUCCESS

    def __init__(self, objects: VolumeObjects) -> None:
        self.objects = objects

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.claims and not pod.disks:
            return None, SKIP
        rwop: set[str] = set()
        for name, ephemeral in pod.claims:
            if ephemeral:
                continue  # upstream's reads persistentVolumeClaim volumes only
            pvc = self.objects.claims.get(f"{pod.namespace}/{name}")
            if pvc is None:
                msg = f'persistentvolumeclaim "{name}" not found'
                return None, Status.unresolvable(msg, plugin=self.name)
            if _RWOP in pvc.access_modes:
                rwop.add(name)
        in_use = self.objects.claim_in_use
        conflicts = sum(1 for name in rwop if in_use(f"{pod.namespace}/{name}"))
        if not pod.disks and conflicts == 0:
            return None, SKIP
        state.write(_STATE_KEY, _State(frozenset(rwop), conflicts))
        return None, SUCCESS

    def pre_filter_extensions(self) -> VolumeRestrictions:
        return self

    def add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node_info: NodeInfo
    ) -> Status:
        st: _State | None = state.read(_STATE_KEY)
        if st is not None:
            st.conflicts += st.count(to_add)
        return SUCCESS

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node_info: NodeInfo
    ) -> Status:
        st: _State | None = state.read(_STATE_KEY)
        if st is not None:
            st.conflicts -= st.count(to_remove)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        if pod.disks:
            for other in node_info.pods.values():
                if other.disks and _disks_conflict(pod, other):
                    return Status(Code.UNSCHEDULABLE, (ERR_REASON_DISK_CONFLICT,), self.name)
        st: _State | None = state.read(_STATE_KEY)
        if st is not None and st.conflicts > 0:
            reason = ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT
            return Status(Code.UNSCHEDULABLE, (reason,), self.name)
        return SUCCESS

    def events_to_register(self) -> Iterable[EventRegistration]:
        """As upstream's: an assigned pod that shared a disk or a claim with the pod deleted;
        a node added; one of the pod's claims added."""

        def freed(pod: PodInfo, old: object, new: object) -> QueueingHint:
            if not isinstance(old, PodInfo) or old.namespace != pod.namespace:
                return QueueingHint.SKIP
            if pod.disks and _disks_conflict(pod, old):
                return QueueingHint.QUEUE
            mine = {name for name, eph in pod.claims if not eph}
            shared = any(not eph and name in mine for name, eph in old.claims)
            return QueueingHint.QUEUE if shared else QueueingHint.SKIP

        return [
            EventRegistration(ClusterEvent("AssignedPod", "Delete"), freed),
            EventRegistration(ClusterEvent("Node", "Add"), None),
            EventRegistration(ClusterEvent("PersistentVolumeClaim", "Add"), pods_claim_volume),
        ]
