"""The scheduling queue (activeQ, backoffQ, unschedulable pods) and the nominator."""

from scheduler.backend.queue.nominator import Nominator
from scheduler.backend.queue.priority_queue import (
    ACTIVE_Q,
    BACKOFF_Q,
    UNSCHEDULABLE_Q,
    PriorityQueue,
    QueuedPodInfo,
)

__all__ = [
    "ACTIVE_Q",
    "BACKOFF_Q",
    "UNSCHEDULABLE_Q",
    "Nominator",
    "PriorityQueue",
    "QueuedPodInfo",
]
