"""The public plugin API of py-scheduler, version 1 (docs/plugins.md).

Import what a plugin needs from here, never from the modules behind it: these names keep
their meaning within a major version of this API (``API_VERSION``), whatever moves inside.

A plugin is a class constructed as ``Plugin(args)`` (``args``: its ``pluginConfig`` entry, a
dict; raise ValueError naming the field for a bad one) with a ``name`` and any of the
extension points below; the framework calls each on the scheduler's single thread.

- ``pre_enqueue(pod) -> Status`` (anything but SUCCESS keeps the pod out of the queue)
- ``pre_filter(state, pod, snapshot) -> (PreFilterResult | None, Status)``
- ``filter(state, pod, node_info) -> Status``
- ``post_filter(state, pod, statuses) -> (PostFilterResult | None, Status)``
- ``pre_score(state, pod, nodes, snapshot) -> Status``
- ``score(state, pod, node_info) -> int`` and, optionally,
  ``normalize_scores(state, pod, scores) -> None`` (in place, to 0..MAX_NODE_SCORE)
- ``reserve(state, pod, node_name) -> Status`` with ``unreserve(state, pod, node_name)``
  (both or neither)
- ``pre_bind(state, pod, node_name) -> Status`` and, optionally,
  ``pre_bind_pre_flight(state, pod, node_name) -> Status`` (SUCCESS or SKIP)
- ``post_bind(state, pod, node_name) -> None``
- ``events_to_register() -> list[EventRegistration]`` (queueing hints), optional: without
  it the plugin is told of every cluster event
"""

from __future__ import annotations

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
    Status,
)
from scheduler.framework.outoftree import ENTRY_POINT_GROUP
from scheduler.types import NodeInfo, NodeRecord, PodInfo

__all__ = [
    "API_VERSION",
    "ENTRY_POINT_GROUP",
    "MAX_NODE_SCORE",
    "SKIP",
    "SUCCESS",
    "ClusterEvent",
    "Code",
    "CycleState",
    "EventRegistration",
    "NodeInfo",
    "NodeRecord",
    "PodInfo",
    "PostFilterResult",
    "PreFilterResult",
    "QueueingHint",
    "Status",
]

API_VERSION = 1
