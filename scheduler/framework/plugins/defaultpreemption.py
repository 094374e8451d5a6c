"""DefaultPreemption: the PostFilter plugin that runs the preemption Evaluator and prefixes
its messages with "preemption: " as upstream does.

As upstream, it never puts itself among a pod's unschedulable plugins: a pod that failed
(with or without preemption) waits on the hints of the Filter plugins that rejected it; a
victim's deletion wakes the preemptor through NodeResourcesFit's AssignedPod/Delete hint.
Its one registration (AssignedPod/Delete, always SKIP) mirrors upstream's and leaves that
decision to those plugins."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scheduler.framework.interface import (
    ClusterEvent,
    CycleState,
    EventRegistration,
    PostFilterResult,
    QueueingHint,
    Status,
)
from scheduler.framework.plugins import names
from scheduler.framework.preemption import Evaluator
from scheduler.types import PodInfo


def prefixed(st: Status) -> Status:
    """The plugin's status for an Evaluator status: upstream prefixes every message with
    "preemption: ", the success one included."""
    msg = st.message()
    if msg:
        return Status(st.code, ("preemption: " + msg,), DefaultPreemption.name)
    return st.with_plugin(DefaultPreemption.name)


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
        return result, prefixed(st)

    async def post_filter_async(
        self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """``post_filter`` awaiting the scheduler extenders' say on the candidates (the
        scheduling cycle runs this when an extender supports preemption)."""
        self.attempts += 1
        result, st = await self.evaluator.preempt_async(state, pod, statuses)
        return result, prefixed(st)

    def events_to_register(self) -> Iterable[EventRegistration]:
        def skip(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
            return QueueingHint.SKIP

        return [EventRegistration(ClusterEvent("AssignedPod", "Delete"), skip)]
