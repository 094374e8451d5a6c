"""Cluster events and queueing hints: the vocabulary in which the framework's plugins tell
the scheduling queue which changes may make a rejected pod schedulable (upstream's
``ClusterEventWithHint``). It lives with the queue, which consumes it; the framework
re-exports it for plugins."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scheduler.types import PodInfo

__all__ = ["ANY", "ClusterEvent", "EventHint", "EventRegistration", "QueueingHint"]

# A registration's resource or action that matches every one (upstream's WildCard).
ANY = "*"


class QueueingHint(enum.Enum):
    SKIP = 0
    QUEUE = 1


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """What changed: resource is one of Node, AssignedPod, UnscheduledPod, PDB, PriorityClass;
    action one of Add, Update, Delete; ``label`` names the update for metrics. In a
    registration, ``ANY`` ("*") as resource or action matches every one."""

    resource: str
    action: str
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or f"{self.resource}{self.action}"


EventHint = Callable[[PodInfo, Any, Any], QueueingHint]


@dataclass(frozen=True, slots=True)
class EventRegistration:
    event: ClusterEvent
    hint: EventHint | None = None  # None: always QUEUE
