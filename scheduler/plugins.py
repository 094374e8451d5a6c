"""The public plugin API of py-scheduler, version 1 (docs/plugins.md).

Import what a plugin needs from here, never from the modules behind it: these names keep
their meaning within a major version of this API (``API_VERSION``), whatever moves inside.

A plugin is a class constructed as ``Plugin(args)`` (``args``: its ``pluginConfig`` entry, a
dict; raise ValueError naming the field for a bad one), or ``Plugin(args, handle)`` when it
takes a second argument (``handle``: a ``FrameworkHandle``, for the waiting pods, the
snapshot's nodes, the live scheduler's API client and its event recorder, and listers of
the claims, volumes, storage classes, CSINodes, namespaces, ResourceClaims,
ResourceSlices, DeviceClasses, PodDisruptionBudgets, PriorityClasses, Services and
workload controllers it watches, with upstream's DefaultSelector), with a ``name``
and any of the extension points below; the framework calls each on the scheduler's single
thread.

- ``less(a, b) -> bool`` (QueueSort: whether queued pod ``a``, a ``QueuedPodInfo``, goes
  before ``b``; one per profile, in place of PrioritySort)
- ``pre_enqueue(pod) -> Status`` (anything but SUCCESS keeps the pod out of the queue)
- ``pre_filter(state, pod, snapshot) -> (PreFilterResult | None, Status)``
- ``filter(state, pod, node_info) -> Status``
- ``post_filter(state, pod, statuses) -> (PostFilterResult | None, Status)``
- ``pre_score(state, pod, nodes, snapshot) -> Status``
- ``score(state, pod, node_info) -> int`` and, optionally,
  ``normalize_scores(state, pod, scores) -> None`` (in place, to 0..MAX_NODE_SCORE)
- ``sign_pod(pod) -> (list[SignFragment], Status)`` (Sign, for OpportunisticBatching: the
  parts of the pod this plugin's PreFilter, Filter, PreScore and Score read; a profile
  batches pods only when all of its plugins at those points sign, and a pod only when
  every one of them answers SUCCESS)
- ``reserve(state, pod, node_name) -> Status`` with ``unreserve(state, pod, node_name)``
  (both or neither)
- ``permit(state, pod, node_name) -> (Status, timeout_seconds)`` (WAIT holds the pod until
  it is allowed through ``handle.get_waiting_pod(uid).allow(name)``, or rejected, or the
  timeout passes)
- ``pre_bind(state, pod, node_name) -> Status`` (may be ``async def``: awaited in the pod's
  binding task, other pods are scheduled meanwhile) and, optionally,
  ``pre_bind_pre_flight(state, pod, node_name) -> Status`` (SUCCESS or SKIP)
- ``bind(state, pod, node_name) -> Status`` (may be ``async def``): SKIP leaves the pod to
  the next Bind plugin (DefaultBinder, the Binding API call, by default), SUCCESS says the
  plugin has bound it; runs only before DefaultBinder in the profile's ``bind`` order
- ``post_bind(state, pod, node_name) -> None``
- ``events_to_register() -> list[EventRegistration]`` (queueing hints), optional: without
  it the plugin is told of every cluster event

At any point a plugin may add pending pods' keys to ``state.pods_to_activate`` (upstream's
PodsToActivate): the core moves them to the active queue once the cycle has assumed the
pod, and again after its binding.
"""

from __future__ import annotations

from scheduler.backend.queue.priority_queue import QueuedPodInfo
from scheduler.draapi import DeviceClassInfo, ResourceClaimInfo, ResourceSliceInfo
from scheduler.errors import ApiCallError
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    EventRegistration,
    PostFilterResult,
    PreFilterResult,
    QueueingHint,
    SignFragment,
    Status,
)
from scheduler.framework.outoftree import ENTRY_POINT_GROUP
from scheduler.framework.waiting_pods import (
    MAX_PERMIT_TIMEOUT_SECONDS,
    ApiClient,
    EventRecorder,
    FrameworkHandle,
    WaitingPod,
)
from scheduler.types import (
    CSINodeInfo,
    LabelSelector,
    NodeInfo,
    NodeRecord,
    PDBInfo,
    PodInfo,
    PriorityClassInfo,
    PVCInfo,
    PVInfo,
    SelectorObject,
    ServiceInfo,
    StorageClassInfo,
)

__all__ = [
    "API_VERSION",
    "ENTRY_POINT_GROUP",
    "MAX_NODE_SCORE",
    "MAX_PERMIT_TIMEOUT_SECONDS",
    "SKIP",
    "SUCCESS",
    "ApiCallError",
    "ApiClient",
    "CSINodeInfo",
    "ClusterEvent",
    "Code",
    "CycleState",
    "DeviceClassInfo",
    "EventRecorder",
    "EventRegistration",
    "FrameworkHandle",
    "LabelSelector",
    "NodeInfo",
    "NodeRecord",
    "PDBInfo",
    "PVCInfo",
    "PVInfo",
    "PodInfo",
    "PostFilterResult",
    "PreFilterResult",
    "PriorityClassInfo",
    "QueuedPodInfo",
    "QueueingHint",
    "ResourceClaimInfo",
    "ResourceSliceInfo",
    "SelectorObject",
    "ServiceInfo",
    "SignFragment",
    "Status",
    "StorageClassInfo",
    "WaitingPod",
]

API_VERSION = 1
