"""Scheduler extenders as the core sees them (upstream's fwk.Extender), without I/O.

An extender is a service the scheduling cycle asks, after the Filter plugins, which of the
feasible nodes it accepts (``filter``), and, beside the Score plugins, how it ranks them
(``prioritize``); the binding cycle may leave the Binding to it (``bind``). The calls are
awaited: the live scheduler's extenders are HTTP services (scheduler/kube/extender.py), and
while a cycle waits for one the event loop goes on (informers, bindings, the lease), the
cycle reading only its snapshot, as upstream's scheduling goroutine does.

How answers combine, as upstream's schedule_one.go:
- Filter: extenders in order, each interested one (``is_interested``) given the nodes the
  previous left; its rejections become the nodes' statuses (Unschedulable, or
  UnschedulableAndUnresolvable for ``failed_and_unresolvable``, which wins when a node is
  in both). An error ends the cycle with that error unless the extender is ignorable (then
  it is skipped). When extenders turned a node down, the pod's unschedulable plugins gain
  ``EXTENDER_NAME``, registered for every cluster event (extenders have no hints).
- Prioritize: every interested extender is called at once; its score s for a node adds
  s x weight x (MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY) to the node's total; an error
  means no score from that extender.
- Bind: the first interested binder binds; an ignorable one that fails lets the next (or
  the Bind plugins) try.
- Preempt (upstream's callExtenders): once DefaultPreemption has its candidates, each
  interested extender that supports preemption is given them (node -> victims, PDB
  violations) and answers the ones it keeps, with their victims (by UID); the next is given
  that answer. An error, a node left without victims or a victim not on its node ends the
  preemption with an error, unless the extender is ignorable (then its answer, or that
  node, is passed over). The pick among what is left is DefaultPreemption's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scheduler.framework.preemption import Candidate
from scheduler.types import NodeInfo, PodInfo

__all__ = [
    "EXTENDER_NAME",
    "MAX_EXTENDER_PRIORITY",
    "Extender",
    "ExtenderError",
    "ExtenderFilterResult",
]

# The name in a pod's unschedulable plugins after an extender rejected nodes (upstream's
# framework.ExtenderName).
EXTENDER_NAME = "Extender"
# Extenders score 0..10 (extender/v1 MaxExtenderPriority); scaled to 0..100 here.
MAX_EXTENDER_PRIORITY = 10


class ExtenderError(Exception):
    """An extender call that failed: unreachable, timed out, not 200, an undecodable
    answer, or the ``error`` it answered with. The message names the extender."""


@dataclass(frozen=True, slots=True)
class ExtenderFilterResult:
    """What a filter call answered: the node names it accepts (a subset of those it was
    given, in its order) and why it turned the others down."""

    nodes: Sequence[str]
    failed: Mapping[str, str] = field(default_factory=dict)
    failed_and_unresolvable: Mapping[str, str] = field(default_factory=dict)


class Extender(Protocol):
    @property
    def name(self) -> str:
        """How logs and messages name it (upstream: its URL prefix)."""
        ...

    @property
    def ignorable(self) -> bool: ...

    @property
    def weight(self) -> int: ...

    def is_filter(self) -> bool: ...

    def is_prioritizer(self) -> bool: ...

    def is_binder(self) -> bool: ...

    def is_interested(self, pod: PodInfo) -> bool:
        """Upstream's IsInterested: no managed resources, or the pod requests or limits
        one of them in a container or init container."""
        ...

    def filter(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Awaitable[ExtenderFilterResult]:
        """Raises ExtenderError."""
        ...

    def prioritize(
        self, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Awaitable[Sequence[tuple[str, int]]]:
        """(node name, score 0..MAX_EXTENDER_PRIORITY) pairs; raises ExtenderError."""
        ...

    def bind(self, pod: PodInfo, node: str) -> Awaitable[None]:
        """Raises ExtenderError."""
        ...

    def supports_preemption(self) -> bool: ...

    def process_preemption(
        self, pod: PodInfo, candidates: Sequence[Candidate]
    ) -> Awaitable[Mapping[str, tuple[Sequence[str], int]]]:
        """The candidates it keeps: node name -> (victims' UIDs, PDB violations); raises
        ExtenderError."""
        ...
