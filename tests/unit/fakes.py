"""Recording ports and small fake plugins for unit tests of the scheduling core.

- ``RecordingBinder`` / ``RecordingRecorder`` / ``RecordingActions``: the three ports of
  ``SchedulerCore``, remembering every call (``RecordingActions`` can be told to fail).
- ``FakeFilter``: a Filter plugin that counts its calls and rejects the nodes it is told to
  (upstream's ``tf.FakeFilterPlugin``); ``MatchFilter`` fits a pod only on the node that
  bears its name (upstream's ``MatchFilterPlugin``).
- ``ScriptedRandom``: a ``random.Random`` whose ``randrange`` answers from a script.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from scheduler.framework.interface import SUCCESS, Code, CycleState, Status
from scheduler.framework.preemption import Candidate
from scheduler.schedule_one import BindingCycle
from scheduler.types import NodeInfo, PodInfo


@dataclass
class RecordingBinder:
    calls: list[tuple[PodInfo, str]] = field(default_factory=list)
    cycles: dict[str, BindingCycle] = field(default_factory=dict)  # pod key -> PreBind steps

    def bind(self, pod: PodInfo, node_name: str, cycle: BindingCycle | None = None) -> None:
        self.calls.append((pod, node_name))
        if cycle is not None:
            self.cycles[pod.key] = cycle


@dataclass(frozen=True)
class Failed:
    pod: str
    reason: str
    message: str
    nominated_node: str | None


@dataclass
class RecordingRecorder:
    scheduled_calls: list[tuple[str, str]] = field(default_factory=list)
    failed_calls: list[Failed] = field(default_factory=list)
    skipped_deleting_calls: list[str] = field(default_factory=list)

    def scheduled(self, pod: PodInfo, node_name: str) -> None:
        self.scheduled_calls.append((pod.key, node_name))

    def failed(
        self, pod: PodInfo, *, reason: str, message: str, nominated_node: str | None
    ) -> None:
        self.failed_calls.append(Failed(pod.key, reason, message, nominated_node))

    def skipped_deleting(self, pod: PodInfo) -> None:
        self.skipped_deleting_calls.append(pod.key)


@dataclass(frozen=True)
class Prepared:
    preemptor: str
    node: str
    victims: tuple[str, ...]
    lower_nominated: tuple[str, ...]


@dataclass
class RecordingActions:
    result: Status = SUCCESS
    calls: list[Prepared] = field(default_factory=list)

    def prepare_candidate(
        self, preemptor: PodInfo, candidate: Candidate, lower_nominated: Sequence[PodInfo]
    ) -> Status:
        self.calls.append(
            Prepared(
                preemptor.key,
                candidate.node_name,
                tuple(v.name for v in candidate.victims),
                tuple(p.name for p in lower_nominated),
            )
        )
        return self.result


class FakeFilter:
    """Counts calls; nodes in ``codes`` get that code, the others SUCCESS. ``on_filter`` runs
    before each verdict (to inject a cluster event in the middle of a cycle)."""

    def __init__(
        self,
        codes: dict[str, Code] | None = None,
        *,
        name: str = "FakeFilter",
        on_filter: Callable[[PodInfo, NodeInfo], None] | None = None,
    ) -> None:
        self.name = name
        self.codes = dict(codes or {})
        self.calls = 0
        self.on_filter = on_filter

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        self.calls += 1
        if self.on_filter is not None:
            self.on_filter(pod, node_info)
        code = self.codes.get(node_info.name, Code.SUCCESS)
        if code == Code.SUCCESS:
            return SUCCESS
        return Status(code, (f"injecting failure for pod {pod.name}",), self.name)


class FalseFilter:
    name = "FalseFilter"

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        return Status.unschedulable("always fails", plugin=self.name)


class MatchFilter:
    name = "MatchFilter"

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status:
        if pod.name == node_info.name:
            return SUCCESS
        return Status.unschedulable("pod name does not match the node", plugin=self.name)


class ScriptedRandom(random.Random):
    """``randrange`` returns the scripted values in turn (each must be in range)."""

    def __init__(self, values: Iterable[int]) -> None:
        super().__init__(0)
        self.script = list(values)

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        value = self.script.pop(0)
        hi = start if stop is None else stop
        assert 0 <= value < hi, f"scripted {value} out of range({hi})"
        return value
