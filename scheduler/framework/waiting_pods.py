"""Pods held at Permit: upstream's waitingPodsMap and waitingPod, without threads.

A Permit plugin that answers Wait (with a timeout) keeps an assumed pod from binding until
every such plugin allows it (``WaitingPod.allow``), one rejects it (``reject``), the
preemption of the pod stops it (``preempt``), or a plugin's timeout passes (the pod is then
rejected by that plugin: "rejected due to timeout after waiting ..."). The pod keeps its
room on the node meanwhile (it is assumed in the cache).

Upstream runs one timer per plugin and blocks the binding goroutine on a channel. Here
time is injected: deadlines are clock seconds, ``WaitingPods.expire(now)`` rejects what
has timed out, and whoever waits is told the outcome through ``on_done`` callbacks (the
live binder resolves a future with it; simulate carries on the binding). Everything runs
on the scheduler's one thread, so there is no lock.

Keyed by pod UID, as upstream's ``GetWaitingPod``/``RejectWaitingPod``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from scheduler.draapi import DeviceClassInfo, ResourceClaimInfo, ResourceSliceInfo
from scheduler.framework.interface import SUCCESS, Code, Status
from scheduler.types import (
    CSINodeInfo,
    LabelSelector,
    NodeInfo,
    PDBInfo,
    PodInfo,
    PriorityClassInfo,
    PVCInfo,
    PVInfo,
    SelectorObject,
    ServiceInfo,
    StorageClassInfo,
)

if TYPE_CHECKING:  # the volume and DRA plugins import this module
    from scheduler.framework.plugins.dynamicresources import DraObjects
    from scheduler.framework.plugins.helper import SelectorObjects
    from scheduler.framework.plugins.volumebinding import VolumeObjects

__all__ = [
    "MAX_PERMIT_TIMEOUT_SECONDS",
    "FrameworkHandle",
    "PodInPreBind",
    "WaitingPod",
    "WaitingPods",
]

# Upstream's maxTimeout: a longer Permit timeout is cut to this.
MAX_PERMIT_TIMEOUT_SECONDS = 15 * 60.0


def _seconds(value: float) -> str:
    """A duration as Go's time.Duration prints whole and fractional seconds ("10s",
    "1.5s", "15m0s"), for the timeout message."""
    if value >= 60:
        minutes, rest = divmod(value, 60)
        return f"{int(minutes)}m{rest:g}s"
    return f"{value:g}s"


class WaitingPod:
    """One pod held at Permit. ``pending``: plugin name -> (deadline, timeout seconds)."""

    __slots__ = ("_listeners", "outcome", "pending", "pod", "since")

    def __init__(self, pod: PodInfo, pending: Mapping[str, tuple[float, float]], now: float):
        self.pod = pod
        self.pending = dict(pending)
        self.since = now
        self.outcome: Status | None = None
        self._listeners: list[Callable[[Status], None]] = []

    def get_pending_plugins(self) -> list[str]:
        """The Permit plugins that have not allowed the pod yet."""
        return list(self.pending)

    def allow(self, plugin: str) -> None:
        """``plugin`` lets the pod go; once no plugin is pending, the pod binds."""
        self.pending.pop(plugin, None)
        if not self.pending:
            self._finish(SUCCESS)

    def reject(self, plugin: str, message: str) -> bool:
        """The pod is unschedulable (for ``plugin``'s queueing hints). False when the pod
        was already allowed, rejected or preempted."""
        return self._finish(Status(Code.UNSCHEDULABLE, (message,), plugin))

    def preempt(self, plugin: str, message: str) -> bool:
        """A preemptor took the pod's room: it goes back to the queue after backoff, not
        as unschedulable (upstream's ``Preempt``, an Error status)."""
        return self._finish(Status(Code.ERROR, (message,), plugin))

    def on_done(self, callback: Callable[[Status], None]) -> None:
        """Call ``callback(outcome)`` once the pod is allowed or stopped (at once if it is)."""
        if self.outcome is not None:
            callback(self.outcome)
        else:
            self._listeners.append(callback)

    def next_deadline(self) -> float | None:
        return min((d for d, _ in self.pending.values()), default=None)

    def expire(self, now: float) -> bool:
        """Reject the pod if a pending plugin's timeout has passed (the earliest such
        plugin names the rejection, as the first of upstream's timers to fire)."""
        due = [(d, name) for name, (d, _) in self.pending.items() if d <= now]
        if not due or self.outcome is not None:
            return False
        _, plugin = min(due)
        timeout = self.pending[plugin][1]
        return self.reject(
            plugin, f"rejected due to timeout after waiting {_seconds(timeout)} at plugin {plugin}"
        )

    def _finish(self, status: Status) -> bool:
        if self.outcome is not None:
            return False
        self.outcome = status
        self.pending.clear()
        listeners, self._listeners = self._listeners, []
        for callback in listeners:
            callback(status)
        return True


class WaitingPods:
    """The waiting pods of one framework, by pod UID."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, pod: PodInfo, timeouts: Mapping[str, float], now: float) -> WaitingPod:
        """Hold ``pod`` for the plugins of ``timeouts`` (seconds each, cut to 15 minutes).
        The entry leaves the map once the pod is allowed or stopped."""
        pending = {}
        for plugin, seconds in timeouts.items():
            seconds = min(max(seconds, 0.0), MAX_PERMIT_TIMEOUT_SECONDS)
            pending[plugin] = (now + seconds, seconds)
        wp = WaitingPod(pod, pending, now)
        self._pods[pod.uid] = wp
        wp.on_done(lambda _: self._drop(wp))
        return wp

    def _drop(self, wp: WaitingPod) -> None:
        if self._pods.get(wp.pod.uid) is wp:
            del self._pods[wp.pod.uid]

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))  # a copy: callbacks may allow or reject

    def __len__(self) -> int:
        return len(self._pods)

    def reject(self, uid: str, message: str = "removed") -> bool:
        """Upstream's ``RejectWaitingPod``: reject the pod (no plugin named); False when it
        is not waiting."""
        wp = self._pods.get(uid)
        return wp is not None and wp.reject("", message)

    def next_deadline(self) -> float | None:
        return min(
            (d for d in (wp.next_deadline() for wp in self._pods.values()) if d is not None),
            default=None,
        )

    def expire(self, now: float) -> int:
        """Reject every pod whose wait has timed out; returns how many. O(waiting)."""
        return sum(1 for wp in list(self._pods.values()) if wp.expire(now))


class PodInPreBind:
    """A pod whose async PreBind is under way (upstream's podsInPreBind entry): a preemption
    that picks it cancels its PreBind (``cancel``) instead of deleting it, unless PreBind
    has finished first (``mark_prebound``); exactly one of the two wins."""

    __slots__ = ("_cancel", "message", "state")

    def __init__(self, cancel: Callable[[str], object]) -> None:
        self._cancel = cancel
        self.state = "prebinding"  # then "cancelled" or "prebound"
        self.message = ""

    def cancel(self, message: str) -> bool:
        if self.state != "prebinding":
            return False
        self.state, self.message = "cancelled", message
        self._cancel(message)
        return True

    def mark_prebound(self) -> bool:
        if self.state != "prebinding":
            return False
        self.state = "prebound"
        return True


class ApiClient(Protocol):
    """The live scheduler's API client as a plugin sees it (``FrameworkHandle.client``)."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """One API call (``path`` from ``/api`` or ``/apis``) after the scheduler's own rate
        limiter, with its credentials: the decoded JSON answer. Raises ``ApiCallError``
        (``status``: the HTTP status, 0 without an answer)."""
        ...


EVENT_TYPES = ("Normal", "Warning")


class EventRecorder(Protocol):
    """The live scheduler's event recorder as a plugin sees it
    (``FrameworkHandle.event_recorder``; upstream's ``events.EventRecorder``)."""

    def eventf(
        self,
        regarding: PodInfo,
        related: PodInfo | None,
        event_type: str,
        reason: str,
        action: str,
        note: str,
    ) -> None:
        """Record an event about the pod ``regarding`` (``related``: another pod it
        concerns, or None), as upstream's ``Eventf`` without the format arguments: an
        events.k8s.io/v1 Event reported by the scheduler, a repeat about the same pod version
        counted into its series. Returns at once; the API call is made in the background
        (a failure is logged, never raised). ``event_type`` is ``Normal`` or ``Warning``
        and ``reason`` and ``action`` are non-empty (ValueError otherwise)."""
        ...


def check_event(event_type: str, reason: str, action: str) -> None:
    """ValueError naming the field unless an event with these would be accepted."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"event_type: expected Normal or Warning, got {event_type!r}")
    if not isinstance(reason, str) or not reason:
        raise ValueError(f"reason: expected a non-empty string, got {reason!r}")
    if not isinstance(action, str) or not action:
        raise ValueError(f"action: expected a non-empty string, got {action!r}")


class _NoEvents:
    """``simulate`` and ``explain``: events are checked, then dropped (no API server)."""

    def eventf(
        self,
        regarding: PodInfo,
        related: PodInfo | None,
        event_type: str,
        reason: str,
        action: str,
        note: str,
    ) -> None:
        check_event(event_type, reason, action)


class FrameworkHandle:
    """What a plugin may use of the framework besides its own extension points (upstream's
    ``framework.Handle``: the waiting pods, the nodes of the cycle's snapshot, the API
    client, the event recorder): given to a plugin whose class takes a second constructor
    argument, ``Plugin(args, handle)``."""

    __slots__ = (
        "_client",
        "_dra",
        "_events",
        "_namespaces",
        "_node_infos",
        "_pdbs",
        "_priority_classes",
        "_selectors",
        "_storage",
        "_waiting",
    )

    def __init__(
        self,
        waiting: WaitingPods,
        node_infos: Callable[[], Sequence[NodeInfo]] = tuple,
        client: ApiClient | None = None,
        events: EventRecorder | None = None,
        storage: VolumeObjects | None = None,
        namespace_labels: Callable[[str], Mapping[str, str]] | None = None,
        dra: DraObjects | None = None,
        *,
        pdbs: Callable[[], Sequence[PDBInfo]] | None = None,
        selectors: SelectorObjects | None = None,
        priority_classes: Mapping[str, PriorityClassInfo] | None = None,
    ) -> None:
        self._dra = dra
        self._pdbs = pdbs
        self._selectors = selectors
        self._priority_classes = priority_classes
        self._waiting = waiting
        self._node_infos = node_infos
        self._client = client
        self._events: EventRecorder = _NoEvents() if events is None else events
        self._storage = storage
        self._namespaces = namespace_labels

    # Listers (upstream's SharedInformerFactory listers, for what the scheduler watches):
    # the objects as the scheduler last heard of them from the API server, parsed (what the
    # scheduler reads of them), never its own assumptions; None when it has no such object.
    def persistent_volume_claim(self, namespace: str, name: str) -> PVCInfo | None:
        return None if self._storage is None else self._storage.claims.get(f"{namespace}/{name}")

    def persistent_volume(self, name: str) -> PVInfo | None:
        return None if self._storage is None else self._storage.volumes.get(name)

    def storage_class(self, name: str) -> StorageClassInfo | None:
        return None if self._storage is None else self._storage.classes.get(name)

    def csi_node(self, name: str) -> CSINodeInfo | None:
        return None if self._storage is None else self._storage.csi_nodes.get(name)

    def resource_claim(self, namespace: str, name: str) -> ResourceClaimInfo | None:
        """A ResourceClaim as the API server last said (not DynamicResources' allocations
        in flight or just written)."""
        return None if self._dra is None else self._dra.claims.get(f"{namespace}/{name}")

    def resource_claims(self) -> Sequence[ResourceClaimInfo]:
        """Every ResourceClaim the scheduler knows of (a copy of the list: O(claims))."""
        return () if self._dra is None else tuple(self._dra.claims.values())

    def resource_slices(self) -> Sequence[ResourceSliceInfo]:
        """Every ResourceSlice (a copy of the list: O(slices)), as published; the taints of
        DeviceTaintRules are not merged into them."""
        return () if self._dra is None else tuple(self._dra.slices.values())

    def device_class(self, name: str) -> DeviceClassInfo | None:
        return None if self._dra is None else self._dra.classes.get(name)

    def pod_disruption_budgets(self, namespace: str | None = None) -> Sequence[PDBInfo]:
        """The PodDisruptionBudgets (of one namespace, or all), with the status the
        disruption controller last wrote (``disruptions_allowed``); a copy, O(PDBs)."""
        pdbs = () if self._pdbs is None else self._pdbs()
        return tuple(p for p in pdbs if namespace is None or p.namespace == namespace)

    def priority_class(self, name: str) -> PriorityClassInfo | None:
        return None if self._priority_classes is None else self._priority_classes.get(name)

    def services(self, namespace: str) -> Sequence[ServiceInfo]:
        """A namespace's Services (their selectors), by name; a copy."""
        if self._selectors is None:
            return ()
        by_name = self._selectors.services.get(namespace, {})
        return tuple(by_name[n] for n in sorted(by_name))

    def controller(self, kind: str, namespace: str, name: str) -> SelectorObject | None:
        """A ReplicaSet, ReplicationController or StatefulSet (``kind``) by name: its
        selector, as the scheduler watches them for default spreading."""
        if self._selectors is None:
            return None
        return self._selectors.controllers.get((kind, namespace, name))

    def default_selector(self, pod: PodInfo) -> LabelSelector | None:
        """Upstream's ``helper.DefaultSelector``: the selectors of the Services that select
        the pod, and of its ReplicationController, ReplicaSet or StatefulSet, in one
        selector (None when there are none): what "pods of the same workload" means for
        default topology spreading, for a plugin of its own kind."""
        if self._selectors is None:
            return None
        return self._selectors.default_selector(pod.namespace, pod.labels, pod.owner_kind_uid)

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        """A namespace's labels (empty for a namespace the scheduler does not know)."""
        return {} if self._namespaces is None else self._namespaces(name)

    @property
    def client(self) -> ApiClient | None:
        """The live scheduler's API client (upstream's ``ClientSet``): for a plugin's own
        calls from an async ``pre_bind`` or ``bind``. None in ``simulate`` and ``explain``,
        which talk to no API server."""
        return self._client

    @property
    def event_recorder(self) -> EventRecorder:
        """The scheduler's event recorder (upstream's ``EventRecorder()``): events a plugin
        records are reported by the scheduler (``reportingController`` the name of this
        plugin's profile). Never
        None: in ``simulate`` and ``explain`` the events are checked and dropped."""
        return self._events

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self._waiting.get(uid)

    def iterate_over_waiting_pods(self) -> Iterator[WaitingPod]:
        """Every waiting pod (of every profile: they share the map, as upstream's), in the
        order they started waiting."""
        return iter(self._waiting)

    def reject_waiting_pod(self, uid: str) -> bool:
        return self._waiting.reject(uid)

    def node_infos(self) -> Sequence[NodeInfo]:
        """The nodes of the snapshot the current cycle started from, with their pods (bound
        and assumed, waiting ones included; upstream's SnapshotSharedLister). Read only."""
        return self._node_infos()
