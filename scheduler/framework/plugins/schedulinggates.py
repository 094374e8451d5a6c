"""SchedulingGates: a PreEnqueue plugin. A pod with ``spec.schedulingGates`` is not ready to
be scheduled: it waits in the queue's gated set, never runs Filter, Score or preemption, and
enters activeQ when an update removes its last gate (the API server allows gates only to be
removed after creation). As upstream's ``schedulinggates.SchedulingGates``, including its
message."""

from __future__ import annotations

from scheduler.framework.interface import SUCCESS, Status
from scheduler.framework.plugins import names
from scheduler.types import PodInfo


class SchedulingGates:
    name = names.SCHEDULING_GATES

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.scheduling_gates:
            return SUCCESS
        # Go prints a []string as "[a b]".
        gates = " ".join(pod.scheduling_gates)
        return Status.unresolvable(f"waiting for scheduling gates: [{gates}]", plugin=self.name)
