"""NodeVolumeLimits, as upstream's (its CSILimits plugin, with VolumeLimitScaling, beta
and on in v1.37): a node takes no more volumes of a CSI driver than the driver's attach
limit there, as the node's CSINode says (``spec.drivers[].allocatable.count``).

What counts, for the pod and for every pod already on the node (bound, assumed, or
nominated and as important): each claim (``persistentVolumeClaim`` or generic ephemeral
volume) as the CSI volume of its PersistentVolume (``driver/volumeHandle``), or, for a claim
not bound yet, as a new volume of its StorageClass's provisioner; and each inline volume of
an in-tree plugin migrated to CSI (AWS EBS, GCE PD, Azure Disk, Cinder, Portworx) when the
node has a CSINode, translated as csi-translation-lib does (scheduler/csimigration.py).
A volume two pods share counts once. VolumeAttachments to the node count too (a volume
still attached after its pod left). The pod fits if, for every driver it adds volumes of,
those on the node plus its new ones stay within the limit (``node(s) exceed max volume
count``). A driver whose CSIDriver says ``preventPodSchedulingIfMissing`` rules out nodes
whose CSINode does not list it (``<driver> CSI driver is not installed on the node``).

As upstream: a pod without claims or migratable inline volumes skips the plugin; a node
without a CSINode, or whose CSINode gives no limits, takes anything; a claim the pod names
that does not exist is UnschedulableAndUnresolvable, a missing claim of a pod already there
is not counted; an inline volume that does not translate is an error. There are no
PreFilter extensions: preemption's dry run counts the pods left on the node.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterable

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.csimigration import CSI_DRIVERS, MIGRATION_ON
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
from scheduler.framework.plugins.volumebinding import VolumeObjects, pods_claim
from scheduler.types import (
    CSINodeInfo,
    NodeInfo,
    PodInfo,
    PVCInfo,
    VolumeAttachmentInfo,
)

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"


class _Unresolvable(Exception):
    """The pod's own claim does not exist (UnschedulableAndUnresolvable)."""


class _Failed(Exception):
    """Anything else that stops the count (an Error, as upstream's AsStatus)."""


def _migration_on(csi_node: CSINodeInfo | None, plugin: str) -> bool:
    """Upstream's isCSIMigrationOn: a CSINode, and a plugin whose migration is counted."""
    return csi_node is not None and plugin in MIGRATION_ON


class NodeVolumeLimits:
    name = names.NODE_VOLUME_LIMITS

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filtering reads the pod's volumes."""
        return [SignFragment(signers.VOLUMES, signers.volumes(pod))], SUCCESS

    def __init__(self, objects: VolumeObjects, *, prefix: str | None = None) -> None:
        self.objects = objects
        # Names a claim's volume before it has one (unique per claim, never a real handle).
        self.prefix = secrets.token_hex(16) if prefix is None else prefix

    # ------------------------------------------------------------------ PreFilter
    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if pod.claims or pod.migrated:
            return None, SUCCESS
        return None, SKIP

    def pre_filter_extensions(self) -> None:
        return None

    # ------------------------------------------------------------------ Filter
    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        node = node_info.node
        if node is None or not (pod.claims or pod.migrated):
            return SUCCESS
        csi_node = self.objects.csi_nodes.get(node.name)
        new: dict[str, str] = {}  # unique volume name -> driver
        try:
            self._attachable(pod, csi_node, new, new_pod=True)
        except _Unresolvable as e:
            return Status.unresolvable(str(e), plugin=self.name)
        except _Failed as e:
            return Status.error(str(e), plugin=self.name)
        if not new:
            return SUCCESS
        for driver in new.values():
            if not self._driver_installed(driver, csi_node):
                msg = f"{driver} CSI driver is not installed on the node"
                return Status.unschedulable(msg, plugin=self.name)
        limits = csi_node.limits() if csi_node is not None else {}
        if not limits:
            return SUCCESS
        attached: dict[str, str] = {}
        try:
            for other in node_info.pods.values():
                if other.claims or other.migrated:
                    self._attachable(other, csi_node, attached, new_pod=False)
        except (_Unresolvable, _Failed) as e:
            return Status.error(str(e), plugin=self.name)
        counts: Counter[str] = Counter()
        for unique, driver in attached.items():
            new.pop(unique, None)  # a volume the node has already counts once
            counts[driver] += 1
        for unique, driver in self._attached_to(node.name).items():
            if unique not in attached:
                counts[driver] += 1
        for driver, adding in Counter(new.values()).items():
            limit = limits.get(driver)
            if limit is not None and counts[driver] + adding > limit:
                return Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, plugin=self.name)
        return SUCCESS

    def _driver_installed(self, driver: str, csi_node: CSINodeInfo | None) -> bool:
        """VolumeLimitScaling's check: a driver without a CSIDriver object, or whose object
        does not opt in, may be anywhere; else the node's CSINode must list it."""
        obj = self.objects.csi_drivers.get(driver)
        if obj is None or not obj.prevent_pod_scheduling_if_missing:
            return True
        return csi_node is not None and driver in csi_node.drivers

    def _attachable(
        self, pod: PodInfo, csi_node: CSINodeInfo | None, out: dict[str, str], *, new_pod: bool
    ) -> None:
        """Upstream's filterAttachableVolumes: the pod's CSI volumes into ``out``."""
        ns = pod.namespace
        for claim_name, ephemeral in pod.claims:
            pvc = self.objects.claims.get(f"{ns}/{claim_name}")
            if pvc is None:
                if new_pod:
                    raise _Unresolvable(
                        f"looking up PVC {ns}/{claim_name}: "
                        f'persistentvolumeclaim "{claim_name}" not found'
                    )
                continue  # not counted: nothing says it belongs to that pod
            if ephemeral and pvc.controller_uid != pod.uid:
                raise _Failed(
                    f"PVC {ns}/{claim_name} was not created for pod {ns}/{pod.name} "
                    "(pod is not owner)"
                )
            driver, handle = self._claim_driver(csi_node, pvc)
            if driver and handle:
                out[f"{driver}/{handle}"] = driver
        for volume, source in pod.migrated:
            if not _migration_on(csi_node, source.plugin):
                continue
            if source.error:
                raise _Failed(f"converting volume({volume}) from inline to csi: {source.error}")
            out[f"{source.driver}/{source.handle}"] = source.driver

    def _claim_driver(self, csi_node: CSINodeInfo | None, pvc: PVCInfo) -> tuple[str, str]:
        """Upstream's getCSIDriverInfo: (driver, volume handle) of a claim ("" if it is
        not counted)."""
        pv = self.objects.volumes.get(pvc.volume_name) if pvc.volume_name else None
        if pv is None:
            return self._class_driver(csi_node, pvc)
        if pv.csi is not None:
            return pv.csi
        src = pv.migrated
        if src is None or not _migration_on(csi_node, src.plugin) or src.error:
            return "", ""
        return src.driver, src.handle

    def _class_driver(self, csi_node: CSINodeInfo | None, pvc: PVCInfo) -> tuple[str, str]:
        """A claim without its volume yet: a new volume of its class's provisioner."""
        if not pvc.storage_class:
            return "", ""  # binds immediately: bound before the pod is scheduled
        sc = self.objects.classes.get(pvc.storage_class)
        if sc is None:
            return "", ""
        handle = f"{self.prefix}-{pvc.namespace}/{pvc.name}"
        provisioner = sc.provisioner
        if provisioner in CSI_DRIVERS:
            if not _migration_on(csi_node, provisioner):
                return "", ""
            return CSI_DRIVERS[provisioner], handle
        return provisioner, handle

    def _attached_to(self, node: str) -> dict[str, str]:
        """The node's VolumeAttachments of CSI PersistentVolumes: unique name -> attacher."""
        out: dict[str, str] = {}
        for va in self.objects.attachments.get(node, {}).values():
            if not va.attacher or not va.pv_name:
                continue
            pv = self.objects.volumes.get(va.pv_name)
            if pv is None or pv.csi is None:
                continue
            out[f"{va.attacher}/{pv.csi[1]}"] = va.attacher
        return out

    # ------------------------------------------------------------------ hints
    def events_to_register(self) -> Iterable[EventRegistration]:
        """As upstream's: a CSINode added (no hint) or given a higher limit; an assigned
        pod with volumes deleted; one of the pod's claims added; a VolumeAttachment deleted
        that may free the pod's driver."""
        return [
            EventRegistration(ClusterEvent("CSINode", "Add"), None),
            EventRegistration(ClusterEvent("CSINode", "Update"), _limit_raised),
            EventRegistration(ClusterEvent("AssignedPod", "Delete"), _pod_with_volumes_left),
            EventRegistration(ClusterEvent("PersistentVolumeClaim", "Add"), pods_claim),
            EventRegistration(ClusterEvent("VolumeAttachment", "Delete"), _attachment_freed),
        ]


def _limit_raised(pod: PodInfo, old: object, new: object) -> QueueingHint:
    if not isinstance(old, CSINodeInfo) or not isinstance(new, CSINodeInfo):
        return QueueingHint.QUEUE
    for driver, count in new.drivers.items():
        if (count or 0) > (old.drivers.get(driver) or 0):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _pod_with_volumes_left(pod: PodInfo, old: object, new: object) -> QueueingHint:
    if not isinstance(old, PodInfo):
        return QueueingHint.QUEUE
    if not old.node_name and not old.nominated_node_name:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE if old.claims or old.migrated else QueueingHint.SKIP


def _attachment_freed(pod: PodInfo, old: object, new: object) -> QueueingHint:
    if not isinstance(old, VolumeAttachmentInfo):
        return QueueingHint.QUEUE
    if any(not ephemeral for _, ephemeral in pod.claims):
        return QueueingHint.QUEUE
    for _, source in pod.migrated:
        if source.error or source.driver == old.attacher:
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


__all__ = ["ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED", "NodeVolumeLimits"]
