"""Event handlers: typed deltas from the informers, routed to the cache and the queue.

As kube-scheduler's ``eventhandlers.go``, this module only routes: the core
(``SchedulerCore.on_*``) decides what an event means for the cache (assigned pods, nodes),
the queue (our pending pods) and the queueing hints. It never sees the wire format (the
informers decode with ``scheduler.decode``) and it does no I/O: a pending pod of ours that
cannot be decoded is handed to ``on_rejected``, which the live layer turns into a log line
and a FailedScheduling event.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from scheduler.decode import ObjectDecoder
from scheduler.deltas import Added, Deleted, Delta, Updated
from scheduler.draapi import DraObject
from scheduler.schedule_one import SchedulerCore
from scheduler.types import (
    NodeRecord,
    PDBInfo,
    PodInfo,
    PriorityClassInfo,
    SelectorObject,
    ServiceInfo,
    VolumeObject,
)

__all__ = ["EventHandlers", "Namespace"]

log = structlog.get_logger("py-scheduler")

Namespace = tuple[str, dict[str, str]]  # name, labels
Raw = Mapping[str, Any]


class EventHandlers:
    def __init__(
        self,
        core: SchedulerCore,
        decoder: ObjectDecoder,
        *,
        scheduler_names: tuple[str, ...],
        namespace_labels: dict[str, dict[str, str]],
        on_rejected: Callable[[Raw, str], None],
        observe: Callable[[str, float], None] | None = None,
    ) -> None:
        self.core = core
        self.decoder = decoder
        self.scheduler_names = frozenset(scheduler_names)  # the profiles
        self.namespace_labels = namespace_labels
        self.on_rejected = on_rejected
        # (event label, seconds) of each event handled: upstream's
        # scheduler_event_handling_duration_seconds, labelled as its ClusterEvents are.
        self.observe = observe

    def _observed(self, label: str, since: float) -> None:
        if self.observe is not None:
            self.observe(label, time.perf_counter() - since)

    # ------------------------------------------------------------------ pods
    def pod(self, d: Delta[PodInfo]) -> None:
        t0 = time.perf_counter()
        if isinstance(d, Added):
            self.core.on_pod_add(d.new)
            label = "AssignedPodAdd" if d.new.node_name else "UnscheduledPodAdd"
        elif isinstance(d, Updated):
            self.core.on_pod_update(d.old, d.new)
            if d.old.node_name:
                label = "AssignedPodUpdate"
            else:  # bound by now: upstream's informers see an add of an assigned pod
                label = "AssignedPodAdd" if d.new.node_name else "UnscheduledPodUpdate"
        else:
            self.core.on_pod_delete(d.old)
            label = "AssignedPodDelete" if d.old.node_name else "UnscheduledPodDelete"
        self._observed(label, t0)

    def pod_rejected(self, raw: Raw, error: Exception) -> None:
        """A pod the decoder refused: ours and pending -> reported; anyone else's -> ignored
        (as kube-scheduler, which never sees such pods: admission rejects them)."""
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
        name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
        ours = isinstance(name, str) and name in self.scheduler_names
        if ours and not spec.get("nodeName"):
            log.warning("pod_rejected", pod=key, error=str(error))
            self.on_rejected(raw, str(error))
            return
        log.debug("object_rejected", kind="Pod", object=key, error=str(error))

    # ------------------------------------------------------------------ nodes
    def node(self, d: Delta[NodeRecord]) -> None:
        t0 = time.perf_counter()
        if isinstance(d, Added):
            self.core.on_node_add(d.new)
        elif isinstance(d, Updated):
            self.core.on_node_update(d.old, d.new)
        else:
            self.core.on_node_delete(d.old.name)
        self._observed("Node" + _action(d), t0)

    # ------------------------------------------------------------------ PDBs, classes
    def pdb(self, d: Delta[PDBInfo]) -> None:
        t0 = time.perf_counter()
        if isinstance(d, Deleted):
            self.core.on_pdb_delete(d.old.key)
        else:
            self.core.on_pdb_set(d.new)
        self._observed("PodDisruptionBudget" + _action(d), t0)

    def priority_class(self, d: Delta[PriorityClassInfo]) -> None:
        t0 = time.perf_counter()
        if isinstance(d, Deleted):
            self.decoder.forget_priority_class(d.old.name)
            self.core.on_priority_class_delete(d.old.name)
        else:
            self.core.on_priority_class_set(d.new)
        self._observed("PriorityClass" + _action(d), t0)

    # ------------------------------------------------------------------ default selector
    def selector_object(self, kind: str) -> Callable[[Delta[ServiceInfo | SelectorObject]], None]:
        """Services, ReplicationControllers, ReplicaSets, StatefulSets: the selectors of
        system default spreading (upstream's DefaultSelector). ``kind`` names which."""

        def handle(d: Delta[ServiceInfo | SelectorObject]) -> None:
            t0 = time.perf_counter()
            if isinstance(d, Deleted):
                self.core.on_selector_object_delete(kind, d.old.key)
            else:
                self.core.on_selector_object_set(kind, d.new)
            self._observed(kind + _action(d), t0)

        return handle

    # ------------------------------------------------------------------ volumes
    def volume_object(self, kind: str) -> Callable[[Delta[VolumeObject]], None]:
        """PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers,
        VolumeAttachments, CSIStorageCapacities (the volume plugins'); ``kind`` names which
        (the event label)."""

        def handle(d: Delta[VolumeObject]) -> None:
            t0 = time.perf_counter()
            if isinstance(d, Deleted):
                self.core.on_volume_object_delete(d.old)
            else:
                self.core.on_volume_object_set(d.new)
            self._observed(kind + _action(d), t0)

        return handle

    # ------------------------------------------------------------------ devices
    def dra_object(self, kind: str) -> Callable[[Delta[DraObject]], None]:
        """ResourceClaims, ResourceSlices, DeviceClasses, DeviceTaintRules
        (DynamicResources'); ``kind`` names which (the event label)."""

        def handle(d: Delta[DraObject]) -> None:
            t0 = time.perf_counter()
            if isinstance(d, Deleted):
                self.core.on_dra_object_delete(d.old)
            else:
                self.core.on_dra_object_set(d.new)
            self._observed(kind + _action(d), t0)

        return handle

    # ------------------------------------------------------------------ namespaces
    def namespace(self, d: Delta[Namespace]) -> None:
        t0 = time.perf_counter()
        if isinstance(d, Deleted):
            self.namespace_labels.pop(d.old[0], None)
        else:
            name, labels = d.new
            old = self.namespace_labels.get(name)
            self.namespace_labels[name] = labels
            if isinstance(d, Updated) and old is not None:
                self.core.on_namespace_update(old, labels)
        self._observed("Namespace" + _action(d), t0)

    def rejected(self, kind: str) -> Callable[[Raw, Exception], None]:
        """on_error for kinds other than pods: log the object and field, keep going."""

        def report(raw: Raw, error: Exception) -> None:
            meta = raw.get("metadata") or {}
            log.warning("object_rejected", kind=kind, object=meta.get("name"), error=str(error))

        return report


def _action(d: Delta[Any]) -> str:
    """The action part of an event's label (upstream's ActionType names)."""
    if isinstance(d, Added):
        return "Add"
    return "Update" if isinstance(d, Updated) else "Delete"
