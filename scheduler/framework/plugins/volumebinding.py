"""VolumeBinding, as upstream's volumebinding plugin.

PreFilter (a pod without claims skips the plugin): every claim the pod's volumes use must
exist, not be lost or being deleted, and a generic ephemeral volume's claim must be the
pod's own; a claim that is not fully bound (``pv.kubernetes.io/bind-completed``) and whose
StorageClass binds immediately (or that names no class, or one we do not know, or that
names its volume already) keeps the pod out until the PV controller binds it. The others
that are not bound wait for their first consumer: this pod.

Filter (upstream's FindPodVolumes): the node must satisfy the node affinity of every bound
claim's PersistentVolume (an in-tree one's CSI translation on a node that migrated its
plugin); each claim that waits is either given an available volume that
fits it on this node (the smallest that matches class, size, access modes, volume mode,
attributes class, selector and node affinity; one already pre-bound to the claim wins) or
must be provisionable there (its class names a provisioner and its allowedTopologies admit
the node; a driver that publishes CSIStorageCapacity objects must have one for the node
with room for the claim); a claim whose ``volume.kubernetes.io/selected-node`` names
another node rules this node out. Score (StorageCapacityScoring, on by default in v1.37):
the nodes where the pod would take existing volumes are ranked by how little of them the
claims use, or, when it would provision them, by how little of the capacity there.

Reserve assumes the choice in memory (the volume's claimRef, the claim's selected-node), so
that the next pod sees it; Unreserve takes it back. PreBind (async, in the pod's binding
task) writes it to the API server (the volume, then the claim, with the resourceVersion
it was read at) and waits, polling the informer cache every second as upstream does, until
the PV controller (or a provisioner) has bound every claim, for at most
``bindTimeoutSeconds``; any sign that it will not (a reset claimRef, a selected-node taken
away, a volume whose node affinity no longer matches) fails the binding, and the pod is
retried. In ``simulate`` (no API server) PreBind makes the assumption the cluster's state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from scheduler.backend.cache.snapshot import Snapshot
from scheduler.csimigration import MIGRATION_ON
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
from scheduler.framework.plugins.helper import broken_linear, match_node_selector_terms
from scheduler.framework.waiting_pods import ApiClient
from scheduler.quantity import NANO
from scheduler.types import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    NO_PROVISIONER,
    CSIDriverInfo,
    CSINodeInfo,
    CSIStorageCapacityInfo,
    NodeInfo,
    NodeRecord,
    NodeSelectorTerm,
    PodInfo,
    PVCInfo,
    PVInfo,
    StorageClassInfo,
    VolumeAttachmentInfo,
    VolumeObject,
)

ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
_STATE_KEY = "VolumeBinding"
DEFAULT_BIND_TIMEOUT_SECONDS = 600
DEFAULT_SHAPE = ((0, 10), (100, 0))  # StorageCapacityScoring's: emptier volumes first


@dataclass
class VolumeObjects:
    """The claims (by ``namespace/name``), volumes and storage classes (by name) the
    scheduler watches, as the API server last said (the core keeps them, the plugin reads
    them), with VolumeBinding's assumptions over them (upstream's assume caches): a claim
    given a selected-node or a volume given a claimRef by a pod that is being bound. An
    assumption stands until the informer brings a newer version of its object (or the pod's
    binding fails)."""

    claims: dict[str, PVCInfo] = field(default_factory=dict)
    volumes: dict[str, PVInfo] = field(default_factory=dict)
    classes: dict[str, StorageClassInfo] = field(default_factory=dict)
    # NodeVolumeLimits': CSINodes by node name, CSIDrivers by name, VolumeAttachments by
    # node name, then name.
    csi_nodes: dict[str, CSINodeInfo] = field(default_factory=dict)
    csi_drivers: dict[str, CSIDriverInfo] = field(default_factory=dict)
    attachments: dict[str, dict[str, VolumeAttachmentInfo]] = field(default_factory=dict)
    attachment_nodes: dict[str, str] = field(default_factory=dict)
    # VolumeBinding's CSIStorageCapacities, by storage class, then "namespace/name".
    capacities: dict[str, dict[str, CSIStorageCapacityInfo]] = field(default_factory=dict)
    assumed_claims: dict[str, PVCInfo] = field(default_factory=dict)
    assumed_volumes: dict[str, PVInfo] = field(default_factory=dict)
    # A node's labels by name (None: no such node); the core sets it to its cache's.
    node_labels: Callable[[str], Mapping[str, str] | None] = lambda name: None
    # Whether a bound or assumed pod uses the claim "namespace/name" (VolumeRestrictions'
    # ReadWriteOncePod check); the core sets it to its cache's.
    claim_in_use: Callable[[str], bool] = lambda key: False

    def claim(self, key: str) -> PVCInfo | None:
        """The claim as the scheduler sees it: assumed, else the API server's."""
        return self.assumed_claims.get(key) or self.claims.get(key)

    def volume(self, name: str) -> PVInfo | None:
        return self.assumed_volumes.get(name) or self.volumes.get(name)

    def set(self, obj: VolumeObject) -> VolumeObject | None:
        """The informer's add or update; returns the object it replaces. An assumption
        gives way to a newer version of its object (upstream's assume cache keeps the
        assumed object until then)."""
        if isinstance(obj, PVCInfo):
            old_claim = self.claims.get(obj.key)
            self.claims[obj.key] = obj
            assumed = self.assumed_claims.get(obj.key)
            if assumed is not None and obj.resource_version > assumed.resource_version:
                del self.assumed_claims[obj.key]
            return old_claim
        if isinstance(obj, PVInfo):
            old_volume = self.volumes.get(obj.name)
            self.volumes[obj.name] = obj
            pv = self.assumed_volumes.get(obj.name)
            if pv is not None and obj.resource_version > pv.resource_version:
                del self.assumed_volumes[obj.name]
            return old_volume
        if isinstance(obj, StorageClassInfo):
            old_class = self.classes.get(obj.name)
            self.classes[obj.name] = obj
            return old_class
        if isinstance(obj, CSINodeInfo):
            old_node = self.csi_nodes.get(obj.name)
            self.csi_nodes[obj.name] = obj
            return old_node
        if isinstance(obj, CSIDriverInfo):
            old_driver = self.csi_drivers.get(obj.name)
            self.csi_drivers[obj.name] = obj
            return old_driver
        if isinstance(obj, CSIStorageCapacityInfo):
            old_capacity = self._drop_capacity(obj.key)
            self.capacities.setdefault(obj.storage_class, {})[obj.key] = obj
            return old_capacity
        old_attachment = self._drop_attachment(obj.name)
        self.attachments.setdefault(obj.node_name, {})[obj.name] = obj
        self.attachment_nodes[obj.name] = obj.node_name
        return old_attachment

    def _drop_attachment(self, name: str) -> VolumeAttachmentInfo | None:
        """Forget a VolumeAttachment wherever it is filed (its node may have changed)."""
        node = self.attachment_nodes.pop(name, None)
        if node is None:
            return None
        on_node = self.attachments[node]
        old = on_node.pop(name)
        if not on_node:
            del self.attachments[node]
        return old

    def _drop_capacity(self, key: str) -> CSIStorageCapacityInfo | None:
        for cls, of_class in self.capacities.items():
            old = of_class.pop(key, None)
            if old is not None:
                if not of_class:
                    del self.capacities[cls]
                return old
        return None

    def delete(self, obj: VolumeObject) -> None:
        if isinstance(obj, PVCInfo):
            self.claims.pop(obj.key, None)
            self.assumed_claims.pop(obj.key, None)
        elif isinstance(obj, PVInfo):
            self.volumes.pop(obj.name, None)
            self.assumed_volumes.pop(obj.name, None)
        elif isinstance(obj, StorageClassInfo):
            self.classes.pop(obj.name, None)
        elif isinstance(obj, CSINodeInfo):
            self.csi_nodes.pop(obj.name, None)
        elif isinstance(obj, CSIDriverInfo):
            self.csi_drivers.pop(obj.name, None)
        elif isinstance(obj, CSIStorageCapacityInfo):
            self._drop_capacity(obj.key)
        else:
            self._drop_attachment(obj.name)


@dataclass(frozen=True, slots=True)
class _Choice:
    """What one node would take (upstream's PodVolumes): existing volumes for some claims,
    provisioning for the others."""

    static: tuple[tuple[PVCInfo, PVInfo], ...] = ()
    dynamic: tuple[PVCInfo, ...] = ()
    # For each claim in ``dynamic``: the CSIStorageCapacity that has room for it on the node
    # (None: its driver publishes no capacity).
    capacities: tuple[CSIStorageCapacityInfo | None, ...] = ()


@dataclass(slots=True)
class _State:
    bound: tuple[PVCInfo, ...]  # fully bound claims
    waiting: tuple[PVCInfo, ...]  # claims that wait for this pod, smallest request first
    # For each waiting claim without a selected-node: the volumes that could take it on
    # some node (node-independent checks passed), with whether each is pre-bound to it.
    candidates: dict[str, tuple[tuple[PVInfo, bool], ...]]
    by_node: dict[str, _Choice] = field(default_factory=dict)
    has_static: bool = False
    has_capacity: bool = False  # some node's claims to provision have a known capacity
    all_bound: bool = True  # set by Reserve: nothing for PreBind to do
    assumed: _Choice | None = None  # what Reserve assumed (the objects it wrote)

    def clone(self) -> _State:
        return _State(
            self.bound,
            self.waiting,
            self.candidates,
            dict(self.by_node),
            self.has_static,
            self.has_capacity,
            self.all_bound,
            self.assumed,
        )


def _affinity_ok(pv: PVInfo, labels: Mapping[str, str], node: str) -> bool:
    """Upstream's CheckNodeAffinity: no required terms match every node."""
    return _terms_ok(pv.node_affinity, labels, node)


def _bound_affinity(
    pv: PVInfo, csi_node: CSINodeInfo | None
) -> tuple[tuple[NodeSelectorTerm, ...] | None, str]:
    """Upstream's tryTranslatePVToCSI for a bound volume's node affinity check: an
    in-tree volume whose plugin the node's CSINode lists as migrated
    (``storage.alpha.kubernetes.io/migrated-plugins``) is checked as its CSI translation
    (its zone terms under the driver's topology key). Returns (the terms, an error)."""
    src = pv.migrated
    if src is None or src.plugin not in MIGRATION_ON or csi_node is None:
        return pv.node_affinity, ""
    if src.plugin not in csi_node.migrated_plugins.split(","):
        return pv.node_affinity, ""
    if src.error:
        return None, f"could not translate pv: {src.error}"
    return pv.csi_affinity, ""


def _terms_ok(
    terms: tuple[NodeSelectorTerm, ...] | None, labels: Mapping[str, str], node: str
) -> bool:
    return terms is None or match_node_selector_terms(terms, labels, node)


def _could_take(pv: PVInfo, claim: PVCInfo) -> tuple[bool, bool]:
    """The node-independent half of upstream's FindMatchingVolume for one volume: (whether
    it could take the claim on some node, whether it is pre-bound to the claim)."""
    if pv.claim_ref is not None and not pv.bound_to(claim):
        return False, False
    if pv.capacity_nanos < claim.storage_nanos or pv.volume_mode != claim.volume_mode:
        return False, False
    if pv.attributes_class != claim.attributes_class or pv.deleting:
        return False, False
    if pv.bound_to(claim):
        return True, True
    if pv.phase != "Available":
        return False, False
    if claim.selector is not None and not claim.selector.matches(pv.labels):
        return False, False
    if pv.storage_class != claim.storage_class:
        return False, False
    if not set(claim.access_modes) <= set(pv.access_modes):
        return False, False
    return True, False


class VolumeMetrics(Protocol):
    """Where VolumeBinding's metric goes (the live scheduler's Prometheus metrics):
    upstream's scheduler_volume_scheduling_stage_error_total."""

    def volume_stage_error(self, operation: str) -> None:
        """A stage failed with an error (not a node turned down): ``predicate`` (Filter),
        ``assume`` (Reserve) or ``bind`` (PreBind)."""
        ...


class VolumeBinding:
    name = names.VOLUME_BINDING

    def sign_pod(self, pod: PodInfo) -> tuple[list[SignFragment], Status]:
        """Filtering and scoring read the pod's volumes."""
        return [SignFragment(signers.VOLUMES, signers.volumes(pod))], SUCCESS

    node_only_filter = True  # Filter reads the pod's state and the node record only

    def __init__(
        self,
        objects: VolumeObjects,
        *,
        client: ApiClient | None = None,
        bind_timeout_seconds: float = DEFAULT_BIND_TIMEOUT_SECONDS,
        shape: Sequence[tuple[int, int]] = DEFAULT_SHAPE,
        poll_interval: float = 1.0,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        metrics: VolumeMetrics | None = None,
    ) -> None:
        self.objects = objects
        self.client = client
        self.metrics = metrics
        self.bind_timeout_seconds = bind_timeout_seconds
        self.shape = tuple(shape)
        self.poll_interval = poll_interval
        self.sleep = sleep

    # ------------------------------------------------------------------ PreFilter
    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.claims:
            return None, SKIP
        ns = pod.namespace
        found: list[PVCInfo] = []
        for claim, ephemeral in pod.claims:
            pvc = self.objects.claim(f"{ns}/{claim}")
            if pvc is None:
                msg = (
                    "waiting for ephemeral volume controller to create the "
                    f'persistentvolumeclaim "{claim}"'
                    if ephemeral
                    else f'persistentvolumeclaim "{claim}" not found'
                )
                return None, Status.unresolvable(msg, plugin=self.name)
            if pvc.lost:
                msg = (
                    f'persistentvolumeclaim "{claim}" bound to non-existent persistentvolume '
                    f'"{pvc.volume_name}"'
                )
                return None, Status.unresolvable(msg, plugin=self.name)
            if pvc.deleting:
                msg = f'persistentvolumeclaim "{claim}" is being deleted'
                return None, Status.unresolvable(msg, plugin=self.name)
            if ephemeral and pvc.controller_uid != pod.uid:
                msg = f"PVC {ns}/{claim} was not created for pod {ns}/{pod.name} (pod is not owner)"
                return None, Status.unresolvable(msg, plugin=self.name)
            found.append(pvc)
        bound: list[PVCInfo] = []
        waiting: list[PVCInfo] = []
        for pvc in found:
            if pvc.bound:
                bound.append(pvc)
                continue
            # As upstream's IsDelayBindingMode: no class, or a class we do not know, binds
            # immediately; a claim that names its volume but is not fully bound yet counts
            # as an unbound immediate one.
            sc = self.objects.classes.get(pvc.storage_class) if pvc.storage_class else None
            if sc is not None and sc.wait_for_first_consumer and not pvc.volume_name:
                waiting.append(pvc)
            else:
                return None, Status.unresolvable(ERR_UNBOUND_IMMEDIATE, plugin=self.name)
        waiting.sort(key=lambda c: c.storage_nanos)  # the smallest claims choose first
        candidates: dict[str, tuple[tuple[PVInfo, bool], ...]] = {}
        if any(c.selected_node is None for c in waiting):
            volumes = [self.objects.volume(n) for n in self.objects.volumes]
            for c in waiting:
                if c.selected_node is None:
                    fits = ((pv, _could_take(pv, c)) for pv in volumes if pv is not None)
                    candidates[c.key] = tuple((pv, pre) for pv, (ok, pre) in fits if ok)
        state.write(_STATE_KEY, _State(tuple(bound), tuple(waiting), candidates))
        return None, SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    # ------------------------------------------------------------------ Filter
    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        st: _State | None = state.read(_STATE_KEY)
        node = node_info.node
        if st is None or node is None:
            return SUCCESS
        choice, reasons, error = self._find(st, node)
        if error:
            if self.metrics is not None:
                self.metrics.volume_stage_error("predicate")
            return Status.error(error, plugin=self.name)
        if reasons:
            return Status.unresolvable(*reasons, plugin=self.name)
        if st.waiting:
            st.by_node[node.name] = choice
            st.has_static = st.has_static or bool(choice.static)
            if not st.has_capacity and any(c is not None for c in choice.capacities):
                st.has_capacity = True
        return SUCCESS

    def _find(self, st: _State, node: NodeRecord) -> tuple[_Choice, list[str], str]:
        """Upstream's FindPodVolumes on one node: (what it would take, the reasons it cannot,
        an error)."""
        labels = node.labels
        bound_ok = pv_found = unbound_ok = sufficient = True
        static: list[tuple[PVCInfo, PVInfo]] = []
        dynamic: list[PVCInfo] = []
        error = ""
        csi_node = self.objects.csi_nodes.get(node.name) if st.bound else None
        for pvc in st.bound:
            pv = self.objects.volume(pvc.volume_name)
            if pv is None:
                pv_found = False
                break
            terms, error = _bound_affinity(pv, csi_node)
            if error:
                return _Choice(), [], error
            if not _terms_ok(terms, labels, node.name):
                bound_ok = False
                break
        provision: list[PVCInfo] = []
        to_match: list[PVCInfo] = []
        for claim in st.waiting:
            if claim.selected_node is None:
                to_match.append(claim)
            elif claim.selected_node != node.name:
                unbound_ok = False  # being provisioned for another node: look no further
                to_match = provision = []
                break
            else:
                provision.append(claim)
        chosen: set[str] = set()
        for claim in to_match:
            pv = self._match(st.candidates.get(claim.key, ()), chosen, labels, node.name)
            if pv is None:
                provision.append(claim)  # no volume here: it would have to be provisioned
                continue
            chosen.add(pv.name)
            static.append((claim, pv))
        capacities: tuple[CSIStorageCapacityInfo | None, ...] = ()
        if provision:
            unbound_ok, sufficient, error, capacities = self._provisionable(provision, labels)
            if unbound_ok and sufficient:
                dynamic = provision
        reasons = []
        if not bound_ok:
            reasons.append(ERR_REASON_NODE_CONFLICT)
        if not unbound_ok:
            reasons.append(ERR_REASON_BIND_CONFLICT)
        if not sufficient:
            reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
        if not pv_found:
            reasons.append(ERR_REASON_PV_NOT_EXIST)
        return _Choice(tuple(static), tuple(dynamic), capacities), reasons, error

    @staticmethod
    def _match(
        candidates: Sequence[tuple[PVInfo, bool]],
        chosen: set[str],
        labels: Mapping[str, str],
        node: str,
    ) -> PVInfo | None:
        """The node half of upstream's FindMatchingVolume: the first candidate pre-bound to
        the claim decides (it, if its node affinity admits the node, else nothing); else
        the smallest available one the node's affinity admits (the first of equals)."""
        best: PVInfo | None = None
        for pv, prebound in candidates:
            if pv.name in chosen:
                continue
            ok = _affinity_ok(pv, labels, node)
            if prebound:
                return pv if ok else None
            if ok and (best is None or pv.capacity_nanos < best.capacity_nanos):
                best = pv
        return best

    def _provisionable(
        self, claims: Sequence[PVCInfo], labels: Mapping[str, str]
    ) -> tuple[bool, bool, str, tuple[CSIStorageCapacityInfo | None, ...]]:
        """Upstream's checkVolumeProvisions: (whether every claim can be provisioned for the
        node, whether there is room for each, an error, and for each claim the
        CSIStorageCapacity that has room for it). The first claim that fails decides."""
        found: list[CSIStorageCapacityInfo | None] = []
        for claim in claims:
            if not claim.storage_class:
                return False, False, f'no class for claim "{claim.key}"', ()
            sc = self.objects.classes.get(claim.storage_class)
            if sc is None:
                return False, False, f'failed to find storage class "{claim.storage_class}"', ()
            if not sc.provisioner or sc.provisioner == NO_PROVISIONER:
                return False, True, "", ()
            if not sc.allows(labels):
                return False, True, "", ()
            room, capacity = self._has_room(sc, claim, labels)
            if not room:
                return True, False, "", ()
            found.append(capacity)
        return True, True, "", tuple(found)

    def _has_room(
        self, sc: StorageClassInfo, claim: PVCInfo, labels: Mapping[str, str]
    ) -> tuple[bool, CSIStorageCapacityInfo | None]:
        """Upstream's hasEnoughCapacity: a driver that publishes its capacity (its CSIDriver
        says ``storageCapacity: true``) must have a CSIStorageCapacity of the claim's class,
        whose node topology selects the node, with room for a volume of the claim's size
        (``maximumVolumeSize``, else ``capacity``); the first such object found."""
        if not claim.storage_nanos:
            return True, None  # no size requested: nothing to check
        driver = self.objects.csi_drivers.get(sc.provisioner)
        if driver is None or not driver.storage_capacity:
            return True, None
        size = -(-claim.storage_nanos // NANO)  # bytes, rounded up as Quantity.Value()
        for capacity in self.objects.capacities.get(sc.name, {}).values():
            limit = capacity.volume_limit
            if limit is None or -(-limit // NANO) < size:
                continue
            topology = capacity.node_topology
            if topology is not None and topology.matches(labels):
                return True, capacity
        return False, None

    # ------------------------------------------------------------------ Score
    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], snapshot: Snapshot
    ) -> Status:
        """Scored: the existing volumes a node's claims would take, else the capacity its
        claims to provision would use; when no node has either every node scores 0, so the
        plugin skips (upstream's scores them all 0)."""
        st: _State | None = state.read(_STATE_KEY)
        return SUCCESS if st is not None and (st.has_static or st.has_capacity) else SKIP

    def score(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> int:
        """Upstream's volume capacity scorer: per storage class, the claims' requests over
        the chosen volumes' capacities through ``shape``, or, when the node would take no
        existing volume, over the capacity the node's CSIStorageCapacity gives the class
        (StorageCapacityScoring); the mean over the classes."""
        st: _State | None = state.read(_STATE_KEY)
        choice = None if st is None else st.by_node.get(node_info.name)
        if choice is None:
            return 0
        per_class: dict[str, list[int]] = {}
        if choice.static:
            for claim, pv in choice.static:
                sums = per_class.setdefault(pv.storage_class, [0, 0])
                sums[0] += -(-claim.storage_nanos // NANO)
                sums[1] += -(-pv.capacity_nanos // NANO)
        else:
            for claim, room in zip(choice.dynamic, choice.capacities, strict=True):
                if room is None:
                    continue
                sums = per_class.setdefault(claim.storage_class, [0, 0])
                sums[0] += -(-claim.storage_nanos // NANO)
                # Not a sum: two claims of one class share the class's capacity there.
                sums[1] = -(-(room.capacity_nanos or 0) // NANO)
        if not per_class:
            return 0
        total = 0
        for requested, capacity in per_class.values():
            util = 100 if capacity == 0 or requested > capacity else requested * 100 // capacity
            total += broken_linear(self.shape, util)
        return int(total / len(per_class) + 0.5)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        return None

    # ------------------------------------------------------------------ Reserve
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Upstream's AssumePodVolumes: unless every claim is bound by now, the node's
        choice is assumed (the volume's claimRef, the claim's selected-node) for the next
        pods to see, and PreBind will write it."""
        st: _State | None = state.read(_STATE_KEY)
        if st is None or not st.waiting:
            return SUCCESS
        choice = st.by_node.get(node_name)
        st.all_bound = True
        if choice is None:
            return SUCCESS
        claims = [self.objects.claim(f"{pod.namespace}/{c}") for c, _ in pod.claims]
        if all(c is not None and c.bound for c in claims):
            return SUCCESS
        static = []
        for claim, pv in choice.static:
            new = pv
            ref = (claim.namespace, claim.name, claim.uid)
            if pv.claim_ref != ref:
                new = replace(pv, claim_ref=ref)
            if not pv.bound_to(claim) and not new.bound_by_controller:
                new = replace(new, bound_by_controller=True)
            if new is not pv:
                self.objects.assumed_volumes[pv.name] = new
            static.append((claim, new))
        dynamic = []
        for claim in choice.dynamic:
            new_claim = replace(claim, selected_node=node_name)
            self.objects.assumed_claims[claim.key] = new_claim
            dynamic.append(new_claim)
        st.assumed = _Choice(tuple(static), tuple(dynamic))
        st.all_bound = False
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Upstream's RevertAssumedPodVolumes: the node's choice is no longer assumed."""
        st: _State | None = state.read(_STATE_KEY)
        choice = None if st is None else st.by_node.get(node_name)
        if choice is None:
            return
        for _, pv in choice.static:
            self.objects.assumed_volumes.pop(pv.name, None)
        for claim in choice.dynamic:
            self.objects.assumed_claims.pop(claim.key, None)

    def pre_bind_needed(self, state: CycleState) -> bool:
        """Whether PreBind has work to do (the core skips the binding cycle for a pod none
        of whose PreBind plugins has: most pods, which have no claims to bind)."""
        st: _State | None = state.read(_STATE_KEY)
        return st is not None and not st.all_bound

    # ------------------------------------------------------------------ PreBind
    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        st: _State | None = state.read(_STATE_KEY)
        if st is None or st.all_bound:
            return SKIP
        if st.assumed is None:
            return Status.error(f'no pod volume found for node "{node_name}"', plugin=self.name)
        return SUCCESS

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Upstream's BindPodVolumes: the API updates, then the wait for the PV controller."""
        status = await self._bind(state, pod, node_name)
        if status.code == Code.ERROR and self.metrics is not None:
            self.metrics.volume_stage_error("bind")
        return status

    async def _bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        st: _State | None = state.read(_STATE_KEY)
        if st is None or st.all_bound:
            return SUCCESS
        choice = st.assumed
        if choice is None:
            return Status.error(f'no pod volume found for node "{node_name}"', plugin=self.name)
        if self.client is None:
            self._commit(choice)
            return SUCCESS
        written, error = await self._write(choice)
        if error:
            return Status.error(error, plugin=self.name)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.bind_timeout_seconds
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return Status.error("binding volumes: context deadline exceeded", plugin=self.name)
            await self.sleep(min(self.poll_interval, remaining))
            done, error = self._check(choice, written, node_name)
            if error:
                return Status.error(f"binding volumes: {error}", plugin=self.name)
            if done:
                return SUCCESS

    async def _write(self, choice: _Choice) -> tuple[dict[str, int], str]:
        """Upstream's bindAPIUpdate, as merge patches that carry the resourceVersion the
        object was read at (so a concurrent change fails them, as an Update would): each
        volume's claimRef, then each claim's selected-node. Returns the resourceVersions
        the API server answered, by object, or an error; what was not written is no longer
        assumed."""
        assert self.client is not None
        written: dict[str, int] = {}
        pending_pvs = [pv.name for _, pv in choice.static]
        pending_claims = [c.key for c in choice.dynamic]
        try:
            for claim, pv in choice.static:
                annotations = {ANN_BOUND_BY_CONTROLLER: "yes"} if pv.bound_by_controller else {}
                body = {
                    "metadata": {
                        "resourceVersion": str(pv.resource_version),
                        "annotations": annotations,
                    },
                    "spec": {
                        "claimRef": {
                            "kind": "PersistentVolumeClaim",
                            "apiVersion": "v1",
                            "namespace": claim.namespace,
                            "name": claim.name,
                            "uid": claim.uid,
                            "resourceVersion": str(claim.resource_version),
                        }
                    },
                }
                answer = await self.client.request(
                    "PATCH",
                    f"/api/v1/persistentvolumes/{pv.name}",
                    body=body,
                    content_type="application/merge-patch+json",
                )
                written[f"pv/{pv.name}"] = _answered_version(answer)
                pending_pvs.remove(pv.name)
            for claim in choice.dynamic:
                body = {
                    "metadata": {
                        "resourceVersion": str(claim.resource_version),
                        "annotations": {ANN_SELECTED_NODE: claim.selected_node},
                    }
                }
                answer = await self.client.request(
                    "PATCH",
                    f"/api/v1/namespaces/{claim.namespace}/persistentvolumeclaims/{claim.name}",
                    body=body,
                    content_type="application/merge-patch+json",
                )
                written[f"pvc/{claim.key}"] = _answered_version(answer)
                pending_claims.remove(claim.key)
        except Exception as e:  # the API's answer, or no answer: the binding fails
            for name in pending_pvs:
                self.objects.assumed_volumes.pop(name, None)
            for key in pending_claims:
                self.objects.assumed_claims.pop(key, None)
            return written, str(e) or type(e).__name__
        return written, ""

    def _check(self, choice: _Choice, written: Mapping[str, int], node: str) -> tuple[bool, str]:
        """Upstream's checkBindings on the API server's objects as the informer last said
        (not the assumptions): (every claim fully bound, an error that ends the wait)."""
        labels = self.objects.node_labels(node)
        if labels is None:
            return False, f'failed to get node "{node}": node "{node}" not found'
        csi_node = self.objects.csi_nodes.get(node)
        for claim, pv in choice.static:
            api_pv = self.objects.volumes.get(pv.name)
            if api_pv is None:
                return False, f'failed to check binding: persistentvolume "{pv.name}" not found'
            api_claim = self.objects.claims.get(claim.key)
            if api_claim is None:
                return False, (
                    f'failed to check binding: persistentvolumeclaim "{claim.name}" not found'
                )
            if written.get(f"pv/{pv.name}", 0) > api_pv.resource_version:
                return False, ""  # our update has not come back through the watch yet
            terms, error = _bound_affinity(api_pv, csi_node)
            if error:
                return False, f"failed to translate pv to csi: {error}"
            if not _terms_ok(terms, labels, node):
                return False, (
                    f'pv "{pv.name}" node affinity doesn\'t match node "{node}": '
                    "no matching NodeSelectorTerms"
                )
            if api_pv.claim_ref is None or not api_pv.claim_ref[2]:
                return False, f'ClaimRef got reset for pv "{pv.name}"'
            if not api_claim.bound:
                return False, ""
        for claim in choice.dynamic:
            api_claim = self.objects.claims.get(claim.key)
            if api_claim is None:
                return False, (
                    f'failed to check provisioning pvc: persistentvolumeclaim "{claim.name}" '
                    "not found"
                )
            if written.get(f"pvc/{claim.key}", 0) > api_claim.resource_version:
                return False, ""
            if api_claim.selected_node != node:
                # A provisioner that fails takes the annotation away to say so.
                return False, f'provisioning failed for PVC "{claim.name}"'
            if api_claim.volume_name:
                api_pv = self.objects.volumes.get(api_claim.volume_name)
                if api_pv is None:
                    return False, ""  # the volume's add has not come through yet
                terms, error = _bound_affinity(api_pv, csi_node)
                if error:
                    return False, error
                if not _terms_ok(terms, labels, node):
                    return False, (
                        f'pv "{api_pv.name}" node affinity doesn\'t match node "{node}": '
                        "no matching NodeSelectorTerms"
                    )
            if not api_claim.bound:
                return False, ""
        return True, ""

    def _commit(self, choice: _Choice) -> None:
        """``simulate``'s PreBind: no API server, so what Reserve assumed becomes the state
        (a volume's claim bound to it; a claim to provision stays unbound, with the node
        selected, as a provisioner would find it)."""
        objects = self.objects
        for claim, pv in choice.static:
            objects.assumed_volumes.pop(pv.name, None)
            objects.assumed_claims.pop(claim.key, None)
            objects.volumes[pv.name] = replace(pv, phase="Bound")
            objects.claims[claim.key] = replace(claim, volume_name=pv.name, bind_completed=True)
        for claim in choice.dynamic:
            objects.assumed_claims.pop(claim.key, None)
            objects.claims[claim.key] = claim

    # ------------------------------------------------------------------ hints
    def events_to_register(self) -> Iterable[EventRegistration]:
        """As upstream's: one of the pod's claims added or changed; any volume added or
        changed; a class added, or its allowedTopologies changed; a node added or
        relabelled; a CSINode added, or its migrated-plugins annotation changed; a
        CSIStorageCapacity added, or its volume limit raised; a CSIDriver that stops
        publishing its capacity (for any pod with claims, where upstream's hint looks at the
        pod's inline CSI volumes only: a pod it would leave waiting is tried again)."""

        def csi_node_changed(pod: PodInfo, old: object, new: object) -> QueueingHint:
            if isinstance(old, CSINodeInfo) and isinstance(new, CSINodeInfo):
                same = old.migrated_plugins == new.migrated_plugins
                return QueueingHint.SKIP if same else QueueingHint.QUEUE
            return QueueingHint.QUEUE

        def capacity_raised(pod: PodInfo, old: object, new: object) -> QueueingHint:
            if not isinstance(old, CSIStorageCapacityInfo) or not isinstance(
                new, CSIStorageCapacityInfo
            ):
                return QueueingHint.QUEUE
            before, after = old.volume_limit, new.volume_limit
            raised = after is not None and (before is None or after > before)
            return QueueingHint.QUEUE if raised else QueueingHint.SKIP

        def capacity_unchecked(pod: PodInfo, old: object, new: object) -> QueueingHint:
            if isinstance(old, CSIDriverInfo) and isinstance(new, CSIDriverInfo):
                off = old.storage_capacity and not new.storage_capacity
                return QueueingHint.QUEUE if off and pod.claims else QueueingHint.SKIP
            return QueueingHint.QUEUE

        def class_changed(pod: PodInfo, old: object, new: object) -> QueueingHint:
            if isinstance(old, StorageClassInfo) and isinstance(new, StorageClassInfo):
                same = old.allowed_topologies == new.allowed_topologies
                return QueueingHint.SKIP if same else QueueingHint.QUEUE
            return QueueingHint.QUEUE

        return [
            EventRegistration(ClusterEvent("StorageClass", "Add"), class_changed),
            EventRegistration(ClusterEvent("StorageClass", "Update"), class_changed),
            EventRegistration(ClusterEvent("PersistentVolumeClaim", "Add"), pods_claim),
            EventRegistration(ClusterEvent("PersistentVolumeClaim", "Update"), pods_claim),
            EventRegistration(ClusterEvent("PersistentVolume", "Add"), None),
            EventRegistration(ClusterEvent("PersistentVolume", "Update"), None),
            EventRegistration(ClusterEvent("Node", "Add"), None),
            EventRegistration(ClusterEvent("Node", "Update"), node_relabelled),
            EventRegistration(ClusterEvent("CSINode", "Add"), csi_node_changed),
            EventRegistration(ClusterEvent("CSINode", "Update"), csi_node_changed),
            EventRegistration(ClusterEvent("CSIDriver", "Update"), capacity_unchecked),
            EventRegistration(ClusterEvent("CSIStorageCapacity", "Add"), capacity_raised),
            EventRegistration(ClusterEvent("CSIStorageCapacity", "Update"), capacity_raised),
        ]


def node_relabelled(pod: PodInfo, old: object, new: object) -> QueueingHint:
    """A node update that may help a volume plugin: its labels changed (a node first seen
    counts as changed), as upstream's UpdateNodeLabel."""
    if isinstance(old, NodeRecord) and isinstance(new, NodeRecord):
        return QueueingHint.QUEUE if old.labels != new.labels else QueueingHint.SKIP
    return QueueingHint.QUEUE


def _claim_hint(*, volumes_only: bool) -> Callable[[PodInfo, object, object], QueueingHint]:
    def hint(pod: PodInfo, old: object, new: object) -> QueueingHint:
        if not isinstance(new, PVCInfo) or new.namespace != pod.namespace:
            return QueueingHint.SKIP
        named = any(
            claim == new.name and not (volumes_only and ephemeral)
            for claim, ephemeral in pod.claims
        )
        return QueueingHint.QUEUE if named else QueueingHint.SKIP

    return hint


# A claim added or changed that the pod names: through any volume (VolumeBinding's), or
# through a persistentVolumeClaim volume only (VolumeZone's and VolumeRestrictions').
pods_claim = _claim_hint(volumes_only=False)
pods_claim_volume = _claim_hint(volumes_only=True)


def _answered_version(answer: Mapping[str, Any]) -> int:
    meta = answer.get("metadata") if isinstance(answer, Mapping) else None
    text = str((meta or {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else 0


__all__ = [
    "DEFAULT_BIND_TIMEOUT_SECONDS",
    "DEFAULT_SHAPE",
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "ERR_UNBOUND_IMMEDIATE",
    "VolumeBinding",
    "VolumeMetrics",
    "VolumeObjects",
    "node_relabelled",
    "pods_claim",
    "pods_claim_volume",
]
