"""DefaultPreemption: the PostFilter plugin that runs the preemption Evaluator and prefixes
its messages with "preemption: " as upstream does. It also registers the cluster events
after which a pod whose preemption failed deserves another look: a PDB or PriorityClass
change (preemption's own inputs) and an assigned pod's deletion."""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.framework.interface import (
    ClusterEvent,
    Code,
    CycleState,
    EventRegistration,
    PostFilterResult,
    Status,
)
from scheduler.framework.plugins import names
from scheduler.framework.preemption import Evaluator
from scheduler.types import PodInfo


class DefaultPreemption:
    name = names.DEFAULT_PREEMPTION

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        self.attempts = 0

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        self.attempts += 1
        result, st = self.evaluator.preempt(state, pod, statuses)
        if st.reasons and st.code != Code.SUCCESS:
            return result, Status(st.code, ("preemption: " + st.message(),), self.name)
        return result, st.with_plugin(self.name)

    def events_to_register(self) -> Iterable[EventRegistration]:
        return [
            EventRegistration(ClusterEvent("PDB", "*")),
            EventRegistration(ClusterEvent("PriorityClass", "*")),
            EventRegistration(ClusterEvent("AssignedPod", "Delete")),
        ]
