"""The scheduling queue (activeQ, backoffQ, unschedulable and gated pods) and the nominator."""

from scheduler.backend.queue.nominator import Nominator
from scheduler.backend.queue.priority_queue import (
    ACTIVE_Q,
    BACKOFF_Q,
    GATED_Q,
    UNSCHEDULABLE_Q,
    PriorityQueue,
    QueuedPodInfo,
)

__all__ = [
    "ACTIVE_Q",
    "BACKOFF_Q",
    "GATED_Q",
    "UNSCHEDULABLE_Q",
    "Nominator",
    "PriorityQueue",
    "QueuedPodInfo",
]
